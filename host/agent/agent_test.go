package agent

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/state"
	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/mock"
	"github.com/hivelet/hivelet/sdk/driver"
)

func onlyLive(t *testing.T, n *node, job string) *model.Allocation {
	t.Helper()
	l := n.live(job)
	if len(l) != 1 {
		return nil
	}
	return l[0]
}

func TestAJobRunsIsReplacedOnATaskChangeUpdatedInPlaceOtherwiseAndStopsOnStop(t *testing.T) {
	w := newWorld(t)
	n := w.newNode("node-a", nil, "")
	defer n.stop(true)

	w.putJob(mockJob("web", 1, map[string]any{"stdout_string": "v1"}))
	var first *model.Allocation
	testutil.Eventually(t, 10*time.Second, "v1 running and healthy", func() bool {
		first = onlyLive(t, n, "web")
		return first != nil && first.ClientStatus == model.ClientRunning && first.DeploymentStatus.IsHealthy()
	})
	testutil.Eventually(t, 10*time.Second, "deployment v1 successful", func() bool {
		d := w.deployment("", "web", 1)
		return d != nil && d.Status == model.DeploymentSuccessful
	})

	// A task change replaces the allocation.
	w.putJob(mockJob("web", 2, map[string]any{"stdout_string": "v2"}))
	var second *model.Allocation
	testutil.Eventually(t, 10*time.Second, "v2 replaced v1", func() bool {
		second = onlyLive(t, n, "web")
		return second != nil && second.JobVersion == 2 && second.ID != first.ID && second.ClientStatus == model.ClientRunning
	})
	if second.PreviousAllocation != first.ID {
		t.Fatalf("replacement's previous allocation = %q, want %q", second.PreviousAllocation, first.ID)
	}
	testutil.Eventually(t, 10*time.Second, "deployment v2 successful", func() bool {
		d := w.deployment("", "web", 2)
		return d != nil && d.Status == model.DeploymentSuccessful
	})
	if got := n.mock.starts.Load(); got != 2 {
		t.Fatalf("%d task starts after one replacement, want 2", got)
	}

	// A change outside the tasks is applied in place: same allocation, no start.
	v3 := mockJob("web", 3, map[string]any{"stdout_string": "v2"})
	v3.Groups[0].Restart.Attempts = 5
	w.putJob(v3)
	testutil.Eventually(t, 10*time.Second, "v3 in place", func() bool {
		a := onlyLive(t, n, "web")
		return a != nil && a.ID == second.ID && a.JobVersion == 3
	})
	if got := n.mock.starts.Load(); got != 2 {
		t.Fatalf("an in-place update started a task (%d starts)", got)
	}

	// stop = true stops it.
	v4 := mockJob("web", 4, map[string]any{"stdout_string": "v2"})
	v4.Stop = true
	w.putJob(v4)
	testutil.Eventually(t, 10*time.Second, "stopped", func() bool { return len(n.live("web")) == 0 })
	// The allocations bucket shows this node's final status, and forgets
	// the older finished allocation of the same name (the local store too).
	testutil.Eventually(t, 5*time.Second, "KV status complete, older allocation forgotten", func() bool {
		complete, older := false, false
		for _, a := range n.src.View().AllocsOf("node-a") {
			complete = complete || (a.ID == second.ID && a.ClientStatus == model.ClientComplete)
			older = older || a.ID == first.ID
		}
		return complete && !older
	})
	if _, ok, _ := n.st.Alloc(first.ID); ok {
		t.Fatal("the older finished allocation is still in the state store")
	}
}

