package policies

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/internal/policywire"
	"github.com/hivelet/hivelet/policies/rules"
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
// mixed, complete or not, replacements lost in flight, lost and
// disconnected allocations, and about one input in six asked while the
// disruption guard holds.
func genCompletionCorpus(r *rand.Rand, n int) []reconcile.CompletionInput {
	now := time.Unix(1_800_000_000, 0).UTC()
	statuses := []model.DeploymentStatus{model.DeploymentRunning, model.DeploymentRunning, model.DeploymentRunning, model.DeploymentPaused, model.DeploymentFailed}
	ins := make([]reconcile.CompletionInput, n)
	for i := range ins {
		d := &model.Deployment{ID: fmt.Sprintf("d-%d", i), JobID: "web", JobVersion: uint64(i), Status: statuses[r.IntN(len(statuses))],
			TaskGroups: map[string]*model.DeploymentState{}}
		in := reconcile.CompletionInput{Deployment: d, Groups: map[string]reconcile.GroupHealth{}, Now: now,
			Policy: &model.PolicyRef{Name: "builtin:default"}}
		if r.IntN(6) == 0 {
			in.Disruption = fmt.Sprintf("%d of the job's nodes expired within 30s", 2+r.IntN(5))
		}
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
				Unhealthy: max(0, r.IntN(8)-6), Pending: r.IntN(3), CanariesHealthy: r.IntN(3), Complete: r.IntN(2) == 0,
				LostInFlight: max(0, r.IntN(6)-3), Lost: max(0, r.IntN(5)-3), Disconnected: max(0, r.IntN(5)-3)}
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
	reverts, disrupted, disruptedWouldDecide := 0, 0, 0
	for i, in := range genCompletionCorpus(r, 800) {
		got, err := m.Completion(context.Background(), in)
		want := NativeCompletion(in)
		if err != nil || got.Decision != want.Decision || got.Revert != want.Revert {
			t.Fatalf("case %d: wasm %+v, %v; native %+v\ninput: %+v", i, got, err, want, in)
		}
		if in.Disruption != "" && in.Deployment.Status == model.DeploymentRunning {
			disrupted++
			if !strings.Contains(got.Reason, in.Disruption) {
				t.Fatalf("case %d: asked during a disruption, the reason %q does not name it", i, got.Reason)
			}
			// The same input without the guard: how often it would have
			// reached a verdict, so the corpus shows the guard at work.
			calm := in
			calm.Disruption = ""
			if NativeCompletion(calm).Decision != reconcile.DecisionContinue {
				disruptedWouldDecide++
			}
		}
		seen[got.Decision]++
		if got.Revert {
			reverts++
		}
	}
	if disrupted == 0 || disruptedWouldDecide == 0 {
		t.Errorf("the corpus has %d running deployments asked during a disruption, %d of which would reach a verdict without it: want both", disrupted, disruptedWouldDecide)
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
	t.Logf("decisions: %v, reverts %d, during a disruption %d (%d would decide without it)", seen, reverts, disrupted, disruptedWouldDecide)
}

// TestWasmQuorumAgreesWithItsNativeRule: the embedded `quorum` module and
// rules.Quorum run natively on the same SDK input decide the same
// (decision, revert and reason) on the completion corpus, under parameter
// sets with and without max_lost_in_flight; the corpus reaches a failure
// caused by lost replacements alone.
func TestWasmQuorumAgreesWithItsNativeRule(t *testing.T) {
	e, faults, _ := newTestEngine(t, Options{})
	m := loadBuiltin(t, e, "quorum")
	r := rand.New(rand.NewPCG(7, 8))
	paramSets := []map[string]string{
		nil,
		{"healthy_fraction": "0.8", "max_unhealthy": "1"},
		{"max_lost_in_flight": "0"},
		{"healthy_fraction": "0.5", "max_lost_in_flight": "1"},
	}
	lostFails := 0
	for i, in := range genCompletionCorpus(r, 400) {
		in.Policy = &model.PolicyRef{Name: "builtin:quorum", Params: paramSets[i%len(paramSets)]}
		got, err := m.Completion(context.Background(), in)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		want, err := rules.Quorum(sdkCompletionInput(completionInput(&in)))
		if err != nil {
			t.Fatalf("case %d: native: %v", i, err)
		}
		if string(got.Decision) != want.Decision.String() || got.Revert != want.Revert || got.Reason != want.Reason {
			t.Fatalf("case %d: wasm %+v; native %+v\ninput: %+v", i, got, want, in)
		}
		if got.Decision == reconcile.DecisionFail && strings.Contains(got.Reason, "lost in flight") && !strings.Contains(got.Reason, "unhealthy") {
			lostFails++
		}
	}
	if lostFails == 0 {
		t.Error("the corpus never failed a deployment for replacements lost in flight")
	}
	if f := faults.all(); len(f) != 0 {
		t.Fatalf("faults: %v", f)
	}
	t.Logf("failures for lost replacements alone: %d", lostFails)
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
	// raw is an ABI version 1 module: its input cannot say the disruption
	// guard holds, so the engine does not ask it then and continues.
	in.Disruption = "many nodes expired at once"
	d, err = e.DecideCompletion(context.Background(), in)
	if err != nil || d.Decision != reconcile.DecisionContinue || !strings.Contains(d.Reason, "many nodes expired") || !strings.Contains(d.Reason, "ABI version 1") {
		t.Fatalf("completion of a version 1 module during a disruption: %+v, %v", d, err)
	}
	if f := faults.all(); len(f) != 0 {
		t.Fatalf("faults: %v", f)
	}
}

// TestAVersion1ModuleIsSentTheVersion1CompletionInput: the engine encodes
// a completion input in the layout of the module's own ABI version (raw is
// a version 1 module, the SDK's are version 2). The version 1 layout
// carries neither the disruption nor the loss counts, so it is the version
// 2 layout minus exactly those bytes, and the version 2 layout decodes with
// them (control).
func TestAVersion1ModuleIsSentTheVersion1CompletionInput(t *testing.T) {
	in := genCompletion(3, time.Unix(1_800_000_000, 0))
	plain := completionInput(&in)
	in.Disruption = "many nodes expired"
	for n, h := range in.Groups {
		h.LostInFlight, h.Lost, h.Disconnected = 1, 2, 3
		in.Groups[n] = h
	}
	loaded := completionInput(&in)
	v1, v1plain := policywire.AppendCompletionInput(nil, &loaded, 1), policywire.AppendCompletionInput(nil, &plain, 1)
	if !slices.Equal(v1, v1plain) {
		t.Fatal("the version 1 layout changed with the disruption or the loss counts")
	}
	v2 := policywire.AppendCompletionInput(nil, &loaded, 2)
	if want := len(v1) + 4 + len(in.Disruption) + 3*len(in.Groups); len(v2) != want {
		t.Fatalf("version 2 layout: %d bytes, want %d", len(v2), want)
	}
	if got, err := policywire.DecodeCompletionInput(v2); err != nil || got.Disruption != in.Disruption || got.Groups[0].Lost != 2 {
		t.Fatalf("version 2 decoded: %+v, %v", got, err)
	}
}
