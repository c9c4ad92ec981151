package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	hostnode "github.com/hivelet/hivelet/host/node"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/host/rollout"
	"github.com/hivelet/hivelet/host/wanted"
)

// The loop around the rollout core (host/rollout): read the facts, call
// rollout.Decide, carry out what it licenses in the pass (starts and stops
// are this node's alone), and hand the shared writes (record CASes, slot
// takes and releases, a revert) to the rollout worker, which re-runs the
// core's transition on the record each CAS reads. Nothing here decides a
// rule of the protocol.

// DeploymentWriter is the shared-record side of the fleet (fleet.Store):
// deployment records by compare-and-set, update slots by
// create-if-absent/delete-at-revision, and the job versions a revert needs.
type DeploymentWriter interface {
	CreateDeployment(ctx context.Context, d *model.Deployment) (*model.Deployment, uint64, bool, error)
	ModifyDeployment(ctx context.Context, namespace, jobID string, version uint64, attempts int,
		decide func(cur model.Deployment) (*model.Deployment, error)) (*model.Deployment, uint64, error)
	GetDeployment(ctx context.Context, namespace, jobID string, version uint64) (*model.Deployment, uint64, error)
	// GetDeploymentFromLeader reads the record through the stream's leader
	// (T5's re-read after a slot take).
	GetDeploymentFromLeader(ctx context.Context, namespace, jobID string, version uint64) (*model.Deployment, error)
	TakeSlot(ctx context.Context, key string, s model.Slot, ttl time.Duration) (uint64, error)
	ReleaseSlot(ctx context.Context, key string, rev uint64) error
	// GetSlot reads one slot (an own take whose answer was lost).
	GetSlot(ctx context.Context, key string) (*model.Slot, uint64, error)
	GetJobVersion(ctx context.Context, namespace, jobID string, version uint64) (*model.Job, error)
	UpdateJob(ctx context.Context, j *model.Job, rev uint64) (uint64, error)
	CreateVerdict(ctx context.Context, key string, v model.LossVerdict) error
	DeleteVerdict(ctx context.Context, key string, rev uint64) error
	PutSummary(ctx context.Context, s *model.RolloutSummary) error
}

// policyDeadline bounds one policy decision asked by the loop, from
// waiting for a pool instance to the answer; past it the engine answers
// with its native default.
const policyDeadline = 2 * time.Second

// rolloutWork is one job's shared writes from one pass.
type rolloutWork struct {
	job    *model.Job
	jobRev uint64
	dec    rollout.Decision
	facts  rollout.Facts
}

// verdictEvery is how long a steward whose only work is the completion
// verdict waits before asking it again when nothing the job reads has
// changed (a change asks at once): how late a deadline the policy reads
// the clock for may be found.
const verdictEvery = time.Second

// deputyEvery is how often at most a deputy with nothing to do derives
// its steward's duties again when only other nodes' allocations or slots
// changed (pass): a duty the steward leaves undone is seen at most that
// much after it appears, and taken over DeputyStepFor(rank) after that.
// At a quarter of DeputyStep (until 2026-12-07) each of the two deputies
// of a 1,000-agent rollout took 1.0-1.5 % of a core, 30-45 times a median
// agent, deciding twice a second (BENCHMARKS.md, "The steward's and
// deputies' pace").
const deputyEvery = rollout.DeputyStep / 2

// stewardEvery is how often at most a steward with nothing of its own to
// do (no update of its own, nothing held) decides its job again when only
// other nodes' allocations or slots changed, while the slot handoff is in
// force (every live node at rollout.HandoffProtocol) and every group's
// progress clock has started (clocksStarted: T6 starts it with the first
// slot taken, at once). Admission then no
// longer waits for the steward: a released slot's queued waiter is told
// by its holder. What the steward derives from those changes (a summary,
// written at most once a second after rollout.SummarySettle; the
// coalesced progress; the completion verdict; the reclaim of a slot whose
// holder has not released it) may come that much later. With the handoff
// a rollout's takes and releases no longer come in waves a summary apart
// but one by one, and a steward deciding at each of them passed twice as
// often as before (57-79 passes a second at 300 agents against 33-36, 6-8 %
// of a core against 3 %: BENCHMARKS.md, "The slot handoff"). At 200 ms
// (until 2026-12-07) a 1,000-agent steward still made 120-160 decisions
// of 3-4 ms each per rollout (1.8-2.2 % of a core); at 500 ms it makes
// about half as many, and the rollout's pace did not change (the summary
// is written at most once a second anyway): BENCHMARKS.md, "The steward's
// and deputies' pace".
const stewardEvery = 500 * time.Millisecond

// deputyDecision is an idle deputy's (or a handoff steward's) last
// decision of a job: its signature without the other nodes' allocations
// and slots, when, and how long a change of those alone waits.
type deputyDecision struct {
	quiet uint64
	at    time.Time
	every time.Duration
}

// verdictAlone reports whether w's only write is the completion verdict.
func verdictAlone(w rolloutWork) bool {
	w.dec.Verdict = false
	return w.empty()
}

func (w rolloutWork) empty() bool {
	d := w.dec
	return d.Create == nil && len(d.Transitions) == 0 && !d.Verdict && len(d.Takes) == 0 &&
		len(d.Releases) == 0 && len(d.Reclaims) == 0 && d.Revert == nil && d.CanaryReplace == nil && d.Summary == nil
}

// narrowing reports whether this agent's allocation watch is narrowed
// (under passMu).
func (a *Agent) narrowing() bool { return a.narrowNow }

// narrowFor reports whether this agent decides job without the other
// nodes' allocations of it (rollout.Facts.Narrow): its watch is filtered
// and does not hold the job's allocations, so admission ranks it by the
// summary alone.
func (a *Agent) narrowFor(view *fleet.View, job *model.Job) bool {
	return a.filtered() && !view.Watches(fleet.KindAllocs, wanted.AllocJobFilter(job.Namespace, job.ID))
}

// filtered reports whether this agent's source filters its allocation
// watch (narrowed now, or widening again): a job's other allocations are
// then in view only where View.Watches says so.
func (a *Agent) filtered() bool {
	_, ok := a.cfg.Source.(filterSource)
	return ok && !a.cfg.WatchAllAllocs
}

// decideNarrowing narrows the allocation watch when the fleet has more
// live nodes than Config.NarrowAbove, and widens it again at or below.
func (a *Agent) decideNarrowing(view *fleet.View) {
	if !a.filtered() {
		a.narrowNow = false
		return
	}
	limit := a.cfg.NarrowAbove
	if limit == 0 {
		limit = DefaultNarrowAbove
	}
	tally := view.Tally()
	older := false
	for level := range tally.ProtocolsBut(view.Nodes.At(wanted.NodeKey(a.nodeID))) {
		// A node that writes no summary may be a steward: the nodes it
		// would leave without one could never be admitted.
		older = older || level < rollout.SummaryProtocol
	}
	live := tally.Live
	a.narrowNow = !older && (limit < 0 || live > limit)
}

// fleetCountStale reports whether the fleet must be counted again for
// decideNarrowing, countFleet and anyNodeExpired: whether the view's node
// records are another snapshot than at the last count (View.NodesCopy).
// Each of the three reads the records' tally (View.Tally: counted by the
// source as it applies them, not walked) and this node's own record,
// which a heartbeat does not change (heartbeats are kept beside them).
// A View not made by a Source (NodesCopy 0) is always counted.
func (a *Agent) fleetCountStale(view *fleet.View) bool {
	stale := view.NodesCopy == 0 || view.NodesCopy != a.fleetCountCopy
	a.fleetCountCopy = view.NodesCopy
	return stale
}