func TestAMalformedJobIsRejectedAndThePreviousVersionKeepsRunning(t *testing.T) {
	w := newWorld(t)
	n := w.newNode("node-a", nil, "")
	defer n.stop(true)
	w.putJob(mockJob("web", 1, nil))
	var first *model.Allocation
	testutil.Eventually(t, 10*time.Second, "v1 running", func() bool {
		first = onlyLive(t, n, "web")
		return first != nil && first.ClientStatus == model.ClientRunning
	})
	bad := strings.Replace(string(mustJSON(mockJob("web", 2, map[string]any{"stdout_string": "x"}))), `"type":"system"`, `"type":"system","colour":"red"`, 1)
	w.putRaw(jobKey("web"), []byte(bad))
	testutil.Eventually(t, 10*time.Second, "rejection visible", func() bool {
		for _, r := range n.agent.Status().Rejections {
			if r.Key == jobKey("web") && strings.Contains(r.Reason, "colour") {
				return true
			}
		}
		return false
	})
	n.waitPasses(t, 2)
	if a := onlyLive(t, n, "web"); a == nil || a.ID != first.ID || a.JobVersion != 1 {
		t.Fatalf("after a rejected declaration: %+v", n.live("web"))
	}
	// Control: a well-formed v2 is applied.
	w.putJob(mockJob("web", 2, map[string]any{"stdout_string": "x"}))
	testutil.Eventually(t, 10*time.Second, "v2 applied", func() bool {
		a := onlyLive(t, n, "web")
		return a != nil && a.JobVersion == 2
	})
}

func TestADeletedJobKeyIsNotADeletionOrder(t *testing.T) {
	w := newWorld(t)
	n := w.newNode("node-a", nil, "")
	defer n.stop(true)
	w.putJob(mockJob("web", 1, nil))
	w.putJob(mockJob("api", 1, nil))
	testutil.Eventually(t, 10*time.Second, "both running", func() bool { return len(n.live("web")) == 1 && len(n.live("api")) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.store.Jobs.Purge(ctx, jobKey("web")); err != nil {
		t.Fatal(err)
	}
	// Control in the same test: a decoded stop = true of the other job stops it.
	stop := mockJob("api", 2, nil)
	stop.Stop = true
	w.putJob(stop)
	testutil.Eventually(t, 10*time.Second, "api stopped", func() bool { return len(n.live("api")) == 0 })
	testutil.Eventually(t, 5*time.Second, "web reported orphaned", func() bool {
		for _, k := range n.agent.Status().Orphaned {
			if k == jobKey("web") {
				return true
			}
		}
		return false
	})
	if len(n.live("web")) != 1 {
		t.Fatal("a purged job key stopped its allocation")
	}
}

func TestARestartedAgentReattachesAndStartsNothing(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	n := w.newNode("node-a", nil, dir)
	w.putJob(mockJob("web", 1, nil))
	var first *model.Allocation
	testutil.Eventually(t, 10*time.Second, "running", func() bool {
		first = onlyLive(t, n, "web")
		return first != nil && first.ClientStatus == model.ClientRunning
	})
	n.stop(false) // a normal shutdown leaves the task running
	drv := n.mock
	if drv.stops.Load() != 0 {
		t.Fatal("a normal shutdown stopped a task")
	}
	n2 := w.newNode("node-a", drv, dir)
	testutil.Eventually(t, 10*time.Second, "reattached", func() bool {
		a := onlyLive(t, n2, "web")
		return a != nil && a.ID == first.ID && a.ClientStatus == model.ClientRunning && drv.recovers.Load() == 1
	})
	n2.waitPasses(t, 2)
	if s := drv.starts.Load(); s != 1 {
		t.Fatalf("%d starts across a restart, want 1", s)
	}
	// Control: a dev-mode shutdown stops the task.
	n2.stop(true)
	if drv.stops.Load() != 1 {
		t.Fatalf("dev shutdown: %d stops", drv.stops.Load())
	}
}

func TestAPassFailsClosedWhenADriverIsUnreachable(t *testing.T) {
	w := newWorld(t)
	n := w.newNode("node-a", nil, "")
	defer n.stop(true)
	w.putJob(mockJob("web", 1, nil))
	var first *model.Allocation
	testutil.Eventually(t, 10*time.Second, "running", func() bool {
		first = onlyLive(t, n, "web")
		return first != nil && first.ClientStatus == model.ClientRunning
	})
	n.drivers.mu.Lock()
	n.drivers.down["mock"] = context.DeadlineExceeded
	n.drivers.mu.Unlock()
	w.putJob(mockJob("web", 2, map[string]any{"stdout_string": "v2"}))
	testutil.Eventually(t, 10*time.Second, "failed closed", func() bool {
		return strings.Contains(n.agent.Status().FailedClosed, "driver mock")
	})
	n.waitPasses(t, 2)
	if a := onlyLive(t, n, "web"); a == nil || a.ID != first.ID || n.mock.stops.Load() != 0 || n.mock.starts.Load() != 1 {
		t.Fatalf("a node that cannot enumerate its tasks acted: live %+v, stops %d, starts %d", n.live("web"), n.mock.stops.Load(), n.mock.starts.Load())
	}
	// Control: once the driver answers, the update goes through.
	n.drivers.mu.Lock()
	delete(n.drivers.down, "mock")
	n.drivers.mu.Unlock()
	testutil.Eventually(t, 10*time.Second, "v2 after recovery", func() bool {
		a := onlyLive(t, n, "web")
		return a != nil && a.JobVersion == 2 && n.agent.Status().FailedClosed == ""
	})
}

func TestAPassFailsClosedWhenTheStateStoreCannotBeRead(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	// A store with one record that cannot be decoded.
	st, err := state.Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	path := st.Path()
	st.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("allocs")).Put([]byte("x"), []byte("{garbage")) }); err != nil {
		t.Fatal(err)
	}
	db.Close()

	st, err = state.Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	drv := &countingDriver{Driver: mock.New()}
	src := fleetSource(w)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go src.Run(ctx)
	a, err := New(Config{Node: func() *model.Node { return nodeRecord("node-a") }, Source: src, Allocs: w.store.ForNode("node-a"),
		Deployments: w.store, Store: st, Drivers: &drivers{m: map[string]driver.Driver{"mock": drv}}, Validate: driver.ValidateConfig,
		AllocRoot: dir + "/alloc", Logger: w.log})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Restore(ctx); err == nil {
		t.Fatal("restore of a corrupt store succeeded")
	}
	w.putJob(mockJob("web", 1, nil))
	<-src.Synced()
	testutil.Eventually(t, 5*time.Second, "job in view", func() bool { _, ok := src.View().Jobs.Get(jobKey("web")); return ok })
	a.Pass(ctx)
	if s := a.Status(); !strings.Contains(s.FailedClosed, "state store unreadable") {
		t.Fatalf("status after a pass on an unreadable store: %+v", s)
	}
	if drv.starts.Load() != 0 {
		t.Fatal("a node that cannot read its store started a task")
	}
	// Control: once the bad record is gone and restore succeeds, the same
	// job is placed.
	if err := st.DeleteAlloc("x"); err != nil {
		t.Fatal(err)
	}
	a.Pass(ctx) // a full pass retries the restore
	testutil.Eventually(t, 5*time.Second, "placed after recovery", func() bool { return drv.starts.Load() == 1 })
	a.Shutdown(context.Background(), true)
}

