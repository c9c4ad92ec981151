package allocrunner

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// TestArtifactsAreFetchedOnceBeforeTheTemplatesAndTheFirstStart: the
// artifact lands in the task's directory before the task starts (a
// template's source may be the downloaded file), and a task restarted by
// its policy is not fetched again.
func TestArtifactsAreFetchedOnceBeforeTheTemplatesAndTheFirstStart(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = w.Write([]byte("greeting={{ env \"NOMAD_TASK_NAME\" }}\n"))
	}))
	defer srv.Close()
	pol := &model.RestartPolicy{Attempts: 5, Interval: model.Duration(time.Minute), Delay: model.Duration(10 * time.Millisecond), Mode: model.RestartModeFail}
	f := newFixture(t, map[string]any{"run_for": "50ms"}, pol, nil)
	task := f.job.Groups[0].Tasks[0]
	task.Artifacts = []model.Artifact{{Source: srv.URL + "/${NOMAD_TASK_NAME}.tpl", Destination: "local/tpl"}}
	task.Templates = []model.Template{{Source: "local/tpl/t.tpl", Destination: "local/app.conf"}}
	r := f.runner(nil)
	r.Run()
	testutil.Eventually(t, 5*time.Second, "three starts", func() bool { return f.drv.startCount("a1/t") >= 3 })
	b, err := os.ReadFile(filepath.Join(f.root, "a1", "t", "local", "app.conf"))
	if err != nil || string(b) != "greeting=t\n" {
		t.Fatalf("rendered from the artifact: %q %v", b, err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("%d downloads for %d starts, want 1", n, f.drv.startCount("a1/t"))
	}
	var downloading int
	for _, e := range r.Alloc().TaskStates["t"].Events {
		if e.Type == EventDownloadingArtifacts {
			downloading++
		}
	}
	if downloading != 1 {
		t.Errorf("%d %q events, want 1", downloading, EventDownloadingArtifacts)
	}
	stopRunner(t, r)
}

// TestAnArtifactThatCannotBeFetchedKeepsTheTaskFromStarting: a 404 is a
// Failed Artifact Download event naming the source, the task never starts,
// and the restart policy decides what comes next (here: one retry, then
// the allocation fails).
func TestAnArtifactThatCannotBeFetchedKeepsTheTaskFromStarting(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	pol := &model.RestartPolicy{Attempts: 1, Interval: model.Duration(time.Minute), Delay: model.Duration(10 * time.Millisecond), Mode: model.RestartModeFail}
	f := newFixture(t, map[string]any{}, pol, nil)
	f.job.Groups[0].Tasks[0].Artifacts = []model.Artifact{{Source: srv.URL + "/gone.tgz"}}
	r := f.runner(nil)
	r.Run()
	<-r.Done()
	a := r.Alloc()
	var failures int
	for _, e := range a.TaskStates["t"].Events {
		if e.Type == EventArtifactFailure && strings.Contains(e.Message, "/gone.tgz") && strings.Contains(e.Message, "404") {
			failures++
		}
	}
	if a.ClientStatus != model.ClientFailed || failures != 2 || f.drv.startCount("a1/t") != 0 {
		t.Fatalf("status %s, %d artifact failures (want 2), %d starts", a.ClientStatus, failures, f.drv.startCount("a1/t"))
	}
}
