package allocrunner

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// TestTemplatesAreRenderedIntoTheTaskDirectoryBeforeItStarts: the file is
// rendered from the task's environment (its ports, node values, env), with
// its mode; an env = true template's variables reach the task, but cannot
// override the node's port variables.
func TestTemplatesAreRenderedIntoTheTaskDirectoryBeforeItStarts(t *testing.T) {
	tb := portTable(t)
	f, r := networkFixture(t, tb, "a1")
	task := f.job.Groups[0].Tasks[0]
	task.Templates = []model.Template{
		{Data: "listen={{ env \"NOMAD_ADDR_web\" }}\nself={{ env \"SELF\" }}\nnode={{ env \"node.unique.id\" | toUpper }}\n", Destination: "local/app.conf", Perms: "600"},
		{Data: "FROM_TEMPLATE=yes\nNOMAD_PORT_web=1\n", Destination: "secrets/app.env", Env: true},
	}
	r.Run()
	testutil.Eventually(t, 3*time.Second, "running", func() bool { return r.Alloc().ClientStatus == model.ClientRunning })
	path := filepath.Join(f.root, "a1", "t", "local", "app.conf")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "listen=127.0.0.1:8080\nself=24000\nnode=N1\n"; string(b) != want {
		t.Errorf("rendered %q, want %q", b, want)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	started, err := f.drv.task("a1/t")
	if err != nil {
		t.Fatal(err)
	}
	if env := started.cfg.Env; env["FROM_TEMPLATE"] != "yes" || env["NOMAD_PORT_web"] != "8080" {
		t.Errorf("env FROM_TEMPLATE=%q NOMAD_PORT_web=%q", env["FROM_TEMPLATE"], env["NOMAD_PORT_web"])
	}
	stopRunner(t, r)
}

// TestATemplateThatCannotRenderKeepsTheTaskFromStarting: a missing source
// is a Template Failure event, the task never starts, and the restart
// policy decides what comes next.
func TestATemplateThatCannotRenderKeepsTheTaskFromStarting(t *testing.T) {
	pol := &model.RestartPolicy{Attempts: 1, Interval: model.Duration(time.Minute), Delay: model.Duration(10 * time.Millisecond), Mode: model.RestartModeFail}
	f := newFixture(t, map[string]any{}, pol, nil)
	f.job.Groups[0].Tasks[0].Templates = []model.Template{{Source: "/nonexistent/${NOMAD_TASK_NAME}.tpl", Destination: "local/x"}}
	r := f.runner(nil)
	r.Run()
	<-r.Done()
	a := r.Alloc()
	var failures int
	for _, e := range a.TaskStates["t"].Events {
		if e.Type == EventTemplateFailure && strings.Contains(e.Message, "/nonexistent/t.tpl") {
			failures++
		}
	}
	if a.ClientStatus != model.ClientFailed || failures != 2 || f.drv.startCount("a1/t") != 0 {
		t.Fatalf("status %s, %d template failures (want 2: first try and one restart), %d starts", a.ClientStatus, failures, f.drv.startCount("a1/t"))
	}
}

// memVars is an in-memory variables store whose Watch fires on every Put.
type memVars struct {
	mu       sync.Mutex
	items    map[string]map[string]string
	watchers []chan struct{}
}

func (m *memVars) Get(_ context.Context, path string) (map[string]string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.items[path]
	return maps.Clone(v), ok, nil
}

func (m *memVars) Watch(ctx context.Context, _ []string) (<-chan struct{}, error) {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	m.watchers = append(m.watchers, ch)
	m.mu.Unlock()
	return ch, nil
}

func (m *memVars) put(path string, items map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.items[path] = items
	for _, w := range m.watchers {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

func (m *memVars) watching() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.watchers)
}

// TestAVariableChangeRendersTheTemplateAgainAndAppliesItsChangeMode: with
// change_mode restart the task is restarted at once, outside the restart
// policy (it allows no restart here, so a counted one would fail the
// allocation); with signal the signal is sent and the task keeps running;
// with noop only the file changes.
func TestAVariableChangeRendersTheTemplateAgainAndAppliesItsChangeMode(t *testing.T) {
	for _, mode := range []model.ChangeMode{model.ChangeRestart, model.ChangeSignal, model.ChangeNoop} {
		t.Run(string(mode), func(t *testing.T) {
			vars := &memVars{items: map[string]map[string]string{"app/db": {"password": "one"}}}
			pol := &model.RestartPolicy{Attempts: 0, Interval: model.Duration(time.Minute), Delay: model.Duration(time.Millisecond), Mode: model.RestartModeFail}
			f := newFixture(t, map[string]any{}, pol, nil)
			tpl := model.Template{Data: `{{ with nomadVar "app/db" }}pw={{ .password }}{{ end }}`, Destination: "secrets/db.conf", ChangeMode: mode}
			if mode == model.ChangeSignal {
				tpl.ChangeSignal = "SIGHUP"
			}
			f.job.Groups[0].Tasks[0].Templates = []model.Template{tpl}
			r := New(Config{Alloc: f.alloc, Job: f.job, Node: &model.Node{ID: "n1"}, Drivers: f.drv, Validate: validate,
				Store: f.store, AllocRoot: f.root, Vars: vars})
			r.Run()
			path := filepath.Join(f.root, "a1", "t", "secrets", "db.conf")
			testutil.Eventually(t, 3*time.Second, "running and watching", func() bool {
				return r.Alloc().ClientStatus == model.ClientRunning && vars.watching() == 1
			})
			if b, _ := os.ReadFile(path); string(b) != "pw=one" {
				t.Fatalf("first render %q", b)
			}
			vars.put("app/db", map[string]string{"password": "two"})
			testutil.Eventually(t, 5*time.Second, "the file rendered again", func() bool {
				b, _ := os.ReadFile(path)
				return string(b) == "pw=two"
			})
			switch mode {
			case model.ChangeRestart:
				testutil.Eventually(t, 5*time.Second, "a second start", func() bool { return f.drv.startCount("a1/t") == 2 })
				testutil.Eventually(t, 3*time.Second, "running again", func() bool { return r.Alloc().ClientStatus == model.ClientRunning })
				if ts := r.Alloc().TaskStates["t"]; ts.Restarts != 1 || ts.Failed {
					t.Fatalf("task state %+v", ts)
				}
			case model.ChangeSignal:
				testutil.Eventually(t, 5*time.Second, "the signal sent", func() bool { return len(f.drv.signalsSent()) == 1 })
				if got := f.drv.signalsSent(); got[0] != "a1/t SIGHUP" || f.drv.startCount("a1/t") != 1 {
					t.Fatalf("signals %v, starts %d", got, f.drv.startCount("a1/t"))
				}
			case model.ChangeNoop:
				testutil.Eventually(t, 5*time.Second, "the re-render recorded", func() bool {
					for _, e := range r.Alloc().TaskStates["t"].Events {
						if e.Type == EventTemplateRendered {
							return true
						}
					}
					return false
				})
				if f.drv.startCount("a1/t") != 1 || len(f.drv.signalsSent()) != 0 {
					t.Fatalf("noop: %d starts, signals %v", f.drv.startCount("a1/t"), f.drv.signalsSent())
				}
			}
			stopRunner(t, r)
		})
	}
}

// TestATemplateRenderedAgainIsOwnedByItsTasksUser: on a root host, a file
// written into a directory that the exec driver gave to the task's user
// (nobody) is that user's, so a 0600 template stays readable by the task;
// in a root-owned directory (control) it stays root's.
func TestATemplateRenderedAgainIsOwnedByItsTasksUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing owners needs root")
	}
	mine, root := filepath.Join(t.TempDir(), "local"), t.TempDir()
	if err := os.Mkdir(mine, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(mine, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]uint32{mine: 65534, root: 0} {
		p := filepath.Join(dir, "db.conf")
		if err := writeFileAtomic(p, []byte("secret"), 0o600); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != want || st.Gid != want || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: uid %d gid %d mode %v, want owner %d, 0600", p, st.Uid, st.Gid, fi.Mode().Perm(), want)
		}
	}
}