func TestACanaryRolloutIsPromotedWhenAutoPromoteAndWaitsForAnOperatorOtherwise(t *testing.T) {
	for _, auto := range []bool{true, false} {
		t.Run(map[bool]string{true: "auto_promote", false: "manual"}[auto], func(t *testing.T) {
			w := newWorld(t)
			n := w.newNode("node-a", nil, "")
			defer n.stop(true)
			w.putJob(mockJob("web", 1, nil))
			testutil.Eventually(t, 10*time.Second, "v1 successful", func() bool {
				d := w.deployment("", "web", 1)
				return d != nil && d.Status == model.DeploymentSuccessful
			})
			v2 := mockJob("web", 2, map[string]any{"stdout_string": "v2"})
			v2.Groups[0].Update.Canary = 100
			v2.Groups[0].Update.AutoPromote = auto
			w.putJob(v2)
			testutil.Eventually(t, 10*time.Second, "the canary runs v2", func() bool {
				a := onlyLive(t, n, "web")
				return a != nil && a.JobVersion == 2 && a.DeploymentStatus.IsCanary() && a.DeploymentStatus.IsHealthy()
			})
			if auto {
				testutil.Eventually(t, 10*time.Second, "v2 promoted and successful", func() bool {
					d := w.deployment("", "web", 2)
					return d != nil && d.Status == model.DeploymentSuccessful && d.TaskGroups["g"].Promoted
				})
				return
			}
			testutil.Eventually(t, 10*time.Second, "v2 waits for promotion", func() bool {
				d := w.deployment("", "web", 2)
				return d != nil && d.Status == model.DeploymentRunning && d.StatusDescription == model.DescNeedsPromotion
			})
			n.waitPasses(t, 3)
			if d := w.deployment("", "web", 2); d.TaskGroups["g"].Promoted || d.Status != model.DeploymentRunning {
				t.Fatalf("a manual rollout promoted itself: %+v", d)
			}
		})
	}
}