// countFleet counts the fleet for the heartbeat's liveness plan
// (node.Liveness): the live nodes, whether each writes a TTL of its own
// (rollout.BeatProtocol), and the longest TTL a live record says it was
// written with.
func (a *Agent) countFleet(view *fleet.View) {
	tally := view.Tally()
	f := hostnode.FleetFacts{Grow: true, Counted: true, Live: tally.Live}
	lowest := rollout.HandoffProtocol // this agent's own level
	for level := range tally.ProtocolsBut(view.Nodes.At(wanted.NodeKey(a.nodeID))) {
		lowest = min(lowest, level)
		f.Grow = f.Grow && level >= rollout.BeatProtocol
	}
	for ttl := range tally.TTLs {
		f.MaxTTL = max(f.MaxTTL, ttl.D())
	}
	a.fleetLevel = lowest
	a.mu.Lock()
	a.fleetFacts = f
	a.mu.Unlock()
}

// Fleet is the fleet as the last pass counted it, for the heartbeat's
// liveness plan (node.Liveness.Fleet).
func (a *Agent) Fleet() hostnode.FleetFacts {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fleetFacts
}

// nodeTTL is the node TTL in force (Config.LiveTTL, else NodeTTL).
func (a *Agent) nodeTTL() time.Duration {
	if a.cfg.LiveTTL != nil {
		if d := a.cfg.LiveTTL(); d > 0 {
			return d
		}
	}
	return a.cfg.NodeTTL
}

// setFilters tells the source what to watch. Narrowed: of the
// allocations, this node's and those of the jobs it watches on every
// node; of the rollout bucket, the loss verdicts, the summaries and the
// slots of the jobs whose slots it needs (slotJobs: a steward candidate,
// or a first look after a restart). Not narrowing: both
// buckets whole. Called with passMu held, or before the loop runs.
func (a *Agent) setFilters() {
	fs, ok := a.cfg.Source.(filterSource)
	if !ok || a.cfg.WatchAllAllocs {
		return
	}
	var allocs, roll []string
	if a.narrowNow {
		allocs = []string{wanted.AllocKeyPrefix(a.nodeID)}
		for k, on := range a.watchJobs {
			if ns, id, ok := strings.Cut(k, "."); on && ok {
				allocs = append(allocs, wanted.AllocJobFilter(ns, id))
			}
		}
		roll = []string{wanted.DownFilter, wanted.SummaryFilter}
		for k, on := range a.slotJobs {
			if ns, id, ok := strings.Cut(k, "."); on && ok {
				roll = append(roll, wanted.SlotFilter(ns, id))
			}
		}
		if manyJobFilters(&a.allocsWide, len(allocs)-1) {
			allocs = nil
		}
		if manyJobFilters(&a.rolloutWide, len(roll)-2) {
			roll = nil
		}
	}
	setKind(fs, fleet.KindAllocs, &a.watchFilters, allocs)
	setKind(fs, fleet.KindRollout, &a.rolloutFilters, roll)
}

// A watch's consumer is made again with every filter it has on each
// change of them, and the server checks each filter against every other
// one as it makes it: 482 filters took it 31-37 ms here (a node stewarding
// 480 jobs on a narrowed fleet, per new job). A kind narrowed to more
// jobs than maxJobFilters is watched whole instead, until its jobs are
// reJobFilters or fewer again: watching every key costs such a node
// deliveries of the jobs it does not need (few, in a fleet where one node
// stewards that many jobs), and a whole watch is never wrong to read.
const (
	maxJobFilters = 64
	reJobFilters  = 32
)

// manyJobFilters reports whether a kind with n per-job filters is watched
// whole, with hysteresis (*wide: it was).
func manyJobFilters(wide *bool, n int) bool {
	if *wide {
		*wide = n > reJobFilters
	} else {
		*wide = n > maxJobFilters
	}
	return *wide
}

// setKind sets one kind's filters when they differ from those last set
// (*last; nil: the whole bucket, which is also where a source starts).
func setKind(fs filterSource, kind string, last *[]string, want []string) {
	slices.Sort(want)
	if slices.Equal(want, *last) {
		return
	}
	*last = want
	fs.SetFilters(kind, want)
}

// summaryOf is the job's rollout summary: the view's, or the one this
// agent wrote last while the view does not show it yet (a later summary
// by time).
func (a *Agent) summaryOf(view *fleet.View, jobKey, ns, jobID string) (*model.RolloutSummary, uint64) {
	st := view.Summaries.At(wanted.SummaryKey(ns, jobID))
	s := st.Value
	if st.Absent {
		s = nil
	}
	a.mu.Lock()
	mine := a.sumWritten[jobKey]
	if mine != nil && s != nil && !s.Time.Before(mine.Time) {
		delete(a.sumWritten, jobKey) // the view has it (or a newer one)
		mine = nil
	}
	a.mu.Unlock()
	if mine != nil {
		return mine, mix(uint64(mine.Time.UnixNano()))
	}
	return s, mix(st.Revision)
}

func nonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// heldSlot is a slot this agent holds, as it took it (or as its view
// showed it held by this node): a narrowed node that watches no slot key
// knows its own slots from here alone. until, when set, is the end of the
// slot's TTL counted from before its Create (after it the server has
// removed the key, and the slot licenses nothing any more); seen says a
// view that watched the job's slots has shown it.
type heldSlot struct {
	s     rollout.Slot
	until time.Time
	seen  bool
}

// slotsOf returns the job's slots and their share of the job's signature:
// this agent's own, from its memory, and, when the view watches the job's
// slot keys, every other node's from the view (an unwatched filter's
// leftovers are never read). Its releases the view still shows are
// removed. A slot of its own that a watching view showed and no longer
// shows was reclaimed or expired: it is forgotten. The second result says
// whether the view watches the slots (else the facts hold only this
// node's: rollout.Facts.OwnSlotsOnly).
func (a *Agent) slotsOf(view *fleet.View, ns, jobID string) ([]rollout.Slot, uint64, bool) {
	prefix := wanted.SlotPrefix(ns, jobID)
	watched := view.Watches(fleet.KindRollout, wanted.SlotFilter(ns, jobID))
	// Sized for the slots in view, up to 128 (a job's are at most its
	// groups' max_parallel; a node watching every job's holds more): a
	// steward's pass, on each slot change, grew the list from empty, and
	// the copies of its large elements were most of this call
	// (BENCHMARKS.md, "The steward's decision").
	var out []rollout.Slot
	var sig uint64
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if watched {
		out = make([]rollout.Slot, 0, min(view.Slots.Len(), 128)+len(a.slotsHeld))
	}
	inView := map[string]bool{}
	for k, st := range view.Slots.All() {
		if !watched || !strings.HasPrefix(k, prefix) || st.Value == nil || st.Absent {
			continue
		}
		if rev, gone := a.slotsGone[k]; gone && rev >= st.Revision {
			continue
		}
		if rev, going := a.slotsReleasing[k]; going && rev >= st.Revision {
			continue // queued for release: no later pass acts on it
		}
		inView[k] = true
		sl := rollout.Slot{Key: k, Revision: st.Revision, Time: st.Time, Slot: *st.Value}
		out = append(out, sl)
		sig += mix(st.Revision ^ hashString(k))
		if st.Value.Holder == a.nodeID {
			h := a.slotsHeld[k]
			if h.s.Revision != st.Revision {
				h.until = time.Time{} // not the take remembered: its TTL is unknown here
			}
			h.s, h.seen = sl, true
			a.slotsHeld[k] = h
		}
	}
	for k, h := range a.slotsHeld {
		if !strings.HasPrefix(k, prefix) || inView[k] {
			continue
		}
		if !h.until.IsZero() && now.After(h.until) {
			delete(a.slotsHeld, k) // the server removed it at its TTL
			continue
		}
		if watched && h.seen {
			delete(a.slotsHeld, k) // shown, and gone since: reclaimed or expired
			continue
		}
		if rev, gone := a.slotsGone[k]; gone && rev >= h.s.Revision {
			continue
		}
		if rev, going := a.slotsReleasing[k]; going && rev >= h.s.Revision {
			continue
		}
		out = append(out, h.s)
		sig += mix(h.s.Revision ^ hashString(k))
	}
	slices.SortFunc(out, func(x, y rollout.Slot) int { return strings.Compare(x.Key, y.Key) })
	return out, sig, watched
}

