package rollout

import (
	"slices"
	"sync"

	"github.com/hivelet/hivelet/host/model"
)

// NodeIndex is what the facts derive from their Nodes alone: each node's
// position by ID, the live eligible IDs, the rankings over them by key, and
// the waiters a summary lists that those nodes let take part.
// An agent of a large fleet decides on the same node list pass after pass
// (heartbeats change nothing a decision reads), and deriving these again
// each pass was most of a waiting agent's pass with a thousand nodes:
// a map of the fleet, a list of the fleet, and a hash of every node for
// each ranking (BENCHMARKS.md, "1,000 agents, 2026-12-05"). A caller that
// keeps one node list for many passes builds its index once
// (NewNodeIndex) and hands both to every Facts it makes (Facts.Index).
//
// Invariant: the slice an index was built for is never modified while
// the index is in use; Facts use an index only for that very slice (the
// same first element and length), and derive afresh otherwise. Safe for
// concurrent use.
type NodeIndex struct {
	nodes []Node
	pos   map[string]int  // first position of each ID
	live  []string        // LiveEligible: sorted, without duplicates, clipped
	in    map[string]bool // the IDs in live

	mu     sync.Mutex
	ranks  map[rankQuery]rankAnswer
	listed map[listedQuery][]model.SummaryWaiter // summaryListed
}

// listedQuery names one group of one summary read for one record.
type listedQuery struct {
	s     *model.RolloutSummary
	d     *model.Deployment
	group string
}

type rankQuery struct {
	key, id string
	withID  bool // the candidates are live plus id when it is not among them
}

type rankAnswer struct {
	rank  int
	first string
}

// maxRankMemo bounds the rankings an index remembers (one per deployment
// key and querying node: a handful per job).
const maxRankMemo = 256

// NewNodeIndex indexes nodes, which the caller must not modify afterwards.
func NewNodeIndex(nodes []Node) *NodeIndex {
	x := &NodeIndex{nodes: nodes, pos: make(map[string]int, len(nodes)), ranks: map[rankQuery]rankAnswer{},
		listed: map[listedQuery][]model.SummaryWaiter{}}
	for i, n := range nodes {
		if _, dup := x.pos[n.ID]; !dup {
			x.pos[n.ID] = i
		}
		if n.Live && n.Eligible {
			x.live = append(x.live, n.ID)
		}
	}
	slices.Sort(x.live)
	x.live = slices.Clip(slices.Compact(x.live))
	x.in = make(map[string]bool, len(x.live))
	for _, id := range x.live {
		x.in[id] = true
	}
	return x
}

// For reports whether x was built for exactly nodes.
func (x *NodeIndex) For(nodes []Node) bool {
	if x == nil || len(x.nodes) != len(nodes) {
		return false
	}
	return len(nodes) == 0 || &x.nodes[0] == &nodes[0]
}

// rank is rankAndFirst(key, candidates, id) over the live eligible IDs
// (plus id when withID and it is not among them), remembered.
func (x *NodeIndex) rank(key, id string, withID bool) (int, string) {
	q := rankQuery{key: key, id: id, withID: withID}
	x.mu.Lock()
	a, ok := x.ranks[q]
	x.mu.Unlock()
	if ok {
		return a.rank, a.first
	}
	cands := x.live
	if withID && !x.in[id] {
		cands = append(cands, id) // live is clipped: a copy
	}
	a.rank, a.first = rankAndFirst(key, cands, id)
	x.mu.Lock()
	if len(x.ranks) >= maxRankMemo {
		clear(x.ranks)
	}
	x.ranks[q] = a
	x.mu.Unlock()
	return a.rank, a.first
}

// index is f.Index when it was built for f.Nodes, else nil.
func (f *Facts) index() *NodeIndex {
	if f.Index.For(f.Nodes) {
		return f.Index
	}
	return nil
}

// rankLive is id's rank and the first node of the ranking by key over the
// live eligible nodes (plus id itself when withID and it is not among
// them): rankAndFirst over LiveEligible, from the index when there is one.
func (f *Facts) rankLive(key, id string, withID bool) (int, string) {
	if x := f.index(); x != nil {
		return x.rank(key, id, withID)
	}
	cands := f.LiveEligible()
	if withID && !slices.Contains(cands, id) {
		cands = append(cands, id)
	}
	return rankAndFirst(key, cands, id)
}

// liveEligibleSet reports whether an ID is among LiveEligible.
func (f *Facts) liveEligibleSet() func(id string) bool {
	if x := f.index(); x != nil {
		return func(id string) bool { return x.in[id] }
	}
	set := map[string]bool{}
	for _, id := range f.LiveEligible() {
		set[id] = true
	}
	return func(id string) bool { return set[id] }
}
