package agent

import (
	"strings"
	"sync"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
)

// maxEchoGap bounds the revisions onlyEchoes walks; a larger jump is not
// examined (a pass runs).
const maxEchoGap = 4096

// maxCreatesRemembered bounds the deployment creations kept for echo
// recognition (each is dropped once recognised or seen by a pass).
const maxCreatesRemembered = 4096

// ownEchoes recognises a view change made only of this agent's own writes
// coming back through the watch, when a pass that would follow it could only
// find nothing new:
//   - this node's allocation status writes: a pass takes this node's
//     allocations from its runners and leaves this node's keys of the
//     allocations bucket out of the fleet facts;
//   - the creation of a deployment a pass planned: passes already plan
//     against it (the overlay, withWritten) from the moment it was planned.
//
// Without this, every start was followed by two or three passes, each
// O(jobs + allocations), that could find nothing to do, and the next job's
// start queued behind them.
//
// The test is exact, never a guess: a change is an echo only if every
// revision the allocations and deployments buckets advanced by since the
// last pass read the view is accounted for (an allocation write of this
// agent whose revision the put returned, or a key of this node at that
// revision; a deployment this agent planned, at that revision, with the
// planned record's ID and modify time), no other bucket's revision moved,
// and the view's generation moved by no more than the revisions did. A
// delete, another node's write, a deployment changed by anyone (this agent
// included) or a revision already overwritten makes a pass, as before.
type ownEchoes struct {
	nodePrefix string // this node's allocation key prefix, "<node>."

	mu      sync.Mutex
	revs    map[uint64]bool              // allocations-bucket revisions written by this agent, not yet read
	created map[string]*model.Deployment // deployment ID → as planned, for a creation not yet read
	seen    map[string]uint64            // bucket kind → revision the last pass (or skipped echo) read
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

// creating records a deployment a pass planned (before it is written).
func (e *ownEchoes) creating(d *model.Deployment) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.created == nil || len(e.created) >= maxCreatesRemembered {
		e.created = map[string]*model.Deployment{} // forgetting costs only passes
	}
	e.created[d.ID] = d
}

// forgetCreation drops a creation the view now holds.
func (e *ownEchoes) forgetCreation(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.created, id)
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
// read is this agent's own writes (see ownEchoes); if so, v counts as read.
func (e *ownEchoes) onlyEchoes(v *fleet.View) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.primed || v.Generation < e.seenGen {
		return false
	}
	for k, r := range v.Revisions {
		if k != fleet.KindAllocs && k != fleet.KindDeployments && r != e.seen[k] {
			return false
		}
	}
	for k := range e.seen {
		if _, ok := v.Revisions[k]; !ok {
			return false
		}
	}
	aFrom, aTo := e.seen[fleet.KindAllocs], v.Revisions[fleet.KindAllocs]
	dFrom, dTo := e.seen[fleet.KindDeployments], v.Revisions[fleet.KindDeployments]
	if aTo < aFrom || dTo < dFrom || aTo-aFrom > maxEchoGap || dTo-dFrom > maxEchoGap ||
		v.Generation-e.seenGen > (aTo-aFrom)+(dTo-dFrom) {
		return false
	}
	// Allocations: revisions the puts returned, then this node's keys.
	var missing map[uint64]bool
	for r := aFrom + 1; r <= aTo; r++ {
		if !e.revs[r] {
			if missing == nil {
				missing = map[uint64]bool{}
			}
			missing[r] = true
		}
	}
	if len(missing) > 0 {
		if e.nodePrefix == "" {
			return false
		}
		for k, st := range v.Allocs {
			if missing[st.Revision] && strings.HasPrefix(k, e.nodePrefix) && !st.Absent {
				delete(missing, st.Revision)
			}
		}
		if len(missing) > 0 {
			return false
		}
	}
	// Deployments: only creations this agent planned, as planned.
	var matched []string
	if dTo > dFrom {
		left := dTo - dFrom
		for _, st := range v.Deployments {
			if st.Revision <= dFrom || st.Revision > dTo {
				continue
			}
			d := st.Value
			if d == nil || st.Absent {
				return false
			}
			w := e.created[d.ID]
			if w == nil || !w.ModifyTime.Equal(d.ModifyTime) || w.Status != d.Status || w.JobVersion != d.JobVersion {
				return false
			}
			matched = append(matched, d.ID)
			left--
		}
		if left != 0 {
			return false // a revision overwritten or deleted since: not provably ours
		}
	}
	for _, id := range matched {
		delete(e.created, id)
	}
	e.markLocked(v)
	return true
}
