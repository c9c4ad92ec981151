package agent

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/allocrunner"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

func TestAllocFilesKnowsLiveAndFinishedAllocationsOnly(t *testing.T) {
	w := newWorld(t)
	n := w.newNode("node-a", nil, "")
	defer n.stop(true)

	if _, _, _, ok := n.agent.AllocFiles("no-such-alloc"); ok {
		t.Fatal("an unknown allocation is known")
	}

	// A running allocation: its directory and its group's tasks, not terminal.
	w.putJob(mockJob("web", 1, map[string]any{"stdout_string": "hi"}))
	testutil.Eventually(t, 10*time.Second, "web running", func() bool {
		l := n.live("web")
		return len(l) == 1 && l[0].ClientStatus == model.ClientRunning
	})
	live := n.live("web")[0]
	dir, tasks, terminal, ok := n.agent.AllocFiles(live.ID)
	if !ok || dir != filepath.Join(n.dir, "alloc", live.ID) || !slices.Equal(tasks, []string{"t"}) || terminal {
		t.Fatalf("running: dir %q tasks %v terminal %v ok %v", dir, tasks, terminal, ok)
	}

	// A finished one (sysbatch, complete): terminal, with its tasks.
	batch := mockJob("batch", 1, map[string]any{"run_for": "50ms", "stdout_string": "done"})
	batch.Type = model.JobTypeSysbatch
	batch.Groups[0].Update = nil
	w.putJob(batch)
	var done *model.Allocation
	testutil.Eventually(t, 10*time.Second, "batch complete", func() bool {
		for _, a := range n.agent.Allocs() {
			if a.JobID == "batch" && a.ClientStatus == model.ClientComplete {
				done = a
				return true
			}
		}
		return false
	})
	testutil.Eventually(t, 10*time.Second, "the finished allocation terminal", func() bool {
		_, _, terminal, ok := n.agent.AllocFiles(done.ID)
		return ok && terminal
	})
	dir, tasks, _, _ = n.agent.AllocFiles(done.ID)
	if dir != filepath.Join(n.dir, "alloc", done.ID) || !slices.Equal(tasks, []string{"t"}) {
		t.Fatalf("finished: dir %q tasks %v", dir, tasks)
	}
	// Control: the running one is still not terminal.
	if _, _, terminal, _ := n.agent.AllocFiles(live.ID); terminal {
		t.Fatal("a running allocation is terminal")
	}
}

// The allocations bucket carries a compact copy of each allocation (a
// task's telling and last events, and how many more there are); the node
// keeps the whole history and gives it on request (AllocDetails, what the
// details service answers with).
func TestTheBucketCarriesACompactAllocationAndTheNodeTheWholeHistory(t *testing.T) {
	w := newWorld(t)
	n := w.newNode("node-1", nil, "")
	defer n.stop(true)
	// A task that fails twice: Received, Started, Terminated, Restarting,
	// Started, Terminated, Not Restarting.
	w.putJob(mockJob("web", 1, map[string]any{"run_for": "30ms", "exit_code": 3}))
	var kv, full *model.Allocation
	testutil.Eventually(t, 30*time.Second, "the allocation failed for good, in the bucket as on the node", func() bool {
		for _, st := range n.src.View().Allocs.All() {
			a := st.Value
			if a == nil || st.Absent || a.JobID != "web" || a.ClientStatus != model.ClientFailed {
				continue
			}
			got, ok := n.agent.AllocDetails(a.ID)
			if !ok || got.ClientStatus != model.ClientFailed {
				return false
			}
			kv, full = a, got
			return true
		}
		return false
	})
	ks, fs := kv.TaskStates["t"], full.TaskStates["t"]
	if ks == nil || fs == nil {
		t.Fatalf("task states: bucket %+v, node %+v", kv.TaskStates, full.TaskStates)
	}
	if len(fs.Events) <= 2 || fs.MoreEvents != 0 {
		t.Fatalf("the node's record holds %d events (%d more): the test's task did not fail as planned: %+v", len(fs.Events), fs.MoreEvents, fs.Events)
	}
	if len(ks.Events) > 2 || ks.MoreEvents != len(fs.Events)-len(ks.Events) {
		t.Fatalf("the bucket holds %d events and says %d more; the node holds %d", len(ks.Events), ks.MoreEvents, len(fs.Events))
	}
	if last, want := ks.Events[len(ks.Events)-1], fs.Events[len(fs.Events)-1]; last.Type != want.Type || !last.Time.Equal(want.Time) {
		t.Fatalf("the bucket's last event %+v, the node's %+v", last, want)
	}
	if tell, _, _ := allocrunner.TellingEvent(ks); tell.Type != allocrunner.EventTerminated || tell.Message != "exit code 3" {
		t.Fatalf("the bucket's copy does not tell why the task failed: %+v", tell)
	}
	if _, ok := n.agent.AllocDetails("no-such-alloc"); ok {
		t.Fatal("an unknown allocation has details")
	}
}
