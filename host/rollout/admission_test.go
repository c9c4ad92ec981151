package rollout

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// Admission reads a group's slots, the steward's assignment and its queue
// without making the collections it used to (admissionGroup, assignedTo,
// queuedAs). Over random facts (own slots in two groups, a summary of this
// record or another or none, slots listed at indices this node holds too,
// waiters listed twice), the answers are those of the former way kept in
// admission_ref_test.go, for every group and every allocation asked.
func TestAdmissionReadsTheSlotsAsTheCollectionsDid(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	d := &model.Deployment{ID: "dep", JobID: "web"}
	groups := []string{"g", "h"}
	listedSlots, assigned, queued, ownOnly := 0, 0, 0, 0
	for round := range 4000 {
		f := Facts{OwnSlotsOnly: rng.IntN(3) > 0, Self: "n0"}
		if f.OwnSlotsOnly {
			ownOnly++
		}
		for _, g := range groups {
			for _, i := range rng.Perm(8)[:rng.IntN(3)] {
				f.Slots = append(f.Slots, Slot{Key: wanted.SlotKey("", "web", g, i),
					Slot: model.Slot{JobID: "web", Group: g, Index: i, Holder: fmt.Sprintf("n%d", rng.IntN(4)), OldAlloc: fmt.Sprintf("a%d", rng.IntN(6))}})
			}
		}
		rng.Shuffle(len(f.Slots), func(i, j int) { f.Slots[i], f.Slots[j] = f.Slots[j], f.Slots[i] })
		if rng.IntN(5) > 0 {
			s := &model.RolloutSummary{DeploymentID: []string{"dep", "dep", "dep", "old"}[rng.IntN(4)], Groups: map[string]*model.GroupSummary{}}
			for _, g := range groups {
				if rng.IntN(4) == 0 {
					continue
				}
				gs := &model.GroupSummary{}
				for _, i := range rng.Perm(10)[:rng.IntN(8)] {
					switch rng.IntN(40) {
					case 0:
						i = -1 - rng.IntN(2) // a malformed summary's
					case 1:
						i = denseSlots + rng.IntN(2)*1_000_000_000 // past the bit set
					}
					gs.Slots = append(gs.Slots, model.SummarySlot{Index: i, Holder: fmt.Sprintf("n%d", rng.IntN(9))})
				}
				for range rng.IntN(12) {
					a := fmt.Sprintf("a%d", rng.IntN(14))
					gs.Waiting = append(gs.Waiting, model.SummaryWaiter{Node: "n" + a, Alloc: a})
				}
				for range rng.IntN(5) {
					gs.Assigned = append(gs.Assigned, rng.IntN(10))
				}
				for range rng.IntN(5) {
					gs.Next = append(gs.Next, rng.IntN(10))
				}
				s.Groups[g] = gs
			}
			f.Summary = s
		}
		for _, g := range append(groups, "none") {
			held, holding, holders := f.admissionGroup(d, g)
			wHeld, wHolding, wHolders := groupSlots(f.admissionSlots(d), g)
			if !maps.Equal(held.asMap(), wHeld) || held.n != len(wHeld) || !maps.Equal(holding, wHolding) || !slices.Equal(holders, wHolders) {
				t.Fatalf("round %d, group %s: held %v holding %v holders %v, want %v %v %v (slots %+v, summary %+v)",
					round, g, held, holding, holders, wHeld, wHolding, wHolders, f.Slots, f.Summary)
			}
			if len(holders) > 0 && holding[""] {
				listedSlots++
			}
			for _, i := range []int{-2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, denseSlots, denseSlots + 1_000_000_000} {
				if held.has(i) != wHeld[i] {
					t.Fatalf("round %d, group %s: index %d held %v, want %v", round, g, i, held.has(i), wHeld[i])
				}
			}
			for maxP := range 12 {
				free, n := held.free(maxP)
				wFree, wN := freeIndices(wHeld, maxP)
				if !slices.Equal(free, wFree) || n != wN {
					t.Fatalf("round %d, group %s, max_parallel %d: free %v %d, want %v %d", round, g, maxP, free, n, wFree, wN)
				}
			}
			var sg *model.GroupSummary
			if f.Summary != nil && f.Summary.DeploymentID == d.ID {
				sg = f.Summary.Groups[g]
			}
			wantA, wantQ := f.assignedSlots(d, g), f.queuedSlots(d, g)
			if (sg != nil && len(sg.Assigned) > 0) != (wantA != nil) {
				t.Fatalf("round %d, group %s: an assignment where the former way had none, or none where it had one", round, g)
			}
			for i := range 15 {
				a := fmt.Sprintf("a%d", i)
				idx, ok := assignedTo(sg, a)
				wIdx, wOK := wantA[a]
				if ok != wOK || idx != wIdx {
					t.Fatalf("round %d, group %s, %s: assigned %d %v, want %d %v", round, g, a, idx, ok, wIdx, wOK)
				}
				if ok {
					assigned++
				}
				q, ok := queuedAs(sg, a)
				wQ, wOK := wantQ[a]
				if ok != wOK || q != wQ {
					t.Fatalf("round %d, group %s, %s: queued %+v %v, want %+v %v", round, g, a, q, ok, wQ, wOK)
				}
				if ok {
					queued++
				}
			}
		}
	}
	// summaryRank against summaryWaiters' list, this node's allocations
	// outdated, current, terminal or updated in place, some slots held.
	ranked, unranked := 0, 0
	for round := range 3000 {
		d := &model.Deployment{ID: "dep", JobID: "web", JobVersion: 2, TaskGroups: map[string]*model.DeploymentState{"g": {}}}
		f := Facts{Self: "n1", Narrow: true, InPlace: map[string]bool{}}
		for i := range 4 {
			f.Nodes = append(f.Nodes, Node{ID: fmt.Sprintf("n%d", i), Live: true, Eligible: i != 3, Ready: true, Protocol: Protocol})
		}
		g := &model.GroupSummary{}
		for range rng.IntN(14) {
			a := fmt.Sprintf("a%d", rng.IntN(12))
			node := fmt.Sprintf("n%d", rng.IntN(4))
			g.Waiting = append(g.Waiting, model.SummaryWaiter{Node: node, Alloc: a})
			if node == f.Self && rng.IntN(4) > 0 {
				al := &model.Allocation{ID: a, NodeID: node, JobVersion: uint64(rng.IntN(3)), DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning}
				if rng.IntN(5) == 0 {
					al.DesiredStatus, al.ClientStatus = model.DesiredStop, model.ClientComplete
				}
				f.Allocs = append(f.Allocs, al)
				f.InPlace[a] = rng.IntN(6) == 0
			}
		}
		if rng.IntN(6) > 0 {
			f.Summary = &model.RolloutSummary{DeploymentID: "dep", Groups: map[string]*model.GroupSummary{"g": g}}
		}
		holding := map[string]bool{}
		many := []int{3, 3, 20}[rng.IntN(3)] // a few, compared in place, or many, hashed
		for range rng.IntN(many) {
			holding[fmt.Sprintf("a%d", rng.IntN(30))] = rng.IntN(8) > 0
		}
		ws := f.summaryWaiters(d, "g", holding)
		for i := range 13 {
			a := fmt.Sprintf("a%d", i)
			r, n := f.summaryRank(d, "g", holding, a)
			if wr := slices.IndexFunc(ws, func(w waiter) bool { return w.id == a }); r != wr || n != len(ws) {
				t.Fatalf("round %d, %s: rank %d of %d, want %d of %d (%+v)", round, a, r, n, wr, len(ws), g)
			}
			if r >= 0 {
				ranked++
			} else {
				unranked++
			}
		}
	}
	t.Logf("3000 rounds of ranks: %d ranked, %d not", ranked, unranked)
	if ranked < 3000 || unranked < 3000 {
		t.Fatal("controls: ranks went untested")
	}
	t.Logf("4000 rounds: %d with own slots only, %d groups counting listed slots, %d assigned and %d queued answers", ownOnly, listedSlots, assigned, queued)
	if ownOnly < 1000 || listedSlots < 1000 || assigned < 1000 || queued < 1000 {
		t.Fatal("controls: a path went untested")
	}
}

