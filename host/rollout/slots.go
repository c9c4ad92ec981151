package rollout

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/host/wanted"
)

func (f *Facts) alloc(id string) *model.Allocation {
	if id == "" {
		return nil
	}
	if f.allocIdx == nil {
		f.allocIdx = make(map[string]*model.Allocation, len(f.Allocs))
		for _, a := range f.Allocs {
			if _, dup := f.allocIdx[a.ID]; !dup {
				f.allocIdx[a.ID] = a
			}
		}
	}
	return f.allocIdx[id]
}

// verdictKnown reports whether the allocation's health is decided: a
// verdict written by its node, or the allocation finished.
// VerdictKnown reports whether an update's replacement has its verdict:
// terminal, healthy or unhealthy (what ends its time in flight).
func VerdictKnown(a *model.Allocation) bool { return verdictKnown(a) }

func verdictKnown(a *model.Allocation) bool {
	return a != nil && (a.Terminal() || a.DeploymentStatus.IsHealthy() || a.DeploymentStatus.IsUnhealthy())
}

func (f *Facts) recordOf(version uint64) *model.Deployment {
	for _, r := range f.Records {
		if r.D != nil && r.D.JobVersion == version {
			return r.D
		}
	}
	return nil
}

// releases lists this node's own slots that are done (T7): the
// replacement's health verdict is written, or there is nothing left to do
// (the record is no longer running and the old allocation was never
// stopped; the old allocation is gone and no replacement will come).
func (f *Facts) releases(dec *Decision, rec *Record) {
	for _, s := range f.Slots {
		if s.Slot.Holder != f.Self {
			continue
		}
		nw, old := f.replacementOf(s.Slot), f.alloc(s.Slot.OldAlloc)
		d := f.recordOf(s.Slot.JobVersion)
		switch {
		case verdictKnown(nw):
			dec.Releases = append(dec.Releases, s)
		case nw == nil && old != nil && !old.Terminal() && (d == nil || !slotLive(d)):
			// Taken, not acted on, and the record stopped running: release
			// without acting (T5).
			dec.Releases = append(dec.Releases, s)
		case nw == nil && (old == nil || old.Terminal()) && !f.placing(old) && !f.owesReplacement(s.Slot, old, d):
			dec.Releases = append(dec.Releases, s)
		}
	}
}

// owesReplacement reports whether this node still owes the replacement of
// old, which its slot stopped: the slot's record is running, old is of an
// older version than the slot's, its name is still one the job runs, and
// this node is still eligible for the job (or not seen yet). Then a plan
// that does not place the name now (the first passes after an agent
// restart, before its own record is seen ready again) does not mean that no
// replacement will come: the slot is kept until the replacement's verdict
// (or the record stops running, the node leaves the job's scope, or the
// slot's TTL ends), so the replacement placed next is still paced by it.
// Found by the rollout fault suite: an agent SIGKILLed between stopping
// its old allocation and recording the replacement released its slot at
// restart and then placed the replacement beside another node's.
func (f *Facts) owesReplacement(sl model.Slot, old *model.Allocation, d *model.Deployment) bool {
	if old == nil || d == nil || d.Status != model.DeploymentRunning || old.JobVersion >= sl.JobVersion {
		return false
	}
	if n, ok := f.node(f.Self); ok && !n.Eligible {
		return false
	}
	g := groupOf(f.Job, old.TaskGroup)
	if g == nil || f.Job.Stop {
		return false
	}
	idx := allocIndex(old.Name)
	return idx >= 0 && idx < g.Count
}

// allocIndex is the index of an allocation name "<job>.<group>[<i>]", or -1.
func allocIndex(name string) int {
	i := strings.LastIndexByte(name, '[')
	if i < 0 || !strings.HasSuffix(name, "]") {
		return -1
	}
	n, err := strconv.Atoi(name[i+1 : len(name)-1])
	if err != nil {
		return -1
	}
	return n
}

// slotLive reports whether a slot of record d may still be acted on.
func slotLive(d *model.Deployment) bool {
	return d.Status == model.DeploymentRunning || d.Status == model.DeploymentSuccessful
}

