package agent

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

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
