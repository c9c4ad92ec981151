package driver_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/hivelet/hivelet/sdk/driver"
	driverpb "github.com/hivelet/hivelet/sdk/driver/proto"
)

// minimal is the smallest complete driver: Base answers the optional
// methods, and it writes Info, StartTask, WaitTask and StopTask. Its tasks
// run until stopped.
type minimal struct {
	driver.Base
	tasks *driver.Tasks[*driver.Exit]
}

func newMinimal() *minimal { return &minimal{tasks: driver.NewTasks[*driver.Exit]("minimal task")} }

func (*minimal) Info(context.Context) (driver.PluginInfo, error) {
	return driver.PluginInfo{Name: "minimal", Version: "0.1.0"}, nil
}

func (m *minimal) StartTask(_ context.Context, cfg *driver.TaskConfig) (*driver.TaskHandle, error) {
	if _, added := m.tasks.Add(cfg.ID, &driver.Exit{}, nil); !added {
		return nil, fmt.Errorf("task %s already started", cfg.ID)
	}
	return &driver.TaskHandle{Version: 1, TaskID: cfg.ID, Driver: "minimal", StartedAt: time.Now()}, nil
}

func (m *minimal) WaitTask(ctx context.Context, id string) (<-chan *driver.ExitResult, error) {
	e, err := m.tasks.Get(id)
	if err != nil {
		return nil, err
	}
	return e.WaitChan(ctx), nil
}

func (m *minimal) StopTask(_ context.Context, id string, _ time.Duration, _ string) error {
	e, err := m.tasks.Get(id)
	if err != nil {
		return err
	}
	e.Finish(&driver.ExitResult{Signal: 15})
	return nil
}

var _ driver.Driver = (*minimal)(nil)

func TestAMinimalDriverRunsATaskOverTheBoundary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := connect(t, newMinimal())
	h, err := d.StartTask(ctx, &driver.TaskConfig{ID: "a/web"})
	if err != nil {
		t.Fatal(err)
	}
	wait, err := d.WaitTask(ctx, h.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.StopTask(ctx, h.TaskID, time.Second, ""); err != nil {
		t.Fatal(err)
	}
	if r := <-wait; r == nil || r.Signal != 15 {
		t.Fatalf("exit %+v, want signal 15", r)
	}
	if _, err := d.WaitTask(ctx, "nope"); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("wait on an unknown task: %v", err)
	}
}

// TestBaseAnswersEveryOptionalMethodOverTheBoundary checks each of Base's
// answers as the host sees it. The control is the full fake driver, which
// answers the same calls itself: none of them is ErrNotSupported there.
func TestBaseAnswersEveryOptionalMethodOverTheBoundary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	base, full := connect(t, newMinimal()), connect(t, newFake())
	for _, d := range []driver.Driver{base, full} {
		if _, err := d.StartTask(ctx, &driver.TaskConfig{ID: "t", Config: map[string]any{"command": "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	unsupported := []struct {
		name string
		call func(driver.Driver) error
	}{
		{"InspectTask", func(d driver.Driver) error { _, err := d.InspectTask(ctx, "t"); return err }},
		{"TaskStats", func(d driver.Driver) error { _, err := d.TaskStats(ctx, "t", time.Second); return err }},
		{"TaskEvents", func(d driver.Driver) error { _, err := d.TaskEvents(ctx); return err }},
		{"SignalTask", func(d driver.Driver) error { return d.SignalTask(ctx, "t", "SIGHUP") }},
	}
	for _, c := range unsupported {
		t.Run(c.name, func(t *testing.T) {
			err := c.call(base)
			if !errors.Is(err, driver.ErrNotSupported) || errors.Is(err, driver.ErrTaskNotFound) {
				t.Errorf("Base: %v, want ErrNotSupported", err)
			}
			if err := c.call(full); err != nil {
				t.Errorf("control, a driver implementing it: %v", err)
			}
		})
	}

	caps, err := base.Capabilities(ctx)
	if err != nil || caps.SendSignals || caps.Exec || caps.FSIsolation != "none" {
		t.Errorf("Capabilities: %+v, %v; want none", caps, err)
	}
	schema, err := base.ConfigSchema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := driver.ValidateConfig(schema, map[string]any{}); err != nil {
		t.Errorf("an empty config block is refused: %v", err)
	}
	if err := driver.ValidateConfig(schema, map[string]any{"command": "x"}); err == nil {
		t.Error("Base's schema accepts a config key")
	}
	fctx, fcancel := context.WithCancel(ctx)
	fps, err := base.Fingerprint(fctx)
	if err != nil {
		t.Fatal(err)
	}
	if fp := <-fps; fp == nil || !fp.Healthy {
		t.Errorf("first fingerprint %+v, want healthy", fp)
	}
	fcancel()
	for range fps { // closed once ctx ends
	}
	if err := base.RecoverTask(ctx, &driver.TaskHandle{TaskID: "t"}); err != nil {
		t.Errorf("RecoverTask: %v", err)
	}
	if err := base.DestroyTask(ctx, "t", true); err != nil {
		t.Errorf("DestroyTask: %v", err)
	}
}

// headerless is a driver server built before Fingerprint sent the accept
// header: it streams its messages with no header of its own.
type headerless struct {
	driverpb.UnimplementedDriverServer
}

func (headerless) Fingerprint(_ *driverpb.FingerprintRequest, s driverpb.Driver_FingerprintServer) error {
	for _, h := range []bool{true, false} {
		if err := s.Send(&driverpb.FingerprintResponse{Healthy: h}); err != nil {
			return err
		}
	}
	return nil
}

// TestAStreamWithoutTheAcceptHeaderLosesNothing: the host waits for a
// stream's accept header to tell a refusal from a quiet stream; against a
// plugin that never sends it, the first message (which carries the
// headers) is still delivered, and so is every later one. The control, an
// RPC the old server does not have at all, is a refusal.
func TestAStreamWithoutTheAcceptHeaderLosesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lis := bufconn.Listen(1 << 16)
	srv := grpc.NewServer()
	driverpb.RegisterDriverServer(srv, headerless{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return lis.Dial() }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	d := driver.NewClient(conn)

	ch, err := d.Fingerprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []bool
	for fp := range ch {
		got = append(got, fp.Healthy)
	}
	if fmt.Sprint(got) != "[true false]" {
		t.Fatalf("fingerprints %v, want [true false]", got)
	}
	if _, err := d.TaskEvents(ctx); !errors.Is(err, driver.ErrNotSupported) {
		t.Fatalf("an RPC the plugin predates: %v, want ErrNotSupported", err)
	}
}
