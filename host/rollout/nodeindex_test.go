package rollout

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hivelet/hivelet/host/model"
)

// An index answers every question the facts ask of their nodes as the
// facts answer it without one: node lookups (the first of duplicate IDs),
// the live eligible IDs, membership, and the rankings with and without
// the asking node, over random node lists with duplicate IDs, nodes down,
// ineligible and unknown. A ranking asked again comes from the memo and is
// still the same; an index built for another slice is ignored.
func TestANodeIndexAnswersAsTheNodesDo(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 4))
	for round := 0; round < 400; round++ {
		var nodes []Node
		for range rng.IntN(40) {
			nodes = append(nodes, Node{ID: fmt.Sprintf("n-%02d", rng.IntN(30)), Live: rng.IntN(5) > 0, Eligible: rng.IntN(4) > 0,
				Ready: rng.IntN(3) > 0, Protocol: rng.IntN(3)})
		}
		slices.SortStableFunc(nodes, func(a, b Node) int {
			switch {
			case a.ID < b.ID:
				return -1
			case a.ID > b.ID:
				return 1
			}
			return 0
		})
		plain := Facts{Nodes: nodes}
		indexed := Facts{Nodes: nodes, Index: NewNodeIndex(nodes)}
		if indexed.index() == nil {
			t.Fatal("an index built for the facts' nodes is not used")
		}
		if !slices.Equal(indexed.LiveEligible(), plain.LiveEligible()) {
			t.Fatalf("round %d: live eligible %v, want %v", round, indexed.LiveEligible(), plain.LiveEligible())
		}
		inIdx, inPlain := indexed.liveEligibleSet(), plain.liveEligibleSet()
		for i := range 32 {
			id := fmt.Sprintf("n-%02d", i)
			a, aok := indexed.node(id)
			b, bok := plain.node(id)
			if a != b || aok != bok {
				t.Fatalf("round %d: node %s: %+v %v, want %+v %v", round, id, a, aok, b, bok)
			}
			if inIdx(id) != inPlain(id) {
				t.Fatalf("round %d: %s among the live eligible: %v, want %v", round, id, inIdx(id), inPlain(id))
			}
			for _, withID := range []bool{false, true} {
				key := fmt.Sprintf("dep-%d", rng.IntN(3))
				for range 2 { // the second from the memo
					r, first := indexed.rankLive(key, id, withID)
					cands := plain.LiveEligible()
					if withID && !slices.Contains(cands, id) {
						cands = append(cands, id)
					}
					wr, wfirst := rankAndFirst(key, cands, id)
					if r != wr || first != wfirst {
						t.Fatalf("round %d: rank of %s by %s (with itself %v): %d %q, want %d %q", round, id, key, withID, r, first, wr, wfirst)
					}
				}
			}
		}
		// The waiters a summary lists that the nodes and the record let
		// take part, canarying or not; the second answer from the memo.
		sum := &model.RolloutSummary{DeploymentID: "dep", Groups: map[string]*model.GroupSummary{"g": {}}}
		for range rng.IntN(30) {
			id := fmt.Sprintf("n-%02d", rng.IntN(34))
			sum.Groups["g"].Waiting = append(sum.Groups["g"].Waiting, model.SummaryWaiter{Node: id, Alloc: "a-" + id})
		}
		st := &model.DeploymentState{DesiredCanaries: rng.IntN(2), Promoted: rng.IntN(2) == 0}
		for i := range 30 {
			if rng.IntN(3) == 0 {
				st.CanaryNodes = append(st.CanaryNodes, fmt.Sprintf("n-%02d", i))
			}
		}
		dep := &model.Deployment{ID: "dep", TaskGroups: map[string]*model.DeploymentState{"g": st}}
		for range 2 {
			if got, want := indexed.summaryListed(sum, dep, "g"), plain.summaryListed(sum, dep, "g"); !slices.Equal(got, want) {
				t.Fatalf("round %d: listed waiters %v, want %v", round, got, want)
			}
		}
		var want []model.SummaryWaiter // written out: the rule itself
		for _, w := range sum.Groups["g"].Waiting {
			if plain.mayUpdate(w.Node) && (!canarying(st) || slices.Contains(st.CanaryNodes, w.Node)) {
				want = append(want, w)
			}
		}
		if got := indexed.summaryListed(sum, dep, "g"); !slices.Equal(got, want) {
			t.Fatalf("round %d: listed waiters %v, want %v", round, got, want)
		}
		// A caller's append to the live eligible IDs (Watching and the
		// creator add themselves) copies: it never writes into the index.
		if live := indexed.LiveEligible(); cap(live) != len(live) {
			t.Fatalf("round %d: LiveEligible from the index has room to append into (len %d, cap %d)", round, len(live), cap(live))
		}
		// Another slice (a copy): the index is not used for it.
		other := Facts{Nodes: slices.Clone(nodes), Index: indexed.Index}
		if len(nodes) > 0 && other.index() != nil {
			t.Fatalf("round %d: an index was used for a slice it was not built for", round)
		}
	}
}

// BenchmarkNarrowedWaiterDecide: one waiting node's decision in a fleet of
// 1,000 nodes (max_parallel 100, the steward's summary listing 200
// waiters, this node among them), as a pass makes it: with the facts
// deriving everything from their nodes afresh, and with a NodeIndex the
// agent keeps for its node list across passes (built once, outside the
// loop, as for a pass that follows heartbeats alone).
//
//	go test -run '^$' -bench NarrowedWaiterDecide -benchmem ./host/rollout/
func BenchmarkNarrowedWaiterDecide(b *testing.B) {
	w := newWorld(1000, 100, 0)
	for i := range w.nodes {
		w.nodes[i].Protocol = AssignProtocol
	}
	w.record(nil)
	steward := w.stewardOf(b)
	sum := Decide(w.facts(b, steward)).Summary
	self := sum.Groups["g"].Waiting[150].Node // listed, not admitted
	base := w.ownOnly(b, self, sum)
	for _, indexed := range []bool{false, true} {
		name := "afresh"
		f := base
		if indexed {
			name = "indexed"
			f.Index = NewNodeIndex(f.Nodes)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				g := f // a pass's own copy of the facts
				if d := Decide(g); len(d.Takes) != 0 {
					b.Fatal("a waiter ranked past the free slots took one")
				}
			}
		})
	}
}