// replacementOf is the allocation that replaces the slot's old allocation:
// the planned one, or any allocation that carries the old one on (a newer
// version's replacement of the same allocation), newest first.
func (f *Facts) replacementOf(s model.Slot) *model.Allocation {
	if a := f.alloc(s.NewAlloc); a != nil {
		return a
	}
	var best *model.Allocation
	for _, a := range f.Allocs {
		if a.PreviousAllocation == s.OldAlloc && (best == nil || a.JobVersion > best.JobVersion) {
			best = a
		}
	}
	return best
}

// placing reports whether this round's plan places the name old had.
func (f *Facts) placing(old *model.Allocation) bool {
	if old == nil {
		return false
	}
	for _, e := range f.Plan.Place {
		if e.Name == old.Name && !f.FailedHere[e.PreviousAllocID] {
			return true
		}
	}
	return false
}

// slotHeld reports whether Slots (this node's own memory, or the slot
// keys it watches) hold index of group name.
func (f *Facts) slotHeld(name string, index int) bool {
	return slices.ContainsFunc(f.Slots, func(s Slot) bool { return s.Slot.Group == name && s.Slot.Index == index })
}

// waiter is an outdated allocation that may take a slot.
type waiter struct {
	node, name, id string
	hash           uint64
}

// nodeActions licenses this node's plan entries for the running (or
// paused, or settled) record d.
func (f *Facts) nodeActions(dec *Decision, d *model.Deployment, counts map[string]Counts) {
	stable := StableVersion(f.Records, d.JobVersion)
	for _, e := range f.Plan.Place {
		st := d.TaskGroups[e.Group]
		if d.Status.Active() && canarying(st) && !canaryNode(st, f.Self) && stable != nil && d.RevertOf == nil {
			// A node that joined during the canary phase: no unvetted
			// version reaches a node that is not a canary.
			if f.FailedHere[e.PreviousAllocID] {
				dec.Held = append(dec.Held, Held{Entry: e, Reason: "the restart policy gave up on this name here"})
				continue
			}
			dec.PlaceStable = append(dec.PlaceStable, e)
			dec.StableVersion = *stable
			continue
		}
		f.place(dec, e)
	}
	// A slot licenses the stop of its old allocation only for the record
	// it was taken for, and only while it is not being released (a slot of
	// an older version's deployment finishes that replacement, never
	// another one).
	releasing := map[string]bool{}
	for _, s := range dec.Releases {
		releasing[s.Key] = true
	}
	mine := map[string]Slot{} // old allocation → this node's slot for d
	for _, s := range f.Slots {
		if s.Slot.Holder == f.Self && s.Slot.DeploymentID == d.ID && !releasing[s.Key] {
			mine[s.Slot.OldAlloc] = s
		}
	}
	// A successful record still paces the nodes that come back with an
	// outdated allocation (a partition healed after the rollout ended).
	pacing := d.Status == model.DeploymentRunning || d.Status == model.DeploymentSuccessful
	var pending []reconcile.Entry // destructive updates without a slot
	for _, e := range f.Plan.Update {
		switch {
		case f.InPlace[e.AllocID]:
			dec.InPlace = append(dec.InPlace, e)
		case !d.Status.Active() && d.Status != model.DeploymentSuccessful:
			dec.Held = append(dec.Held, Held{Entry: e, Reason: "deployment is " + string(d.Status)})
		default:
			if _, ok := mine[e.AllocID]; ok {
				if pacing {
					dec.Stop = append(dec.Stop, e)
				} else {
					dec.Held = append(dec.Held, Held{Entry: e, Reason: "holds a slot; deployment is " + string(d.Status)})
				}
				continue
			}
			if !pacing {
				dec.Held = append(dec.Held, Held{Entry: e, Reason: "update held: deployment is " + string(d.Status)})
				continue
			}
			pending = append(pending, e)
		}
	}
	f.admit(dec, d, counts, pending)
}

