package agent

import (
	"slices"
	"strings"

	"github.com/hivelet/hivelet/host/allocrunner"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// viewIndex is the pass's index of the fleet view by job: the other nodes'
// allocations and the deployments of each job, as keys into the view.
// Owned by the pass (under passMu).
//
// Invariant: when built, it holds exactly what a rebuild from the view of
// generation gen would hold. It is rebuilt from the view on a full pass, when
// the change log no longer reaches back to gen, and after a pass that
// refused to act (whose changes were read but not acted on); otherwise it is
// brought forward by the changes since gen, which also name the jobs an
// incremental pass must look at again.
type viewIndex struct {
	built  bool
	gen    uint64
	self   uint64                         // this node's record (nodeSig), as of gen
	nodes  uint64                         // counts the changes of the node set a reconcile reads (heartbeats are not)
	others map[string]*otherAllocs        // job key → other nodes' allocations
	deps   map[string]map[string]struct{} // job key → deployment keys
}

// otherAllocs are the other nodes' allocation keys of one job, each with
// its revision and value in the view (a pass of the steward lists the
// job's allocations from here, not by a lookup of each key in the view:
// a tenth of its pass at 1,000 nodes), and the sum of the revisions' mixes (the job
// signature's share), kept as keys come and go: a steward's pass reads the
// share on every change of the job's allocations, most of which it then
// puts off (stewardEvery), and a sum over every key of the job was a walk
// of the fleet per pass (a tenth of a 300-agent rollout's CPU).
type otherAllocs struct {
	keys map[string]otherAlloc
	sig  uint64
}

// otherAlloc is one key's revision and value in the view (values in a
// view are never modified: a change replaces them).
type otherAlloc struct {
	rev   uint64
	value *model.Allocation
}

func (ix *viewIndex) addOther(jk, key string, st wanted.AllocState) {
	o := ix.others[jk]
	if o == nil {
		o = &otherAllocs{keys: map[string]otherAlloc{}}
		ix.others[jk] = o
	}
	if old, ok := o.keys[key]; ok {
		o.sig -= mix(old.rev)
	}
	o.keys[key] = otherAlloc{rev: st.Revision, value: st.Value}
	o.sig += mix(st.Revision)
}

func (ix *viewIndex) removeOther(jk, key string) {
	o := ix.others[jk]
	if o == nil {
		return
	}
	if old, ok := o.keys[key]; ok {
		o.sig -= mix(old.rev)
		delete(o.keys, key)
	}
	if len(o.keys) == 0 {
		delete(ix.others, jk)
	}
}

func addKey(m map[string]map[string]struct{}, jk, key string) {
	s := m[jk]
	if s == nil {
		s = map[string]struct{}{}
		m[jk] = s
	}
	s[key] = struct{}{}
}

func removeKey(m map[string]map[string]struct{}, jk, key string) {
	if s := m[jk]; s != nil {
		delete(s, key)
		if len(s) == 0 {
			delete(m, jk)
		}
	}
}

// otherAllocJob is the job of another node's allocation under key, or ""
// when the key is this node's, malformed, or holds nothing in force.
func otherAllocJob(view *fleet.View, key, ownPrefix string) (string, wanted.AllocState) {
	if strings.HasPrefix(key, ownPrefix) {
		return "", wanted.AllocState{} // this node's allocations come from its runners
	}
	st, ok := view.Allocs.Get(key)
	if !ok || st.Value == nil || st.Absent {
		return "", wanted.AllocState{}
	}
	if _, _, ok := wanted.ParseAllocKey(key); !ok {
		return "", wanted.AllocState{}
	}
	return wanted.JobKey(st.Value.Namespace, st.Value.JobID), st
}

// deploymentJob is the job of the deployment under key, or "".
func deploymentJob(view *fleet.View, key string) string {
	st, ok := view.Deployments.Get(key)
	if !ok || st.Value == nil || st.Absent {
		return ""
	}
	// A deployment's key is its job's key and version (checked against the
	// record when it was decoded): the job key is a prefix of it.
	dot := strings.LastIndexByte(key, '.')
	if dot < 0 {
		return ""
	}
	return key[:dot]
}

// refresh brings the index to view. It returns the jobs whose view inputs
// changed since the last pass, or all = true when every job must be looked
// at (a rebuild, or a change that concerns every job: a node record other
// than a heartbeat, an intent, this node's own record, a bucket's first
// pull).
func (ix *viewIndex) refresh(src ViewSource, view *fleet.View, nodeID string, self uint64, full bool) (dirty map[string]bool, all bool) {
	ownPrefix := nodeID + "."
	var changes []fleet.Change
	ok := false
	if ix.built && !full && view.Generation >= ix.gen {
		changes, ok = src.ChangesSince(ix.gen, view.Generation)
	}
	if !ok {
		ix.others = map[string]*otherAllocs{}
		ix.deps = map[string]map[string]struct{}{}
		for k := range view.Allocs.All() {
			if jk, st := otherAllocJob(view, k, ownPrefix); jk != "" {
				ix.addOther(jk, k, st)
			}
		}
		for k := range view.Deployments.All() {
			if jk := deploymentJob(view, k); jk != "" {
				addKey(ix.deps, jk, k)
			}
		}
		ix.built, ix.gen, ix.self = true, view.Generation, self
		ix.nodes++
		return nil, true
	}
	all = self != ix.self
	dirty = map[string]bool{}
	mark := func(c fleet.Change) {
		for _, jk := range c.Jobs {
			if jk != "" {
				dirty[jk] = true
			}
		}
	}
	for _, c := range changes {
		if c.Key == "" {
			all = true // a bucket's first full pull
			continue
		}
		switch c.Kind {
		case fleet.KindNodes:
			if !c.HeartbeatOnly {
				ix.nodes++
				all = true
			}
		case fleet.KindIntents:
			all = true
		case fleet.KindJobs:
			mark(c)
		case fleet.KindAllocs:
			if strings.HasPrefix(c.Key, ownPrefix) {
				continue // this node's own writes: its runners are the truth
			}
			mark(c)
			ix.removeOther(c.Jobs[0], c.Key)
			ix.removeOther(c.Jobs[1], c.Key)
			if jk, st := otherAllocJob(view, c.Key, ownPrefix); jk != "" {
				ix.addOther(jk, c.Key, st)
			}
		case fleet.KindRollout:
			mark(c) // a slot taken or released: its job's admission moved
		case fleet.KindDeployments:
			mark(c)
			removeKey(ix.deps, c.Jobs[0], c.Key)
			removeKey(ix.deps, c.Jobs[1], c.Key)
			if jk := deploymentJob(view, c.Key); jk != "" {
				addKey(ix.deps, jk, c.Key)
			}
		}
	}
	ix.gen, ix.self = view.Generation, self
	return dirty, all
}

// baseSig is the share of every job's signature that the node set and this
// node's record make: it moves with any change a reconcile reads of them,
// not with heartbeats.
func (ix *viewIndex) baseSig() uint64 { return mix(ix.nodes) ^ ix.self }

// othersOf returns the other nodes' allocations of a job (their
// signature's share is othersSig).
func (ix *viewIndex) othersOf(jk string) []*model.Allocation {
	o := ix.others[jk]
	if o == nil {
		return nil
	}
	out := make([]*model.Allocation, 0, len(o.keys))
	for _, x := range o.keys {
		out = append(out, x.value)
	}
	return out
}

// othersSig is the sum of the mixes of the revisions of the other nodes'
// allocations of a job (the job signature's share), kept as they change.
func (ix *viewIndex) othersSig(jk string) uint64 {
	if o := ix.others[jk]; o != nil {
		return o.sig
	}
	return 0
}

// depsOf returns a job's deployments with their signature share.
func (ix *viewIndex) depsOf(view *fleet.View, jk string) ([]*model.Deployment, uint64) {
	return recordsOf(ix.deps[jk], view.Deployments)
}

// recordsOf returns the values of the view's records under keys, and the
// sum of their revisions' mixes.
func recordsOf[T any](keys map[string]struct{}, records fleet.Map[wanted.Record[T]]) ([]*T, uint64) {
	if len(keys) == 0 {
		return nil, 0
	}
	out := make([]*T, 0, len(keys))
	var sig uint64
	for k := range keys {
		st := records.At(k)
		out = append(out, st.Value)
		sig += mix(st.Revision)
	}
	return out, sig
}

// ownJobAddLocked records that allocation id of job key jk is this node's
// (a runner or a finished allocation). a.mu must be held.
func (a *Agent) ownJobAddLocked(jk, id string) {
	addKey(a.ownJobs, jk, id)
	delete(a.ownOrder, jk)
	a.ownEpoch++
}

// ownJobRemoveLocked forgets it. a.mu must be held.
func (a *Agent) ownJobRemoveLocked(jk, id string) {
	removeKey(a.ownJobs, jk, id)
	delete(a.ownOrder, jk)
	a.ownEpoch++
}

// ownOf returns this node's allocations of a job (live runners' snapshots
// and finished ones) in the reconciler's order: by name, then ID (all on
// this node), so that its input arrives sorted and a pass sorts nothing.
// The order is kept per job and rebuilt only when the job's set of
// allocations here changes (a name and an ID never change). Snapshots are
// taken with a.mu released: a pass over many runners does not hold the
// agent's lock while it waits on each runner's.
func (a *Agent) ownOf(jk string) []*model.Allocation {
	a.mu.Lock()
	ids := a.ownJobs[jk]
	if len(ids) == 0 {
		a.mu.Unlock()
		return nil
	}
	order, known := a.ownOrder[jk]
	epoch := a.ownEpoch
	if !known {
		order = make([]string, 0, len(ids))
		for id := range ids {
			order = append(order, id)
		}
	}
	runners := make([]*allocrunner.Runner, len(order))
	terminal := make([]*model.Allocation, len(order))
	for i, id := range order {
		if r := a.runners[id]; r != nil {
			runners[i] = r
		} else {
			terminal[i] = a.terminal[id]
		}
	}
	a.mu.Unlock()
	out := make([]*model.Allocation, 0, len(order))
	for i := range order {
		switch {
		case runners[i] != nil:
			out = append(out, runners[i].Snapshot())
		case terminal[i] != nil:
			out = append(out, terminal[i])
		}
	}
	if !known {
		slices.SortFunc(out, func(x, y *model.Allocation) int {
			if c := strings.Compare(x.Name, y.Name); c != 0 {
				return c
			}
			return strings.Compare(x.ID, y.ID)
		})
		sorted := make([]string, len(out))
		for i, al := range out {
			sorted[i] = al.ID
		}
		a.mu.Lock()
		if a.ownEpoch == epoch && len(sorted) == len(a.ownJobs[jk]) { // no add or remove meanwhile
			if a.ownOrder == nil {
				a.ownOrder = map[string][]string{}
			}
			a.ownOrder[jk] = sorted
		}
		a.mu.Unlock()
	}
	return out
}

// hasOwn reports whether this node holds any allocation of a job.
func (a *Agent) hasOwn(jk string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.ownJobs[jk]) > 0
}

// takeOwnDirty returns and clears the jobs whose allocations on this node
// changed (or whose written deployments did) since the last call.
func (a *Agent) takeOwnDirty() map[string]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := a.ownDirty
	a.ownDirty = map[string]bool{}
	return d
}
