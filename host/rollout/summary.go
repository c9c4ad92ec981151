package rollout

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
)

// The narrowed view (docs/rollout.md, "Who watches what"). A node does not
// watch every allocation of the fleet: it watches its own, and the job's
// allocations on every node only for the jobs whose fleet-wide duties it
// may have to carry out (Watching). Everything else it needs of the other
// nodes' allocations, the admission order of the waiting ones, comes from
// the rollout summary that the steward derives (Summarize) and writes at
// most once a second. Safety never rests on the summary: a slot is still
// taken by create-if-absent of its key (I5), and a node checks its own
// canary membership in the record (I4); a stale summary only delays an
// admission.

// StewardDepth is how many nodes of a deployment's steward ranking (the
// steward and its first deputies) watch the job's allocations and may act
// on its duties; the same nodes may create its record (RankingKey), and
// the same depth of the next version's ranking watches ahead. A node further down the ranking acts once enough nodes above it
// have expired to move it up.
const StewardDepth = 3

// SummaryEvery is the least time between two writes of a job's summary.
const SummaryEvery = time.Second

// SummaryLazy is the longest a summary change that admits no new waiter
// (takes, counts) waits to be written.
const SummaryLazy = 3 * time.Second

// admitsMore reports how many waiters summary next admits that cur does
// not (those ranked below next's free slot count, max_parallel less the
// slots it lists, that are not ranked below cur's), how many of next's
// waiters stay beyond its free count (spare: they would take slots freed
// next), and how many it queues on a held slot that cur did not queue
// there (queued). Takes admit nobody new; releases and a promotion do; a
// take queues the next waiter on the slot taken.
func admitsMore(d *model.Deployment, cur, next *model.RolloutSummary) (more, spare, queued int) {
	admitted := func(g *model.GroupSummary, maxP int) []model.SummaryWaiter {
		if g == nil {
			return nil
		}
		free := min(max(maxP-len(g.Slots), 0), len(g.Waiting))
		return g.Waiting[:free]
	}
	for name, gn := range next.Groups {
		maxP := 1
		if st := d.TaskGroups[name]; st != nil {
			maxP = max(st.MaxParallel, 1)
		}
		was := map[model.SummaryWaiter]bool{}
		for _, w := range admitted(cur.Groups[name], maxP) {
			was[w] = true
		}
		now := admitted(gn, maxP)
		for _, w := range now {
			if !was[w] {
				more++
			}
		}
		if gn != nil {
			spare += max(gn.WaitingTotal-len(now), 0)
			// A waiter queued on a held slot it was not queued on before:
			// the slot's holder tells it of its release only once a
			// summary names it (HandoffProtocol).
			q := queuedByAlloc(cur.Groups[name])
			for a, place := range queuedByAlloc(gn) {
				if p, ok := q[a]; !ok || p.Index != place.Index {
					queued++
				}
			}
		}
	}
	return more, spare, queued
}

// SummarySettle is how long the steward lets a change of a deployment's
// summary settle before writing it (the first summary of a deployment is
// written at once): a wave's releases then reach the waiters in one
// summary, not split across two intervals.
const SummarySettle = 100 * time.Millisecond

// SummaryCatch is the longest a summary that admits waiters is held, once
// it could be written, for slots of the deployment whose replacements are
// expected to turn healthy, and so be released, within it (releasesDue).
// Without it a wave whose replacements turn healthy just after a summary
// is admitted in two halves, each released just after the summary that
// admitted the other, and each then waits out SummaryEvery: the halves
// stay a second apart for the rest of the rollout (BENCHMARKS.md,
// "2026-12-06"). Held, the summary admits both halves, and the next wave
// is whole again. It is held only when that saves slot time (catchWait).
const SummaryCatch = 300 * time.Millisecond

// releaseLag is how long after a replacement turns healthy its slot's
// release is expected to reach the steward (the holder's pass, its
// delete, the delivery).
const releaseLag = 50 * time.Millisecond

// releaseLate is how late past its expected time a release is still
// waited for. On a loaded fleet a holder's release lags its replacement's
// health by more than releaseLag (its pass, its write, the delivery: 0.4-0.9
// s at the 90th percentile with 1,000 agents on two cores), and a summary
// written while a wave's releases are that late admits the part released
// so far and holds the rest a whole SummaryEvery: the wave splits again
// (BENCHMARKS.md, "2026-12-07").
const releaseLate = SummaryEvery

