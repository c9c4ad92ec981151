package agent

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/testutil"
)

// The node is the single writer of its allocation keys: a record forged
// from outside (desired stop, client failed) is written back from the
// node's state and the task keeps running; a key removed from outside is
// written again; a key naming an allocation the node does not have is
// removed. Each is counted. Control: the node's own writes are not counted
// as foreign.
func TestAForgedAllocationRecordIsCorrectedByItsNode(t *testing.T) {
	w := newWorld(t)
	n := w.newNode("node-1", nil, "")
	defer n.stop(true)
	w.putJob(mockJob("web", 1, nil))
	var mine *model.Allocation
	testutil.Eventually(t, 20*time.Second, "the allocation running and healthy", func() bool {
		live := n.live("web")
		if len(live) == 1 && live[0].ClientStatus == model.ClientRunning {
			mine = live[0]
			return true
		}
		return false
	})
	n.waitPasses(t, 3)
	if got := n.agent.Status().ForeignWrites; got != 0 {
		t.Fatalf("control: %d foreign writes counted from the node's own writes", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := wanted.AllocKey("node-1", mine.Namespace, mine.JobID, mine.ID)
	kvValue := func() *model.Allocation {
		e, err := w.store.Allocs.Get(ctx, key)
		if err != nil {
			return nil
		}
		var a model.Allocation
		if json.Unmarshal(e.Value(), &a) != nil {
			return nil
		}
		return &a
	}
	starts := n.mock.starts.Load()

	// 1. A forged record: stop it, it failed.
	forged := *mine
	forged.DesiredStatus, forged.ClientStatus, forged.ClientDescription = model.DesiredStop, model.ClientFailed, "forged"
	if _, err := w.store.Allocs.Put(ctx, key, mustJSON(&forged)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the node's record written back", func() bool {
		a := kvValue()
		return a != nil && a.DesiredStatus == model.DesiredRun && a.ClientStatus == model.ClientRunning
	})
	if live := n.live("web"); len(live) != 1 || live[0].ID != mine.ID || n.mock.starts.Load() != starts {
		t.Fatalf("after the forged record: live %v, starts %d → %d", live, starts, n.mock.starts.Load())
	}

	// 2. The key removed from outside.
	if err := w.store.Allocs.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the removed key written again", func() bool {
		a := kvValue()
		return a != nil && a.ID == mine.ID && a.ClientStatus == model.ClientRunning
	})

	// 3. A key under this node for an allocation it does not have.
	ghost := forged
	ghost.ID = "00000000-0000-0000-0000-00000000beef"
	ghost.DesiredStatus, ghost.ClientStatus = model.DesiredRun, model.ClientRunning
	ghostKey := wanted.AllocKey("node-1", ghost.Namespace, ghost.JobID, ghost.ID)
	if _, err := w.store.Allocs.Put(ctx, ghostKey, mustJSON(&ghost)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the unknown allocation's key removed", func() bool {
		_, err := w.store.Allocs.Get(ctx, ghostKey)
		return err != nil
	})
	if live := n.live("web"); len(live) != 1 || live[0].ID != mine.ID || n.mock.starts.Load() != starts {
		t.Fatalf("after the unknown key: live %v, starts %d → %d", live, starts, n.mock.starts.Load())
	}
	// Each repair is counted, except one the node's writer answered with a
	// write it had already queued (ownKeyFix leaves such a key alone): seen
	// once in a loaded run of the whole package, never twice.
	if got := n.agent.Status().ForeignWrites; got < 2 {
		t.Fatalf("foreign writes counted %d, want at least 2 of the 3 repairs", got)
	}
}
