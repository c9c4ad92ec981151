package reconcile

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hivelet/hivelet/host/model"
)

// nodeInfo is what the round knows of one node: its sets and its live
// allocations (sorted by name, then ID).
type nodeInfo struct {
	id          string
	taintedNode *model.Node // nil while tainted: the node is gone
	// lo and hi are the node's window of fleet.live (sorted by node, name
	// and ID): no list per node is built.
	lo, hi int32
	// pos is the node's index in fleet.nodes (group.canaryAt is indexed by it).
	pos         int32
	ready       bool // an effective ready node
	tainted     bool
	notReady    bool
	hasTerminal bool // some terminal allocation is on this node
}

// liveOf returns the node's live allocations, sorted by name, then ID.
func (f *fleet) liveOf(ni *nodeInfo) []*model.Allocation { return f.live[ni.lo:ni.hi:ni.hi] }

// likelySorted reports whether the live allocations' first few are in
// order: a list out of order is mostly found out here, before a merge
// that would find it out only at the first allocation out of order (the
// merge still checks every one).
func likelySorted(live []*model.Allocation) bool {
	for i := 1; i < min(len(live), 9); i++ {
		if live[i-1] == nil || live[i] == nil || byNodeNameID(live[i-1], live[i]) > 0 {
			return false
		}
	}
	return true
}

// checkLive validates the live allocations.
func checkLive(live []*model.Allocation) error {
	for _, a := range live {
		if a == nil || a.ID == "" {
			return errors.New("reconciling: a live allocation has no ID")
		}
	}
	return nil
}

// sortedReady validates the ready nodes and returns them sorted by ID, in
// one pass when they already are; a node listed twice is refused (which
// record would win would depend on input order).
func sortedReady(ready []*model.Node) ([]*model.Node, error) {
	sorted := true
	for i, n := range ready {
		if n == nil || n.ID == "" {
			return nil, errors.New("reconciling: a ready node has no ID")
		}
		if sorted && i > 0 && ready[i-1].ID >= n.ID {
			sorted = false
		}
	}
	if sorted {
		return ready, nil // strictly increasing: no node is listed twice
	}
	// Sorted by (ID, node) pairs: comparing IDs held in the array does not
	// load every node's record, as sorting the records would.
	type idNode struct {
		id string
		n  *model.Node
	}
	pairs := make([]idNode, len(ready))
	for i, n := range ready {
		pairs[i] = idNode{n.ID, n}
	}
	slices.SortFunc(pairs, func(a, b idNode) int { return strings.Compare(a.id, b.id) })
	out := make([]*model.Node, len(pairs))
	for i, p := range pairs {
		if i > 0 && p.id == pairs[i-1].id {
			return nil, fmt.Errorf("reconciling: ready node %q is listed twice", p.id)
		}
		out[i] = p.n
	}
	return out, nil
}

// byNodeNameID orders live allocations as the node pass reads them.
func byNodeNameID(a, b *model.Allocation) int {
	if c := strings.Compare(a.NodeID, b.NodeID); c != 0 {
		return c
	}
	return byNameID(a, b)
}

// byNameID orders one node's live allocations.
func byNameID(a, b *model.Allocation) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// sortedCopy returns s when it is already sorted (checking is linear), else
// a sorted copy: the input is never modified, and an input that arrives in
// order (the agent lists nodes and keys in order) costs no sort at all.
func sortedCopy[T any](s []T, cmp func(a, b T) int) []T {
	if slices.IsSortedFunc(s, cmp) {
		return s
	}
	c := slices.Clone(s)
	slices.SortFunc(c, cmp)
	return c
}

