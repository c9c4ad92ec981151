package fleet

import (
	"iter"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// View is a consistent, read-only snapshot of the buckets as this host has
// applied them. Maps are keyed by KV key; the records' values are shared
// between snapshots and must not be modified.
type View struct {
	// Generation increases with every change applied.
	Generation uint64
	// ChangeGeneration is the Generation of the last change that was not
	// a node's heartbeat alone: what a reader of anything but heartbeat
	// times (Rejections, for one) compares instead of Generation, which a
	// fleet's heartbeats move many times a second.
	ChangeGeneration uint64
	// Synced reports that every bucket has been pulled whole at least once.
	Synced bool
	Jobs   Map[wanted.JobState]
	// Nodes are the node records, each as of its last change that was not
	// a heartbeat: every field is current except the heartbeat's own
	// (HeartbeatAt, and the state's Revision, Applied and Time), which
	// NodeBeats holds for the records whose newer puts were heartbeats
	// alone. NodeState, NodesNewest, Node and NodeList read both. (A fleet's
	// heartbeats would otherwise copy parts of the map into every snapshot
	// taken after one.) Like the other kinds' Maps, a snapshot after a
	// node's change shares every part of the map the change did not touch:
	// copied whole, a thousand agents' registrations cost each agent a
	// thousand copies of a thousand records.
	Nodes Map[wanted.NodeState]
	// NodeBeats are the heartbeats applied since Nodes was copied, in the
	// order applied (a key may appear more than once: the last one is its
	// newest state). Snapshots share it (each holds a prefix of one log the
	// source only appends to), so a snapshot after a heartbeat costs no
	// copy; it is folded into Nodes once it is as long as Nodes.
	NodeBeats []NodeBeat
	// NodesCopy numbers the snapshots of Nodes a Source made: two
	// snapshots with the same NodesCopy share one Nodes, so what is derived
	// from Nodes alone need not be derived again (0: a View not made by a
	// Source).
	NodesCopy   uint64
	Intents     Map[wanted.IntentState]
	Allocs      Map[wanted.AllocState]
	Deployments Map[wanted.DeploymentState]
	// Slots are the update slots held now (rollout bucket), by key.
	Slots Map[wanted.SlotState]
	// Downs are the loss verdicts in force (rollout bucket), by key.
	Downs Map[wanted.VerdictState]
	// Summaries are the jobs' rollout summaries (rollout bucket), by key.
	Summaries Map[wanted.SummaryState]
	// Watched is, per kind watched through filters, the filters whose
	// pull is complete: the View holds every key matching one of them. A
	// kind absent from it is watched whole (see Watches).
	Watched map[string][]string
	// Revisions is the last revision applied per bucket kind.
	Revisions map[string]uint64

	rejected *rejectionsMemo // the Source's, shared by its snapshots
	// tally counts Nodes' records, kept by the Source as they are applied
	// (nil: a View not made by a Source; Tally counts).
	tally *NodeTally
}

// Tally counts the node records of Nodes (see NodeTally): the Source's
// count, kept as it applied them, or for a View made otherwise a count
// of Nodes whole.
func (v *View) Tally() NodeTally {
	if v.tally != nil {
		return *v.tally
	}
	return tallyOf(v.Nodes.All())
}

// View returns the current snapshot. It is cheap when nothing changed since
// the last call.
func (s *Source) View() *View {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap != nil {
		return s.snap
	}
	synced := true
	for _, k := range s.kinds {
		synced = synced && s.synced[k]
	}
	// A snapshot's maps are never written: a kind unchanged since the last
	// snapshot shares that snapshot's Map (most changes touch one bucket,
	// and an allocation status echo copies no part of the jobs and
	// deployments), and a changed kind's Map shares the parts of the last
	// one its changes did not touch (Map).
	v := &View{Generation: s.gen, ChangeGeneration: s.changeGen, Synced: synced, Revisions: maps.Clone(s.revs), rejected: &s.rejected}
	p := s.prev
	if p == nil {
		p = &View{}
	}
	v.Jobs = snapshotOf(s.stale[KindJobs] || s.prev == nil, &s.jobs, p.Jobs)
	switch {
	case s.stale[KindNodes] || s.prev == nil || len(s.beats) > s.nodes.Len()/nodeBeatsShare:
		// A change that is not a heartbeat, or heartbeats enough to be
		// worth folding in: the records at their newest (the parts written
		// since the last fold copied, the rest shared), and a new log
		// begins (the snapshots taken keep the old one).
		t := s.tally.clone()
		v.Nodes, v.tally = s.nodes.Snapshot(), &t
		s.nodesCopy++
		v.NodesCopy = s.nodesCopy
		s.beats = nil
	case s.beatsStale:
		// The log as it stands, capped: the source's later appends land
		// past this snapshot's end.
		v.Nodes, v.tally, v.NodeBeats, v.NodesCopy = p.Nodes, p.tally, s.beats[:len(s.beats):len(s.beats)], p.NodesCopy
	default:
		v.Nodes, v.tally, v.NodeBeats, v.NodesCopy = p.Nodes, p.tally, p.NodeBeats, p.NodesCopy
	}
	s.beatsStale = false
	v.Intents = snapshotOf(s.stale[KindIntents] || s.prev == nil, &s.intents, p.Intents)
	v.Allocs = snapshotOf(s.stale[KindAllocs] || s.prev == nil, &s.allocs, p.Allocs)
	v.Deployments = snapshotOf(s.stale[KindDeployments] || s.prev == nil, &s.deps, p.Deployments)
	v.Slots = snapshotOf(s.stale[KindRollout] || s.prev == nil, &s.slots, p.Slots)
	v.Downs = snapshotOf(s.stale[KindRollout] || s.prev == nil, &s.downs, p.Downs)
	v.Summaries = snapshotOf(s.stale[KindRollout] || s.prev == nil, &s.sums, p.Summaries)
	v.Watched = s.watchedLocked()
	clear(s.stale)
	s.snap, s.prev = v, v
	return v
}

// nodeBeatsShare bounds the heartbeats a snapshot holds beside its node
// records: past len(Nodes)/nodeBeatsShare they are folded in (the records
// copied whole once). A snapshot shares the log, so a longer one costs
// only the readers of heartbeat times (NodeState scans it).
const nodeBeatsShare = 1

// NodeBeat is one heartbeat applied: the node key and its state after it.
type NodeBeat struct {
	Key   string
	State wanted.NodeState
}

// NodesNewest yields every node key with its state at its newest revision
// (Nodes with NodeBeats laid over it).
func (v *View) NodesNewest() iter.Seq2[string, wanted.NodeState] {
	return func(yield func(string, wanted.NodeState) bool) {
		var newest map[string]wanted.NodeState
		if len(v.NodeBeats) > 0 {
			newest = make(map[string]wanted.NodeState, len(v.NodeBeats))
			for _, b := range v.NodeBeats {
				newest[b.Key] = b.State
			}
		}
		for k, st := range v.Nodes.All() {
			if b, ok := newest[k]; ok {
				st = b
			}
			if !yield(k, st) {
				return
			}
		}
	}
}

// NodeState returns the state of one node key, at its newest revision
// (heartbeats included).
func (v *View) NodeState(key string) (wanted.NodeState, bool) {
	for i := len(v.NodeBeats) - 1; i >= 0; i-- {
		if v.NodeBeats[i].Key == key {
			return v.NodeBeats[i].State, true
		}
	}
	return v.Nodes.Get(key)
}

// snapshotOf is a snapshot's Map of one bucket: cur's when it changed
// since the previous snapshot, else the previous snapshot's.
func snapshotOf[V any](changed bool, cur *mapBuilder[V], prev Map[V]) Map[V] {
	if changed {
		return cur.Snapshot()
	}
	return prev
}

// Watches reports whether the View holds every key of kind that filter
// matches: the kind is watched whole, or filter is one of its watched
// filters whose pull is complete (sorted: a pass asks once per job).
func (v *View) Watches(kind, filter string) bool {
	w, filtered := v.Watched[kind]
	if !filtered {
		return true
	}
	_, ok := slices.BinarySearch(w, filter)
	return ok
}

// Job returns the state of one job key.
func (v *View) Job(namespace, id string) (wanted.JobState, bool) {
	return v.Jobs.Get(wanted.JobKey(namespace, id))
}

// Node returns a node as the fleet sees it (down once its heartbeat entry is
// gone), or nil.
func (v *View) Node(id string) *model.Node {
	st, ok := v.NodeState(wanted.NodeKey(id))
	if !ok {
		return nil
	}
	return wanted.NodeView(st)
}

// NodeList returns every known node (down ones included), sorted by ID.
func (v *View) NodeList() []*model.Node {
	out := make([]*model.Node, 0, v.Nodes.Len())
	for _, st := range v.NodesNewest() {
		if n := wanted.NodeView(st); n != nil {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Intent returns the operator intent in force for a node.
func (v *View) Intent(nodeID string) wanted.Intent {
	st, _ := v.Intents.Get(wanted.NodeKey(nodeID))
	return wanted.IntentOf(st)
}

// AllocsOf returns the last good status record of a node's allocations
// whose keys are present, sorted by ID.
func (v *View) AllocsOf(nodeID string) []*model.Allocation {
	var out []*model.Allocation
	for k, st := range v.Allocs.All() {
		if n, _, ok := wanted.ParseAllocKey(k); ok && n == nodeID && st.Value != nil && !st.Absent {
			out = append(out, st.Value)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Deployment returns a deployment with its revision (for UpdateDeployment).
func (v *View) Deployment(namespace, jobID string, version uint64) (*model.Deployment, uint64, bool) {
	st, ok := v.Deployments.Get(wanted.DeploymentKey(namespace, jobID, version))
	if !ok || st.Value == nil || st.Absent {
		return nil, 0, false
	}
	return st.Value, st.Revision, true
}

// Rejections returns every rejection currently in force, sorted by bucket
// and key.
func (v *View) Rejections() []wanted.Rejection {
	var out []wanted.Rejection
	out = memoMapRejections(out, v.rejected, KindJobs, v.Jobs)
	out = memoMapRejections(out, v.rejected, KindNodes, v.Nodes)
	out = memoMapRejections(out, v.rejected, KindIntents, v.Intents)
	out = memoMapRejections(out, v.rejected, KindAllocs, v.Allocs)
	out = memoMapRejections(out, v.rejected, KindDeployments, v.Deployments)
	out = memoMapRejections(out, v.rejected, KindRollout+"/slots", v.Slots)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bucket != out[j].Bucket {
			return out[i].Bucket < out[j].Bucket
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// appendRejectionsOf appends the rejection in force of each record of seq.
func appendRejectionsOf[T any](out []wanted.Rejection, seq iter.Seq2[string, wanted.Record[T]]) []wanted.Rejection {
	for _, st := range seq {
		if st.Rejection != nil {
			out = append(out, *st.Rejection)
		}
	}
	return out
}

// rejectionsMemo keeps, per kind and per part of its Map, the rejections
// found in the part last walked: a snapshot shares an unchanged kind's
// Map with the one before, and a changed Map shares most of its parts (a
// heartbeat does not change the nodes'), so a part is walked again only
// once it is another. One Source's snapshots share one memo.
type rejectionsMemo struct {
	mu    sync.Mutex
	parts map[string]*partRejections
}

type partRejections struct {
	id  [mapShards]uint64 // the parts walked (mapParts.id)
	out [mapShards][]wanted.Rejection
}

// memoMapRejections appends the rejections of m's records to out,
// walking only the parts of m that are not the parts last walked for kind
// (a nil r walks every part).
func memoMapRejections[T any](out []wanted.Rejection, r *rejectionsMemo, kind string, m Map[wanted.Record[T]]) []wanted.Rejection {
	if m.p == nil {
		return out
	}
	if r == nil {
		return appendRejectionsOf(out, m.All())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	pr := r.parts[kind]
	if pr == nil {
		if r.parts == nil {
			r.parts = map[string]*partRejections{}
		}
		pr = &partRejections{}
		r.parts[kind] = pr
	}
	for i, part := range &m.p.part {
		id := m.p.id[i]
		if id == 0 {
			continue // no key hashed to it
		}
		// A part is never written once a snapshot holds it (mapBuilder
		// copies it first, under a new ID).
		if pr.id[i] != id {
			pr.id[i], pr.out[i] = id, appendRejectionsOf(nil, maps.All(part))
		}
		out = append(out, pr.out[i]...)
	}
	return out
}

// Orphaned returns the keys of jobs whose key is gone while a last good
// version is held (their allocations keep running), sorted.
func (v *View) Orphaned() []string {
	var out []string
	for k, st := range v.Jobs.All() {
		if wanted.OrderFor(st) == wanted.OrderKeep {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// LostSince maps each node with a loss verdict in force to the verdict's
// "down since" (the earliest, when it has several): the server time its
// heartbeat key expired, kept after the expiry's marker is gone.
func (v *View) LostSince() map[string]time.Time {
	out := map[string]time.Time{}
	for _, st := range v.Downs.All() {
		if d := st.Value; d != nil && !st.Absent && (out[d.Node].IsZero() || d.DownSince.Before(out[d.Node])) {
			out[d.Node] = d.DownSince
		}
	}
	return out
}
