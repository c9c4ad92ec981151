package reconcile

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/hivelet/hivelet/host/model"
)

// nodeInfo is what the round knows of one node: its sets and its live
// allocations (sorted by name, then ID). It holds no pointers (a round's
// node view is one block the garbage collector neither scans nor tracks
// writes to): its ID is read where the input holds it (see fleet.nodeID).
type nodeInfo struct {
	// lo and hi are the node's window of fleet.live (sorted by node, name
	// and ID): no list per node is built.
	lo, hi int32
	// pos is the node's index in fleet.nodes (group.canaryAt is indexed by it).
	pos int32
	// at is the node's place in the first list of fleet.tainted,
	// fleet.notReady and fleet.ready it is in (see nodeID).
	at          int32
	ready       bool // an effective ready node
	tainted     bool
	notReady    bool
	hasTerminal bool // some terminal allocation is on this node
}

// nodeID returns the node's ID, from the input list that holds it: a
// tainted node's from the sorted tainted IDs, a not-ready one's from the
// sorted not-ready IDs, a ready node's from its record, and a node only
// carrying allocations from its first one.
func (f *fleet) nodeID(ni *nodeInfo) string {
	switch {
	case f.localID != "":
		return f.localID
	case ni.tainted:
		return f.tainted[ni.at]
	case ni.notReady:
		return f.notReady[ni.at]
	case ni.ready:
		return f.ready[ni.at].ID
	}
	return f.live[ni.lo].NodeID
}

// taintedNode returns a tainted node's record (nil: the node is gone).
func (f *fleet) taintedNode(ni *nodeInfo) *model.Node { return f.taintedRecs[ni.at] }

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
		f.taintedRecs = make([]*model.Node, len(tainted))
		for i, id := range tainted {
			f.taintedRecs[i] = in.TaintedNodes[id]
		}
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
	f.live, f.ready, f.notReady, f.tainted = live, ready, notReady, tainted
	// A merge that found its input out of order leaves its list to the
	// next. The list is built in a variable, and kept in f.nodes once
	// built (not at every node: f is on the heap).
	nodes := f.nodes[:0]
	if n := len(ready) + len(notReady) + len(tainted); cap(nodes) < n {
		nodes = make([]nodeInfo, 0, n)
	}
	f.nodes = nodes
	// The effective ready nodes are ready itself until a ready node is
	// found tainted or not ready; from then on, a list of their own.
	f.readyList = nil
	excluded := false
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
		on := false // live's head is on node id
		if l < len(live) {
			if !validAt(l) {
				return false
			}
			// The sets' heads all follow the last node merged (each set
			// is sorted and was advanced past it): a node of live that
			// is not one of them must follow it too, or live is out of
			// order.
			if c := live[l].NodeID; !have || (c != id && c < id) {
				if len(nodes) > 0 && c <= prev {
					return false
				}
				id, have, on = c, true, true
			} else {
				on = c == id
			}
		}
		if !have {
			if !excluded {
				f.readyList = ready
			}
			f.nodes = nodes
			return true
		}
		ni := nodeInfo{pos: int32(len(nodes))}
		for nr < len(notReady) && notReady[nr] == id {
			ni.notReady, ni.at = true, int32(nr)
			nr++
		}
		if t < len(tainted) && tainted[t] == id {
			ni.tainted, ni.at = true, int32(t)
			t++
		}
		if r < len(ready) && ready[r].ID == id {
			switch {
			case !ni.tainted && !ni.notReady:
				ni.ready, ni.at = true, int32(r)
				if excluded {
					f.readyList = append(f.readyList, ready[r])
				}
			case !excluded:
				excluded = true
				f.readyList = append(make([]*model.Node, 0, len(ready)-1), ready[:r]...)
			}
			r++
			if r < len(ready) && !readyAt(r) {
				return false
			}
		}
		from := l
		if on {
			for l++; l < len(live); l++ {
				if !validAt(l) {
					return false
				}
				if live[l].NodeID != id {
					break
				}
				if byNameID(live[l-1], live[l]) > 0 {
					return false
				}
			}
		}
		ni.lo, ni.hi = int32(from), int32(l)
		nodes = append(nodes, ni)
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
		pos[f.nodeID(&f.nodes[i])] = int32(i)
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
	i, ok := sort.Find(len(f.nodes), func(i int) int { return strings.Compare(id, f.nodeID(&f.nodes[i])) })
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