// indexNodes builds the node view, sorted by node ID: every ready,
// not-ready and tainted node and every node carrying a live allocation,
// each with its window of the live allocations sorted by node, name and ID.
// A node listed ready and also tainted or not ready is not an effective
// ready node.
//
// Inputs that arrive sorted (the agent lists nodes and keys in order) are
// merged as they are: no node ID is hashed and nothing is sorted. Live
// allocations out of order (the merge finds out) are grouped by node
// through a map from node ID to position and ordered within each node,
// which costs a hash per allocation instead of a sort of the whole list.
func (f *fleet) indexNodes() error {
	in := f.in
	notReady := sortedCopy(in.NotReadyNodes, strings.Compare)
	var tainted []string
	if len(in.TaintedNodes) > 0 {
		tainted = slices.Sorted(maps.Keys(in.TaintedNodes))
	}
	// Valid inputs in order are checked by the merge itself, each node
	// and allocation read once; anything else takes the checks one by one
	// (which also find the error to report, in their order).
	if !likelySorted(in.LiveAllocs) || !f.merge(in.ReadyNodes, notReady, tainted, in.LiveAllocs, false) {
		ready, err := sortedReady(in.ReadyNodes)
		if err != nil {
			return err
		}
		if err := checkLive(in.LiveAllocs); err != nil {
			return err
		}
		if !(likelySorted(in.LiveAllocs) && f.merge(ready, notReady, tainted, in.LiveAllocs, true)) && !f.groupLive(ready, notReady, tainted) {
			// Some allocation is on a node no set lists: merge a sorted copy.
			live := slices.Clone(in.LiveAllocs)
			slices.SortFunc(live, byNodeNameID)
			f.merge(ready, notReady, tainted, live, true)
		}
	}
	for _, a := range in.TerminalAllocs {
		if a == nil || a.ID == "" {
			return errors.New("reconciling: a terminal allocation has no ID")
		}
		f.addTerminal(a, f.find(a.NodeID))
	}
	return nil
}

// merge builds f.nodes from the sets, sorted by node ID, and the live
// allocations, in one merge of the four lists. It reports false, having
// built nothing to keep, when a ready node or live allocation is invalid
// (nil, no ID), the ready nodes are not in strictly increasing order, or
// the live allocations are not sorted by node, name and ID: each is checked
// as it is merged, its record read once.
//
// Node IDs are compared for equality first: the live allocations of a
// ready node follow that node's head of the list, so a fleet whose
// allocations are on its ready nodes costs one equality test per node
// besides the ready list's own order, not an ordering comparison of IDs
// that share a long prefix.
//
// ready is checked unless checked says it already was (sortedReady).
func (f *fleet) merge(ready []*model.Node, notReady, tainted []string, live []*model.Allocation, checked bool) bool {
	f.live = live
	// A merge that found its input out of order leaves its lists to the next.
	if n := len(ready) + len(notReady) + len(tainted); cap(f.nodes) >= n {
		f.nodes, f.readyList = f.nodes[:0], f.readyList[:0]
	} else {
		f.nodes, f.readyList = make([]nodeInfo, 0, n), make([]*model.Node, 0, len(ready))
	}
	// readyAt reports whether ready[r] is valid and follows ready[r-1].
	readyAt := func(r int) bool {
		if checked {
			return true
		}
		n := ready[r]
		return n != nil && n.ID != "" && (r == 0 || ready[r-1].ID < n.ID)
	}
	validAt := func(l int) bool { return live[l] != nil && live[l].ID != "" }
	if len(ready) > 0 && !readyAt(0) {
		return false
	}
	r, nr, t, l := 0, 0, 0, 0
	prev := ""
	for {
		// The smallest node ID at the head of any of the sorted sets.
		var id string
		have := false
		if r < len(ready) {
			id, have = ready[r].ID, true
		}
		if nr < len(notReady) && (!have || (notReady[nr] != id && notReady[nr] < id)) {
			id, have = notReady[nr], true
		}
		if t < len(tainted) && (!have || (tainted[t] != id && tainted[t] < id)) {
			id, have = tainted[t], true
		}
		if l < len(live) {
			if !validAt(l) {
				return false
			}
			// The sets' heads all follow the last node merged (each set
			// is sorted and was advanced past it): a node of live that
			// is not one of them must follow it too, or live is out of
			// order.
			if c := live[l].NodeID; !have || (c != id && c < id) {
				if len(f.nodes) > 0 && c <= prev {
					return false
				}
				id, have = c, true
			}
		}
		if !have {
			return true
		}
		ni := nodeInfo{id: id, pos: int32(len(f.nodes))}
		for nr < len(notReady) && notReady[nr] == id {
			ni.notReady = true
			nr++
		}
		if t < len(tainted) && tainted[t] == id {
			ni.tainted, ni.taintedNode = true, f.in.TaintedNodes[id]
			t++
		}
		if r < len(ready) && ready[r].ID == id {
			if !ni.tainted && !ni.notReady {
				ni.ready = true
				f.readyList = append(f.readyList, ready[r])
			}
			r++
			if r < len(ready) && !readyAt(r) {
				return false
			}
		}
		from := l
		for l < len(live) {
			if l > from && !validAt(l) {
				return false
			}
			if live[l].NodeID != id {
				break
			}
			if l > from && byNameID(live[l-1], live[l]) > 0 {
				return false
			}
			l++
		}
		ni.lo, ni.hi = int32(from), int32(l)
		f.nodes = append(f.nodes, ni)
		prev = id
	}
}