// forgetGoneSlots drops release marks the view has caught up with.
func (a *Agent) forgetGoneSlots(view *fleet.View) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, rev := range a.slotsGone {
		if st, ok := view.Slots.Get(k); !ok || st.Absent || st.Revision > rev {
			delete(a.slotsGone, k)
		}
	}
}

// rolloutFacts builds the core's facts for one job from the pass's view.
func (a *Agent) rolloutFacts(job *model.Job, self *model.Node, view *fleet.View, own, others []*model.Allocation,
	deps []*model.Deployment, slots []rollout.Slot, plan *reconcile.Plan, now time.Time) rollout.Facts {
	f := rollout.Facts{
		Self: a.nodeID, BootID: a.bootID, Job: job, Plan: plan, Slots: slots,
		Now: a.serverNow(now), NodeTTL: a.nodeTTL(), Nonce: nonce(), FleetProtocol: a.fleetLevel,
		InPlace: map[string]bool{}, FailedHere: map[string]bool{},
	}
	for _, d := range deps {
		if d != nil && d.JobID == job.ID && d.Namespace == job.Namespace {
			f.Records = append(f.Records, rollout.Record{D: d})
		}
	}
	slices.SortFunc(f.Records, func(x, y rollout.Record) int { return int(x.D.JobVersion) - int(y.D.JobVersion) })
	f.Allocs = append(f.Allocs, own...)
	f.Narrow = a.narrowFor(view, job)
	if !f.Narrow {
		for _, al := range others {
			if al != nil && al.NodeID != a.nodeID {
				f.Allocs = append(f.Allocs, al)
			}
		}
	}
	f.Summary, _ = a.summaryOf(view, wanted.JobKey(job.Namespace, job.ID), job.Namespace, job.ID)
	a.noticeOwnSummarySlots(f.Summary)
	f.Released, _ = a.releasedFor(job)
	f.Nodes, f.Index = a.nodeFacts.nodes(job, self, view, f.Allocs, a.changeLog())
	for _, e := range plan.Place {
		if a.failedHere(e.PreviousAllocID, job.Version) {
			f.FailedHere[e.PreviousAllocID] = true
		}
	}
	a.mu.Lock()
	for _, e := range plan.Update {
		if r := a.runners[e.AllocID]; r != nil && tasksEqual(groupOf(r.Job(), e.Group), groupOf(job, e.Group)) {
			f.InPlace[e.AllocID] = true
		}
	}
	seenKey := fmt.Sprintf("%s@%d", wanted.JobKey(job.Namespace, job.ID), job.Version)
	first, ok := a.firstSeen[seenKey]
	if !ok {
		first = now
		a.firstSeen[seenKey] = now
	}
	f.SinceSeen = now.Sub(first)
	f.Overdue = map[string]time.Duration{}
	for k, t := range a.dueSince[wanted.JobKey(job.Namespace, job.ID)] {
		f.Overdue[k] = now.Sub(t)
	}
	a.mu.Unlock()
	f.ReconnectedAt = a.guardSince()
	return f
}

// nodeDerived is what the rollout facts take from a node's record and the
// job alone.
type nodeDerived struct {
	job             *model.Job
	sig             string // the job's scopeSig: a job with the same one derives the same
	rec             *model.Node
	scope, eligible bool
	ready           bool // eligible, ready and every driver of the job healthy (live aside)
}

func derive(job *model.Job, n *model.Node) nodeDerived {
	f := nodeDerived{job: job, rec: n, scope: inScope(job, n)}
	f.eligible = f.scope && n.Eligibility != model.Ineligible && n.Drain == nil
	f.ready = f.eligible && n.Ready() && driversOK(job, n)
	return f
}

func (f nodeDerived) node(n *model.Node, live bool, expired time.Time) rollout.Node {
	// DownSince is its last expiry, also when it is back (the disruption
	// guard counts it).
	return rollout.Node{ID: n.ID, Live: live, Eligible: f.eligible, Protocol: n.RolloutProtocol, Record: n,
		Ready: f.ready && live, DownSince: expired}
}

// nodeFactsCache keeps, per node, its nodeDerived and the fleet's node keys in
// order, for the rollout facts: they take every node of the fleet on every
// pass, and with a thousand nodes deriving each one's scope and drivers
// again and sorting the fleet was a sixth of an agent's CPU (BENCHMARKS.md,
// "1,000 agents"). An entry holds while its job and record are the same
// values: the view replaces a record or a job that changed, never edits
// it. The order holds while the fleet's key set is the one it sorted.
type nodeFactsCache struct {
	mu    sync.Mutex
	facts map[string]nodeDerived
	order []string
	// lists are the last node list built per job key, patched from the
	// source's change log while only node records changed (nodeList).
	lists map[string]*nodeList
	// scopes are the jobs' scopeSigs.
	scopes scopeMemo
	// patches counts the lists patched from the log, reused the lists
	// handed out again unchanged (tests).
	patches, reused uint64
}

// nodeList is the last node list built for one job, with what it was built
// from. While the job, self's ID, the nodes carrying allocations and the loss
// verdicts are the same, and the change log since gen names only node keys
// the list already places (pos: a key's index in rows, -1 for a key left
// out), the list is patched at those keys instead of rebuilt: a pass of a
// thousand-node fleet no longer walks every node record (with a thousand
// agents on two cores the walk was a sixth of all CPU, most of it memory
// stalls on other nodes' records: BENCHMARKS.md, "1,000 agents, 2026-12-03").
type nodeList struct {
	gen      uint64
	job      *model.Job
	sig      string // job's scopeSig
	selfID   string
	carrying map[string]bool
	down     map[string]time.Time
	rows     []rollout.Node // without self (its record is built anew each pass)
	pos      map[string]int
	// out is the last list handed out (rows with self in its place, never
	// modified once handed out), its index, and the self row it holds:
	// handed out again while no row changed and self's row is the same
	// (sameRow). A pass of a large fleet then copies no list, builds no
	// index and hashes no node: heartbeats change none of them.
	out  []rollout.Node
	idx  *rollout.NodeIndex
	self rollout.Node
}

// sameRow reports whether two rollout nodes say the same: every field
// equal, and their records the same or differing in the heartbeat time
// alone (what the daemon changes each time it builds self's record, and
// nothing a decision reads).
func sameRow(a, b rollout.Node) bool {
	ra, rb := a.Record, b.Record
	a.Record, b.Record = nil, nil
	if a != b {
		return false
	}
	if ra == nil || rb == nil {
		return ra == rb
	}
	return model.SameButHeartbeat(ra, rb)
}

// changeLog is the part of the view source the node list is patched from.
type changeLog interface {
	ChangesSince(from, to uint64) ([]fleet.Change, bool)
}

func (c *nodeFactsCache) fact(job *model.Job, sig string, n *model.Node) nodeDerived {
	if f, ok := c.facts[n.ID]; ok && f.rec == n && (f.job == job || f.sig == sig) {
		return f
	}
	f := derive(job, n)
	f.sig = sig
	c.facts[n.ID] = f
	return f
}