func TestASysbatchJobRunsOnceAndAgainOnlyForANewVersion(t *testing.T) {
	w := newWorld(t)
	n := w.newNode("node-a", nil, "")
	defer n.stop(true)
	job := func(version uint64, out string) *model.Job {
		j := mockJob("batch", version, map[string]any{"run_for": "50ms", "stdout_string": out})
		j.Type = model.JobTypeSysbatch
		j.Groups[0].Update = nil
		return j
	}
	done := func() []*model.Allocation {
		var out []*model.Allocation
		for _, a := range n.agent.Allocs() {
			if a.JobID == "batch" && a.ClientStatus == model.ClientComplete {
				out = append(out, a)
			}
		}
		return out
	}
	w.putJob(job(1, "one"))
	testutil.Eventually(t, 10*time.Second, "v1 complete", func() bool { return len(done()) == 1 })
	n.waitPasses(t, 3) // passes come and go: nothing re-runs
	if s := n.mock.starts.Load(); s != 1 {
		t.Fatalf("a finished sysbatch allocation ran %d times", s)
	}
	// Control: a new version runs again.
	w.putJob(job(2, "two"))
	testutil.Eventually(t, 10*time.Second, "v2 complete", func() bool {
		for _, a := range done() {
			if a.JobVersion == 2 {
				return true
			}
		}
		return false
	})
	if s := n.mock.starts.Load(); s != 2 {
		t.Fatalf("%d starts after a new version, want 2", s)
	}
}

// passLog captures the "reconcile pass" records of an agent.
type passLog struct {
	mu     sync.Mutex
	places []int64
}

func (p *passLog) Enabled(context.Context, slog.Level) bool { return true }
func (p *passLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "reconcile pass" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "place" {
			p.mu.Lock()
			p.places = append(p.places, a.Value.Int64())
			p.mu.Unlock()
		}
		return true
	})
	return nil
}
func (p *passLog) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *passLog) WithGroup(string) slog.Handler      { return p }

func TestABurstOfDeclarationsIsOnePass(t *testing.T) {
	w := newWorld(t)
	pl := &passLog{}
	w.log = slog.New(pl)
	n := w.newNodeResync("node-a", nil, "", time.Hour)
	defer n.stop(true)
	testutil.Eventually(t, 5*time.Second, "first pass", func() bool { return n.agent.Status().Passes > 0 })

	n.agent.passMu.Lock() // a long pass in progress
	const burst = 20
	for i := range burst {
		j := mockJob(fmt.Sprintf("j%d", i), 1, nil)
		j.Groups[0].Update.MaxParallel = 0
		w.putJob(j)
	}
	testutil.Eventually(t, 5*time.Second, "the burst in the view", func() bool {
		return n.src.View().Jobs.Len() == burst
	})
	n.agent.passMu.Unlock()
	testutil.Eventually(t, 10*time.Second, "all started", func() bool { return n.mock.starts.Load() == burst })
	// The starts happen inside the pass; its log line comes at its end.
	testutil.Eventually(t, 10*time.Second, "the placing pass logged", func() bool {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		return slices.ContainsFunc(pl.places, func(p int64) bool { return p > 0 })
	})

	pl.mu.Lock()
	defer pl.mu.Unlock()
	var placing []int64
	for _, p := range pl.places {
		if p > 0 {
			placing = append(placing, p)
		}
	}
	if len(placing) != 1 || placing[0] != burst {
		t.Fatalf("passes that placed: %v, want one pass placing all %d", placing, burst)
	}
}

