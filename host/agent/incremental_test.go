package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// An incremental pass looks at the jobs that changed, those that did not
// converge at the last pass and those whose wait ended, not at every job:
// the other jobs are counted as skipped, as a walk over all of them would.
// noDeployment is a mock job that makes no deployment.
func noDeployment(id string) *model.Job {
	j := mockJob(id, 1, nil)
	j.Groups[0].Update.MaxParallel = 0
	return j
}

// manualNode is a node whose passes the test makes, running jobs jobs
// j00… each converged, with nothing left to look at.
func manualNode(t *testing.T, w *world, jobs int) *node {
	t.Helper()
	n := w.newNodeWith("node-a", nil, "", time.Hour, func(n *node) { n.manual = true })
	a := n.agent
	ctx := context.Background()
	<-n.src.Synced()
	for i := range jobs {
		w.putJob(noDeployment(fmt.Sprintf("j%02d", i)))
	}
	testutil.Eventually(t, 10*time.Second, "every job in view", func() bool { return n.src.View().Jobs.Len() == jobs })
	a.pass(ctx, true)
	testutil.Eventually(t, 10*time.Second, "every job running", func() bool {
		a.pass(ctx, false) // a narrowed node holds a job until its watch is in: passes until then
		running := 0
		for _, al := range a.Allocs() {
			if al.ClientStatus == model.ClientRunning {
				running++
			}
		}
		return running == jobs
	})
	// Passes until nothing is left to look at: the allocations' status
	// changes make their jobs dirty once more. On a loaded machine the
	// runners' last reports (each task's events, its health after the
	// group's min_healthy_time) trickle in after one pass found nothing:
	// passes must find nothing for half a second running.
	var quietSince time.Time
	testutil.Eventually(t, 20*time.Second, "passes that look at nothing for 500ms", func() bool {
		a.pass(ctx, false)
		if len(a.visited) != 0 {
			quietSince = time.Time{}
			return false
		}
		if quietSince.IsZero() {
			quietSince = time.Now()
		}
		time.Sleep(20 * time.Millisecond)
		return time.Since(quietSince) >= 500*time.Millisecond
	})
	return n
}

func TestAnIncrementalPassLooksOnlyAtTheJobsThatMayNeedIt(t *testing.T) {
	w := newWorld(t)
	const jobs = 20
	n := manualNode(t, w, jobs)
	defer n.stop(true)
	a := n.agent
	ctx := context.Background()
	looked := func() []string { return slices.Sorted(maps.Keys(a.visited)) }
	// A runner's late report (a task event) can make a job this node runs
	// dirty at any moment on a loaded machine: the pass may look at such
	// a job too, but not at every job.
	lookedAt := func(must string) (got []string, ok bool) {
		got = looked()
		return got, slices.Contains(got, must) && len(got) <= jobs/2
	}
	if c := a.Status().LastCounts; c.Jobs != jobs || c.Skipped != jobs {
		t.Fatalf("a pass with nothing changed counted %d jobs, %d skipped; want %d and %d", c.Jobs, c.Skipped, jobs, jobs)
	}

	// A new job: the pass looks at it alone, places it, and counts the
	// others skipped.
	w.putJob(noDeployment("new"))
	testutil.Eventually(t, 10*time.Second, "the new job in view", func() bool { return n.src.View().Jobs.Len() == jobs+1 })
	a.pass(ctx, false)
	got, ok := lookedAt("default.new")
	if !ok {
		t.Fatalf("the pass after a put looked at %v, want default.new and few others", got)
	}
	// (Placed, or held until its allocations are watched: this node
	// narrows its watches.)
	if c := a.Status().LastCounts; c.Place+c.WatchHeld != 1 || c.Jobs != jobs+1 || c.Skipped < jobs-(len(got)-1) {
		t.Fatalf("the pass after a put: place %d, watch-held %d, %d jobs, %d skipped; want 1 of the first two, %d, at least %d", c.Place, c.WatchHeld, c.Jobs, c.Skipped, jobs+1, jobs-(len(got)-1))
	}
	testutil.Eventually(t, 10*time.Second, "the new job placed", func() bool {
		a.pass(ctx, false)
		return len(n.live("new")) == 1
	})

	// A converged job whose wait ended is looked at, though nothing of it
	// changed.
	testutil.Eventually(t, 10*time.Second, "quiet again", func() bool {
		a.pass(ctx, false)
		return len(looked()) == 0
	})
	a.retryAt["default.j07"] = time.Now().Add(-time.Second)
	a.pass(ctx, false)
	if got, ok := lookedAt("default.j07"); !ok {
		t.Fatalf("the pass after a wait ended looked at %v, want default.j07 and few others", got)
	}

	// A job that does not converge (its task cannot be placed: an unknown
	// driver) is looked at again by the next pass, and the one after.
	bad := noDeployment("bad")
	bad.Groups[0].Tasks[0].Driver = "nosuch"
	w.putJob(bad)
	testutil.Eventually(t, 10*time.Second, "the bad job in view", func() bool { return n.src.View().Jobs.Len() == jobs+2 })
	a.pass(ctx, false)
	for range 2 {
		a.pass(ctx, false)
		if got := looked(); !slices.Contains(got, "default.bad") {
			t.Fatalf("a pass after the bad job's looked at %v, want default.bad among them", got)
		}
	}
}

