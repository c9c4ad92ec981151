package policies

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
)

// genCanaryCorpus generates varied canary requests: node counts from 0 to
// 60, counts from 0 to past the eligible size, IDs in random order of
// creation but sent sorted, as the reconciler sends them.
func genCanaryCorpus(r *rand.Rand, n int) []reconcile.CanaryRequest {
	reqs := make([]reconcile.CanaryRequest, n)
	for i := range reqs {
		nodes := genNodes(r.IntN(60), 1+r.IntN(4))
		r.Shuffle(len(nodes), func(a, b int) { nodes[a], nodes[b] = nodes[b], nodes[a] })
		for j, nd := range nodes {
			nd.ID = fmt.Sprintf("%08x-%d", r.Uint32(), j)
		}
		slices.SortFunc(nodes, func(a, b *model.Node) int { return compare(a.ID, b.ID) })
		reqs[i] = canaryReq(nodes, r.IntN(len(nodes)+3), &model.PolicyRef{Name: "builtin:percent"})
		reqs[i].DeploymentID = fmt.Sprintf("d-%d", i)
	}
	return reqs
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// genCompletionCorpus generates completion inputs covering every rule:
// statuses, unhealthy allocations, deadlines before and after now,
// canaries healthy or not, promoted or not, auto_promote and auto_revert
// mixed, complete or not.
func genCompletionCorpus(r *rand.Rand, n int) []reconcile.CompletionInput {
	now := time.Unix(1_800_000_000, 0).UTC()
	statuses := []model.DeploymentStatus{model.DeploymentRunning, model.DeploymentRunning, model.DeploymentRunning, model.DeploymentPaused, model.DeploymentFailed}
	ins := make([]reconcile.CompletionInput, n)
	for i := range ins {
		d := &model.Deployment{ID: fmt.Sprintf("d-%d", i), JobID: "web", JobVersion: uint64(i), Status: statuses[r.IntN(len(statuses))],
			TaskGroups: map[string]*model.DeploymentState{}}
		in := reconcile.CompletionInput{Deployment: d, Groups: map[string]reconcile.GroupHealth{}, Now: now,
			Policy: &model.PolicyRef{Name: "builtin:default"}}
		for g := range r.IntN(5) {
			name := fmt.Sprintf("g%d", g)
			total := r.IntN(12)
			s := &model.DeploymentState{DesiredTotal: total, AutoRevert: r.IntN(2) == 0, AutoPromote: r.IntN(2) == 0, Promoted: r.IntN(3) == 0}
			if r.IntN(2) == 0 {
				s.DesiredCanaries = r.IntN(3)
			}
			if r.IntN(2) == 0 {
				s.ProgressDeadline = model.Duration(10 * time.Minute)
				s.RequireProgressBy = now.Add(time.Duration(r.IntN(5)-2) * time.Minute)
			}
			d.TaskGroups[name] = s
			healthy := r.IntN(total + 2)
			in.Groups[name] = reconcile.GroupHealth{Placed: total, Healthy: healthy,
				Unhealthy: max(0, r.IntN(8)-6), Pending: r.IntN(3), CanariesHealthy: r.IntN(3), Complete: r.IntN(2) == 0}
		}
		ins[i] = in
	}
	return ins
}

// TestWasmPercentAgreesWithNativeDefault: the embedded `percent` module and
// the native fallback choose the same nodes on a generated corpus.
func TestWasmPercentAgreesWithNativeDefault(t *testing.T) {
	e, faults, _ := newTestEngine(t, Options{})
	m := loadBuiltin(t, e, "percent")
	r := rand.New(rand.NewPCG(1, 2))
	for i, req := range genCanaryCorpus(r, 200) {
		got, err := m.Canary(context.Background(), req)
		want := NativeCanary(req)
		if err != nil || !slices.Equal(got.NodeIDs, want.NodeIDs) {
			t.Fatalf("case %d (%d eligible, count %d): wasm %v, %v; native %v", i, len(req.Eligible), req.Count, got.NodeIDs, err, want.NodeIDs)
		}
	}
	if f := faults.all(); len(f) != 0 {
		t.Fatalf("faults: %v", f)
	}
}

// TestWasmDefaultCompletionAgreesWithNativeDefault: the embedded `default`
// module and the native fallback decide the same (decision and revert) on a
// generated corpus that reaches every decision.
func TestWasmDefaultCompletionAgreesWithNativeDefault(t *testing.T) {
	e, faults, _ := newTestEngine(t, Options{})
	m := loadBuiltin(t, e, "default")
	r := rand.New(rand.NewPCG(3, 4))
	seen := map[reconcile.Decision]int{}
	reverts := 0
	for i, in := range genCompletionCorpus(r, 800) {
		got, err := m.Completion(context.Background(), in)
		want := NativeCompletion(in)
		if err != nil || got.Decision != want.Decision || got.Revert != want.Revert {
			t.Fatalf("case %d: wasm %+v, %v; native %+v\ninput: %+v", i, got, err, want, in)
		}
		seen[got.Decision]++
		if got.Revert {
			reverts++
		}
	}
	for _, d := range []reconcile.Decision{reconcile.DecisionContinue, reconcile.DecisionPromote, reconcile.DecisionSucceed, reconcile.DecisionFail} {
		if seen[d] == 0 {
			t.Errorf("the corpus never reached %s: %v", d, seen)
		}
	}
	if reverts == 0 {
		t.Error("the corpus never reached a revert")
	}
	if f := faults.all(); len(f) != 0 {
		t.Fatalf("faults: %v", f)
	}
	t.Logf("decisions: %v, reverts %d", seen, reverts)
}

// TestARawABIModuleWithoutTheSDKRunsInTheEngine: raw.wat, written against
// the ABI by hand, answers like the native default on the corpus (and its
// completion export answers continue).
func TestARawABIModuleWithoutTheSDKRunsInTheEngine(t *testing.T) {
	e, faults, _ := newTestEngine(t, Options{})
	m, err := e.Load(context.Background(), "raw", "", watModule(t, "raw"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Kinds != KindCanary|KindCompletion || m.ABI != 1 || len(m.Imports) != 0 {
		t.Fatalf("raw module: kinds %s, ABI %d, imports %v", m.Kinds, m.ABI, m.Imports)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for i, req := range genCanaryCorpus(r, 100) {
		req.Policy = &model.PolicyRef{Name: "raw", Params: map[string]string{"ignored": "yes"}}
		got, err := e.ChooseCanaries(context.Background(), req)
		if want := NativeCanary(req); err != nil || !slices.Equal(got.NodeIDs, want.NodeIDs) || got.Reason != "first nodes as sent (raw WAT)" {
			t.Fatalf("case %d: raw %+v, %v; native %v", i, got, err, want.NodeIDs)
		}
	}
	in := genCompletion(2, time.Unix(1_800_000_000, 0))
	in.Policy = &model.PolicyRef{Name: "raw"}
	d, err := e.DecideCompletion(context.Background(), in)
	if err != nil || d.Decision != reconcile.DecisionContinue || d.Reason != "raw module says continue" {
		t.Fatalf("completion: %+v, %v", d, err)
	}
	if f := faults.all(); len(f) != 0 {
		t.Fatalf("faults: %v", f)
	}
}