// releasesDue are the times, in order, by which slots of deployment d
// are expected to be released, of those expected within SummaryCatch of
// now; a release expected up to releaseLate ago and not yet come is
// expected releaseLag from now. A slot's release is expected releaseLag
// after its replacement turns healthy: every task running, the last
// started min_healthy_time ago (the allocation runner's health rule;
// checks, when the group has any, can only make it later, and the wait is
// bounded). A replacement not yet running, already judged, or judged by
// hand (health_check "manual") is not waited for, nor a release later
// than releaseLate. Only a delay rests on this: the holder's own clock, a
// late health, a release that does not come cost at most SummaryCatch.
func (f *Facts) releasesDue(d *model.Deployment) []time.Time {
	if f.Job == nil || f.Job.Version != d.JobVersion {
		return nil
	}
	var dues []time.Time
	for _, s := range f.Slots {
		if s.Slot.DeploymentID != d.ID {
			continue
		}
		a := f.alloc(s.Slot.NewAlloc)
		if a == nil || verdictKnown(a) || a.ClientStatus != model.ClientRunning {
			continue
		}
		g := f.Job.LookupGroup(s.Slot.Group)
		if g == nil {
			continue
		}
		u := model.EffectiveUpdate(f.Job, g)
		if u == nil || u.HealthCheck == "manual" {
			continue
		}
		var started time.Time
		running := len(a.TaskStates) > 0
		for _, ts := range a.TaskStates {
			switch {
			case ts == nil:
				running = false
			case ts.State == "running":
				if ts.StartedAt.After(started) {
					started = ts.StartedAt
				}
			case ts.State == "dead" && !ts.Failed:
				// a prestart or poststart task that did its work
			default:
				running = false
			}
		}
		if !running || started.IsZero() {
			continue
		}
		due := started.Add(u.MinHealthyTime.D() + releaseLag)
		if !due.After(f.Now) && due.After(f.Now.Add(-releaseLate)) {
			due = f.Now.Add(releaseLag) // late: it may come at any moment
		}
		if due.After(f.Now) && !due.After(f.Now.Add(SummaryCatch)) {
			dues = append(dues, due)
		}
	}
	slices.SortFunc(dues, time.Time.Compare)
	return dues
}

// catchWait is how long to hold a summary that admits more waiters now
// for releases expected at dues (releasesDue): the wait that saves the
// most slot time, or 0 when none saves any. Held w, the summary keeps the
// more slots it frees idle w longer; each release it then also admits
// (while spare waiters remain to take them) would otherwise have stayed
// free until the next summary, about SummaryEvery less w later. So a
// summary that frees a few slots waits for a wave's late half; one that
// frees most of a wave does not wait for its stragglers.
func catchWait(now time.Time, dues []time.Time, more, spare int) time.Duration {
	var best, bestGain time.Duration
	for i, due := range dues {
		w := due.Sub(now)
		gain := time.Duration(min(i+1, spare))*(SummaryEvery-w) - time.Duration(more)*w
		if gain > bestGain {
			best, bestGain = w, gain
		}
	}
	return best
}

// catchFor is catchWait for a summary that admits more waiters (none:
// a summary that only queues waiters on held slots is not held for
// releases, which the handoff passes on anyway).
func (f *Facts) catchFor(more, spare int, d *model.Deployment) time.Duration {
	if more == 0 {
		return 0
	}
	return catchWait(f.Now, f.releasesDue(d), more, spare)
}

// summaryWaiters is how many waiters a summary lists per group, as a
// multiple of max_parallel.
const summaryWaiters = 2

// Watching reports whether this node must hold every node's allocations
// of the job (Facts.Narrow false): it is among the first StewardDepth nodes
// of the ranking of the job version's record (which creates the record and
// stewards it: RankingKey), or of the next version's. The next version's
// first nodes watch ahead: when that version is put they create its record
// and steward it at once, instead of first making their watch of the job's
// allocations and pulling every node's (seconds, on a busy server: the
// rollout's start waited for it). Its inputs are the job, the records and
// the nodes; the allocations are not read.
func Watching(f *Facts) bool {
	now, ahead := WatchRoles(f)
	return now || ahead
}

// WatchRoles says why this node watches (Watching): now, it is among the
// first StewardDepth nodes of the ranking of the version in force; ahead,
// of the next version's. A node that watches ahead only has no duty for
// the version in force, so other nodes' allocations and slots changing
// decide nothing of its own until the next version is put (its own
// allocations, the job, the records and the nodes still do).
func WatchRoles(f *Facts) (now, ahead bool) {
	if f.Job == nil {
		return false, false
	}
	key := RankingKey(f.Job.Namespace, f.Job.ID, f.Job.Version)
	for _, r := range f.Records {
		if r.D != nil && r.D.JobVersion == f.Job.Version {
			key = r.D.ID
		}
	}
	r, _ := f.rankLive(key, f.Self, true)
	next, _ := f.rankLive(RankingKey(f.Job.Namespace, f.Job.ID, f.Job.Version+1), f.Self, true)
	return r >= 0 && r < StewardDepth, next >= 0 && next < StewardDepth
}

