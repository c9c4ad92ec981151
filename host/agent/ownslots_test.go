package agent

import (
	"context"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// A slot this boot of this node took whose answer was lost is found
// through the steward's summary, which lists it held by this node: the
// agent reads it once per summary and adopts it, so its next pass acts on
// it (before, the node held a slot it did not know of, was no longer
// listed among the waiters, and waited out the slot's TTL). A slot this
// node's previous boot took is not adopted here (the restart path watches
// the job's slots), nor is one the agent remembers, nor is the same
// summary asked about twice.
func TestASlotTheSummaryListsAsOwnAndMemoryLacksIsReadAndAdopted(t *testing.T) {
	w := newWorld(t)
	a := &Agent{nodeID: "n1", bootID: "boot-now", cfg: Config{Deployments: w.store, Now: time.Now}, log: testLogger(t),
		kick: make(chan struct{}, 1), rolloutWake: make(chan struct{}, 1),
		slotsHeld: map[string]heldSlot{}, slotsGone: map[string]uint64{}, slotsReleasing: map[string]uint64{},
		slotsToCheck: map[string]bool{}, ownSlotsSeen: map[string]time.Time{}}
	ctx := context.Background()
	take := func(i int, boot string) string {
		k := wanted.SlotKey("", "web", "g", i)
		sl := model.Slot{JobID: "web", JobVersion: 2, DeploymentID: "d2", Group: "g", Index: i, Holder: "n1", BootID: boot,
			OldAlloc: "a-old", NewAlloc: "a-new", Nonce: "x"}
		if _, err := w.store.TakeSlot(ctx, k, sl, time.Minute); err != nil {
			t.Fatal(err)
		}
		return k
	}
	mine, older := take(0, "boot-now"), take(1, "boot-before")
	// A summary listing only other nodes' slots asks about nothing.
	a.noticeOwnSummarySlots(&model.RolloutSummary{JobID: "web", DeploymentID: "d2", Time: time.Unix(99, 0),
		Groups: map[string]*model.GroupSummary{"g": {Slots: []model.SummarySlot{{Index: 2, Holder: "n2"}}}}})
	if len(a.slotsToCheck) != 0 || len(a.rolloutWake) != 0 {
		t.Fatalf("another node's slots queued %v", a.slotsToCheck)
	}
	sum := &model.RolloutSummary{JobID: "web", JobVersion: 2, DeploymentID: "d2", Time: time.Unix(100, 0),
		Groups: map[string]*model.GroupSummary{"g": {Slots: []model.SummarySlot{{Index: 0, Holder: "n1"}, {Index: 1, Holder: "n1"}, {Index: 2, Holder: "n2"}}}}}
	a.noticeOwnSummarySlots(sum)
	if len(a.slotsToCheck) != 2 || !a.slotsToCheck[mine] || !a.slotsToCheck[older] {
		t.Fatalf("queued %v, want this node's two slots", a.slotsToCheck)
	}
	select {
	case <-a.rolloutWake:
	default:
		t.Fatal("the rollout writer was not woken")
	}
	a.checkOwnSlots(ctx)
	if h, ok := a.slotsHeld[mine]; !ok || h.s.Slot.OldAlloc != "a-old" || h.s.Revision == 0 {
		t.Fatalf("this boot's slot not adopted: %+v", a.slotsHeld)
	}
	if _, ok := a.slotsHeld[older]; ok {
		t.Fatal("the previous boot's slot was adopted")
	}
	select {
	case <-a.kick:
	default:
		t.Fatal("no pass kicked after the adoption")
	}
	// The same summary again: nothing asked (the adopted one is held, the
	// other was checked for this summary).
	a.noticeOwnSummarySlots(sum)
	if len(a.slotsToCheck) != 0 {
		t.Fatalf("the same summary asked again about %v", a.slotsToCheck)
	}
	// A newer summary asks again about the one not adopted only.
	next := *sum
	next.Time = sum.Time.Add(time.Second)
	a.noticeOwnSummarySlots(&next)
	if len(a.slotsToCheck) != 1 || !a.slotsToCheck[older] {
		t.Fatalf("a newer summary queued %v, want only the unadopted slot", a.slotsToCheck)
	}
}