// admit decides which of this node's destructive updates try a slot now
// (docs/rollout.md, "Admission"): the waiting allocations of the group are
// ordered by hash(deployment ‖ node); the one at rank r tries the r-th free
// index only if r < free. Every held slot of the job group counts, of any
// version (I5).
func (f *Facts) admit(dec *Decision, d *model.Deployment, counts map[string]Counts, pending []reconcile.Entry) {
	byGroup := map[string][]reconcile.Entry{}
	for _, e := range pending {
		byGroup[e.Group] = append(byGroup[e.Group], e)
	}
	for _, name := range slices.Sorted(mapsKeys(byGroup)) {
		entries := byGroup[name]
		st := d.TaskGroups[name]
		g := groupOf(f.Job, name)
		if st == nil || g == nil {
			for _, e := range entries {
				dec.Held = append(dec.Held, Held{Entry: e, Reason: "group " + name + " is not in the deployment"})
			}
			continue
		}
		maxP := st.MaxParallel
		if maxP <= 0 && g.Update != nil {
			maxP = g.Update.MaxParallel
		}
		if maxP <= 0 {
			maxP = 1
		}
		held, holding, holders := f.admissionGroup(d, name)
		free, nfree := held.free(maxP)
		// rankOf is an allocation's place among the group's waiters (-1:
		// not among them) and their number. A narrowed node's waiters are
		// the summary's list, ranked without being made (summaryRank).
		var rankOf func(alloc string) (int, int)
		switch {
		case f.Narrow:
			// holding counts the summary's slots with OwnSlotsOnly and is
			// f.Slots' otherwise (admissionGroup), as the ranking wants.
			rankOf = func(alloc string) (int, int) { return f.summaryRank(d, name, holding, alloc) }
		default:
			var ws []waiter
			if f.OwnSlotsOnly {
				ws = f.waiters(d, name, holding) // the summary's slots counted too
			} else {
				ws = f.slotWaiters(d, name) // slots is f.Slots: the summary's ranking
			}
			rankOf = func(alloc string) (int, int) {
				return slices.IndexFunc(ws, func(w waiter) bool { return w.id == alloc }), len(ws)
			}
		}
		// The steward's assignment, when its summary makes one: each
		// admitted waiter tries the index assigned to it (kept from one
		// summary to the next until the steward sees it taken). A waiter
		// queued on a held slot takes it once told of its release
		// (HandoffProtocol). Read for this node's entries alone
		// (assignedTo, queuedAs): a node decides for its own one or two,
		// where maps of every listed waiter cost a waiting node more than
		// the rest of its decision.
		var sg *model.GroupSummary
		if f.Narrow && f.Summary != nil && f.Summary.DeploymentID == d.ID {
			sg = f.Summary.Groups[name]
		}
		hasAssigned := sg != nil && len(sg.Assigned) > 0
		for _, e := range entries {
			if f.Narrow && canarying(st) && !canaryNode(st, f.Self) {
				// The summary's order is the steward's: this node's own
				// record is what says it may not update yet (I4).
				dec.Held = append(dec.Held, Held{Entry: e, Reason: "not a canary node: waiting for the promotion", Unlisted: true})
				continue
			}
			r, nws := rankOf(e.AllocID)
			idx, ok, handoff := -1, r >= 0 && r < nfree, false
			if ok {
				idx = free[r]
			}
			if q, isQueued := queuedAs(sg, e.AllocID); isQueued && r >= 0 {
				// Queued on a slot: taken once the node ahead of this one
				// in the slot's queue (its holder, the waiter admitted to
				// it, or the first of its queue) said it released it
				// (Released, TellsAt). The summary's holder of the slot
				// is then gone, but the slot must not be held in this
				// node's own view (its own memory, or the slot keys it
				// watches), and fewer than max_parallel others (I5).
				h, told := f.Released[wanted.SlotKey(d.Namespace, d.JobID, name, q.Index)]
				others := held.n
				if held.has(q.Index) {
					others--
				}
				if !told || TellsAt(f.Summary, name, q.Index, h) != q.Depth || q.Index >= maxP || f.slotHeld(name, q.Index) || others >= maxP {
					dec.Held = append(dec.Held, Held{Entry: e, Reason: fmt.Sprintf("waiting for an update slot: queued on slot %d (place %d) by the steward's summary, not released yet", q.Index, q.Depth)})
					continue
				}
				idx, ok, handoff = q.Index, true, true
			} else if hasAssigned {
				// Only a waiter its own view still counts (r >= 0: live,
				// ready, eligible, not already holding for it) tries.
				idx, ok = assignedTo(sg, e.AllocID)
				ok = ok && r >= 0
				if ok && (held.has(idx) || idx >= maxP) {
					// Held by this node's own memory (a take the summary
					// does not list yet): the next summary says more.
					dec.Held = append(dec.Held, Held{Entry: e, Reason: fmt.Sprintf("waiting for an update slot: slot %d assigned by the steward's summary is still held", idx)})
					continue
				}
			}
			if !ok {
				why := fmt.Sprintf("waiting for an update slot (%d/%d in flight", held.n, maxP)
				if len(holders) > 0 {
					// The first few holders by slot index: at a hundred in
					// flight the whole list was most of every waiting
					// node's reason, made on each of its decisions.
					why += ": " + strings.Join(holders[:min(len(holders), heldReasonHolders)], ", ")
					if more := len(holders) - heldReasonHolders; more > 0 {
						why += fmt.Sprintf(" and %d more", more)
					}
				}
				why += ")"
				switch {
				case r >= 0:
					why += fmt.Sprintf(", rank %d among %d waiting", r, nws)
				case f.Narrow && (f.Summary == nil || f.Summary.DeploymentID != d.ID):
					why += ", no rollout summary of this deployment yet"
				case f.Narrow:
					why += ", not among the first waiting in the steward's summary"
				}
				dec.Held = append(dec.Held, Held{Entry: e, Reason: why, Unlisted: f.Narrow && r < 0})
				continue
			}
			dec.Takes = append(dec.Takes, Take{
				Key: wanted.SlotKey(d.Namespace, d.JobID, name, idx),
				Slot: model.Slot{Namespace: d.Namespace, JobID: d.JobID, JobVersion: d.JobVersion, DeploymentID: d.ID,
					Group: name, Index: idx, Holder: f.Self, BootID: f.BootID, OldAlloc: e.AllocID, NewAlloc: e.NewAllocID, Nonce: f.Nonce},
				TTL: SlotTTL(g), Entry: e, Rank: r, Handoff: handoff,
			})
		}
	}
}

