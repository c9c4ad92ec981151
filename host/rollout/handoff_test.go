package rollout

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// handoffWorld is twelve nodes, max_parallel 4, every node at level.
func handoffWorld(level int) *world {
	w := newWorld(12, 4, 0)
	for i := range w.nodes {
		w.nodes[i].Protocol = level
	}
	w.record(nil)
	return w
}

// settledAt is the steward's facts on summary cur, later by since, with the
// summary's change settled.
func settledAt(t *testing.T, w *world, steward string, cur *model.RolloutSummary, since time.Duration) Facts {
	t.Helper()
	f := w.facts(t, steward)
	f.Summary, f.Now = cur, cur.Time.Add(since)
	f.Overdue = map[string]time.Duration{"settle:summary:" + strconv.FormatInt(cur.Time.UnixNano(), 10): time.Second}
	return f
}

// The slot handoff (HandoffProtocol). The summary that admits waiters to
// the free slots also queues the next waiters on them (Next), and a later
// one on the held slots: a queued waiter is who a holder tells of its
// release. A queued waiter takes its slot only once told of the release by
// the holder the summary names there, or by the waiter it admitted there
// (Released), only that slot, and only while fewer than max_parallel are
// held in its view (I5); the second of a slot's queue takes it once told
// by the first. The summary that then sees the slot free admits
// the same waiter to the same index. Controls: a fleet with one node at
// protocol 4 queues nobody, a waiter without the hint or with a hint from
// another node takes nothing, and another queued waiter takes nothing on a
// hint for a slot that is not its own.
func TestAWaiterQueuedOnASlotTakesItOnceToldOfItsRelease(t *testing.T) {
	for _, handoff := range []bool{true, false} {
		level := HandoffProtocol
		if !handoff {
			level = AssignProtocol
		}
		w := handoffWorld(level)
		steward := w.stewardOf(t)
		s1 := Decide(w.facts(t, steward)).Summary
		g1 := s1.Groups["g"]
		if !slices.Equal(g1.Assigned, []int{0, 1, 2, 3}) {
			t.Fatalf("handoff %v: S1 assigns %v, want 0..3", handoff, g1.Assigned)
		}
		if !handoff {
			if len(g1.Next) != 0 {
				t.Fatalf("control: at protocol %d S1 queues %v", AssignProtocol, g1.Next)
			}
			// A hint without a queue admits nothing beyond the assignment.
			q := g1.Waiting[4]
			f := w.ownOnly(t, q.Node, s1)
			f.Released = map[string]string{wanted.SlotKey("", "web", "g", 0): g1.Waiting[0].Node}
			if got := Decide(f).Takes; len(got) != 0 {
				t.Fatalf("control: a waiter not queued takes %+v on a hint", got)
			}
			continue
		}
		if !slices.Equal(g1.Next, []int{0, 1, 2, 3}) || len(g1.Waiting) != 8 {
			t.Fatalf("S1 queues %v on %d waiters, want the next four on 0..3", g1.Next, len(g1.Waiting))
		}
		// Derived again on itself, nothing changed: the same summary (the
		// queue is kept, not reshuffled), so none is written.
		again := w.facts(t, steward)
		again.Summary, again.Now = s1, s1.Time.Add(SummaryLazy)
		if s := Decide(again).Summary; s != nil {
			t.Fatalf("S1 derived again on itself, unchanged, gives another summary: %+v", s.Groups["g"])
		}
		holders, queued := g1.Waiting[:4], g1.Waiting[4:8]
		for i, h := range holders {
			got := Decide(w.ownOnly(t, h.Node, s1)).Takes
			if len(got) != 1 || !strings.HasSuffix(got[0].Key, "."+strconv.Itoa(i)) {
				t.Fatalf("W%d takes %+v", i, got)
			}
			w.holdSlot(t, got[0])
		}
		for i, q := range queued {
			if got := Decide(w.ownOnly(t, q.Node, s1)).Takes; len(got) != 0 {
				t.Fatalf("Q%d, queued and not told, takes %+v", i, got)
			}
		}
		// The steward's summary after the takes lists the slots held and
		// keeps the queue.
		s2 := Decide(settledAt(t, w, steward, s1, SummaryLazy)).Summary
		if s2 == nil {
			t.Fatal("no summary after the takes")
		}
		g2 := s2.Groups["g"]
		if len(g2.Assigned) != 0 || len(g2.Slots) != 4 || !slices.Equal(g2.Next, []int{0, 1, 2, 3}) || !slices.Equal(g2.Waiting[:4], queued) || len(g2.Waiting) != 8 {
			t.Fatalf("S2 (every slot taken) assigns %v, lists %v, queues %v on %v", g2.Assigned, g2.Slots, g2.Next, g2.Waiting)
		}
		seconds := g2.Waiting[4:8] // second in each slot's queue
		q0, q1 := queued[0], queued[1]
		key0 := wanted.SlotKey("", "web", "g", 0)
		// W0's replacement turns healthy; it releases slot 0.
		w.slots = slices.DeleteFunc(w.slots, func(s Slot) bool { return s.Key == key0 })
		w.alloc(holders[0].Alloc).JobVersion = 2
		w.alloc(holders[0].Alloc).DeploymentStatus = &model.AllocDeploymentStatus{Healthy: new(true)}
		if got, ok := QueuedOn(s1, "g", 0, holders[0].Node); !ok || got != q0 {
			t.Fatalf("QueuedOn(slot 0, released by %s) = %v %v, want %v", holders[0].Node, got, ok, q0)
		}
		if got, ok := QueuedOn(s1, "g", 0, holders[1].Node); ok {
			t.Fatalf("QueuedOn(slot 0, released by %s, admitted to slot 1) = %v", holders[1].Node, got)
		}
		f := w.ownOnly(t, q0.Node, s1)
		dec := Decide(f)
		if len(dec.Takes) != 0 || len(dec.Held) != 1 || !strings.Contains(dec.Held[0].Reason, "queued on slot 0") {
			t.Fatalf("control: queued, not told: takes %+v, held %+v", dec.Takes, dec.Held)
		}
		f.Released = map[string]string{key0: holders[1].Node}
		if got := Decide(f).Takes; len(got) != 0 {
			t.Fatalf("control: told by a node the summary did not admit there, takes %+v", got)
		}
		f.Released = map[string]string{key0: holders[0].Node}
		got := Decide(f).Takes
		if len(got) != 1 || got[0].Key != key0 || got[0].Slot.OldAlloc != q0.Alloc || !got[0].Handoff {
			t.Fatalf("queued on slot 0 and told of its release: takes %+v, want %s", got, key0)
		}
		f2 := w.ownOnly(t, q0.Node, s2)
		f2.Released = map[string]string{key0: holders[0].Node}
		if got := Decide(f2).Takes; len(got) != 1 || got[0].Key != key0 {
			t.Fatalf("queued on slot 0 by S2, which lists its holder, and told: takes %+v, want %s", got, key0)
		}
		// The second of slot 0's queue is told by the first, once that one
		// took the slot (after S2) and released it: the holder S2 lists
		// there is gone then too. Told by the holder S2 lists, it takes
		// nothing (that release is the first's to act on).
		if got, ok := QueuedOn(s2, "g", 0, q0.Node); !ok || got != seconds[0] {
			t.Fatalf("QueuedOn(slot 0, released by the first of its queue) = %v %v, want %v", got, ok, seconds[0])
		}
		fs := w.ownOnly(t, seconds[0].Node, s2)
		fs.Released = map[string]string{key0: holders[0].Node}
		if got := Decide(fs).Takes; len(got) != 0 {
			t.Fatalf("control: second in slot 0's queue, told by the holder, takes %+v", got)
		}
		fs.Released = map[string]string{key0: q0.Node}
		if got := Decide(fs).Takes; len(got) != 1 || got[0].Key != key0 {
			t.Fatalf("second in slot 0's queue, told by the first: takes %+v, want %s", got, key0)
		}
		f1 := w.ownOnly(t, q1.Node, s1)
		f1.Released = map[string]string{key0: holders[0].Node}
		if got := Decide(f1).Takes; len(got) != 0 {
			t.Fatalf("control: queued on slot 1, told of slot 0's release: takes %+v", got)
		}
		// I5 across versions: the other three and an older version's slot
		// beyond max_parallel still held, so slot 0's release leaves
		// max_parallel held.
		over := *s1
		og := *g1
		og.Slots = []model.SummarySlot{{Index: 1, Holder: holders[1].Node}, {Index: 2, Holder: holders[2].Node}, {Index: 3, Holder: holders[3].Node}, {Index: 5, Holder: "n-old"}}
		over.Groups = map[string]*model.GroupSummary{"g": &og}
		fo := w.ownOnly(t, q0.Node, &over)
		fo.Released = map[string]string{key0: holders[0].Node}
		if got := Decide(fo).Takes; len(got) != 0 {
			t.Fatalf("queued and told, with max_parallel slots still held (one an older version's): takes %+v", got)
		}
		// The steward sees the release before q0's take: its summary
		// admits q0 to slot 0 (the take q0 may be making), not the waiter
		// first in rank.
		s3 := Decide(settledAt(t, w, steward, s2, SummaryEvery+SummarySettle)).Summary
		if s3 == nil {
			t.Fatal("no summary after the release")
		}
		g3 := s3.Groups["g"]
		if len(g3.Assigned) != 1 || g3.Assigned[0] != 0 || g3.Waiting[0] != q0 {
			t.Fatalf("S3 admits %v to %v, want %v to slot 0", g3.Waiting[:len(g3.Assigned)], g3.Assigned, q0)
		}
		want := append(slices.Clone(queued[1:]), seconds[0])
		if !slices.Equal(g3.Next, []int{1, 2, 3, 0}) || !slices.Equal(g3.Waiting[1:5], want) {
			t.Fatalf("S3 queues %v on %v, want %v: the first kept on 1..3, slot 0's second moved up", g3.Waiting[1:1+len(g3.Next)], g3.Next, want)
		}
		if got := Decide(w.ownOnly(t, q0.Node, s3)).Takes; len(got) != 1 || got[0].Key != key0 {
			t.Fatalf("q0 on S3 takes %+v, want %s as on its hint", got, key0)
		}
	}
}

