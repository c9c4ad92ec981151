package agent

import (
	"strings"
	"sync"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// maxEchoGap bounds the changes onlyEchoes examines; a larger jump is not
// examined (a pass runs).
const maxEchoGap = 4096

// maxCreatesRemembered bounds the deployment creations kept for echo
// recognition (each is dropped once recognised or seen by a pass).
const maxCreatesRemembered = 4096

// echoSource is what onlyEchoes reads (fleet.Source): the changes since the
// last pass and the records they left, without a snapshot of the view.
type echoSource interface {
	Generation() uint64
	ChangesSince(from, to uint64) ([]fleet.Change, bool)
	Alloc(key string) (wanted.AllocState, bool)
	Deployment(key string) (wanted.DeploymentState, bool)
}

// ownEchoes recognises a view change made only of this agent's own writes
// coming back through the watch, when a pass that would follow it could only
// find nothing new:
//   - this node's allocation status writes: a pass takes this node's
//     allocations from its runners and leaves this node's keys of the
//     allocations bucket out of the fleet facts;
//   - the creation of a deployment a pass planned: passes already plan
//     against it (the overlay, withWritten) from the moment it was planned;
//   - any deployment write of this agent whose revision the write returned:
//     every such write goes through the overlay and is followed by a kick
//     (carryOut), so the pass that reads it has run or is coming. A change
//     of a deployment key this agent is writing whose revision is not yet
//     known (its echo came before the reply) makes no pass yet: it is
//     judged again once the revision is known, and the write's end kicks a
//     pass in any case (endDeploymentWrite).
//
// Invariant: a start makes no pass of its own echoes, so the next job's
// start never queues behind passes that can find nothing to do. Node
// records that changed only in their heartbeat time count as echoes too: a
// pass reads nothing of them, so a fleet's heartbeats alone make no pass
// (TestOnlyEchoesSkipsExactlyThisNodesOwnAllocationWrites,
// TestHeartbeatsMakeNoPassAndMoveNoSignature).
//
// The test is exact, never a guess, and costs O(changes), not O(view): a
// change is an echo only if every change since the last pass read the view
// (the fleet's change log, one change per generation) is accounted for: an
// allocation write of this agent whose revision the put returned, or this
// node's key still at that revision; a deployment this agent planned, still
// at that revision, with the planned record's ID, status, version and modify
// time. Anything else (another bucket, another node's write, a delete, a
// record overwritten since, a deployment changed by anyone, this agent
// included, a log that no longer reaches back) makes a pass.
type ownEchoes struct {
	nodePrefix string // this node's allocation key prefix, "<node>."
	// writing reports whether this node's write of an allocation is queued
	// or in flight: a change of its key whose revision no put returned yet
	// is an echo only then (anything else under this node's prefix is
	// somebody else's write, which a pass corrects: checkOwnKeys).
	writing func(allocID string) bool

	mu           sync.Mutex
	revs         map[uint64]bool              // allocations-bucket revisions written by this agent, not yet read
	created      map[string]*model.Deployment // deployment ID → as planned, for a creation not yet read
	depRevs      map[uint64]bool              // deployments-bucket revisions written by this agent, not yet read
	depWriting   map[string]int               // deployment key → this agent's writes of it under way
	postponed    bool                         // a change of a key in depWriting awaits its write's end
	seenGen      uint64                       // view generation the last pass (or skipped echo) read
	seenAllocRev uint64                       // allocations-bucket revision it read
	seenDepRev   uint64                       // deployments-bucket revision it read
	primed       bool

	// waitsUntil's scan so far: the changes after waitBase up to waitGen
	// can all wait, the earliest until waitDue (waitWhy). It holds while
	// seenGen is waitBase and the paced jobs and the batch time are the
	// same: each notification then reads only the changes after waitGen.
	waitBase, waitGen uint64
	waitPaced         *pacedJobs
	waitBatch         time.Time
	waitDue           time.Time
	waitWhy           string
}

// beginDeploymentWrite records that this agent is writing the deployment
// key (before the write is sent).
func (e *ownEchoes) beginDeploymentWrite(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.depWriting == nil {
		e.depWriting = map[string]int{}
	}
	e.depWriting[key]++
}

// endDeploymentWrite records the end of a write begun with
// beginDeploymentWrite: rev is the revision it wrote (0: it wrote nothing,
// failed, or cannot tell). It reports whether a change was postponed for a
// write under way: the caller must then make sure a pass follows.
func (e *ownEchoes) endDeploymentWrite(key string, rev uint64) (postponed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.depWriting[key] <= 1 {
		delete(e.depWriting, key)
	} else {
		e.depWriting[key]--
	}
	if rev != 0 && (!e.primed || rev > e.seenDepRev) {
		if e.depRevs == nil || len(e.depRevs) >= maxCreatesRemembered {
			e.depRevs = map[uint64]bool{} // forgetting costs only passes
		}
		e.depRevs[rev] = true
	}
	postponed, e.postponed = e.postponed, false
	return postponed
}

// add records the revision of one of this agent's allocation writes.
func (e *ownEchoes) add(rev uint64) {
	if rev == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.primed && rev <= e.seenAllocRev {
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
	e.postponed = false // this pass reads what was put off
	e.markLocked(v.Generation, v.Revisions[fleet.KindAllocs], v.Revisions[fleet.KindDeployments])
}

func (e *ownEchoes) markLocked(gen, allocRev, depRev uint64) {
	e.seenGen = gen
	if allocRev > e.seenAllocRev || !e.primed {
		e.seenAllocRev = allocRev
	}
	if depRev > e.seenDepRev || !e.primed {
		e.seenDepRev = depRev
	}
	e.primed = true
	for r := range e.revs {
		if r <= e.seenAllocRev {
			delete(e.revs, r)
		}
	}
	for r := range e.depRevs {
		if r <= e.seenDepRev {
			delete(e.depRevs, r)
		}
	}
}

// onlyEchoes reports whether every change src applied since the last pass
// read the view is this agent's own writes (see ownEchoes); if so, they
// count as read. If not, it names the first change that is not an echo:
// the cause of the pass that follows (Status.PassCauses).
func (e *ownEchoes) onlyEchoes(src echoSource) (bool, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	gen := src.Generation()
	if !e.primed || gen < e.seenGen || gen-e.seenGen > maxEchoGap {
		return false, "unread"
	}
	if gen == e.seenGen {
		return true, "" // nothing applied since
	}
	changes, complete := src.ChangesSince(e.seenGen, gen)
	if !complete || uint64(len(changes)) != gen-e.seenGen {
		return false, "unread"
	}
	allocRev, depRev := e.seenAllocRev, e.seenDepRev
	var matched []string
	postpone := false
	for _, c := range changes {
		if c.Key == "" {
			return false, c.Kind + ": pulled whole"
		}
		switch c.Kind {
		case fleet.KindAllocs:
			if !e.revs[c.Revision] {
				cause := fleet.KindAllocs + ": another node's"
				// Not (yet) known from a put's reply: this node's key, still
				// holding a record at that revision.
				if e.nodePrefix == "" || !strings.HasPrefix(c.Key, e.nodePrefix) {
					return false, cause
				}
				cause = fleet.KindAllocs + ": this node's, not its write"
				if _, id, ok := wanted.ParseAllocKey(c.Key); !ok || e.writing == nil || !e.writing(id) {
					return false, cause
				}
				st, ok := src.Alloc(c.Key)
				if !ok || st.Absent || st.Value == nil || st.Revision != c.Revision {
					return false, cause
				}
			}
			allocRev = max(allocRev, c.Revision)
		case fleet.KindNodes:
			if !c.HeartbeatOnly {
				return false, fleet.KindNodes
			}
			// A heartbeat (this node's or another's) changes nothing a
			// pass reads.
		case fleet.KindDeployments:
			if e.depRevs[c.Revision] {
				depRev = max(depRev, c.Revision)
				continue // this agent's write, by the revision it returned
			}
			if e.depWriting[c.Key] > 0 {
				// Perhaps this agent's write, whose reply is not in yet:
				// judged again when it is (endDeploymentWrite).
				postpone = true
				continue
			}
			st, ok := src.Deployment(c.Key)
			if !ok || st.Absent || st.Value == nil || st.Revision != c.Revision {
				return false, fleet.KindDeployments // deleted, or changed since: not provably ours
			}
			d := st.Value
			w := e.created[d.ID]
			if w == nil || !w.ModifyTime.Equal(d.ModifyTime) || w.Status != d.Status || w.JobVersion != d.JobVersion {
				return false, fleet.KindDeployments
			}
			matched = append(matched, d.ID)
			depRev = max(depRev, c.Revision)
		default:
			return false, c.Kind
		}
	}
	if postpone {
		// Nothing is marked read: the changes are judged again, from the
		// same place, once the write's revision is known.
		e.postponed = true
		return true, ""
	}
	for _, id := range matched {
		delete(e.created, id)
	}
	e.markLocked(gen, allocRev, depRev)
	return true, ""
}

// nodeChangeEvery is the shortest time between two passes made for other
// nodes' record changes alone (a node joining, leaving or changing its
// attributes): those are applied in batches. A change of anything else (a
// job, an allocation, a deployment, a slot, an intent, this node's own
// record) still makes a pass at once, and so does a kick. A fleet whose
// nodes join one after the other would otherwise make every agent pass once
// per join, each pass O(fleet): a thousand agents starting cost a billion
// node visits in all.
const nodeChangeEvery = time.Second

// pacedEvery is what waitsUntil reads of the jobs whose other nodes'
// changes this node decides on a timer (Agent.deputyLast): each job key
// with the time its next timed decision is due.
type pacedEvery map[string]time.Time

// pacedJobs is pacedEvery as a pass published it (Agent.notePaced): a base
// built whole and the jobs changed since laid over it (a zero time: not
// paced any more). Neither map is written once published.
type pacedJobs struct{ base, over pacedEvery }

// at is job k's time, if it is paced.
func (p *pacedJobs) at(k string) (time.Time, bool) {
	if t, ok := p.over[k]; ok {
		return t, !t.IsZero()
	}
	t, ok := p.base[k]
	return t, ok
}

// waitsUntil reports whether every change src applied since the last pass
// read the view can wait for a pass at a later time, and until when: other
// nodes' record changes until batchAt (nodeChangeEvery); another node's
// allocation, or a slot, of a job in paced until that job's time, as long
// as it is after now (the pass would put that job's decision off until
// then: deputyLast, and decide nothing else anew); a heartbeat and this
// agent's own allocation writes known by their revisions not at all. Any
// other change, this node's own record or allocation key, a whole-bucket
// change, a summary or a log that no longer reaches back makes a pass at
// once (false). The cause names what the wait was for. Unlike onlyEchoes
// it marks nothing read: the pass that follows reads them.
func (e *ownEchoes) waitsUntil(src echoSource, self string, batchAt time.Time, paced *pacedJobs, now time.Time) (time.Time, string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	gen := src.Generation()
	if !e.primed || gen <= e.seenGen || gen-e.seenGen > maxEchoGap {
		return time.Time{}, "", false
	}
	from, due, cause := e.seenGen, time.Time{}, ""
	if e.waitBase == e.seenGen && e.waitPaced == paced && e.waitBatch.Equal(batchAt) && e.waitGen > e.seenGen && e.waitGen <= gen {
		from, due, cause = e.waitGen, e.waitDue, e.waitWhy // scanned by the last call
	}
	e.waitGen = 0 // until this scan ends with changes that can all wait
	if from == gen {
		return due, cause, !due.IsZero()
	}
	changes, complete := src.ChangesSince(from, gen)
	if !complete || uint64(len(changes)) != gen-from {
		return time.Time{}, "", false
	}
	jobs := paced
	if jobs == nil {
		jobs = &pacedJobs{}
	}
	selfKey := wanted.NodeKey(self)
	until := func(at time.Time, why string) {
		if due.IsZero() || at.Before(due) {
			due, cause = at, why
		}
	}
	// pacedChange: the change names a job (Change.Jobs, what the pass's
	// index marks dirty) and every job it names is paced past now.
	pacedChange := func(c fleet.Change) bool {
		named := false
		for _, jk := range c.Jobs {
			if jk == "" {
				continue
			}
			at, ok := jobs.at(jk)
			if !ok || !at.After(now) {
				return false
			}
			until(at, causePaced)
			named = true
		}
		return named
	}
	for _, c := range changes {
		if c.Key == "" {
			return time.Time{}, "", false
		}
		switch c.Kind {
		case fleet.KindNodes:
			if c.HeartbeatOnly {
				continue // a pass reads nothing of it (onlyEchoes)
			}
			if c.Key == selfKey {
				return time.Time{}, "", false
			}
			until(batchAt, causeNodesBatched)
		case fleet.KindAllocs:
			if e.revs[c.Revision] {
				continue // this agent's own write, by the revision it returned
			}
			if e.nodePrefix != "" && strings.HasPrefix(c.Key, e.nodePrefix) {
				return time.Time{}, "", false
			}
			if !pacedChange(c) {
				return time.Time{}, "", false
			}
		case fleet.KindRollout:
			if !strings.HasPrefix(c.Key, "slot.") || !pacedChange(c) {
				return time.Time{}, "", false
			}
		default:
			return time.Time{}, "", false
		}
	}
	if due.IsZero() {
		return due, cause, false // heartbeats and echoes only: onlyEchoes' to judge
	}
	e.waitBase, e.waitGen, e.waitPaced, e.waitBatch, e.waitDue, e.waitWhy = e.seenGen, gen, paced, batchAt, due, cause
	return due, cause, true
}

// The causes of the passes waitsUntil put off (Status.PassCauses).
const (
	causeNodesBatched = "change: nodes, batched"
	causePaced        = "change: other nodes' allocations or slots, paced"
)