// row is the rollout node of the record st under key k, and whether the
// list includes it (a record in force, not self's, in the job's scope or
// carrying one of its allocations).
func (c *nodeFactsCache) row(job *model.Job, sig, selfID string, st wanted.NodeState, carrying map[string]bool, downSince map[string]time.Time) (rollout.Node, bool) {
	n := st.Value
	if n == nil || n.ID == selfID {
		return rollout.Node{}, false
	}
	nf := c.fact(job, sig, n)
	if !nf.scope && !carrying[n.ID] {
		return rollout.Node{}, false
	}
	expired := st.Expired
	if st.Absent && expired.IsZero() {
		expired = downSince[n.ID] // the verdict remembers the expiry this agent did not see
	}
	rn := nf.node(n, !st.Absent, expired)
	if st.Absent {
		rn.LostSince = downSince[n.ID] // zero without a verdict
	}
	return rn, true
}

// nodes is the rollout facts' nodes for job, sorted by ID: every node of
// the view in the job's scope or carrying one of allocs, and self (live).
// With src (nil: always rebuilt, and no index) the last list of the job is
// patched from the change log when it can be (nodeList), and handed out
// again with its index while nothing in it changed. The slice is shared
// and read-only: neither the caller nor a later call modifies it.
func (c *nodeFactsCache) nodes(job *model.Job, self *model.Node, view *fleet.View, allocs []*model.Allocation, src changeLog) ([]rollout.Node, *rollout.NodeIndex) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.facts == nil || len(c.facts) > 2*view.Nodes.Len()+16 {
		c.facts = make(map[string]nodeDerived, view.Nodes.Len()) // forget the nodes gone
	}
	jk := wanted.JobKey(job.Namespace, job.ID)
	sig := c.scopes.of(job)
	// Sized as the last list's: a steward's set is the fleet's, and
	// growing it from empty on each decision was most of this call.
	size := 0
	if l := c.lists[jk]; l != nil {
		size = len(l.carrying)
	}
	carrying := make(map[string]bool, size)
	for _, al := range allocs {
		carrying[al.NodeID] = true
	}
	downSince := view.LostSince()
	var rows []rollout.Node
	l := c.lists[jk]
	if l != nil && src != nil && (l.job == job || l.sig == sig) && l.selfID == self.ID && view.Generation >= l.gen &&
		maps.Equal(l.carrying, carrying) && maps.Equal(l.down, downSince) && c.patch(l, job, view, src) {
		// A new version of the job with the scope of the last one (scopeSig)
		// keeps the list: no row reads the job but through its scope.
		l.job = job
		rows = l.rows
	} else {
		l = nil
		var keys map[string]int
		rows, keys = c.build(job, sig, self.ID, view, carrying, downSince)
		if c.lists == nil {
			c.lists = map[string]*nodeList{}
		}
		delete(c.lists, jk)
		if keys != nil && src != nil {
			if len(c.lists) >= 64 {
				clear(c.lists) // jobs gone; the next pass of each rebuilds once
			}
			l = &nodeList{gen: view.Generation, job: job, sig: sig, selfID: self.ID, carrying: carrying, down: downSince, rows: rows, pos: keys}
			c.lists[jk] = l
		}
	}
	// Self, live, in its place by ID.
	sf := derive(job, self).node(self, true, time.Time{})
	if l != nil && l.out != nil && sameRow(l.self, sf) {
		c.reused++
		return l.out, l.idx
	}
	i, _ := slices.BinarySearchFunc(rows, sf, func(x, y rollout.Node) int { return strings.Compare(x.ID, y.ID) })
	out := make([]rollout.Node, 0, len(rows)+1)
	out = append(out, rows[:i]...)
	out = append(out, sf)
	out = append(out, rows[i:]...)
	if l == nil {
		return out, nil
	}
	l.out, l.idx, l.self = out, rollout.NewNodeIndex(out), sf
	return l.out, l.idx
}

// patch brings l to view from the change log: it reports false (rebuild)
// when the log does not reach back, names a bucket-wide change of the
// nodes, a key gone or new, or a record that enters or leaves the list or
// changes its ID.
func (c *nodeFactsCache) patch(l *nodeList, job *model.Job, view *fleet.View, src changeLog) bool {
	if view.Generation == l.gen {
		return true
	}
	changes, ok := src.ChangesSince(l.gen, view.Generation)
	if !ok {
		return false
	}
	for _, ch := range changes {
		if ch.Kind != fleet.KindNodes || ch.HeartbeatOnly && ch.Key != "" {
			// A heartbeat changes nothing of a row but the record's
			// heartbeat time (sameRow): the row stands. A later change of
			// the key that is not a heartbeat reads the record in view.
			continue
		}
		p, known := l.pos[ch.Key]
		st, present := view.Nodes.Get(ch.Key)
		if ch.Key == "" || !known || !present {
			return false
		}
		rn, in := c.row(job, l.sig, l.selfID, st, l.carrying, l.down)
		if in != (p >= 0) || in && rn.ID != l.rows[p].ID {
			return false
		}
		if in && !sameRow(l.rows[p], rn) {
			l.rows[p] = rn
			l.out, l.idx = nil, nil // handed out: never modified, built anew
		}
	}
	l.gen = view.Generation
	c.patches++
	return true
}

// build derives the list but self afresh (through the per-node facts), and
// the position of each node key in it; keys is nil when a record's ID is
// not its key's order (the list is then sorted again and never patched).
func (c *nodeFactsCache) build(job *model.Job, sig, selfID string, view *fleet.View, carrying map[string]bool, downSince map[string]time.Time) (out []rollout.Node, keys map[string]int) {
	out = make([]rollout.Node, 0, view.Nodes.Len()+1)
	if len(c.order) != view.Nodes.Len() {
		c.order = c.order[:0]
	}
	pos := make(map[string]int, view.Nodes.Len())
	for attempt := 0; ; attempt++ {
		complete := len(c.order) == view.Nodes.Len()
		for _, k := range c.order {
			st, ok := view.Nodes.Get(k)
			if !ok {
				complete = false
				break
			}
			rn, in := c.row(job, sig, selfID, st, carrying, downSince)
			if !in {
				pos[k] = -1
				continue
			}
			pos[k] = len(out)
			out = append(out, rn)
		}
		if complete || attempt > 0 {
			break
		}
		// The fleet's key set changed since the order was sorted.
		out = out[:0]
		clear(pos)
		c.order = slices.Sorted(view.Nodes.Keys())
	}
	cmp := func(x, y rollout.Node) int { return strings.Compare(x.ID, y.ID) }
	if !slices.IsSortedFunc(out, cmp) {
		slices.SortFunc(out, cmp) // a record whose ID is not its key
		pos = nil
	}
	if len(pos) != view.Nodes.Len() {
		pos = nil // not every key placed: never patched
	}
	return out, pos
}

// changeLog is the view source's change log, for the rollout facts' node
// list (nil without a source).
func (a *Agent) changeLog() changeLog {
	if a.cfg.Source == nil {
		return nil
	}
	return a.cfg.Source
}

func (a *Agent) serverNow(t time.Time) time.Time {
	if a.cfg.ServerNow != nil {
		return a.cfg.ServerNow(t)
	}
	return t
}