// A steward queues nobody while the group holds more slots than
// max_parallel (an older version's beyond it: a release then admits
// nobody), and never queues one waiter twice or on a free index.
func TestQueueSlotsQueuesOnlyWhereAReleaseAdmits(t *testing.T) {
	ws := []model.SummaryWaiter{{Node: "a", Alloc: "A"}, {Node: "b", Alloc: "B"}, {Node: "c", Alloc: "C"}, {Node: "d", Alloc: "D"}}
	slot := func(i int, holder string) Slot {
		return Slot{Key: wanted.SlotKey("", "web", "g", i), Slot: model.Slot{Group: "g", Index: i, Holder: holder}}
	}
	order, assigned, next := queueSlots([]Slot{slot(0, "x"), slot(1, "y"), slot(3, "old")}, "g", 2, ws, nil)
	if len(assigned) != 0 || len(next) != 0 || !slices.Equal(order, ws) {
		t.Fatalf("3 held of max_parallel 2: admitted %v, queued %v, order %v", assigned, next, order)
	}
	// The held index first, then the ones just assigned.
	order, assigned, next = queueSlots([]Slot{slot(1, "y")}, "g", 3, ws, nil)
	if !slices.Equal(assigned, []int{0, 2}) || !slices.Equal(next, []int{1, 0}) || !slices.Equal(order, ws) {
		t.Fatalf("1 held of 3: admitted %v, queued %v, order %v", assigned, next, order)
	}
	// prev queued C first and D second on slot 1, now free: C is admitted
	// to 1 first, D moves up to first in 1's queue, the others fill the
	// places left (A first on 0, B second on 0).
	prev := &model.GroupSummary{Waiting: []model.SummaryWaiter{ws[2], ws[3]}, Next: []int{1}}
	order, assigned, next = queueSlots([]Slot{slot(0, "x")}, "g", 2, ws, prev)
	if !slices.Equal(assigned, []int{1}) || !slices.Equal(next, []int{0, 1}) || !slices.Equal(order, []model.SummaryWaiter{ws[2], ws[0], ws[3], ws[1]}) {
		t.Fatalf("C, D queued on 1, 1 freed: admitted %v, queued %v, order %v", assigned, next, order)
	}
	// C gone (it took 1 and released it): D, second, is admitted to 1.
	order, assigned, _ = queueSlots([]Slot{slot(0, "x")}, "g", 2, []model.SummaryWaiter{ws[0], ws[1], ws[3]}, prev)
	if !slices.Equal(assigned, []int{1}) || order[0] != ws[3] {
		t.Fatalf("D second on 1, C gone, 1 free: admitted %v, order %v", assigned, order)
	}
}
