package agent

import (
	"context"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/testutil"
)

// TestGoneJobsAreLookedForOnlyWhenTheJobsMoved: a pass walks the
// job-keyed maps for gone jobs' keys on its first and full passes, when
// the job count went down (a view that lost a key) and when the jobs
// bucket's revision went back (re-created); not when the revision only
// went forward with as many jobs or more (declarations and new jobs put:
// a Source's view keeps every key it has seen).
func TestGoneJobsAreLookedForOnlyWhenTheJobsMoved(t *testing.T) {
	view := func(rev uint64, keys ...string) *fleet.View {
		v := &fleet.View{Jobs: fleet.MapOf(map[string]wanted.JobState{}), Revisions: map[string]uint64{fleet.KindJobs: rev}}
		for _, k := range keys {
			v.Jobs = v.Jobs.With(k, wanted.JobState{Key: k})
		}
		return v
	}
	var m pruneMark
	steps := []struct {
		what string
		full bool
		v    *fleet.View
		want bool
	}{
		{"the first pass, with no job", false, view(0), true},
		{"nothing moved", false, view(0), false},
		{"a job put", false, view(3, "default.a"), false},
		{"nothing moved since", false, view(3, "default.a"), false},
		{"a full pass", true, view(3, "default.a"), true},
		{"another job put", false, view(4, "default.a", "default.b"), false},
		{"a view that lost a key at the same revision", false, view(4, "default.a"), true},
		{"the same again", false, view(4, "default.a"), false},
		{"a declaration put again, the revision forward", false, view(9, "default.a"), false},
		{"the bucket pulled again, the revision lower", false, view(2, "default.a"), true},
		{"the revision forward from there", false, view(3, "default.a"), false},
	}
	for _, s := range steps {
		if got := m.due(s.full, s.v); got != s.want {
			t.Fatalf("%s: due %v, want %v", s.what, got, s.want)
		}
	}
}

// TestAFinishedRunnerIsCollectedByAnIncrementalPass: a pass looks for
// finished runners only when one closed its Done since the last look
// (OnDone), and an incremental pass after that finds it: this node makes
// its full pass only every hour.
func TestAFinishedRunnerIsCollectedByAnIncrementalPass(t *testing.T) {
	w := newWorld(t)
	n := w.newNodeResync("node-a", nil, "", time.Hour)
	defer n.stop(true)
	batch := mockJob("batch", 0, map[string]any{"run_for": "20ms"})
	batch.Type = model.JobTypeSysbatch
	batch.Groups[0].Update = nil
	w.putJob(batch)
	// Each look makes an incremental pass of its own (the agent's loop
	// makes others): the allocation must leave the runners for the
	// finished set through those.
	collected := func() bool {
		n.agent.pass(context.Background(), false)
		n.agent.mu.Lock()
		defer n.agent.mu.Unlock()
		for _, r := range n.agent.runners {
			if r.Alloc().JobID == batch.ID {
				return false
			}
		}
		for _, al := range n.agent.terminal {
			if al.JobID == batch.ID && al.ClientStatus == model.ClientComplete {
				return true
			}
		}
		return false
	}
	testutil.Eventually(t, 15*time.Second, "the batch allocation collected as complete", collected)
	if n.agent.runnersDone.Load() == 0 {
		t.Fatal("a runner finished and OnDone was not called")
	}
}
