package docker_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	docker "github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/plugins/manager"
	"github.com/hivelet/hivelet/sdk/driver"
)

// holdingEngine is a proxy in front of the Docker engine's socket that,
// once armed, lets a container start through and then holds the driver's
// next inspect of that container unanswered, and says which container it
// holds: the moment a plugin's StartTask has a running container and no
// handle returned yet.
type holdingEngine struct {
	sock  string
	mu    sync.Mutex
	armed bool
	start string // the container whose start went through while armed
	held  chan string
}

var (
	startPath   = regexp.MustCompile(`^(/v[0-9.]+)?/containers/([^/]+)/start$`)
	inspectPath = regexp.MustCompile(`^(/v[0-9.]+)?/containers/([^/]+)/json$`)
)

func newHoldingEngine(t *testing.T) *holdingEngine {
	t.Helper()
	target := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		target = strings.TrimPrefix(h, "unix://")
	}
	h := &holdingEngine{sock: filepath.Join(testutil.ShortTempDir(t, "hve"), "e.sock"), held: make(chan string, 1)}
	ln, err := net.Listen("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: "docker"})
	rp.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", target)
	}}
	rp.FlushInterval = -1 // log streams and waits pass through as they come
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m := inspectPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodGet && h.take(m[2]) {
			h.held <- m[2]
			<-r.Context().Done() // until the plugin that asked is dead
			return
		}
		rp.ServeHTTP(w, r)
		if m := startPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodPost {
			h.started(m[2])
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return h
}

func (h *holdingEngine) arm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed, h.start = true, ""
}

func (h *holdingEngine) started(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.armed && h.start == "" {
		h.start = id
	}
}

// take reports whether the inspect of id is the one to hold, and disarms.
func (h *holdingEngine) take(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.armed || h.start == "" || h.start != id {
		return false
	}
	h.armed = false
	return true
}

// The fault of issue 11 (1): the docker plugin is SIGKILLed while StartTask
// has started the container and not yet returned its handle. The host got
// an error and no handle. Whatever it does next must not leave a container
// nobody tracks: a retried start of the same task adopts the running
// container (not a second one, not a refusal, not a restart), and a stop
// with no handle (the purge of a failed allocation) removes it.
func TestAStartInterruptedByAPluginSIGKILLIsAdoptedOrDestroyed(t *testing.T) {
	c := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	eng := newHoldingEngine(t)
	m, err := manager.New(manager.Config{
		SelfExe:    os.Args[0],
		Builtins:   []string{docker.Name},
		StateDir:   testutil.ShortTempDir(t, "hvd"),
		MinBackoff: 10 * time.Millisecond,
		Env:        map[string][]string{docker.Name: {"DOCKER_HOST=unix://" + eng.sock}},
		Logger:     slog.New(slog.NewTextHandler(testLog{t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Kill() })
	d, err := m.Driver(ctx, docker.Name)
	if err != nil {
		t.Fatal(err)
	}

	// interrupt starts tc and SIGKILLs the plugin while the start is held
	// after the container started; it returns that container's ID once the
	// plugin is back.
	interrupt := func(tc *driver.TaskConfig) string {
		t.Helper()
		eng.arm()
		errc := make(chan error, 1)
		go func() {
			_, err := d.StartTask(ctx, tc)
			errc <- err
		}()
		var id string
		select {
		case id = <-eng.held:
		case err := <-errc:
			t.Fatalf("the start returned before it was held: %v", err)
		case <-ctx.Done():
			t.Fatal("the start never reached the held inspect")
		}
		old, up := m.PID(docker.Name)
		if !up {
			t.Fatal("the plugin is not running")
		}
		if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err == nil {
			t.Fatal("a start whose plugin was killed returned no error")
		}
		for {
			if pid, up := m.PID(docker.Name); up && pid != old {
				break
			}
			if ctx.Err() != nil {
				t.Fatal("the plugin was not relaunched")
			}
			time.Sleep(10 * time.Millisecond)
		}
		st, err := c.InspectContainer(ctx, id)
		if err != nil || !st.Running {
			t.Fatalf("the interrupted start's container: %+v %v, want it running (the fault)", st, err)
		}
		return id
	}

	// The host retries the start: the running container is adopted.
	tc := task(t, c, "tick", "20")
	orphan := interrupt(tc)
	before, err := c.InspectContainer(ctx, orphan)
	if err != nil {
		t.Fatal(err)
	}
	recoveredAt := time.Now()
	h, err := d.StartTask(ctx, tc)
	if err != nil {
		t.Fatalf("retrying the interrupted start: %v", err)
	}
	t.Logf("interrupted start adopted %v after the retry began", time.Since(recoveredAt))
	if got := containerID(t, h); got != orphan || !h.StartedAt.Equal(before.StartedAt) {
		t.Fatalf("the retry runs container %s started %v; want the interrupted start's %s started %v", short(got), h.StartedAt, short(orphan), before.StartedAt)
	}
	if list, err := c.ListContainers(ctx, map[string]string{docker.LabelAllocID: tc.AllocID}); err != nil || len(list) != 1 {
		t.Fatalf("containers of the task: %+v %v, want exactly one", list, err)
	}
	waitOutput(t, tc.StdoutPath, "tick 5\n") // tracked: its logs are copied
	if err := d.StopTask(ctx, tc.ID, 5*time.Second, ""); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, d, tc.ID, 30*time.Second); r.Err != "" {
		t.Fatalf("the adopted task's exit: %+v", r)
	}
	if err := d.DestroyTask(ctx, tc.ID, true); err != nil {
		t.Fatal(err)
	}

	// The host gives up on the task instead (its allocation is stopped and
	// purged): DestroyTask without a handle removes the container.
	tc2 := task(t, c, "run")
	interrupt(tc2)
	if err := d.DestroyTask(ctx, tc2.ID, true); err != nil {
		t.Fatalf("destroying the interrupted start's task: %v", err)
	}
	if list, err := c.ListContainers(ctx, map[string]string{docker.LabelAllocID: tc2.AllocID}); err != nil || len(list) != 0 {
		t.Fatalf("containers left by the interrupted start after DestroyTask: %+v %v", list, err)
	}
}