// groupLive builds f.nodes from the sets and groups the (unsorted) live
// allocations by node: a counting sort by node position, then each node's
// few allocations sorted by name and ID. It reports false, having built
// nothing to keep, when an allocation is on a node no set lists.
func (f *fleet) groupLive(ready []*model.Node, notReady, tainted []string) bool {
	in := f.in
	f.merge(ready, notReady, tainted, nil, true)
	pos := make(map[string]int32, len(f.nodes))
	for i := range f.nodes {
		pos[f.nodes[i].id] = int32(i)
	}
	owner := make([]int32, len(in.LiveAllocs))
	count := make([]int32, len(f.nodes)+1)
	for i, a := range in.LiveAllocs {
		p, ok := pos[a.NodeID]
		if !ok {
			return false
		}
		owner[i] = p
		count[p+1]++
	}
	for i := range f.nodes {
		count[i+1] += count[i]
		f.nodes[i].lo, f.nodes[i].hi = count[i], count[i]
	}
	f.live = make([]*model.Allocation, len(in.LiveAllocs))
	for i, a := range in.LiveAllocs {
		ni := &f.nodes[owner[i]]
		f.live[ni.hi] = a
		ni.hi++
	}
	for i := range f.nodes {
		if w := f.liveOf(&f.nodes[i]); len(w) > 1 {
			slices.SortFunc(w, byNodeNameID)
		}
	}
	return true
}

// find returns the node's info, or nil when the node is not in view.
func (f *fleet) find(id string) *nodeInfo {
	i, ok := slices.BinarySearchFunc(f.nodes, id, func(ni nodeInfo, id string) int { return strings.Compare(ni.id, id) })
	if !ok {
		return nil
	}
	return &f.nodes[i]
}

// addTerminal indexes a terminal allocation (on node ni, nil when the node
// is not in view): the newest per (node, name) is the one a placement
// carries on.
func (f *fleet) addTerminal(a *model.Allocation, ni *nodeInfo) {
	k := nodeName{a.NodeID, a.Name}
	if f.terminal == nil {
		f.terminal = make(map[nodeName]int32, len(f.in.TerminalAllocs))
	}
	if i, ok := f.terminal[k]; !ok {
		f.terminal[k] = int32(len(f.terms))
		f.terms = append(f.terms, a)
	} else if newerTerminal(a, f.terms[i]) {
		f.terms[i] = a
	}
	if ni != nil {
		ni.hasTerminal = true
		if a.JobVersion == f.version {
			if f.ran == nil {
				f.ran = map[nodeGroup]bool{}
			}
			f.ran[nodeGroup{a.NodeID, a.TaskGroup}] = true
		}
	}
}

type nodeGroup struct{ node, group string }