// RankingKey is the key of the rendezvous ranking that creates and
// stewards the record of a job version: the record's ID (derived from the
// namespace, job and version alone, so known before the record exists).
// The nodes that create a record are then the ones that steward it, and
// every node can tell who will before the version is put.
func RankingKey(namespace, jobID string, version uint64) string {
	return reconcile.DeploymentID(namespace, jobID, version)
}

// waiters are the group's outdated allocations that may take a slot of
// record d now, in admission order: ordered by hash(deployment ‖ node),
// then node, name and ID. Allocations whose replacement holds a slot, on
// nodes that may not update, outside the canary set while canarying, or
// updated in place here are not waiting. They are the full view's: a
// narrowed node (Facts.Narrow), which holds only its own allocations, is
// ranked by the summary's list instead (summaryRank).
func (f *Facts) waiters(d *model.Deployment, name string, holding map[string]bool) []waiter {
	st := d.TaskGroups[name]
	canaryOnly, canaries := canaryGate(st)
	var ws []waiter
	for _, a := range f.groupAllocs(d, name) {
		if a.Terminal() || a.JobVersion >= d.JobVersion || holding[a.ID] || !f.mayUpdate(a.NodeID) {
			continue
		}
		if canaryOnly && !canaries[a.NodeID] {
			continue
		}
		if a.NodeID == f.Self && f.InPlace[a.ID] {
			continue
		}
		ws = append(ws, waiter{node: a.NodeID, name: a.Name, id: a.ID, hash: Rendezvous(d.ID, a.NodeID)})
	}
	slices.SortFunc(ws, func(a, b waiter) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		if c := strings.Compare(a.node, b.node); c != 0 {
			return c
		}
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	return ws
}

// slotWaiters is waiters with the holding of the facts' own slots
// (f.Slots), remembered for the decision: the steward's summary and its
// own admission both rank the group's waiters, and each ranking hashes and
// sorts every outdated allocation of the job.
func (f *Facts) slotWaiters(d *model.Deployment, name string) []waiter {
	k := waitersKey{d: d, group: name}
	if ws, ok := f.waitersMemo[k]; ok {
		return ws
	}
	ws := f.waiters(d, name, holdingOf(f.Slots, name))
	if f.waitersMemo == nil {
		f.waitersMemo = map[waitersKey][]waiter{}
	}
	f.waitersMemo[k] = ws
	return ws
}

type waitersKey struct {
	d     *model.Deployment
	group string
}

// stillWaiting reports whether the waiter w the summary lists still waits
// as far as this node knows: its slot not held as far as holding says,
// and, on this node, its allocation still outdated here.
func (f *Facts) stillWaiting(d *model.Deployment, w model.SummaryWaiter, holding map[string]bool) bool {
	if holding[w.Alloc] {
		return false
	}
	if w.Node == f.Self {
		a := f.alloc(w.Alloc)
		if a == nil || a.Terminal() || a.JobVersion >= d.JobVersion || f.InPlace[w.Alloc] {
			return false // this node knows better: not waiting any more
		}
	}
	return true
}

// summaryRank is alloc's place among the waiters of a node without the
// fleet's allocations (-1: not among them) and their number: the summary's
// list for d, in its order, less what the node's own view of the slots,
// the nodes and the record says is no longer waiting (summaryListed,
// stillWaiting). It ranks without making that list: a waiting node ranks
// its own one or two allocations on each summary it hears, among 2 ×
// max_parallel listed (admission_ref_test.go keeps the list, made, as the
// reference).
func (f *Facts) summaryRank(d *model.Deployment, name string, holding map[string]bool, alloc string) (r, n int) {
	r = -1
	s := f.Summary
	if s == nil || s.DeploymentID != d.ID || s.Groups[name] == nil {
		return r, 0
	}
	// holding has the few old allocations of this node's own slots (and
	// "" for the summary's): compared in place rather than hashed for
	// each of the listed waiters.
	var few []string // nil: many, hashed
	if len(holding) <= 8 {
		few = make([]string, 0, len(holding))
		for a, held := range holding {
			if held {
				few = append(few, a)
			}
		}
	}
	for _, w := range f.summaryListed(s, d, name) {
		if few != nil {
			if slices.Contains(few, w.Alloc) || !f.stillWaiting(d, w, nil) {
				continue
			}
		} else if !f.stillWaiting(d, w, holding) {
			continue
		}
		if r < 0 && w.Alloc == alloc {
			r = n
		}
		n++
	}
	return r, n
}

// summaryListed are the waiters summary s lists for group name of record
// d that may take part in admission as far as the nodes and the record
// say (mayUpdate, the canary set while canarying), in its order: what
// summaryRank filters further by this pass's slots and this node's own
// allocations (stillWaiting). Remembered by the facts' index for the same summary and
// record (both replaced, never edited, when they change): a waiting node
// passes on one summary many times.
func (f *Facts) summaryListed(s *model.RolloutSummary, d *model.Deployment, name string) []model.SummaryWaiter {
	x := f.index()
	q := listedQuery{s: s, d: d, group: name}
	if x != nil {
		x.mu.Lock()
		l, ok := x.listed[q]
		x.mu.Unlock()
		if ok {
			return l
		}
	}
	st := d.TaskGroups[name]
	canaryOnly, canaries := canaryGate(st)
	// Most of the time every waiter listed takes part: the summary's own
	// list is the answer then (capped, so that a caller's append copies;
	// nothing writes into it). Otherwise a copy without the others.
	all := s.Groups[name].Waiting
	var out []model.SummaryWaiter
	for i, w := range all {
		if !f.mayUpdate(w.Node) || canaryOnly && !canaries[w.Node] {
			if out == nil {
				out = make([]model.SummaryWaiter, i, len(all))
				copy(out, all[:i])
			}
			continue
		}
		if out != nil {
			out = append(out, w)
		}
	}
	if out == nil {
		out = all[:len(all):len(all)]
	}
	if x != nil {
		x.mu.Lock()
		if len(x.listed) >= maxRankMemo {
			clear(x.listed)
		}
		x.listed[q] = out
		x.mu.Unlock()
	}
	return out
}

// Summarize derives the rollout summary of record d from a full view.
func Summarize(d *model.Deployment, f *Facts, counts map[string]Counts) *model.RolloutSummary {
	s := &model.RolloutSummary{Namespace: d.Namespace, JobID: d.JobID, JobVersion: d.JobVersion, DeploymentID: d.ID,
		Steward: f.Self, Time: f.Now, Groups: map[string]*model.GroupSummary{}}
	assign := f.allAt(AssignProtocol)
	handoff := assign && f.allAt(HandoffProtocol)
	for _, name := range slices.Sorted(mapsKeys(d.TaskGroups)) {
		st := d.TaskGroups[name]
		if st == nil {
			continue
		}
		ws := f.slotWaiters(d, name)
		maxP := max(st.MaxParallel, 1)
		c := counts[name]
		g := &model.GroupSummary{WaitingTotal: len(ws), Desired: c.Desired, Placed: c.Placed, Healthy: c.Healthy,
			Unhealthy: c.Unhealthy, Pending: c.Pending, Outdated: c.Outdated, InFlight: c.InFlight}
		for _, sl := range f.Slots {
			if sl.Slot.Group == name {
				g.Slots = append(g.Slots, model.SummarySlot{Index: sl.Slot.Index, Holder: sl.Slot.Holder})
			}
		}
		slices.SortFunc(g.Slots, func(a, b model.SummarySlot) int { return a.Index - b.Index })
		for _, w := range ws[:min(len(ws), summaryWaiters*maxP)] {
			g.Waiting = append(g.Waiting, model.SummaryWaiter{Node: w.node, Alloc: w.id})
		}
		if assign {
			var prev *model.GroupSummary
			if f.Summary != nil && f.Summary.DeploymentID == d.ID {
				prev = f.Summary.Groups[name]
			}
			if handoff {
				g.Waiting, g.Assigned, g.Next = queueSlots(f.Slots, name, maxP, g.Waiting, prev)
			} else {
				g.Assigned = assignSlots(f.Slots, name, maxP, g.Waiting, prev)
			}
		}
		s.Groups[name] = g
	}
	return s
}

// assignSlots assigns the free update slot indices of group name to the
// waiters admitted (the first max_parallel less held of waiting, in
// admission order): a waiter that prev assigned an index still free keeps
// it, and the others take the remaining free indices in order. The
// steward's view lags the takes: a waiter admitted by one summary that has
// not taken its slot when the next is derived is still listed, and keeps
// its index there, so the waiter the newer summary admits next is given
// another key (with the index a waiter's rank names in the free list, the
// two tried the same key, and one of them waited an interval for nothing).
func assignSlots(slots []Slot, name string, maxP int, waiting []model.SummaryWaiter, prev *model.GroupSummary) []int {
	held := heldOf(slots, name)
	free, n := held.free(maxP)
	n = min(n, len(waiting))
	if n == 0 {
		return nil
	}
	was := assignedByAlloc(prev)
	out := make([]int, n)
	taken := map[int]bool{}
	for i := range out {
		out[i] = -1
		if idx, ok := was[waiting[i].Alloc]; ok && idx >= 0 && idx < maxP && !held.has(idx) && !taken[idx] {
			out[i] = idx
			taken[idx] = true
		}
	}
	next := 0
	for i := range out {
		if out[i] >= 0 {
			continue
		}
		for taken[free[next]] {
			next++
		}
		out[i] = free[next]
		taken[free[next]] = true
	}
	return out
}

// queueSlots is assignSlots with the handoff (HandoffProtocol): it admits
// waiters to the free indices and queues the next ones on the slots, two
// deep, and returns the waiters reordered to match: the admitted first
// (Assigned[i] is waiting[i]'s), then the first in each slot's queue
// (Next[j] is waiting[len(Assigned)+j]'s), then the second in the queue of
// Next[j] (waiting[len(Assigned)+len(Next)+j], as far as waiters remain),
// then the rest in admission order.
//
// A waiter that prev queued on, or assigned, an index free now is admitted
// to it first (the first of its queue before the second): its holder told
// it of the release, and it may be taking it already, so the summary names
// the same waiter for the same key. The other free indices go to the first
// waiters left, in admission order. The slots queued on are the held ones
// (their releases come first) and then the ones just assigned, whose
// waiter's release comes a cycle later: a summary comes at most once a
// SummaryEvery, often after the first of a queue has taken the slot,
// replaced its allocation and released it, so the second is told by the
// first. A waiter queued on an index keeps its place, the second moving up
// to first once the first has gone; the remaining places go to the next
// waiters in admission order. Indices are queued on only while the group
// holds no more than max_parallel slots, so that each release admits
// exactly one waiter (a slot of an older version beyond max_parallel still
// counts, I5: its release admits nobody).
func queueSlots(slots []Slot, name string, maxP int, waiting []model.SummaryWaiter, prev *model.GroupSummary) (order []model.SummaryWaiter, assigned, next []int) {
	held := heldOf(slots, name)
	free, n := held.free(maxP)
	n = min(n, len(waiting))
	// was is each waiter's place in prev: its index, and 0 when prev
	// assigned it, else its depth in the index's queue (1 or 2); placed
	// is that place by position in waiting, and queuedAt the positions
	// prev queued on each index, in waiting's order. Each is built once:
	// looking the waiters up again for each slot made a summary of
	// max_parallel 1,000 cost 43 ms (BenchmarkStewardDecide).
	type place struct{ idx, depth int }
	was := map[string]place{}
	for a, idx := range assignedByAlloc(prev) {
		was[a] = place{idx, 0}
	}
	for a, q := range queuedByAlloc(prev) {
		was[a] = place{q.Index, q.Depth}
	}
	placed := make([]place, len(waiting))
	queuedAt := map[int][]int{}
	for i, w := range waiting {
		p, ok := was[w.Alloc]
		if !ok {
			p = place{-1, -1}
		} else if p.depth >= 1 {
			queuedAt[p.idx] = append(queuedAt[p.idx], i)
		}
		placed[i] = p
	}
	used := make([]bool, len(waiting))
	taken := make([]bool, maxP) // only indices below maxP are admitted to
	var admitted []int          // positions in waiting
	admit := func(i, idx int) {
		used[i], taken[idx] = true, true
		admitted = append(admitted, i)
		assigned = append(assigned, idx)
	}
	for depth := 0; depth <= 2; depth++ {
		for i := range waiting {
			if len(admitted) == n {
				break
			}
			if p := placed[i]; p.depth == depth && p.idx >= 0 && p.idx < maxP && !held.has(p.idx) && !taken[p.idx] && !used[i] {
				admit(i, p.idx)
			}
		}
	}
	// Free indices are taken in order, and taken ones stay taken: the
	// first one not taken is never before the last one found.
	k := 0
	for i := range waiting {
		if len(admitted) == n {
			break
		}
		if used[i] {
			continue
		}
		for k < len(free) && taken[free[k]] {
			k++
		}
		if k == len(free) {
			break
		}
		admit(i, free[k])
	}
	var first, second []int // positions in waiting, by position in next
	if held.n <= maxP {
		for i := 0; i < maxP; i++ {
			if held.has(i) {
				next = append(next, i)
			}
		}
		next = append(next, assigned...)
		// claim gives queue place k of index h to the waiter prev had
		// closest to the head of h's queue (at depth >= from), if any.
		claim := func(h, from int) int {
			best, bestDepth := -1, 3
			for _, i := range queuedAt[h] {
				if d := placed[i].depth; !used[i] && d >= from && d < bestDepth {
					best, bestDepth = i, d
				}
			}
			return best
		}
		// fill gives a place to the first waiter not placed yet (used
		// only ever turns true: the search goes on from the last).
		unused := 0
		fill := func() int {
			for unused < len(used) && used[unused] {
				unused++
			}
			if unused == len(used) {
				return -1
			}
			return unused
		}
		for k, h := range next {
			i := claim(h, 1)
			if i < 0 {
				i = fill()
			}
			if i < 0 {
				next = next[:k]
				break
			}
			used[i] = true
			first = append(first, i)
		}
		for _, h := range next {
			i := claim(h, 2)
			if i < 0 {
				i = fill()
			}
			if i < 0 {
				break
			}
			used[i] = true
			second = append(second, i)
		}
	}
	order = make([]model.SummaryWaiter, 0, len(waiting))
	for _, part := range [][]int{admitted, first, second} {
		for _, i := range part {
			order = append(order, waiting[i])
		}
	}
	for i, w := range waiting {
		if !used[i] {
			order = append(order, w)
		}
	}
	return order, assigned, next
}

// Queued is a waiter's place in a slot's queue: the slot's index, and
// its depth (1: told by the slot's holder, or by the waiter admitted to
// it; 2: told by the first of the queue, once that one took it and
// released it).
type Queued struct{ Index, Depth int }

// queuedByAlloc maps each waiter g queues on a slot (Next) to its place.
func queuedByAlloc(g *model.GroupSummary) map[string]Queued {
	if g == nil || len(g.Next) == 0 {
		return nil
	}
	out := make(map[string]Queued, 2*len(g.Next))
	for j, idx := range g.Next {
		if i := len(g.Assigned) + j; i < len(g.Waiting) {
			out[g.Waiting[i].Alloc] = Queued{idx, 1}
		}
		if i := len(g.Assigned) + len(g.Next) + j; i < len(g.Waiting) {
			out[g.Waiting[i].Alloc] = Queued{idx, 2}
		}
	}
	return out
}

// TellsAt is the depth of the queue of slot index of group name, in
// summary s, whose waiter a release of that slot by node teller admits
// (0: none): 1 when s lists teller holding the index, or assigns the index
// to a waiter on teller; 2 when teller is the first of the index's queue
// (it took the slot after s was written, and released it since).
func TellsAt(s *model.RolloutSummary, name string, index int, teller string) int {
	if s == nil || s.Groups[name] == nil {
		return 0
	}
	g := s.Groups[name]
	for _, sl := range g.Slots {
		if sl.Index == index && sl.Holder == teller {
			return 1
		}
	}
	for i, idx := range g.Assigned {
		if idx == index && i < len(g.Waiting) && g.Waiting[i].Node == teller {
			return 1
		}
	}
	for j, idx := range g.Next {
		if i := len(g.Assigned) + j; idx == index && i < len(g.Waiting) && g.Waiting[i].Node == teller {
			return 2
		}
	}
	return 0
}

// QueuedOn is the waiter summary s queues on slot index of group name
// that a release of the slot by node teller admits (TellsAt): who the
// releasing node tells.
func QueuedOn(s *model.RolloutSummary, name string, index int, teller string) (model.SummaryWaiter, bool) {
	depth := TellsAt(s, name, index, teller)
	if depth == 0 {
		return model.SummaryWaiter{}, false
	}
	g := s.Groups[name]
	for a, q := range queuedByAlloc(g) {
		if q.Index == index && q.Depth == depth {
			for _, w := range g.Waiting {
				if w.Alloc == a {
					return w, true
				}
			}
		}
	}
	return model.SummaryWaiter{}, false
}

// allAt reports whether every live node advertises rollout protocol
// level at least: of the whole fleet (FleetProtocol) and of the facts'
// nodes (self included).
func (f *Facts) allAt(level int) bool {
	if f.FleetProtocol != 0 && f.FleetProtocol < level {
		return false
	}
	for _, n := range f.Nodes {
		if n.Live && n.Protocol < level {
			return false
		}
	}
	return true
}

// assignedByAlloc maps each waiter g assigns a slot index to that index
// (nil when g assigns none).
func assignedByAlloc(g *model.GroupSummary) map[string]int {
	if g == nil || len(g.Assigned) == 0 {
		return nil
	}
	out := make(map[string]int, len(g.Assigned))
	for i, idx := range g.Assigned {
		if i < len(g.Waiting) {
			out[g.Waiting[i].Alloc] = idx
		}
	}
	return out
}

// sameSummary reports whether two summaries say the same (their writer
// and time aside).
func sameSummary(a, b *model.RolloutSummary) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.DeploymentID != b.DeploymentID || a.JobVersion != b.JobVersion || len(a.Groups) != len(b.Groups) {
		return false
	}
	for name, ga := range a.Groups {
		gb := b.Groups[name]
		if gb == nil || ga.WaitingTotal != gb.WaitingTotal || ga.Desired != gb.Desired || ga.Placed != gb.Placed ||
			ga.Healthy != gb.Healthy || ga.Unhealthy != gb.Unhealthy || ga.Pending != gb.Pending || ga.Outdated != gb.Outdated ||
			ga.InFlight != gb.InFlight || !slices.Equal(ga.Waiting, gb.Waiting) || !slices.Equal(ga.Slots, gb.Slots) ||
			!slices.Equal(ga.Assigned, gb.Assigned) || !slices.Equal(ga.Next, gb.Next) {
			return false
		}
	}
	return true
}

