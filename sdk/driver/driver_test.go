package driver_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hivelet/hivelet/sdk/driver"
)

// fake is an in-memory Driver that records what it was asked, so the tests
// can check that every value crosses the gRPC boundary intact.
type fake struct {
	mu      sync.Mutex
	started map[string]*driver.TaskConfig
	exits   map[string]chan *driver.ExitResult
	signals []string
	stops   []time.Duration
}

func newFake() *fake {
	return &fake{started: map[string]*driver.TaskConfig{}, exits: map[string]chan *driver.ExitResult{}}
}

func (f *fake) Info(context.Context) (driver.PluginInfo, error) {
	return driver.PluginInfo{Name: "fake", Version: "1.2.3"}, nil
}

func (f *fake) Capabilities(context.Context) (driver.Capabilities, error) {
	return driver.Capabilities{SendSignals: true, FSIsolation: "none", Mounts: true}, nil
}

func (f *fake) ConfigSchema(context.Context) (*driver.Schema, error) {
	return &driver.Schema{Fields: map[string]*driver.Field{
		"command": {Type: driver.TypeString, Required: true, Description: "what to run"},
		"ports": {Type: driver.TypeObjectList, Elem: &driver.Schema{Fields: map[string]*driver.Field{
			"host": {Type: driver.TypeNumber, Required: true},
		}}},
	}}, nil
}