// heldReasonHolders is how many holders a waiting entry's reason names.
const heldReasonHolders = 5

// steward does the fleet-level duties of the record's steward (or of an
// overdue deputy): reclaim slots, start the progress clock, record
// progress, ask for the completion verdict, fail a group whose canary node
// was lost, and write a pending revert.
func (f *Facts) steward(dec *Decision, rec *Record, counts map[string]Counts) {
	d := rec.D
	dec.StewardRank, dec.Steward = f.rankLive(d.ID, f.Self, false)
	if dec.StewardRank < 0 || dec.StewardRank >= StewardDepth || f.Narrow {
		// Only the first StewardDepth of the ranking act, and only with
		// the job's allocations in view (they watch them: Watching).
		return
	}
	disrupted, why := f.Disruption()
	if disrupted {
		dec.Disruption = why
	}
	act := func(key string) bool {
		k := dec.StewardRank
		if k == 0 || f.Overdue[key] >= DeputyStepFor(k) {
			return true
		}
		dec.Due = append(dec.Due, key)
		return false
	}
	nonce, now := f.Nonce, f.Now
	// A duty's key names the record as read: a steward that is alive and
	// writing changes it, so its deputies' timers start again (they act
	// only for a steward that stopped moving the record).
	at := d.ID + "@" + strconv.FormatInt(d.ModifyTime.UnixNano(), 10)
	// T8: reclaim the job's slots whose holder expired (not during a
	// disruption) or whose replacement already has its verdict.
	for _, s := range f.Slots {
		lost := !f.live(s.Slot.Holder) && !disrupted
		done := verdictKnown(f.alloc(s.Slot.NewAlloc)) && s.Slot.Holder != f.Self
		if (lost || done) && act("reclaim:"+s.Key+"@"+strconv.FormatUint(s.Revision, 10)) {
			dec.Reclaims = append(dec.Reclaims, s)
		}
	}
	f.summaryDuty(dec, d, counts, act)
	switch d.Status {
	case model.DeploymentRunning:
	case model.DeploymentFailed:
		if d.Revert != nil && d.Revert.Status == model.RevertPending && f.Job.Version == d.JobVersion && act("revert:"+at) {
			dec.Revert = &RevertWork{FailedVersion: d.JobVersion, ToVersion: d.Revert.ToVersion}
		}
		return
	default:
		return
	}
	// T6: the progress clock starts at the first slot taken (or, with no
	// slot to take, once the version is placed).
	for name, st := range d.TaskGroups {
		if st.ProgressDeadline <= 0 || !st.RequireProgressBy.IsZero() {
			continue
		}
		slot := slices.ContainsFunc(f.Slots, func(s Slot) bool { return s.Slot.DeploymentID == d.ID && s.Slot.Group == name })
		if (slot || placedOnly(counts[name])) && act("clock:"+at) {
			slots := f.Slots
			dec.Transitions = append(dec.Transitions, Transition{Kind: "start_clock", Version: d.JobVersion,
				Apply: func(cur model.Deployment) (*model.Deployment, error) {
					return StartClock(cur, slots, counts, now, nonce)
				}})
			break
		}
	}
	// T9: progress above the watermark, coalesced (ProgressDue): every
	// write of the record reaches every node of the fleet.
	for _, name := range slices.Sorted(mapsKeys(d.TaskGroups)) {
		st := d.TaskGroups[name]
		if counts[name].Healthy <= st.HealthyAllocs {
			continue
		}
		if wait := ProgressDue(st, d.ModifyTime, now); wait > 0 {
			if dec.RetryIn == 0 || wait < dec.RetryIn {
				dec.RetryIn = wait
			}
			continue
		}
		if act("progress:" + at) {
			dec.Transitions = append(dec.Transitions, Transition{Kind: "progress", Version: d.JobVersion,
				Apply: func(cur model.Deployment) (*model.Deployment, error) { return Progress(cur, counts, now, nonce) }})
			break
		}
	}
	// A canary node lost (or drained) before promotion: the canary policy
	// is asked for a replacement (the one change I4 allows to the set);
	// without one the group fails.
	if !disrupted {
		for _, name := range slices.Sorted(mapsKeys(d.TaskGroups)) {
			st := d.TaskGroups[name]
			if !canarying(st) {
				continue
			}
			for _, id := range st.CanaryNodes {
				if n, ok := f.node(id); !ok || !n.Live || !n.Eligible {
					why := "lost"
					if ok && n.Live {
						why = "drained or made ineligible"
					}
					if act("canary_lost:" + at) {
						dec.CanaryReplace = f.replacementRequest(d, name, id, why)
					}
					return
				}
			}
		}
	}
	// The completion policy is asked during a disruption too, and told so
	// (the default continues); a success is never applied then
	// (ApplyVerdict).
	if act("verdict:" + at) {
		dec.Verdict = true
	}
}