// noteDecision keeps the timers the core reads back: the deputies' overdue
// duties and the creator's delay.
func (a *Agent) noteDecision(dec rollout.Decision, now time.Time, jobKey string) {
	a.mu.Lock()
	due := a.dueSince[jobKey]
	next := make(map[string]time.Time, len(dec.Due))
	for _, k := range dec.Due {
		if t, ok := due[k]; ok {
			next[k] = t
		} else {
			next[k] = now
		}
	}
	if len(next) == 0 {
		delete(a.dueSince, jobKey)
	} else {
		a.dueSince[jobKey] = next
	}
	a.mu.Unlock()
	retry := dec.RetryIn
	if len(dec.Due) > 0 && (retry == 0 || retry > rollout.DeputyStep) {
		retry = rollout.DeputyStep
	}
	if retry > 0 {
		a.wakeFor(jobKey, retry, "timer: a rollout wait")
	}
}

// jobWake is a job's one wake-up timer (wakeFor).
type jobWake struct{ t *time.Timer }

// wakeFor asks for a pass in d for the job jobKey, in place of the job's
// earlier request if one is pending. The newest request is the one that
// holds: each comes from the pass that last decided the job (its
// noteDecision, then its verdict's retry, which is sooner) or skipped it
// as an idle deputy (its next turn, before which every pass skips it
// again), and that pass's waits supersede the ones before. Keeping the
// sooner of two requests instead would lose the later one: a converged
// job is skipped by the pass the sooner one makes, which asks nothing.
// So a job has at most one timer pending. A steward decided again on
// every change of the other nodes' allocations asked for a timer on each
// of those decisions, every one of which made a pass of its own later:
// more than half a 100-agent rollout's steward passes
// (TestAJobHasOneWakeUpPending). Those superseded passes had also been
// what broke a wave split across two summaries, by chance: one timer per
// job waits for the summary's catch (rollout.SummaryCatch), which ends
// the split on purpose (BENCHMARKS.md, "2026-12-06, later").
func (a *Agent) wakeFor(jobKey string, d time.Duration, why string) {
	w := &jobWake{}
	a.mu.Lock()
	defer a.mu.Unlock()
	if old := a.wakes[jobKey]; old != nil {
		old.t.Stop() // one already firing finds itself replaced and makes no kick
	}
	if a.wakes == nil {
		a.wakes = map[string]*jobWake{}
	}
	a.wakes[jobKey] = w
	w.t = time.AfterFunc(d, func() {
		a.mu.Lock()
		mine := a.wakes[jobKey] == w
		if mine {
			delete(a.wakes, jobKey)
		}
		a.mu.Unlock()
		if mine {
			a.KickFor(why)
		}
	})
}

// queueRollout hands a job's shared writes to the rollout worker,
// replacing older work for the job not yet done: every write is re-decided
// on what it reads, so only the newest facts matter.
func (a *Agent) queueRollout(k string, w rolloutWork) {
	if a.cfg.Deployments == nil || w.empty() {
		return
	}
	a.mu.Lock()
	if old, ok := a.rolloutQueue[k]; ok {
		// The older work is dropped unexecuted: its releases are no
		// longer pending (the new work names the ones still due).
		for _, s := range append(slices.Clone(old.dec.Releases), old.dec.Reclaims...) {
			if rev, marked := a.slotsReleasing[s.Key]; marked && rev == s.Revision {
				delete(a.slotsReleasing, s.Key)
			}
		}
	}
	a.rolloutQueue[k] = w
	for _, s := range append(slices.Clone(w.dec.Releases), w.dec.Reclaims...) {
		a.slotsReleasing[s.Key] = s.Revision
	}
	a.mu.Unlock()
	select {
	case a.rolloutWake <- struct{}{}:
	default:
	}
}

// queueSummary hands a job's newest summary to the summary writer (an
// older one not yet written is replaced: it says less).
func (a *Agent) queueSummary(jobKey string, s *model.RolloutSummary) {
	a.mu.Lock()
	a.sumQueue[jobKey] = s
	a.mu.Unlock()
	select {
	case a.sumWake <- struct{}{}:
	default:
	}
}

// summaryLoop writes queued rollout summaries until ctx ends, apart from
// the other rollout writes: a summary is a key of its own, derived, with
// one writer. A summary derived within rollout.SummaryEvery after the last
// one written here for the same deployment was decided against an older
// one (its write was still under way): it is dropped, and the next pass,
// which reads the newer one, decides again when the interval is over (the
// once-a-second bound holds).
func (a *Agent) summaryLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.sumWake:
		}
		a.mu.Lock()
		batch := a.sumQueue
		a.sumQueue = map[string]*model.RolloutSummary{}
		a.mu.Unlock()
		for _, k := range slices.Sorted(maps.Keys(batch)) {
			s := batch[k]
			a.mu.Lock()
			last := a.sumLast[k]
			a.mu.Unlock()
			if last != nil && last.DeploymentID == s.DeploymentID && s.Time.After(last.Time) && s.Time.Sub(last.Time) < rollout.SummaryEvery {
				a.KickFor("kick: a summary held back") // the next pass reads the newer one and decides again
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			start := time.Now()
			err := a.cfg.Deployments.PutSummary(sctx, s)
			a.timeWrite("summary", start)
			cancel()
			if err != nil {
				// Decided again by the next pass (as before this writer, no
				// pass is forced: a server that refuses at once would spin).
				if ctx.Err() == nil {
					a.log.Error("rollout write", "job", s.JobID, "err", err)
				}
				continue
			}
			a.mu.Lock()
			a.sumWritten[k] = s
			a.sumLast[k] = s
			a.mu.Unlock()
		}
	}
}

// noticeOwnSummarySlots asks the rollout writer to check the slots that
// summary s lists as held by this node and its memory does not hold, once
// per summary: a take whose answer was lost (a timeout under load, the
// read that should have told also lost) left a slot this node holds and
// does not know of, which the steward then counts as in flight and whose
// holder never acts on it; its waiter, no longer listed, would wait out
// the slot's TTL.
func (a *Agent) noticeOwnSummarySlots(s *model.RolloutSummary) {
	if s == nil || !listsHolder(s, a.nodeID) {
		return // nearly always: every pass of every job reads a summary
	}
	wake := false
	a.mu.Lock()
	for _, name := range slices.Sorted(maps.Keys(s.Groups)) {
		g := s.Groups[name]
		if g == nil {
			continue
		}
		for _, sl := range g.Slots {
			if sl.Holder != a.nodeID {
				continue
			}
			k := wanted.SlotKey(s.Namespace, s.JobID, name, sl.Index)
			if _, held := a.slotsHeld[k]; held {
				continue
			}
			if _, going := a.slotsReleasing[k]; going {
				continue
			}
			if _, gone := a.slotsGone[k]; gone {
				continue
			}
			if t, ok := a.ownSlotsSeen[k]; ok && !s.Time.After(t) {
				continue
			}
			a.ownSlotsSeen[k] = s.Time
			a.slotsToCheck[k] = true
			wake = true
		}
	}
	if len(a.ownSlotsSeen) > 4096 {
		clear(a.ownSlotsSeen) // slots long gone; a summary asks again at worst
	}
	a.mu.Unlock()
	if wake {
		select {
		case a.rolloutWake <- struct{}{}:
		default:
		}
	}
}

// listsHolder reports whether summary s lists a slot held by node.
func listsHolder(s *model.RolloutSummary, node string) bool {
	for _, g := range s.Groups {
		if g == nil {
			continue
		}
		for _, sl := range g.Slots {
			if sl.Holder == node {
				return true
			}
		}
	}
	return false
}

