package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

type fixedView struct{ v *fleet.View }

func (f fixedView) View() *fleet.View { return f.v }

type nodeP struct{}

func (nodeP) Node() *model.Node { return &model.Node{ID: "n1", Status: model.NodeStatusReady} }

type healthP struct{ h Health }

func (p healthP) Health() Health { return p.h }

func view() *fleet.View {
	good := func(id string, v uint64, stop bool) *model.Job {
		return &model.Job{ID: id, Type: model.JobTypeSystem, Version: v, Stop: stop}
	}
	return &fleet.View{Jobs: fleet.MapOf(map[string]wanted.JobState{
		"default.web":    {Key: "default.web", Value: good("web", 3, false), Revision: 7, Applied: 9, Rejection: &wanted.Rejection{Bucket: "hivelet_jobs", Key: "default.web", Revision: 9, Reason: "unknown field \"x\""}},
		"default.old":    {Key: "default.old", Value: good("old", 1, false), Revision: 2, Absent: true},
		"default.halt":   {Key: "default.halt", Value: good("halt", 2, true), Revision: 4},
		"default.bad":    {Key: "default.bad", Rejection: &wanted.Rejection{Key: "default.bad", Revision: 5, Reason: "nope"}},
		"default.vanish": {Key: "default.vanish", Absent: true},
	})}
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, string(b)
}

func TestJobsShowRevisionAndStatus(t *testing.T) {
	h := NewHandler(Providers{Jobs: JobsFromSource(fixedView{view()})}, nil)
	code, body := get(t, h, "/v1/jobs")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var got []JobStatus
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"default.web": "running", "default.old": "orphaned", "default.halt": "stopped", "default.bad": "rejected"}
	if len(got) != len(want) {
		t.Fatalf("got %d jobs: %s", len(got), body)
	}
	for _, j := range got {
		if want[j.Key] != j.Status {
			t.Errorf("%s: status %s, want %s", j.Key, j.Status, want[j.Key])
		}
		if j.Key == "default.web" && (j.Revision != 7 || j.Version != 3 || j.Rejection == nil) {
			t.Errorf("web: %+v", j)
		}
	}
}

func TestRejectionsAndMissingProviders(t *testing.T) {
	h := NewHandler(Providers{Rejections: RejectionsFromSource(fixedView{view()}), Node: nodeP{}}, nil)
	code, body := get(t, h, "/v1/rejections")
	if code != 200 || !strings.Contains(body, "unknown field") || !strings.Contains(body, "default.bad") {
		t.Fatalf("%d %s", code, body)
	}
	if code, body := get(t, h, "/v1/node"); code != 200 || !strings.Contains(body, `"id": "n1"`) {
		t.Fatalf("node: %d %s", code, body)
	}
	// A provider left nil answers 404, not an empty success.
	for _, p := range []string{"/v1/allocations", "/v1/plugins", "/v1/policies", "/v1/health", "/v1/jobs"} {
		if code, _ := get(t, h, p); code != 404 {
			t.Errorf("%s: %d, want 404", p, code)
		}
	}
	if code, _ := get(t, NewHandler(Providers{}, nil), "/metrics"); code != 404 {
		t.Errorf("/metrics without a gatherer: %d", code)
	}
}

func TestHealthIs503WhenDegraded(t *testing.T) {
	for _, c := range []struct {
		status string
		code   int
	}{{"ok", 200}, {"degraded", 503}} {
		h := NewHandler(Providers{Health: healthP{Health{Status: c.status, NATS: fleet.StateConnected}}}, nil)
		if code, body := get(t, h, "/v1/health"); code != c.code {
			t.Errorf("%s: %d %s", c.status, code, body)
		}
	}
}

func TestMetricsAreServedFromThePassedRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.ObserveReconcile("ok", 3*time.Millisecond)
	m.CountPassCause("change: jobs")
	m.CountPassCause("change: jobs")
	m.CountPassCause("timer: a rollout wait")
	counts := map[string]int{"running": 4, "pending": 1}
	m.CountAllocsWith(func() map[string]int { return counts })
	m.WatchRestarted(fleet.KindJobs, "reconnect")
	m.DeclarationRejected(fleet.KindJobs, "default.web")
	m.DeclarationRejected(fleet.KindJobs, "default.web")
	m.PluginRestarted("docker")
	m.ConnState(fleet.StateReconnecting)
	m.SetEnumerationFailed(true)
	m.HeartbeatResult(nil)
	m.HeartbeatResult(errors.New("no responders"))
	_, body := get(t, NewHandler(Providers{}, reg), "/metrics")
	for _, want := range []string{
		`hivelet_reconcile_passes_total{outcome="ok"} 1`,
		`hivelet_reconcile_pass_causes_total{cause="change: jobs"} 2`,
		`hivelet_reconcile_pass_causes_total{cause="timer: a rollout wait"} 1`,
		`hivelet_reconcile_duration_seconds_count 1`,
		`hivelet_allocations{status="running"} 4`,
		`hivelet_allocations{status="pending"} 1`,
		`hivelet_kv_watch_restarts_total{bucket="jobs",reason="reconnect"} 1`,
		`hivelet_rejected_declarations_total{bucket="jobs"} 2`,
		`hivelet_plugin_restarts_total{plugin="docker"} 1`,
		`hivelet_nats_connection_state{state="reconnecting"} 1`,
		`hivelet_nats_connection_state{state="connected"} 0`,
		`hivelet_enumeration_failed 1`,
		`hivelet_node_heartbeats_total{outcome="ok"} 1`,
		`hivelet_node_heartbeats_total{outcome="error"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// The allocations gauge is counted when read: a later scrape shows
	// the counts of then, and a status no longer counted has no series.
	counts = map[string]int{"running": 2, "complete": 3}
	_, body = get(t, NewHandler(Providers{}, reg), "/metrics")
	for _, want := range []string{`hivelet_allocations{status="running"} 2`, `hivelet_allocations{status="complete"} 3`} {
		if !strings.Contains(body, want) {
			t.Errorf("second scrape lacks %q", want)
		}
	}
	if strings.Contains(body, `hivelet_allocations{status="pending"}`) {
		t.Error("second scrape still shows the status no longer counted")
	}
	// A second registry gets its own collectors: no global state.
	if _, body := get(t, NewHandler(Providers{}, func() *prometheus.Registry { r := prometheus.NewRegistry(); NewMetrics(r); return r }()), "/metrics"); strings.Contains(body, `outcome="ok"`) {
		t.Error("metrics leaked between registries")
	}
}

func TestServeRefusesANonLoopbackAddress(t *testing.T) {
	if _, err := Listen(Config{Addr: "0.0.0.0:0"}); err == nil {
		t.Fatal("listened on 0.0.0.0")
	}
	l, err := Listen(Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("control: loopback refused: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, NewHandler(Providers{Node: nodeP{}}, nil), nil) }()
	resp, err := http.Get("http://" + l.Addr().String() + "/v1/node")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}