// cutSource is a ViewSource that, while cut is set, reports a job's
// declaration put after the view (a new generation whose change is in the
// jobs bucket), as the Source does when a job is put during a pass.
type cutSource struct {
	ViewSource
	cut atomic.Bool
	// beat makes the change reported a heartbeat of another node instead.
	beat atomic.Bool
}

const cutGen = 1 << 40

func (s *cutSource) Generation() uint64 {
	g := s.ViewSource.Generation()
	if s.cut.Load() {
		g += cutGen
	}
	return g
}

func (s *cutSource) ChangesSince(from, to uint64) ([]fleet.Change, bool) {
	now := s.ViewSource.Generation()
	if !s.cut.Load() || to <= now {
		return s.ViewSource.ChangesSince(from, to)
	}
	out, ok := s.ViewSource.ChangesSince(min(from, now), now)
	if s.beat.Load() {
		return append(out, fleet.Change{Gen: to, Kind: fleet.KindNodes, Key: "node-z", HeartbeatOnly: true}), ok
	}
	return append(out, fleet.Change{Gen: to, Kind: fleet.KindJobs, Key: "default.meanwhile", Jobs: [2]string{"default.meanwhile"}}), ok
}

// A pass gives way to a job's declaration put while it runs: it stops
// deciding the other jobs once it has decided passSlice's worth, and the
// next pass decides the jobs it left, which are not taken as converged.
// Heartbeats and other changes do not cut a pass.
func TestAPassGivesWayToADeclarationAndTheNextDecidesWhatItLeft(t *testing.T) {
	defer func(d time.Duration) { passSlice = d }(passSlice)
	passSlice = 0 // give way after the first job
	w := newWorld(t)
	const jobs = 12
	n := manualNode(t, w, jobs)
	defer n.stop(true)
	a := n.agent
	ctx := context.Background()
	src := &cutSource{ViewSource: a.cfg.Source}
	a.cfg.Source = src

	// Controls: a full pass with no declaration waiting decides every job,
	// and so does one during which another node's heartbeat came.
	for _, beat := range []bool{false, true} {
		src.cut.Store(beat)
		src.beat.Store(beat)
		a.pass(ctx, true)
		if c := a.Status().LastCounts; c.Deferred != 0 || c.Jobs != jobs {
			t.Fatalf("a full pass with nothing put meanwhile (a heartbeat: %v): %d jobs, %d deferred; want %d, 0", beat, c.Jobs, c.Deferred, jobs)
		}
	}

	src.beat.Store(false)
	src.cut.Store(true)
	a.pass(ctx, true)
	if c := a.Status().LastCounts; c.Deferred != jobs-1 || c.Jobs != 1 {
		t.Fatalf("a full pass with a declaration waiting: %d jobs decided, %d deferred; want 1, %d", c.Jobs, c.Deferred, jobs-1)
	}
	var left []string
	for i := range jobs {
		if k := fmt.Sprintf("default.j%02d", i); !hasKey(a.lastSig, k) {
			left = append(left, k)
		}
	}
	if len(left) != jobs-1 {
		t.Fatalf("%d jobs taken as not converged after the cut, want %d", len(left), jobs-1)
	}

	src.cut.Store(false)
	a.pass(ctx, false)
	for _, k := range left {
		if _, ok := a.visited[k]; !ok {
			t.Fatalf("the pass after the cut did not look at %s, which the cut left", k)
		}
	}
	// (The one job decided before the cut is skipped, unless a late
	// report of its runner made it dirty meanwhile.)
	if c := a.Status().LastCounts; c.Deferred != 0 || c.Jobs != jobs || c.Skipped > 1 {
		t.Fatalf("the pass after the cut: %d jobs, %d skipped, %d deferred; want %d, at most 1, 0", c.Jobs, c.Skipped, c.Deferred, jobs)
	}
	testutil.Eventually(t, 10*time.Second, "converged again", func() bool {
		a.pass(ctx, false)
		return len(a.visited) == 0
	})
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}