// checkOwnSlots reads the slots noticeOwnSummarySlots queued and adopts
// each that this boot of this node took (its holder and boot ID): the
// next pass acts on it as on a take it remembers. One of another boot is
// left to the restart path (a restarted node watches its jobs' slots).
func (a *Agent) checkOwnSlots(ctx context.Context) {
	a.mu.Lock()
	keys := slices.Sorted(maps.Keys(a.slotsToCheck))
	clear(a.slotsToCheck)
	a.mu.Unlock()
	adopted := false
	for _, k := range keys {
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		sl, rev, err := a.cfg.Deployments.GetSlot(gctx, k)
		cancel()
		if err != nil || sl == nil || sl.Holder != a.nodeID || sl.BootID != a.bootID || a.bootID == "" {
			continue
		}
		a.mu.Lock()
		_, held := a.slotsHeld[k]
		_, going := a.slotsReleasing[k]
		_, gone := a.slotsGone[k]
		adopt := !held && !going && !gone
		if adopt {
			a.slotsHeld[k] = heldSlot{s: rollout.Slot{Key: k, Revision: rev, Time: a.serverNow(a.cfg.Now()), Slot: *sl}}
			adopted = true
		}
		a.mu.Unlock()
		if adopt {
			a.log.Warn("update slot found held by this node through the rollout summary: adopted (its take's answer was lost)", "slot", k, "old_alloc", sl.OldAlloc)
		}
	}
	if adopted {
		a.KickFor("kick: a slot adopted")
	}
}

// rolloutLoop carries out queued rollout work until ctx ends.
func (a *Agent) rolloutLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.rolloutWake:
		}
		a.startsFirst(ctx)
		a.mu.Lock()
		batch := a.rolloutQueue
		a.rolloutQueue = map[string]rolloutWork{}
		a.mu.Unlock()
		a.checkOwnSlots(ctx)
		a.carryOutLosses(ctx)
		var msgs []string
		for _, k := range slices.Sorted(maps.Keys(batch)) {
			for _, err := range a.carryOut(ctx, batch[k]) {
				a.log.Error("rollout write", "job", batch[k].job.ID, "err", err)
				msgs = append(msgs, err.Error())
			}
		}
		a.mu.Lock()
		a.status.DeploymentErrors = msgs
		a.mu.Unlock()
	}
}

// startsFirst lets this node's driver starts in flight return before the
// rollout's writes are made (Config.StartsFirst): a task's start is what a
// placement waits for, and these writes, their echoes and the passes those
// cause can come a few milliseconds later at no cost (nothing is admitted
// or released on a view they change until they are made).
func (a *Agent) startsFirst(ctx context.Context) {
	wait := a.cfg.StartsFirst
	if wait == 0 {
		wait = DefaultStartsFirst
	}
	idle := a.starts.Idle()
	select {
	case <-idle:
		return
	default:
	}
	if wait < 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
	}
}

// carryOut makes one job's shared writes. The summary goes to the summary
// writer first, so that the waiters' admission does not wait behind the
// record's compare-and-sets (at 1,000 agents on two cores a steward's
// transitions took 454 ms each, and summaries waited behind them).
func (a *Agent) carryOut(ctx context.Context, w rolloutWork) []error {
	var errs []error
	job, dec := w.job, w.dec
	if s := dec.Summary; s != nil {
		a.queueSummary(wanted.JobKey(job.Namespace, job.ID), s)
	}
	kick := false
	for _, t := range dec.Transitions {
		start := time.Now()
		err := a.modifyDeployment(ctx, job.Namespace, job.ID, t.Version, t.Apply)
		a.timeWrite("transition", start)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s on deployment of version %d: %w", t.Kind, t.Version, err))
		} else {
			a.log.Info("deployment transition", "job", job.ID, "job_version", t.Version, "kind", t.Kind, "reason", t.Reason)
			kick = true
		}
	}
	if c := dec.Create; c != nil {
		start := time.Now()
		d := rollout.CreateRecord(c, a.chooseCanaries(ctx, c.Canaries))
		if err := a.createDeployment(ctx, job, d); err != nil {
			errs = append(errs, err)
		}
		a.timeWrite("create", start)
		kick = true
	}
	for _, s := range append(slices.Clone(dec.Releases), dec.Reclaims...) {
		a.mu.Lock()
		rev, gone := a.slotsGone[s.Key]
		a.mu.Unlock()
		if gone && rev >= s.Revision {
			continue // released already (a pass queued it again before the view caught up)
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		start := time.Now()
		err := a.cfg.Deployments.ReleaseSlot(rctx, s.Key, s.Revision)
		a.timeWrite("release", start)
		cancel()
		a.mu.Lock()
		delete(a.slotsReleasing, s.Key)
		if err == nil {
			a.slotsGone[s.Key] = s.Revision
			delete(a.slotsHeld, s.Key)
		}
		a.mu.Unlock()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		a.handOff(w.facts.Summary, s)
		what, why := "released", "the replacement's health is known"
		holder := nodeFact(w.facts, s.Slot.Holder)
		if s.Slot.Holder != a.nodeID {
			// T8 reclaims a slot for one of two reasons: its replacement
			// has its verdict (allowed in a disruption: nothing is in
			// flight any more), or its holder expired (never in one).
			what = "reclaimed"
			if !replacementJudged(w.facts.Allocs, s.Slot.NewAlloc) && !holder.Live {
				why = "its holder's node expired"
			}
		}
		a.log.Info("update slot "+what, "job", job.ID, "slot", s.Key, "holder", s.Slot.Holder, "old_alloc", s.Slot.OldAlloc, "new_alloc", s.Slot.NewAlloc, "why", why,
			"decided_at", w.facts.Now, "reconnected_at", w.facts.ReconnectedAt, "holder_down_since", holder.DownSince)
		kick = true
	}
	for _, t := range dec.Takes {
		start := time.Now()
		took, err := a.takeSlot(ctx, t)
		a.timeWrite("take", start)
		if err != nil {
			errs = append(errs, err)
		} else if took {
			kick = true
		}
	}
	if dec.Verdict && dec.Record != nil {
		start := time.Now()
		changed, err := a.stewardVerdict(ctx, w)
		a.timeWrite("verdict", start)
		if err != nil {
			errs = append(errs, err)
		} else if changed {
			kick = true
		}
	}
	if r := dec.CanaryReplace; r != nil {
		answer := a.chooseCanaries(ctx, []reconcile.CanaryRequest{r.Request})[r.Group]
		now, nonce := w.facts.Now, w.facts.Nonce
		if err := a.modifyDeployment(ctx, job.Namespace, job.ID, r.Version, func(cur model.Deployment) (*model.Deployment, error) {
			return rollout.ReplaceCanary(cur, r, answer, now, nonce)
		}); err != nil {
			errs = append(errs, fmt.Errorf("replacing lost canary node %s: %w", r.Lost, err))
		} else {
			a.log.Info("lost canary node handled", "job", job.ID, "group", r.Group, "lost", r.Lost, "why", r.Why, "replacement", answer.Choice.NodeIDs, "reason", answer.Choice.Reason)
		}
		kick = true
	}
	if dec.Revert != nil {
		if err := a.writeRevert(ctx, w); err != nil {
			errs = append(errs, err)
		}
		kick = true
	}
	if kick {
		a.KickFor(kickRolloutWrites)
	}
	return errs
}

