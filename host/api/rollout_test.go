package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/internal/testutil"
)

// opWorld is a fleet in an embedded NATS server, written as agents write
// it: nodes n1 and n2 live, job web at version 2 (version 1 successful),
// v2's record canarying on n1 with n1's canary not healthy yet.
type opWorld struct {
	ctx context.Context
	st  *fleet.Store
	src *fleet.Source
	h   http.Handler
}

func newOpWorld(t *testing.T) *opWorld {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	emb, err := fleet.StartEmbedded(ctx, fleet.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := fleet.Connect(ctx, fleet.ConnConfig{URLs: []string{emb.ClientURL()}, FailFast: true}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := fleet.EnsureBuckets(ctx, conn, fleet.Names("api"), fleet.BucketOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := fleet.NewSource(st, fleet.SourceConfig{})
	done := make(chan struct{})
	go func() { _ = src.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		conn.Close()
		emb.Shutdown()
	})
	w := &opWorld{ctx: ctx, st: st, src: src}
	for v := uint64(1); v <= 2; v++ {
		j := &model.Job{ID: "web", Type: model.JobTypeSystem, Version: v, Groups: []*model.Group{{Name: "g", Count: 1,
			Update: &model.UpdateStrategy{MaxParallel: 1, Canary: 50, AutoRevert: true},
			Tasks:  []*model.Task{{Name: "t", Driver: "mock", Config: map[string]any{"image": "web:v" + string(rune('0'+v))}}}}}}
		if _, err := st.PutJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		if err := st.PutJobVersion(ctx, j); err != nil {
			t.Fatal(err)
		}
		d := &model.Deployment{ID: reconcile.DeploymentID("", "web", v), JobID: "web", JobVersion: v, Status: model.DeploymentSuccessful,
			Protocol: 1, TaskGroups: map[string]*model.DeploymentState{"g": {MaxParallel: 1, AutoRevert: true, DesiredTotal: 2}}}
		if v == 2 {
			d.Status, d.StatusDescription = model.DeploymentRunning, model.DescNeedsPromotion
			d.TaskGroups["g"].CanaryNodes, d.TaskGroups["g"].DesiredCanaries = []string{"n1"}, 1
		}
		if _, _, _, err := st.CreateDeployment(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"n1", "n2"} {
		if _, err := st.ForNode(id).PutNode(ctx, &model.Node{ID: id, Status: model.NodeStatusReady, Eligibility: model.Eligible,
			Drivers: map[string]model.DriverInfo{"mock": {Detected: true, Healthy: true}}}); err != nil {
			t.Fatal(err)
		}
	}
	w.canary(t, nil)
	<-src.Synced()
	w.h = NewHandler(Providers{Operator: &Operator{Store: st, View: src, By: "api"}}, nil)
	return w
}

// canary writes n1's v2 allocation with the health verdict given and waits
// until the view shows it.
func (w *opWorld) canary(t *testing.T, healthy *bool) {
	t.Helper()
	a := &model.Allocation{ID: "b-n1", Name: "web.g[0]", JobID: "web", JobVersion: 2, TaskGroup: "g", NodeID: "n1",
		DeploymentID: reconcile.DeploymentID("", "web", 2), DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning}
	if healthy != nil {
		a.DeploymentStatus = &model.AllocDeploymentStatus{Healthy: healthy}
	}
	rev, err := w.st.ForNode("n1").PutAlloc(w.ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "the view shows the canary's allocation", func() bool {
		for _, s := range w.src.View().Allocs.All() {
			if s.Value != nil && s.Value.ID == "b-n1" && s.Revision >= rev {
				return true
			}
		}
		return false
	})
}

func (w *opWorld) post(t *testing.T, path, body string) (int, ActionResult, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	w.h.ServeHTTP(rec, httptest.NewRequest("POST", path, strings.NewReader(body)))
	b, _ := io.ReadAll(rec.Body)
	var res ActionResult
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("%s: %v: %s", path, err, b)
		}
	}
	return rec.Code, res, string(b)
}

func TestTheRolloutActionsAnswerWithTheCoresCodes(t *testing.T) {
	w := newOpWorld(t)
	code, _, body := w.post(t, "/v1/deployment/web/promote", "")
	if code != http.StatusConflict || !strings.Contains(body, "group g has 0/1 healthy canaries") {
		t.Fatalf("promote without a healthy canary: %d %s", code, body)
	}
	for _, c := range []struct {
		path, body string
		want       int
	}{
		{"/v1/deployment/nosuch/promote", "", http.StatusNotFound},
		{"/v1/deployment/web/promote", `{"groupz": ["g"]}`, http.StatusBadRequest},
		{"/v1/deployment/web/promote?group=nosuch", "", http.StatusConflict},
		{"/v1/job/web/revert/x", "", http.StatusBadRequest},
		{"/v1/job/web/revert/9", "", http.StatusNotFound},
		{"/v1/job/nosuch/revert/1", "", http.StatusNotFound},
	} {
		if code, _, body := w.post(t, c.path, c.body); code != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.path, c.body, code, body, c.want)
		}
	}
	if d, _, _ := w.st.GetDeployment(w.ctx, "", "web", 2); d.TaskGroups["g"].Promoted {
		t.Fatal("a refused promotion was written")
	}
	// Control: the canary healthy, the same request promotes.
	yes := true
	w.canary(t, &yes)
	code, res, body := w.post(t, "/v1/deployment/web/promote", `{"groups": ["g"]}`)
	if code != http.StatusOK || !res.Changed || !res.Deployment.TaskGroups["g"].Promoted || res.Deployment.TaskGroups["g"].PromotedBy != "api" {
		t.Fatalf("promote: %d %s", code, body)
	}

	if code, res, body = w.post(t, "/v1/deployment/web/pause", ""); code != http.StatusOK || res.Deployment.Status != model.DeploymentPaused {
		t.Fatalf("pause: %d %s", code, body)
	}
	if code, res, body = w.post(t, "/v1/deployment/web/resume", ""); code != http.StatusOK || res.Deployment.Status != model.DeploymentRunning {
		t.Fatalf("resume: %d %s", code, body)
	}
	code, res, body = w.post(t, "/v1/deployment/web/fail", "")
	if code != http.StatusOK || res.Deployment.Status != model.DeploymentFailed || res.Deployment.Revert == nil ||
		res.Deployment.Revert.Status != model.RevertPending || res.Deployment.Revert.ToVersion != 1 {
		t.Fatalf("fail: %d %s", code, body)
	}
	if code, _, body = w.post(t, "/v1/deployment/web/resume", ""); code != http.StatusConflict {
		t.Fatalf("resume of a failed deployment: %d %s", code, body)
	}

	code, res, body = w.post(t, "/v1/job/web/revert/1", "")
	if code != http.StatusOK || res.Job.Version != 3 || res.Job.RevertOf == nil || *res.Job.RevertOf != 1 {
		t.Fatalf("revert: %d %s", code, body)
	}
	if cur, _, err := w.st.GetJob(w.ctx, "", "web"); err != nil || cur.Version != 3 || cur.Groups[0].Tasks[0].Config["image"] != "web:v1" {
		t.Fatalf("job after revert: %+v %v", cur, err)
	}
	if code, _, body = w.post(t, "/v1/job/web/revert/1", ""); code != http.StatusConflict {
		t.Fatalf("a second revert to the spec in force: %d %s", code, body)
	}
}

func TestTheRolloutActionsAreAbsentWithoutAnOperator(t *testing.T) {
	h := NewHandler(Providers{}, nil)
	for _, p := range []string{"/v1/deployment/web/promote", "/v1/job/web/revert/1"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", p, nil))
		if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "not available") {
			t.Fatalf("%s: %d %s", p, rec.Code, rec.Body)
		}
	}
	// Control: with an Operator the same request reaches it (and is told
	// there is no such deployment).
	h = NewHandler(Providers{Operator: &Operator{View: fixedView{&fleet.View{}}}}, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/deployment/web/promote", nil))
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `no deployment of job \"web\"`) {
		t.Fatalf("with an operator: %d %s", rec.Code, rec.Body)
	}
}
