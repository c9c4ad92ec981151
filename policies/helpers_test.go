package policies

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/internal/policywire"
	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/sdk/policy"
)

// faultLog collects the faults an engine reports.
type faultLog struct {
	mu     sync.Mutex
	faults []*Fault
}

func (l *faultLog) add(f *Fault) {
	l.mu.Lock()
	l.faults = append(l.faults, f)
	l.mu.Unlock()
}

func (l *faultLog) all() []*Fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Fault(nil), l.faults...)
}

func newTestEngine(t testing.TB, opts Options) (*Engine, *faultLog, *prometheus.Registry) {
	t.Helper()
	faults := &faultLog{}
	reg := prometheus.NewRegistry()
	if opts.CacheDir == "" {
		opts.CacheDir = testutil.WazeroCacheDir(t) // the suite's one cache
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Deadline == 0 {
		// Correctness tests must not flake on a loaded machine; the
		// deadline itself is tested with 100 ms in faults_test.go.
		opts.Deadline = 5 * time.Second
	}
	if opts.LoadDeadline == 0 {
		// The same for a module's initialisation (default 2 s), which a
		// fresh instance also runs after a trap: a Go guest's took over
		// 2 s once in the suite beside three other packages under -race
		// (TestWasmQuorumAgreesWithItsNativeRule; the controls after a
		// trap in TestEveryFaultKindFallsBackToTheNativeDefaultAndIsReported).
		opts.LoadDeadline = 30 * time.Second
	}
	opts.Registerer = reg
	opts.OnFault = faults.add
	e, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e, faults, reg
}

func loadBuiltin(t testing.TB, e *Engine, name string) *Module {
	t.Helper()
	wasm, ok := BuiltinWasm(name)
	if !ok {
		t.Fatalf("no built-in %s", name)
	}
	m, err := e.Compile(context.Background(), BuiltinPrefix+name, wasm)
	if err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	e.builtins[name] = m
	e.byDigest[m.Digest] = m
	e.mu.Unlock()
	return m
}

// genNodes makes n ready nodes over dcs datacenters, with five attributes
// and three meta keys each, sorted by ID.
func genNodes(n, dcs int) []*model.Node {
	nodes := make([]*model.Node, n)
	for i := range nodes {
		nodes[i] = &model.Node{
			ID:         fmt.Sprintf("node-%06d-0a1b2c3d", i),
			Name:       fmt.Sprintf("host-%d", i),
			Datacenter: fmt.Sprintf("dc%d", i%dcs),
			NodePool:   "default",
			Class:      []string{"", "gpu", "edge"}[i%3],
			Status:     model.NodeStatusReady,
			Attributes: map[string]string{
				"kernel.name": "linux", "cpu.arch": "amd64", "os.name": "debian",
				"unique.hostname": fmt.Sprintf("host-%d", i), "driver.docker": "1",
			},
			Meta: map[string]string{"rack": fmt.Sprintf("r%d", i%7), "canary": fmt.Sprint(i%10 == 3), "team": "web"},
		}
	}
	return nodes
}

func canaryReq(nodes []*model.Node, count int, ref *model.PolicyRef) reconcile.CanaryRequest {
	return reconcile.CanaryRequest{
		JobID: "web", JobVersion: 3, DeploymentID: "d-7f3a", Group: "frontend",
		Percent: 10, Count: count, Eligible: nodes, Policy: ref,
	}
}

// genCompletion makes a completion input over groups groups.
func genCompletion(groups int, now time.Time) reconcile.CompletionInput {
	d := &model.Deployment{ID: "d-7f3a", JobID: "web", JobVersion: 3, Status: model.DeploymentRunning,
		TaskGroups: map[string]*model.DeploymentState{}}
	in := reconcile.CompletionInput{Deployment: d, Groups: map[string]reconcile.GroupHealth{}, Now: now}
	for i := range groups {
		name := fmt.Sprintf("group-%02d", i)
		d.TaskGroups[name] = &model.DeploymentState{DesiredTotal: 100, AutoRevert: true,
			ProgressDeadline: model.Duration(10 * time.Minute), RequireProgressBy: now.Add(time.Minute)}
		in.Groups[name] = reconcile.GroupHealth{Placed: 100, Healthy: 90, Pending: 10}
	}
	return in
}

// counterValue reads a counter from a registry (so the test also proves
// the metric is registered where the caller said).
func counterValue(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// sdkCompletionInput is a completion input as the SDK hands it to a rule
// (what sdk/policy's decoder builds from the same bytes).
func sdkCompletionInput(c policywire.Completion) policy.CompletionInput {
	groups := make([]policy.Group, len(c.Groups))
	for i, g := range c.Groups {
		groups[i] = policy.Group(g)
	}
	return policy.CompletionInput{DeploymentID: c.DeploymentID, JobID: c.JobID, JobVersion: c.JobVersion, Status: c.Status,
		Disruption: c.Disruption, Now: c.Now, Params: c.Params, Groups: groups}
}

// wireCompletionOutput is a rule's answer as the SDK encodes it.
func wireCompletionOutput(out policy.CompletionOutput) policywire.CompletionOutput {
	return policywire.CompletionOutput{Decision: policywire.Decision(out.Decision), Revert: out.Revert, Reason: out.Reason}
}