// takeSlot is T5: create the slot; then read the record again from the
// stream's leader, and release without acting if it is no longer running. Only then is the slot remembered, so that the next pass
// (which alone stops the old allocation) sees it stored.
func (a *Agent) takeSlot(ctx context.Context, t rollout.Take) (bool, error) {
	a.mu.Lock()
	for _, h := range a.slotsHeld {
		if h.s.Slot.OldAlloc == t.Slot.OldAlloc {
			a.mu.Unlock()
			return false, nil // already holding one for it
		}
	}
	a.mu.Unlock()
	ttl := t.TTL
	a.mu.Lock()
	if r := a.runners[t.Slot.OldAlloc]; r != nil {
		// The task being killed is the old version's: its kill_timeout
		// counts, not only the new one's.
		if g := groupOf(r.Job(), t.Slot.Group); g != nil {
			ttl = max(ttl, rollout.SlotTTL(g))
		}
	}
	a.mu.Unlock()
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	a.mu.Lock()
	hint, hinted := a.released[t.Key]
	a.mu.Unlock()
	until := a.cfg.Now().Add(ttl) // counted from before the Create: never later than the server's
	rev, err := a.cfg.Deployments.TakeSlot(tctx, t.Key, t.Slot, ttl)
	if errors.Is(err, fleet.ErrSlotTaken) {
		a.dropHint(t.Key) // a release told of is stale: the slot is held again
		return false, nil // lost the race: wait for the next change
	}
	if err != nil {
		return false, err
	}
	cur, err := a.cfg.Deployments.GetDeploymentFromLeader(tctx, t.Slot.Namespace, t.Slot.JobID, t.Slot.JobVersion)
	if err != nil || (cur.Status != model.DeploymentRunning && cur.Status != model.DeploymentSuccessful) {
		if rerr := a.cfg.Deployments.ReleaseSlot(tctx, t.Key, rev); rerr != nil {
			return false, rerr
		}
		why := "the record could not be read"
		if cur != nil {
			why = "the deployment is " + string(cur.Status)
		}
		a.log.Info("update slot released without acting", "slot", t.Key, "why", why)
		return false, nil
	}
	a.mu.Lock()
	a.slotsHeld[t.Key] = heldSlot{s: rollout.Slot{Key: t.Key, Revision: rev, Time: a.serverNow(a.cfg.Now()), Slot: t.Slot}, until: until}
	delete(a.released, t.Key)
	if t.Handoff {
		a.status.HandoffTakes++
		if hinted {
			a.status.HandoffWaitMS += float64(until.Add(-ttl).Sub(hint.at).Microseconds()) / 1000
		}
	}
	a.mu.Unlock()
	a.log.Info("update slot taken", "job", t.Slot.JobID, "slot", t.Key, "old_alloc", t.Slot.OldAlloc, "new_alloc", t.Slot.NewAlloc, "rank", t.Rank, "handoff", t.Handoff)
	return true, nil
}

// chooseCanaries asks the canary policy once per request.
func (a *Agent) chooseCanaries(ctx context.Context, reqs []reconcile.CanaryRequest) map[string]rollout.CanaryAnswer {
	out := map[string]rollout.CanaryAnswer{}
	chooser := a.cfg.Canaries
	if chooser == nil {
		chooser = reconcile.DefaultCanaryChooser{}
	}
	for _, req := range reqs {
		name := "default"
		if req.Policy != nil && req.Policy.Name != "" {
			name = req.Policy.Name
		}
		// The deadline covers getting a pool instance as well as the call.
		pctx, cancel := context.WithTimeout(ctx, policyDeadline)
		c, err := chooser.ChooseCanaries(pctx, req)
		cancel()
		out[req.Group] = rollout.CanaryAnswer{Choice: c, Err: err, PolicyName: name}
	}
	return out
}

func completionPolicyOf(job *model.Job) *model.PolicyRef {
	for _, g := range job.Groups {
		if g.Update != nil && g.Update.CompletionPolicy != nil {
			return g.Update.CompletionPolicy
		}
	}
	return nil
}

// stewardVerdict asks the completion policy about the record on the
// pass's facts and, when it says promote, succeed or fail, applies it by
// CAS, asking again on the record the CAS read (never replaying).
func (a *Agent) stewardVerdict(ctx context.Context, w rolloutWork) (bool, error) {
	job, rec := w.job, w.dec.Record.D
	policy := completionPolicyOf(job)
	facts := w.facts
	decide := func(cur *model.Deployment, counts map[string]rollout.Counts) reconcile.CompletionDecision {
		in := rollout.CompletionInput(cur, counts, policy, facts.Now, w.dec.Disruption)
		pctx, cancel := context.WithTimeout(ctx, policyDeadline)
		v, err := a.cfg.Completion.DecideCompletion(pctx, in)
		cancel()
		if err != nil {
			a.log.Warn("completion policy failed; using the default", "deployment_id", cur.ID, "err", err)
			v = reconcile.DecideDefault(in)
		}
		return v
	}
	// The decision derived rec's counts from these facts already
	// (re-deriving them here was 0.12 of the steward's 0.92 CPU-s in a
	// 1,000-agent rollout); the record read again in the CAS below is
	// derived anew.
	counts := w.dec.Counts
	if counts == nil {
		counts = rollout.Derive(rec, &facts)
	}
	if v := decide(rec, counts); v.Decision == reconcile.DecisionContinue {
		return false, nil
	}
	stable := rollout.StableVersion(facts.Records, rec.JobVersion)
	disrupted := w.dec.Disruption != ""
	var applied reconcile.CompletionDecision
	changed := false
	err := a.modifyDeployment(ctx, job.Namespace, job.ID, rec.JobVersion, func(cur model.Deployment) (*model.Deployment, error) {
		counts := rollout.Derive(&cur, &facts)
		v := decide(&cur, counts)
		applied = v
		next, err := rollout.ApplyVerdict(cur, counts, v, disrupted, stable, a.nodeID, facts.Now, facts.Nonce)
		changed = next != nil
		return next, err
	})
	if err != nil {
		return false, fmt.Errorf("applying the completion verdict to deployment %s: %w", rec.ID, err)
	}
	if changed {
		a.log.Info("deployment decided", "deployment_id", rec.ID, "job", job.ID, "decision", applied.Decision, "reason", applied.Reason, "revert", applied.Revert)
	}
	return changed, nil
}

// writeRevert is T12: write a new job version with the stable spec, by CAS
// on the job key as this agent read it (an operator's newer version wins),
// then record the revert as done.
func (a *Agent) writeRevert(ctx context.Context, w rolloutWork) error {
	rw, failed := w.dec.Revert, w.job
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stable, err := a.cfg.Deployments.GetJobVersion(rctx, failed.Namespace, failed.ID, rw.ToVersion)
	if err != nil {
		return fmt.Errorf("reading stable version %d of job %s for the revert: %w", rw.ToVersion, failed.ID, err)
	}
	now, nonce := w.facts.Now, w.facts.Nonce
	if model.SameSpec(stable, failed) {
		return a.modifyDeployment(ctx, failed.Namespace, failed.ID, rw.FailedVersion, func(cur model.Deployment) (*model.Deployment, error) {
			return rollout.RevertSettled(cur, model.RevertNone, 0, fmt.Sprintf("the spec of stable version %d equals the failed one", rw.ToVersion), now, nonce)
		})
	}
	next := *stable
	next.Version = failed.Version + 1
	to := rw.ToVersion
	next.RevertOf = &to
	next.Stable = false
	next.SubmitTime = a.cfg.Now().UTC()
	if _, err := a.cfg.Deployments.UpdateJob(rctx, &next, w.jobRev); err != nil {
		if errors.Is(err, fleet.ErrLostRace) {
			return nil // someone wrote the job first: the next pass settles the revert
		}
		return fmt.Errorf("writing the revert of job %s: %w", failed.ID, err)
	}
	a.log.Info("deployment reverted", "job", failed.ID, "failed_version", failed.Version, "stable_version", rw.ToVersion, "new_version", next.Version)
	return a.modifyDeployment(ctx, failed.Namespace, failed.ID, rw.FailedVersion, func(cur model.Deployment) (*model.Deployment, error) {
		return rollout.RevertSettled(cur, model.RevertDone, next.Version, "", now, nonce)
	})
}