func (f *fake) Fingerprint(ctx context.Context) (<-chan *driver.Fingerprint, error) {
	ch := make(chan *driver.Fingerprint)
	go func() {
		defer close(ch)
		for i := 0; ; i++ {
			select {
			case ch <- &driver.Fingerprint{Healthy: true, Attributes: map[string]string{"n": strings.Repeat("x", i)}}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

func (f *fake) StartTask(_ context.Context, cfg *driver.TaskConfig) (*driver.TaskHandle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.started[cfg.ID]; ok {
		return nil, errors.New("already started")
	}
	f.started[cfg.ID] = cfg
	f.exits[cfg.ID] = make(chan *driver.ExitResult, 1)
	return &driver.TaskHandle{Version: 1, TaskID: cfg.ID, Driver: "fake", DriverState: []byte(`{"pid":42}`),
		StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}, nil
}

func (f *fake) RecoverTask(_ context.Context, h *driver.TaskHandle) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.started[h.TaskID]; !ok {
		return driver.ErrTaskNotFound
	}
	return nil
}

func (f *fake) WaitTask(_ context.Context, id string) (<-chan *driver.ExitResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, ok := f.exits[id]
	if !ok {
		return nil, driver.ErrTaskNotFound
	}
	return ch, nil
}

func (f *fake) StopTask(_ context.Context, id string, timeout time.Duration, sig string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, ok := f.exits[id]
	if !ok {
		return driver.ErrTaskNotFound
	}
	f.stops = append(f.stops, timeout)
	f.signals = append(f.signals, sig)
	select {
	case ch <- &driver.ExitResult{ExitCode: 143, Signal: 15}:
	default:
	}
	return nil
}

func (f *fake) DestroyTask(_ context.Context, id string, _ bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.started[id]; !ok {
		return driver.ErrTaskNotFound
	}
	delete(f.started, id)
	return nil
}

func (f *fake) InspectTask(_ context.Context, id string) (*driver.TaskStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.started[id]; !ok {
		return nil, driver.ErrTaskNotFound
	}
	return &driver.TaskStatus{ID: id, State: driver.TaskStateRunning, Attributes: map[string]string{"pid": "42"}}, nil
}

func (f *fake) TaskStats(ctx context.Context, id string, interval time.Duration) (<-chan *driver.TaskResourceUsage, error) {
	ch := make(chan *driver.TaskResourceUsage)
	go func() {
		defer close(ch)
		for {
			select {
			case ch <- &driver.TaskResourceUsage{CPUPercent: 12.5, MemoryBytes: uint64(interval)}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

func (f *fake) TaskEvents(ctx context.Context) (<-chan *driver.TaskEvent, error) {
	ch := make(chan *driver.TaskEvent, 1)
	ch <- &driver.TaskEvent{TaskID: "a/web", Message: "pulled", Annotations: map[string]string{"image": "x"}}
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

func (f *fake) SignalTask(_ context.Context, id string, sig string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.started[id]; !ok {
		return driver.ErrTaskNotFound
	}
	f.signals = append(f.signals, sig)
	return nil
}

// connect serves impl over a real gRPC connection (in-process) and returns
// the host-side client.
func connect(t testing.TB, impl driver.Driver) driver.Driver {
	t.Helper()
	c, _ := plugin.TestPluginGRPCConn(t, false, driver.PluginSet(impl))
	t.Cleanup(func() { _ = c.Close() })
	raw, err := c.Dispense(driver.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(driver.Driver)
}

func TestEveryCallCrossesTheBoundaryIntact(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f := newFake()
	d := connect(t, f)

	info, err := d.Info(ctx)
	if err != nil || info != (driver.PluginInfo{Name: "fake", Version: "1.2.3"}) {
		t.Fatalf("info = %+v, %v", info, err)
	}
	caps, err := d.Capabilities(ctx)
	if err != nil || !caps.SendSignals || caps.FSIsolation != "none" || !caps.Mounts {
		t.Fatalf("capabilities = %+v, %v", caps, err)
	}
	schema, err := d.ConfigSchema(ctx)
	want, _ := f.ConfigSchema(ctx)
	if err != nil || !reflect.DeepEqual(schema, want) {
		t.Fatalf("schema = %+v, %v", schema, err)
	}

	cfg := &driver.TaskConfig{
		ID: "a1/web", AllocID: "a1", TaskName: "web", JobID: "j", Group: "g", NodeID: "n",
		Config: map[string]any{"command": "/bin/true", "args": []any{"x"}, "n": 3.0},
		Env:    map[string]string{"A": "1"}, Resources: driver.Resources{CPU: 100, MemoryMB: 64},
		AllocDir: "/alloc", StdoutPath: "/alloc/out", StderrPath: "/alloc/err", KillSignal: "SIGINT", NetworkMode: "bridge",
		Mounts: []driver.Mount{{HostPath: "/srv/data", TaskPath: "/data", ReadOnly: true, PropagationMode: "host-to-task"}, {HostPath: "/srv/b", TaskPath: "/b"}},
	}
	h, err := d.StartTask(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantH, _ := (&fake{started: map[string]*driver.TaskConfig{}, exits: map[string]chan *driver.ExitResult{}}).StartTask(ctx, cfg)
	if !reflect.DeepEqual(h, wantH) {
		t.Fatalf("handle = %+v, want %+v", h, wantH)
	}
	if got := f.started["a1/web"]; !reflect.DeepEqual(got, cfg) {
		t.Fatalf("driver got config %+v, want %+v", got, cfg)
	}
	if err := d.RecoverTask(ctx, h); err != nil {
		t.Fatalf("recovering a known task: %v", err)
	}
	st, err := d.InspectTask(ctx, "a1/web")
	if err != nil || st.State != driver.TaskStateRunning || st.Attributes["pid"] != "42" {
		t.Fatalf("inspect = %+v, %v", st, err)
	}
	if err := d.SignalTask(ctx, "a1/web", "SIGHUP"); err != nil {
		t.Fatal(err)
	}

	wait, err := d.WaitTask(ctx, "a1/web")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-wait:
		t.Fatalf("wait yielded %+v before the task stopped", r)
	case <-time.After(50 * time.Millisecond):
	}
	if err := d.StopTask(ctx, "a1/web", 3*time.Second, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	r, ok := <-wait
	if !ok || r.ExitCode != 143 || r.Signal != 15 {
		t.Fatalf("exit = %+v ok=%v", r, ok)
	}
	if _, ok := <-wait; ok {
		t.Fatal("wait channel yielded twice")
	}
	if !reflect.DeepEqual(f.signals, []string{"SIGHUP", "SIGTERM"}) || f.stops[0] != 3*time.Second {
		t.Fatalf("signals %v stops %v", f.signals, f.stops)
	}

	sctx, scancel := context.WithCancel(ctx)
	stats, err := d.TaskStats(sctx, "a1/web", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if u := <-stats; u.CPUPercent != 12.5 || u.MemoryBytes != uint64(time.Second) {
		t.Fatalf("stats = %+v", u)
	}
	fps, err := d.Fingerprint(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if fp := <-fps; !fp.Healthy {
		t.Fatalf("fingerprint = %+v", fp)
	}
	evs, err := d.TaskEvents(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if e := <-evs; e.Message != "pulled" || e.Annotations["image"] != "x" {
		t.Fatalf("event = %+v", e)
	}
	scancel()
	for range stats {
	}
	for range fps {
	}

	if err := d.DestroyTask(ctx, "a1/web", true); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownTaskIsErrTaskNotFoundOnTheHostSide(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := connect(t, newFake())
	// Control: a known task is not reported missing.
	if _, err := d.StartTask(ctx, &driver.TaskConfig{ID: "known"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.WaitTask(ctx, "known"); err != nil {
		t.Fatalf("waiting on a known task: %v", err)
	}
	calls := map[string]func() error{
		"recover": func() error { return d.RecoverTask(ctx, &driver.TaskHandle{TaskID: "nope"}) },
		"wait":    func() error { _, err := d.WaitTask(ctx, "nope"); return err },
		"stop":    func() error { return d.StopTask(ctx, "nope", time.Second, "") },
		"destroy": func() error { return d.DestroyTask(ctx, "nope", false) },
		"inspect": func() error { _, err := d.InspectTask(ctx, "nope"); return err },
		"signal":  func() error { return d.SignalTask(ctx, "nope", "SIGHUP") },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, driver.ErrTaskNotFound) {
			t.Errorf("%s of an unknown task: %v, want ErrTaskNotFound", name, err)
		}
	}
	// Other driver errors are not mistaken for ErrTaskNotFound.
	_, err := d.StartTask(ctx, &driver.TaskConfig{ID: "known"})
	if err == nil || errors.Is(err, driver.ErrTaskNotFound) || !strings.Contains(err.Error(), "already started") {
		t.Fatalf("double start: %v", err)
	}
}

// TestADriversErrorReadsOnceOnTheHostSide: a driver's own error crosses
// as its message, without gRPC's "rpc error: code = Unknown desc =" and
// without the host repeating what the driver already said it was doing;
// its gRPC status stays visible (codes.Unknown), and a message that does
// not say it keeps the host's prefix.
func TestADriversErrorReadsOnceOnTheHostSide(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := connect(t, &failing{err: errors.New("starting task a1/web: image x could not be pulled")})
	_, err := d.StartTask(ctx, &driver.TaskConfig{ID: "a1/web"})
	if err == nil || err.Error() != "starting task a1/web: image x could not be pulled" {
		t.Fatalf("got %q", err)
	}
	if st, ok := status.FromError(err); !ok || st.Code() != codes.Unknown {
		t.Fatalf("the status is lost: %v %v", st, ok)
	}
	d = connect(t, &failing{err: errors.New("image x could not be pulled")})
	if _, err := d.StartTask(ctx, &driver.TaskConfig{ID: "a1/web"}); err == nil || err.Error() != "starting task a1/web: image x could not be pulled" {
		t.Fatalf("without the driver's prefix: %q", err)
	}
}

// failing is a driver whose StartTask fails with err.
type failing struct {
	driver.Base
	err error
}

func (f *failing) Info(context.Context) (driver.PluginInfo, error) {
	return driver.PluginInfo{Name: "failing"}, nil
}
func (f *failing) StartTask(context.Context, *driver.TaskConfig) (*driver.TaskHandle, error) {
	return nil, f.err
}
func (f *failing) WaitTask(context.Context, string) (<-chan *driver.ExitResult, error) {
	return nil, driver.ErrTaskNotFound
}
func (f *failing) StopTask(context.Context, string, time.Duration, string) error { return nil }