// ProgressEvery is how often a group's progress (T9) is recorded at most
// while its progress deadline is not near: a tenth of the deadline, within
// [ProgressEveryMin, ProgressEveryMax]. A 1,000-node rollout wrote its
// record 55 times, nearly all of them progress, and each write reached
// every node (a decode and a pass each).
func ProgressEvery(deadline time.Duration) time.Duration {
	return min(max(deadline/10, ProgressEveryMin), ProgressEveryMax)
}

// The bounds of ProgressEvery.
const (
	ProgressEveryMin = time.Second
	ProgressEveryMax = 10 * time.Second
)

// ProgressDue says how long the progress of group st, above its watermark,
// may wait before it is recorded (0: now). It is recorded once the record
// has been unchanged for ProgressEvery (any write of the record counts:
// the watermark is then at most that late), and at once when the group's
// deadline is within two such intervals, so that progress made is never
// failed as none. A deadline recorded late is later by as much, never
// earlier: the group is judged no stricter than "each newly healthy
// allocation extends it". Every steward candidate computes the same from
// the record, so a deputy does not take the wait for a steward's silence.
func ProgressDue(st *model.DeploymentState, modified, now time.Time) time.Duration {
	every := ProgressEveryMax // no deadline: the watermark is only shown
	if st.ProgressDeadline > 0 {
		every = ProgressEvery(st.ProgressDeadline.D())
		if !st.RequireProgressBy.IsZero() && st.RequireProgressBy.Sub(now) <= 2*every {
			return 0
		}
	}
	return max(0, every-now.Sub(modified))
}