// summaryDuty asks for a new summary when the one stored says something
// else than the full view does, at most once per SummaryEvery (until
// then RetryIn says when to look again). It runs for the steward and its
// overdue deputies (act).
func (f *Facts) summaryDuty(dec *Decision, d *model.Deployment, counts map[string]Counts, act func(string) bool) {
	if d.Status != model.DeploymentRunning && d.Status != model.DeploymentSuccessful {
		return
	}
	next := Summarize(d, f, counts)
	cur := f.Summary
	if sameSummary(next, cur) {
		return
	}
	key := "summary"
	if cur != nil {
		key += ":" + strconv.FormatInt(cur.Time.UnixNano(), 10)
	}
	if cur != nil && cur.DeploymentID == d.ID {
		// At most once per SummaryEvery. A change that admits nobody new
		// (slots taken, counts moved) waits up to SummaryLazy: the
		// waiters need not know of takes (each knows its own, and the
		// ranks after it stay below the free count). One that frees a
		// slot or lists a new waiter is written once it has settled for
		// SummarySettle (from the first pass that saw it): a wave's
		// slots are released as each replacement turns healthy, within
		// a few hundred milliseconds, and a summary written on the first
		// release would admit one waiter and hold the rest an interval.
		since := f.Now.Sub(cur.Time)
		wait := SummaryLazy - since
		if more, spare, queued := admitsMore(d, cur, next); more > 0 || queued > 0 {
			settle := "settle:" + key
			wait = max(SummaryEvery-since, SummarySettle-f.Overdue[settle])
			if wait > 0 {
				dec.Due = append(dec.Due, settle)
			} else if w := f.catchFor(more, spare, d); w > 0 {
				// Writable, but more of the wave's slots are about to be
				// released: one summary admits them too (SummaryCatch).
				catch := "catch:" + key
				wait = min(w, SummaryCatch-f.Overdue[catch])
				if wait > 0 {
					dec.Due = append(dec.Due, catch)
				}
			}
		}
		if wait > 0 {
			if dec.RetryIn == 0 || wait < dec.RetryIn {
				dec.RetryIn = wait
			}
			return
		}
	}
	if !act(key) {
		return
	}
	dec.Summary = next
}

