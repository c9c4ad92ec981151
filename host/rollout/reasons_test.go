package rollout

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
)

// A policy may answer reasons of up to 16 MiB: every record that stores one
// (the success's description, a failure's, the canary reason and its event,
// a canary replacement's event, a failed canary policy's error) stays far
// below a NATS message (1 MiB), so its compare-and-set can be written
// (before, a 2 MiB completion reason made every write of the success fail
// with "maximum payload exceeded" and the rollout never ended). Control: a
// reason that fits is stored as the policy gave it.
func TestAPolicysHugeReasonIsBoundedInEveryRecordThatStoresIt(t *testing.T) {
	huge := strings.Repeat("é", 1<<20) // 2 MiB, two bytes a character
	fits := func(t *testing.T, what string, d *model.Deployment) {
		t.Helper()
		if d == nil {
			t.Fatalf("%s: no record", what)
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 16<<10 {
			t.Fatalf("%s: the record is %d bytes", what, len(b))
		}
		if !strings.Contains(string(b), " bytes, cut to ") {
			t.Fatalf("%s: the record does not say how long the reason was: %.300s", what, b)
		}
	}
	w := newWorld(3, 1, 0)
	d := w.record(nil)
	yes := true
	for _, a := range w.allocs {
		a.JobVersion, a.DeploymentStatus = 2, &model.AllocDeploymentStatus{Healthy: &yes}
	}
	counts := Derive(d, &Facts{Job: w.job, Allocs: w.allocs, Nodes: w.nodes, Now: t0})
	ok, err := ApplyVerdict(*d, counts, reconcile.CompletionDecision{Decision: reconcile.DecisionSucceed, Reason: huge}, false, nil, "n1", t0, "x")
	if err != nil || ok == nil || ok.Status != model.DeploymentSuccessful {
		t.Fatalf("success: %+v %v", ok, err)
	}
	fits(t, "success", ok)
	failed, err := ApplyVerdict(*d, counts, reconcile.CompletionDecision{Decision: reconcile.DecisionFail, Reason: huge}, false, nil, "n1", t0, "x")
	if err != nil || failed == nil || failed.Status != model.DeploymentFailed {
		t.Fatalf("failure: %+v %v", failed, err)
	}
	fits(t, "failure", failed)

	// T1: the canary reason, and the refusal of a bad answer.
	c := &Create{Proposal: w.record(func(d *model.Deployment) { d.TaskGroups["g"].DesiredCanaries = 1 }),
		Canaries: []reconcile.CanaryRequest{{Group: "g", Count: 1, Percent: 34, Eligible: []*model.Node{{ID: "n1"}, {ID: "n2"}, {ID: "n3"}}}}}
	fits(t, "canary reason", CreateRecord(c, map[string]CanaryAnswer{"g": {Choice: reconcile.CanaryChoice{NodeIDs: []string{"n2"}, Reason: huge}}}))
	fits(t, "canary policy error", CreateRecord(c, map[string]CanaryAnswer{"g": {Err: errors.New(huge)}}))

	// A lost canary node replaced, and a replacement the policy could not
	// name.
	r := &CanaryReplacement{Group: "g", Lost: "n1", Why: "lost", Version: 2,
		Request: reconcile.CanaryRequest{Group: "g", Count: 1, Eligible: []*model.Node{{ID: "n2"}, {ID: "n3"}}}}
	canarying := *w.record(func(d *model.Deployment) {
		d.TaskGroups["g"].CanaryNodes, d.TaskGroups["g"].DesiredCanaries = []string{"n1"}, 1
	})
	replaced, err := ReplaceCanary(canarying, r, CanaryAnswer{Choice: reconcile.CanaryChoice{NodeIDs: []string{"n3"}, Reason: huge}}, t0, "x")
	if err != nil {
		t.Fatal(err)
	}
	fits(t, "canary replaced", replaced)
	none, err := ReplaceCanary(canarying, r, CanaryAnswer{Choice: reconcile.CanaryChoice{Reason: huge}}, t0, "x")
	if err != nil || none == nil || none.Status != model.DeploymentFailed {
		t.Fatalf("no replacement: %+v %v", none, err)
	}
	fits(t, "no replacement", none)

	// Control: a reason that fits is kept as it was.
	short, _ := ApplyVerdict(*d, counts, reconcile.CompletionDecision{Decision: reconcile.DecisionSucceed, Reason: "all 3 healthy"}, false, nil, "n1", t0, "x")
	if short == nil || short.StatusDescription != "all 3 healthy" {
		t.Fatalf("a short reason was changed: %+v", short)
	}
	if got := BoundReason(huge); len(got) > MaxReason+64 || !strings.HasPrefix(huge, strings.TrimSuffix(got[:MaxReason/2], "…")) {
		t.Fatalf("BoundReason kept %d bytes", len(got))
	}
}