// DeputyStepFor is how long a decision must be overdue before deputy k acts.
func DeputyStepFor(k int) time.Duration { return time.Duration(k) * DeputyStep }

// CanaryReplacement asks the canary policy for a node to replace a canary
// node lost before promotion.
type CanaryReplacement struct {
	Group   string                  `json:"group"`
	Lost    string                  `json:"lost"`
	Why     string                  `json:"why"`
	Request reconcile.CanaryRequest `json:"request"`
	// Version is the record's job version; Revert and Stable what a
	// failure would do.
	Version uint64  `json:"version"`
	Revert  bool    `json:"revert,omitempty"`
	Stable  *uint64 `json:"stable,omitempty"`
}

// replacementRequest builds the request for one lost canary node: one
// node, among the ready nodes that are not canary nodes already.
func (f *Facts) replacementRequest(d *model.Deployment, group, lost, why string) *CanaryReplacement {
	st := d.TaskGroups[group]
	var eligible []*model.Node
	for _, n := range f.readyNodes() {
		if !slices.Contains(st.CanaryNodes, n.ID) {
			eligible = append(eligible, n)
		}
	}
	var existing []string
	for _, id := range st.CanaryNodes {
		if id != lost {
			existing = append(existing, id)
		}
	}
	var policy *model.PolicyRef
	pct := 0
	if g := groupOf(f.Job, group); g != nil && g.Update != nil {
		policy, pct = g.Update.CanaryPolicy, g.Update.Canary
	}
	return &CanaryReplacement{Group: group, Lost: lost, Why: why, Version: d.JobVersion, Revert: st.AutoRevert,
		Stable: StableVersion(f.Records, d.JobVersion),
		Request: reconcile.CanaryRequest{JobID: d.JobID, JobVersion: d.JobVersion, DeploymentID: d.ID, Group: group,
			Percent: pct, Count: 1, Eligible: eligible, Existing: existing, Policy: policy}}
}

// ReplaceCanary is the one change I4 allows to a canary set: on the record
// just read, a canary node lost before promotion is replaced by the node
// the canary policy named (checked against the request), or, when it named
// none (or a bad one), the deployment fails saying so.
func ReplaceCanary(cur model.Deployment, r *CanaryReplacement, a CanaryAnswer, now time.Time, nonce string) (*model.Deployment, error) {
	if cur.Status != model.DeploymentRunning {
		return nil, nil
	}
	st := cur.TaskGroups[r.Group]
	if !canarying(st) || !slices.Contains(st.CanaryNodes, r.Lost) {
		return nil, nil // promoted, or replaced already
	}
	why := ""
	switch {
	case a.Err != nil:
		why = "the canary policy failed: " + BoundReason(a.Err.Error())
	case len(a.Choice.NodeIDs) == 0:
		why = "the canary policy named no replacement"
		if a.Choice.Reason != "" {
			why += ": " + BoundReason(a.Choice.Reason)
		}
	default:
		if bad := reconcile.ValidateCanaryChoice(r.Request, a.Choice); bad != "" {
			why = "the canary policy's replacement was refused: " + bad
		} else if slices.Contains(st.CanaryNodes, a.Choice.NodeIDs[0]) {
			why = "the canary policy named a node that is a canary node already"
		}
	}
	if why != "" {
		return Fail(cur, fmt.Sprintf("canary node %s of group %s %s before promotion; %s", r.Lost, r.Group, r.Why, why), r.Revert, r.Stable, now, nonce)
	}
	d := clone(cur)
	g := d.TaskGroups[r.Group]
	nodes := slices.DeleteFunc(slices.Clone(g.CanaryNodes), func(id string) bool { return id == r.Lost })
	nodes = append(nodes, a.Choice.NodeIDs[0])
	slices.Sort(nodes)
	g.CanaryNodes = nodes
	msg := fmt.Sprintf("group %s: canary node %s %s before promotion, replaced by %s", r.Group, r.Lost, r.Why, a.Choice.NodeIDs[0])
	if a.Choice.Reason != "" {
		msg += " (" + BoundReason(a.Choice.Reason) + ")"
	}
	event(d, now, model.EventCanary, msg)
	touch(d, now, nonce)
	return d, nil
}