// admissionGroup reads the group's slots as admission counts them for
// record d: their indexes, the old allocations they replace ("" for one
// the summary lists) and their holders by index. They are f.Slots or, when
// those are this node's own only (OwnSlotsOnly), those plus the slots that
// d's summary lists at the indices this node's memory does not hold (one
// it released and the summary still shows is counted until the next
// summary: a delay, never an extra take). A stale summary only delays an
// admission or costs a lost Create: the bound is the keys' (I5).
//
// It reads them without making slot records of them: a waiting node
// decides on every summary it hears, and a summary mid-rollout lists
// max_parallel held slots, each of which cost it a key, a record and a
// place in three collections (admission_ref_test.go keeps that way as the
// reference).
func (f *Facts) admissionGroup(d *model.Deployment, group string) (held heldSet, holding map[string]bool, holders []string) {
	var listed []model.SummarySlot
	if f.OwnSlotsOnly && f.Summary != nil && f.Summary.DeploymentID == d.ID {
		if g := f.Summary.Groups[group]; g != nil {
			listed = g.Slots
		}
	}
	type holder struct {
		index int
		node  string
	}
	hs := make([]holder, 0, len(f.Slots)+len(listed))
	holding = map[string]bool{}
	for _, s := range f.Slots {
		if s.Slot.Group == group {
			held.add(s.Slot.Index)
			holding[s.Slot.OldAlloc] = true
			hs = append(hs, holder{s.Slot.Index, s.Slot.Holder})
		}
	}
	counted := false
	for _, sl := range listed {
		if f.slotHeld(group, sl.Index) {
			continue // this node's own memory of the index
		}
		held.add(sl.Index)
		hs = append(hs, holder{sl.Index, sl.Holder})
		counted = true
	}
	if counted {
		holding[""] = true // the summary names no old allocation
	}
	slices.SortFunc(hs, func(a, b holder) int { return a.index - b.index })
	if len(hs) > 0 {
		holders = make([]string, len(hs))
		for i, h := range hs {
			holders[i] = h.node
		}
	}
	return held, holding, holders
}

