package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// An incremental pass looks at the jobs that changed, those that did not
// converge at the last pass and those whose wait ended, not at every job:
// the other jobs are counted as skipped, as a walk over all of them would.
func TestAnIncrementalPassLooksOnlyAtTheJobsThatMayNeedIt(t *testing.T) {
	w := newWorld(t)
	n := w.newNodeWith("node-a", nil, "", time.Hour, func(n *node) { n.manual = true })
	defer n.stop(true)
	a := n.agent
	ctx := context.Background()
	<-n.src.Synced()
	const jobs = 20
	noDeployment := func(id string) *model.Job {
		j := mockJob(id, 1, nil)
		j.Groups[0].Update.MaxParallel = 0
		return j
	}
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
	looked := func() []string { return slices.Sorted(maps.Keys(a.visited)) }
	// Passes until nothing is left to look at: the allocations' status
	// changes make their jobs dirty once more.
	testutil.Eventually(t, 10*time.Second, "a pass that looks at nothing", func() bool {
		a.pass(ctx, false)
		return len(looked()) == 0
	})
	if c := a.Status().LastCounts; c.Jobs != jobs || c.Skipped != jobs {
		t.Fatalf("a pass with nothing changed counted %d jobs, %d skipped; want %d and %d", c.Jobs, c.Skipped, jobs, jobs)
	}

	// A new job: the pass looks at it alone, places it, and counts the
	// others skipped.
	w.putJob(noDeployment("new"))
	testutil.Eventually(t, 10*time.Second, "the new job in view", func() bool { return n.src.View().Jobs.Len() == jobs+1 })
	a.pass(ctx, false)
	if got := looked(); !slices.Equal(got, []string{"default.new"}) {
		t.Fatalf("the pass after a put looked at %v, want only default.new", got)
	}
	// (Placed, or held until its allocations are watched: this node
	// narrows its watches.)
	if c := a.Status().LastCounts; c.Place+c.WatchHeld != 1 || c.Jobs != jobs+1 || c.Skipped != jobs {
		t.Fatalf("the pass after a put: place %d, watch-held %d, %d jobs, %d skipped; want 1 of the first two, %d, %d", c.Place, c.WatchHeld, c.Jobs, c.Skipped, jobs+1, jobs)
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
	if got := looked(); !slices.Equal(got, []string{"default.j07"}) {
		t.Fatalf("the pass after a wait ended looked at %v, want only default.j07", got)
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