// A waiting node's reason names the first five holders by slot index and
// counts the rest: the fleet's 100 in flight made each waiter's reason
// (and each of its decisions) carry a hundred node IDs.
func TestAWaitersReasonNamesTheFirstFiveHolders(t *testing.T) {
	w, f := midwayWorld(t, 1000, 100)
	sum := f.Summary
	listed := map[string]bool{}
	for _, x := range sum.Groups["g"].Waiting {
		listed[x.Node] = true
	}
	self := ""
	for _, a := range w.allocs {
		if a.JobVersion == 1 && a.ClientStatus == model.ClientRunning && !listed[a.NodeID] {
			self = a.NodeID
		}
	}
	if self == "" {
		t.Fatal("no waiter the summary leaves out")
	}
	dec := Decide(w.ownOnly(t, self, sum))
	if len(dec.Held) != 1 {
		t.Fatalf("held %+v", dec.Held)
	}
	holders := make([]string, 0, 5)
	for _, s := range sum.Groups["g"].Slots[:5] {
		holders = append(holders, s.Holder)
	}
	want := "waiting for an update slot (100/100 in flight: " + strings.Join(holders, ", ") + " and 95 more), not among the first waiting in the steward's summary"
	if got := dec.Held[0].Reason; got != want {
		t.Fatalf("reason %q, want %q", got, want)
	}
}