// heldSet is a set of held slot indices (admissionGroup): what a map of
// them said, without hashing max_parallel keys per decision.
type heldSet struct {
	at []bool // at[i]: index i is held, for 0 <= i < denseSlots
	// far are the other indices held (a malformed summary's negative or
	// huge ones), listed: a slice sized by whatever index a summary names
	// would be a summary's to size.
	far []int
	n   int // how many are held, both kinds
}

// denseSlots bounds the indices heldSet keeps in its bit set (max_parallel
// beyond it is past any fleet this design serves).
const denseSlots = 1 << 16

func (h *heldSet) add(i int) {
	if i < 0 || i >= denseSlots {
		if !slices.Contains(h.far, i) {
			h.far = append(h.far, i)
			h.n++
		}
		return
	}
	if i >= len(h.at) {
		h.at = append(h.at, make([]bool, i+1-len(h.at))...)
	}
	if !h.at[i] {
		h.at[i] = true
		h.n++
	}
}

func (h heldSet) has(i int) bool {
	if i < 0 || i >= denseSlots {
		return slices.Contains(h.far, i)
	}
	return i < len(h.at) && h.at[i]
}

// free are the slot indices below maxP the set does not hold, in order,
// and how many of them may be taken now: maxP less every held slot (one
// beyond maxP, an older version's, still counts: I5), at most the free
// ones.
func (h heldSet) free(maxP int) (free []int, n int) {
	for i := 0; i < maxP; i++ {
		if !h.has(i) {
			free = append(free, i)
		}
	}
	return free, min(max(maxP-h.n, 0), len(free))
}

