package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/allocrunner"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/rollout"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/testutil"
)

// The slot handoff end to end, on one NATS server with narrowed agents:
// once every slot is held, the steward's summary queues the next waiters
// on the held slots, each holder tells its slot's queued waiter of its
// release over core NATS, and that waiter takes the slot without waiting
// for the summary that shows it free. The rollout keeps its invariants:
// never more than max_parallel replacements in flight, and it completes.
// Control: the same rollout with one node advertising rollout protocol 4
// (an agent from before the handoff): the steward queues nobody, no hint
// is sent and every take waits for a summary, as before.
func TestAReleasedSlotIsHandedToTheWaiterTheSummaryQueuedOnIt(t *testing.T) {
	for _, handoff := range []bool{true, false} {
		t.Run(fmt.Sprintf("handoff=%v", handoff), func(t *testing.T) {
			f := &testFleet{w: newWorldTTL(t, 0), rec: &recorder{tasks: map[string]string{}}}
			t.Cleanup(func() {
				for _, n := range f.nodes {
					n.stopOnce(true)
				}
			})
			for i := 1; i <= 8; i++ {
				f.addWith(t, fmt.Sprintf("node-%02d", i), func(n *node) {
					if !handoff && i == 8 {
						n.protocol = rollout.AssignProtocol
					}
				})
			}
			mod := func(g *model.Group) {
				g.Update.MaxParallel = 2
				g.Update.MinHealthyTime = model.Duration(300 * time.Millisecond)
			}
			f.atV1(t, mod)
			f.w.putJob(fleetJob(2, mod))
			f.waitStatus(t, 2, model.DeploymentSuccessful, 60*time.Second)
			testutil.Eventually(t, 10*time.Second, "every node on v2", func() bool { return f.allRun(2) })
			if got := f.maxInFlight(t, "v1", "v2"); got > 2 {
				t.Fatalf("%d replacements in flight, max_parallel 2", got)
			}
			var sent, heard, took uint64
			for _, n := range f.nodes {
				st := n.agent.Status()
				sent, heard, took = sent+st.HandoffsSent, heard+st.HandoffsHeard, took+st.HandoffTakes
			}
			t.Logf("release hints sent %d, heard %d (a node's own included), takes on a hint %d", sent, heard, took)
			if !handoff {
				if sent != 0 || heard != 0 || took != 0 {
					t.Fatalf("control: a node at protocol %d is live, yet hints were sent %d, heard %d, taken on %d", rollout.AssignProtocol, sent, heard, took)
				}
				return
			}
			// Eight outdated allocations, two slots: after the first two
			// takes the slots are always held, and the queued waiters are
			// told of each release (a waiter told after it took on a
			// summary, or a hint lost to a race, takes nothing on it).
			if took == 0 || heard == 0 {
				t.Fatalf("no take was made on a release hint (sent %d, heard %d, taken %d)", sent, heard, took)
			}
		})
	}
}

// The agent's side of a hint, one step at a time on a real store: a hint
// for one of a job's slots is kept, marks the job for a look and kicks a
// pass; one whose key is not the job's slot is dropped. A take made on it
// is counted and forgets it; a take refused (the slot held again since)
// forgets it too, so the next pass does not try again on it; a hint
// nobody took is forgotten after releasedHintTTL.
func TestAReleaseHintIsKeptUntilItsTakeAndForgottenWhenStale(t *testing.T) {
	w := newWorld(t)
	now := time.Now()
	clock := func() time.Time { return now }
	a := &Agent{nodeID: "n1", bootID: "boot-now", cfg: Config{Deployments: w.store, Now: clock}, log: testLogger(t),
		kick: make(chan struct{}, 1), rolloutWake: make(chan struct{}, 1), ownDirty: map[string]bool{}, runners: map[string]*allocrunner.Runner{},
		slotsHeld: map[string]heldSlot{}, slotsGone: map[string]uint64{}, slotsReleasing: map[string]uint64{}, released: map[string]releasedHint{}}
	ctx := context.Background()
	job := &model.Job{ID: "web", Namespace: "default"}
	k0, k1 := wanted.SlotKey("", "web", "g", 0), wanted.SlotKey("", "web", "g", 1)
	a.onReleased(model.SlotReleased{JobID: "web", Key: "slot.default.other.g.0", Holder: "n2"})
	if len(a.released) != 0 || len(a.kick) != 0 {
		t.Fatalf("a hint whose key is another job's slot was kept: %v", a.released)
	}
	a.onReleased(model.SlotReleased{JobID: "web", Key: k0, Holder: "n2"})
	a.onReleased(model.SlotReleased{JobID: "web", Key: k1, Holder: "n3"})
	if got, sig := a.releasedFor(job); len(got) != 2 || got[k0] != "n2" || got[k1] != "n3" || sig == 0 {
		t.Fatalf("hints %v (sig %d), want both", got, sig)
	}
	if !a.ownDirty[wanted.JobKey("", "web")] || len(a.kick) != 1 || a.Status().HandoffsHeard != 2 {
		t.Fatalf("the job not marked (%v), no kick (%d), or not counted (%d)", a.ownDirty, len(a.kick), a.Status().HandoffsHeard)
	}
	d := &model.Deployment{ID: "d2", JobID: "web", JobVersion: 2, Status: model.DeploymentRunning, TaskGroups: map[string]*model.DeploymentState{}}
	if _, _, _, err := w.store.CreateDeployment(ctx, d); err != nil {
		t.Fatal(err)
	}
	slot := func(i int, holder string) model.Slot {
		return model.Slot{JobID: "web", JobVersion: 2, DeploymentID: "d2", Group: "g", Index: i, Holder: holder, OldAlloc: "a-old-" + holder, NewAlloc: "a-new-" + holder, Nonce: "x"}
	}
	// Slot 1 was taken again by another node before this one's try.
	if _, err := w.store.TakeSlot(ctx, k1, slot(1, "n4"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if took, err := a.takeSlot(ctx, rollout.Take{Key: k1, Slot: slot(1, "n1"), TTL: time.Minute, Handoff: true}); took || err != nil {
		t.Fatalf("a take of a slot held again: took %v, %v", took, err)
	}
	if _, kept := a.released[k1]; kept {
		t.Fatal("the stale hint was kept after its take was refused")
	}
	if took, err := a.takeSlot(ctx, rollout.Take{Key: k0, Slot: slot(0, "n1"), TTL: time.Minute, Handoff: true}); !took || err != nil {
		t.Fatalf("the take on a hint: took %v, %v", took, err)
	}
	if _, kept := a.released[k0]; kept || a.Status().HandoffTakes != 1 {
		t.Fatalf("after its take the hint is kept (%v) or the take not counted (%d)", a.released, a.Status().HandoffTakes)
	}
	a.onReleased(model.SlotReleased{JobID: "web", Key: k1, Holder: "n4"})
	now = now.Add(releasedHintTTL + time.Millisecond)
	if got, _ := a.releasedFor(job); len(got) != 0 || len(a.released) != 0 {
		t.Fatalf("a hint older than releasedHintTTL is still given: %v", got)
	}
}