// TestARolloutLongerThanItsProgressDeadlineSucceedsWhileItKeepsProgressing:
// each allocation that turns healthy moves require-progress-by forward, so a
// rollout paced by max_parallel is judged on progress, not on its length.
// The rollout below cannot take less than 6 × min_healthy_time = 2.4 s
// against a 1.5 s progress deadline.
func TestARolloutLongerThanItsProgressDeadlineSucceedsWhileItKeepsProgressing(t *testing.T) {
	w := newWorld(t)
	n := w.newNode("node-a", nil, "")
	defer n.stop(true)
	job := func(version uint64, out string) *model.Job {
		j := mockJob("slow", version, map[string]any{"stdout_string": out})
		j.Groups[0].Count = 6
		j.Groups[0].Update.MinHealthyTime = model.Duration(400 * time.Millisecond)
		j.Groups[0].Update.HealthyDeadline = model.Duration(time.Second)
		j.Groups[0].Update.ProgressDeadline = model.Duration(1500 * time.Millisecond)
		return j
	}
	w.putJob(job(1, "v1"))
	testutil.Eventually(t, 15*time.Second, "v1 successful", func() bool {
		d := w.deployment("", "slow", 1)
		return d != nil && d.Status == model.DeploymentSuccessful
	})
	start := time.Now()
	w.putJob(job(2, "v2"))
	testutil.Eventually(t, 30*time.Second, "v2 decided", func() bool {
		d := w.deployment("", "slow", 2)
		return d != nil && (d.Status == model.DeploymentSuccessful || d.Status == model.DeploymentFailed)
	})
	took := time.Since(start)
	d := w.deployment("", "slow", 2)
	if d.Status != model.DeploymentSuccessful {
		t.Fatalf("a progressing rollout failed after %s: %s (%s)", took, d.Status, d.StatusDescription)
	}
	if took < 1500*time.Millisecond {
		for _, a := range n.live("slow") {
			t.Logf("alloc %s v%d %s healthy=%v", a.Name, a.JobVersion, a.ClientStatus, a.DeploymentStatus.IsHealthy())
		}
		t.Logf("deployment %+v %+v", d, d.TaskGroups["g"])
		t.Fatalf("the rollout took %s, shorter than its progress deadline: the test proves nothing", took)
	}
	// The last allocation's health may be recorded by the success itself
	// (the reconciler's status update), so at least five are.
	if st := d.TaskGroups["g"]; st.HealthyAllocs < 5 || !st.RequireProgressBy.After(start.Add(1500*time.Millisecond)) {
		t.Fatalf("progress not recorded: healthy %d, require progress by %s (rollout started %s)", st.HealthyAllocs, st.RequireProgressBy, start)
	}
}

// TestAJobWhosePolicyIsStillLoadingIsHeldNotDecidedByAStandIn: while the
// canary or completion policy a job names is not loaded, the job is held (no
// placement, no deployment, no verdict); once it settles the job rolls. A job
// naming no policy on the same node (the control) runs at once.
func TestAJobWhosePolicyIsStillLoadingIsHeldNotDecidedByAStandIn(t *testing.T) {
	w := newWorld(t)
	var loaded atomic.Bool
	n := &node{w: w, id: "node-a", dir: t.TempDir(), mock: &countingDriver{Driver: mock.New()}, resync: 200 * time.Millisecond}
	n.drivers = &drivers{m: map[string]driver.Driver{"mock": n.mock}, down: map[string]error{}}
	n.pending = func(j *model.Job) (bool, string) {
		for _, g := range j.Groups {
			if g.Update != nil && g.Update.CanaryPolicy != nil && !loaded.Load() {
				return true, "policy " + g.Update.CanaryPolicy.Name + " loading"
			}
		}
		return false, ""
	}
	n.start()
	defer n.stop(true)

	named := mockJob("named", 1, nil)
	named.Groups[0].Update.CanaryPolicy = &model.PolicyRef{Name: "spread"}
	w.putJob(named)
	w.putJob(mockJob("plain", 1, nil))
	testutil.Eventually(t, 10*time.Second, "the control job runs", func() bool { return onlyLive(t, n, "plain") != nil })
	n.waitPasses(t, 3) // several backstop passes
	if l := n.live("named"); len(l) != 0 || w.deployment("", "named", 1) != nil {
		t.Fatalf("a job whose policy is loading was acted on: %d allocations, deployment %v", len(l), w.deployment("", "named", 1))
	}
	if got := n.agent.Status().LastCounts.PolicyHeld; got != 1 {
		t.Fatalf("policy_held = %d, want 1", got)
	}
	loaded.Store(true)
	testutil.Eventually(t, 10*time.Second, "the held job runs once its policy settles", func() bool { return onlyLive(t, n, "named") != nil })
}