// assignedTo is the index g assigns to the waiter alloc, if any
// (assignedByAlloc's answer for one key: the last place that lists it).
func assignedTo(g *model.GroupSummary, alloc string) (idx int, ok bool) {
	if g == nil {
		return 0, false
	}
	for i, x := range g.Assigned {
		if i < len(g.Waiting) && g.Waiting[i].Alloc == alloc {
			idx, ok = x, true
		}
	}
	return idx, ok
}

// queuedAs is the place g queues the waiter alloc at, if any
// (queuedByAlloc's answer for one key: the last place that lists it).
func queuedAs(g *model.GroupSummary, alloc string) (q Queued, ok bool) {
	if g == nil {
		return q, false
	}
	for j, idx := range g.Next {
		if i := len(g.Assigned) + j; i < len(g.Waiting) && g.Waiting[i].Alloc == alloc {
			q, ok = Queued{idx, 1}, true
		}
		if i := len(g.Assigned) + len(g.Next) + j; i < len(g.Waiting) && g.Waiting[i].Alloc == alloc {
			q, ok = Queued{idx, 2}, true
		}
	}
	return q, ok
}

// heldOf is the group's held slot indices.
func heldOf(slots []Slot, group string) heldSet {
	var held heldSet
	for _, s := range slots {
		if s.Slot.Group == group {
			held.add(s.Slot.Index)
		}
	}
	return held
}

// holdingOf is the old allocations the group's held slots replace
// (groupSlots' second result).
func holdingOf(slots []Slot, group string) map[string]bool {
	holding := map[string]bool{}
	for _, s := range slots {
		if s.Slot.Group == group {
			holding[s.Slot.OldAlloc] = true
		}
	}
	return holding
}