// stableJob returns a recorded version of a job (cached: versions are
// immutable).
func (a *Agent) stableJob(ctx context.Context, ns, id string, version uint64) (*model.Job, error) {
	key := wanted.JobVersionKey(ns, id, version)
	a.mu.Lock()
	j := a.versions[key]
	a.mu.Unlock()
	if j != nil {
		return j, nil
	}
	if a.cfg.Deployments == nil {
		return nil, errors.New("no fleet store")
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	j, err := a.cfg.Deployments.GetJobVersion(rctx, ns, id, version)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.versions[key] = j
	a.mu.Unlock()
	return j, nil
}

// guardSince is the server time from which the disruption guard holds for
// one node TTL: this agent's last reconnect, or the nodes bucket's watch
// resuming after an interruption (once its stream has a leader again),
// whichever is later. a.mu must not be held.
func (a *Agent) guardSince() time.Time {
	a.mu.Lock()
	since := a.reconnectedAt
	a.mu.Unlock()
	if r, ok := a.cfg.Source.(interface{ ResumedAt(string) time.Time }); ok {
		if t := r.ResumedAt(fleet.KindNodes); !t.IsZero() {
			if st := a.serverNow(t); st.After(since) {
				since = st
			}
		}
	}
	return since
}

// NoteReconnect records that this agent's NATS connection came back (the
// disruption guard holds for one node TTL after it). Wire it to the
// connection's reconnect handler.
func (a *Agent) NoteReconnect() {
	now := a.serverNow(a.cfg.Now())
	a.mu.Lock()
	a.reconnectedAt = now
	a.mu.Unlock()
	a.log.Info("NATS reconnected: no reclaim and no verdict for one node TTL (disruption guard)", "server_time", now)
	a.KickFor("kick: NATS reconnected")
}

// nodeFact is the facts' node id (the zero Node, not live, when unknown).
func nodeFact(f rollout.Facts, id string) rollout.Node {
	for _, n := range f.Nodes {
		if n.ID == id {
			return n
		}
	}
	return rollout.Node{}
}

// lossPass decides this pass's loss verdicts (T13, T14) over every node
// of the view and hands them to the worker.
func (a *Agent) lossPass(view *fleet.View, self *model.Node, now time.Time) {
	if a.cfg.Deployments == nil {
		return
	}
	// rollout.Losses writes a verdict only for a node down with a loss
	// revision, and deletes only this node's own verdicts: with neither in
	// view (a fleet without losses, nearly always) it decides nothing, and
	// the O(fleet) slices it would be given are not built.
	if !anyVerdictOf(view, a.nodeID) && !a.nodeExpiredInView {
		return
	}
	var nodes []rollout.Node
	for k, st := range view.Nodes.All() {
		if st.Value == nil || k == a.nodeID {
			continue
		}
		n := rollout.Node{ID: st.Value.ID, Live: !st.Absent, DownSince: st.Expired, Protocol: st.Value.RolloutProtocol}
		if st.Absent {
			n.LossRevision = st.Applied
		}
		nodes = append(nodes, n)
	}
	nodes = append(nodes, rollout.Node{ID: a.nodeID, Live: true, Protocol: self.RolloutProtocol})
	var verdicts []rollout.Verdict
	for k, st := range view.Downs.All() {
		if st.Value != nil && !st.Absent {
			verdicts = append(verdicts, rollout.Verdict{Key: k, Revision: st.Revision, V: *st.Value})
		}
	}
	snow := a.serverNow(now)
	dec := rollout.Losses(a.nodeID, nodes, verdicts, snow, a.nodeTTL(), a.guardSince())
	if len(dec.Writes) == 0 && len(dec.Deletes) == 0 {
		return
	}
	if len(dec.Deletes) > 0 {
		// Back from a loss: what the fleet derived of this node's
		// allocations meanwhile is recorded in them before the verdict goes.
		var own []rollout.ReturnAlloc
		a.mu.Lock()
		for _, r := range a.runners {
			al := r.Snapshot()
			own = append(own, rollout.ReturnAlloc{Alloc: al, Group: groupOf(r.Job(), al.TaskGroup), Created: a.serverNow(al.CreateTime)})
		}
		a.mu.Unlock()
		slices.SortFunc(own, func(x, y rollout.ReturnAlloc) int { return strings.Compare(x.Alloc.ID, y.Alloc.ID) })
		dec.Returns = rollout.Returning(a.nodeID, dec.Deletes, own, snow)
	}
	a.mu.Lock()
	a.lossWork = &dec
	a.mu.Unlock()
	select {
	case a.rolloutWake <- struct{}{}:
	default:
	}
}

// anyVerdictOf and anyNodeExpired say whether view holds what
// rollout.Losses could act on: a loss verdict of self (to delete on its
// return), or a node other than self expired with a loss revision (a
// verdict to write). Nearly always neither: the verdicts are few, and the
// walk over every node record is made only when the fleet is counted
// again (fleetCountStale: an expiry or a return is never a heartbeat).
func anyVerdictOf(view *fleet.View, self string) bool {
	for _, st := range view.Downs.All() {
		if st.Value != nil && !st.Absent && st.Value.Node == self {
			return true
		}
	}
	return false
}

func anyNodeExpired(view *fleet.View, self string) bool {
	n := view.Tally().Expired
	if fleet.NodeExpired(view.Nodes.At(wanted.NodeKey(self))) {
		n--
	}
	return n > 0
}

// carryOutLosses writes and deletes the loss verdicts of the last pass.
func (a *Agent) carryOutLosses(ctx context.Context) {
	a.mu.Lock()
	dec := a.lossWork
	a.lossWork = nil
	a.mu.Unlock()
	if dec == nil {
		return
	}
	for _, w := range dec.Writes {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := a.cfg.Deployments.CreateVerdict(wctx, w.Key, w.V)
		cancel()
		if err != nil {
			a.log.Error("writing a loss verdict", "verdict", w.Key, "err", err)
			continue
		}
		a.log.Info("node lost: verdict written", "lost_node", w.V.Node, "down_since", w.V.DownSince, "verdict", w.Key)
	}
	for _, ret := range dec.Returns {
		a.mu.Lock()
		r := a.runners[ret.AllocID]
		a.mu.Unlock()
		if r == nil {
			continue // gone meanwhile: nothing left to record
		}
		if ret.Lost {
			r.MarkLost(ret.Why)
			a.stopAsync(r, ret.Why)
			a.log.Warn("allocation lost while this node was down: stopped, its name is placed again", "alloc_id", ret.AllocID, "why", ret.Why)
			continue
		}
		if r.RecordReconnect(ret.Since, a.cfg.Now(), ret.Why) {
			a.log.Info("allocation reconnected: kept running", "alloc_id", ret.AllocID, "why", ret.Why)
		}
	}
	for _, v := range dec.Deletes {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := a.cfg.Deployments.DeleteVerdict(wctx, v.Key, v.Revision)
		cancel()
		if err != nil {
			a.log.Error("deleting this node's loss verdict", "verdict", v.Key, "err", err)
			continue
		}
		a.log.Info("this node is back: its loss verdict deleted", "verdict", v.Key, "down_since", v.V.DownSince)
	}
}

// replacementJudged reports whether the allocation id (a slot's planned
// replacement) is among allocs with its verdict known: terminal, healthy
// or unhealthy.
func replacementJudged(allocs []*model.Allocation, id string) bool {
	for _, al := range allocs {
		if al.ID == id {
			return rollout.VerdictKnown(al)
		}
	}
	return false
}
