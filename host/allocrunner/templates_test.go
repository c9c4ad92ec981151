package allocrunner

import (
	"os"
	"path/filepath"
	"strings"
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
