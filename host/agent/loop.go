package agent

import (
	"sync"

	"github.com/hivelet/hivelet/host/fleet"
)

// maxEchoGap bounds the revisions onlyEchoes walks; a larger jump is not
// examined (a pass runs).
const maxEchoGap = 4096

// ownEchoes recognises a view change made only of this node's own
// allocation status writes coming back through the watch. Those change
// nothing a pass reads: a pass takes this node's allocations from its
// runners and leaves this node's keys of the allocations bucket out of the
// fleet facts, so the pass such an echo would trigger is skipped (every
// pass is O(jobs + allocations); without this, each start was followed by
// two or three passes that could only find nothing to do, and the next
// job's start queued behind them).
//
// The test is exact, never a guess: a change is an echo only if every
// revision the allocations bucket advanced by since the last pass is one
// this agent wrote, no other bucket's revision moved, and the view's
// generation moved by no more than those revisions. A write whose
// revision is not known yet when its echo arrives (the reply to the put
// still in flight) makes a pass, as before.
type ownEchoes struct {
	mu      sync.Mutex
	revs    map[uint64]bool   // allocations-bucket revisions written by this agent, not yet passed
	seen    map[string]uint64 // bucket kind → revision the last pass (or skipped echo) read
	seenGen uint64
	primed  bool
}

// add records the revision of one of this agent's allocation writes.
func (e *ownEchoes) add(rev uint64) {
	if rev == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.primed && rev <= e.seen[fleet.KindAllocs] {
		return // its echo was already read by a pass
	}
	if e.revs == nil {
		e.revs = map[uint64]bool{}
	}
	e.revs[rev] = true
}

// passed records the view a pass read: changes up to it need no new pass.
func (e *ownEchoes) passed(v *fleet.View) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.markLocked(v)
}

func (e *ownEchoes) markLocked(v *fleet.View) {
	if e.seen == nil {
		e.seen = map[string]uint64{}
	}
	clear(e.seen)
	for k, r := range v.Revisions {
		e.seen[k] = r
	}
	e.seenGen = v.Generation
	e.primed = true
	cur := v.Revisions[fleet.KindAllocs]
	for r := range e.revs {
		if r <= cur {
			delete(e.revs, r)
		}
	}
}

// onlyEchoes reports whether everything v holds beyond what the last pass
// read is this agent's own allocation writes; if so, v counts as read.
func (e *ownEchoes) onlyEchoes(v *fleet.View) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.primed || v.Generation < e.seenGen {
		return false
	}
	for k, r := range v.Revisions {
		if k != fleet.KindAllocs && r != e.seen[k] {
			return false
		}
	}
	for k := range e.seen {
		if _, ok := v.Revisions[k]; !ok {
			return false
		}
	}
	from, to := e.seen[fleet.KindAllocs], v.Revisions[fleet.KindAllocs]
	if to < from || to-from > maxEchoGap || v.Generation-e.seenGen > to-from {
		return false
	}
	for r := from + 1; r <= to; r++ {
		if !e.revs[r] {
			return false
		}
	}
	e.markLocked(v)
	return true
}
