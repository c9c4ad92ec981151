package agent

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"sort"
	"time"

	"github.com/hivelet/hivelet/host/allocrunner"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/host/rollout"
	"github.com/hivelet/hivelet/host/state"
	"github.com/hivelet/hivelet/host/wanted"
)

// jobInForce resolves what a job key orders, using the state store's last
// good version when the view holds none (a malformed declaration read at
// boot must not make the node forget what it runs).
func jobInForce(st wanted.JobState, stored *state.JobRecord) (*model.Job, wanted.Order) {
	if st.Value == nil && stored != nil && stored.Job != nil {
		st.Value = stored.Job
		st.Revision = stored.Revision
		if st.Key == "" {
			st.Absent = true // known only from the store: the key is not in the view
		}
	}
	return st.Value, wanted.OrderFor(st)
}

// Pass runs one full reconcile pass now (tests and benchmarks call it; Run
// runs full passes on its resync period and incremental ones on changes).
// Passes never overlap.
func (a *Agent) Pass(ctx context.Context) { a.pass(ctx, true) }

// pass runs one pass. An incremental pass (full false) skips a job whose
// signature (everything its plan depends on but the clock) is unchanged
// since its last successful reconcile: the reconciler is pure, so the plan
// would be the same. The clock-driven rules (lost_after, deadlines) are
// covered by the full passes.
func (a *Agent) pass(ctx context.Context, full bool) {
	a.passMu.Lock()
	defer a.passMu.Unlock()
	defer a.notePaced()
	start := time.Now()
	if a.cfg.PassCPU {
		runtime.LockOSThread()
		cpu0, ok := threadCPU()
		defer func() {
			if cpu1, ok1 := threadCPU(); ok && ok1 {
				a.mu.Lock()
				a.status.PassCPUMS += float64((cpu1 - cpu0).Microseconds()) / 1000
				a.mu.Unlock()
			}
			runtime.UnlockOSThread()
		}()
	}
	defer func() {
		el := time.Since(start)
		a.mu.Lock()
		a.status.PassMS += float64(el.Microseconds()) / 1000
		a.mu.Unlock()
	}()
	now := a.cfg.Now()
	a.passSeq++
	a.mu.Lock()
	restoreFailed := a.restoreErr != nil
	a.mu.Unlock()
	if restoreFailed && full {
		// Fail closed is not forever: a store that becomes readable again
		// (space freed, a bad record removed) is restored on a full pass.
		if err := a.Restore(ctx); err == nil {
			a.log.Info("state store readable again: restored")
		}
	}
	self := a.cfg.Node()
	a.passNode.Store(self)
	defer a.passNode.Store(nil)
	view := a.cfg.Source.View()

	if done := a.runnersDone.Load(); full || done != a.collectedDone || a.doneUnfinished {
		// Read before the walk: a runner done during it is walked again
		// by the next pass.
		a.collectedDone = done
		a.doneUnfinished = a.collectFinished() > 0
	}

	if reason := a.mayAct(ctx); reason != "" {
		a.index.built = false // changes read by no pass: the next one rebuilds
		a.mu.Lock()
		a.status.FailedClosed = reason
		a.status.Passes = a.passSeq
		a.status.LastPass = now
		a.mu.Unlock()
		a.cfg.Metrics.ObserveReconcile("failed_closed", time.Since(start))
		a.cfg.Metrics.SetEnumerationFailed(true)
		a.log.Error("reconcile pass refused: failing closed", "pass", a.passSeq, "reason", reason)
		return
	}

	a.echoes.passed(view)
	a.forgetGoneSlots(view)
	a.checkOwnKeys(a.cfg.Source, view)

	// The fleet is counted when its node records changed, not on every
	// full pass too: the counts read the records alone, no clock (a
	// thousand agents' full passes, one each 5 s, made the walks 2 % of a
	// 1,000-agent run's CPU).
	if a.fleetCountStale(view) {
		a.decideNarrowing(view)
		a.countFleet(view)
		a.nodeExpiredInView = anyNodeExpired(view, a.nodeID)
	}
	// Which jobs to look at: on a full pass all of them; on an incremental
	// one those whose view inputs changed since the last pass (the change
	// log says which), whose allocations here changed, and those that had
	// not converged. The others' plans cannot have changed: the reconciler
	// is pure and the clock-driven rules are the full passes'.
	viewDirty, all := a.index.refresh(a.cfg.Source, view, a.nodeID, nodeSig(self), full)
	baseSig := a.index.baseSig()
	ownDirty := a.takeOwnDirty()
	if full {
		a.lastSig = map[string]uint64{}
	}
	var waited []string // jobs whose wait ended: looked at below
	for k, t := range a.retryAt {
		if !now.Before(t) {
			delete(a.lastSig, k) // its wait is over: plan it again
			delete(a.retryAt, k)
			waited = append(waited, k)
		}
	}
	look := func(k string) bool { return full || all || viewDirty[k] || ownDirty[k] }
	// Jobs with work come first: their starts must not wait for the
	// reconciles of jobs in flight or the signature checks of every
	// converged job. First the jobs this node runs nothing of and that did
	// not converge (a new job), then the others that did not converge, then
	// the converged ones that changed; each part in key order. Converged
	// jobs that did not change are only counted.
	var fresh, todo, converged []string
	unchanged := 0
	add := func(k string) {
		_, ok := a.lastSig[k]
		switch {
		case ok && !look(k):
			unchanged++
		case ok:
			converged = append(converged, k)
		case !a.hasOwn(k):
			fresh = append(fresh, k)
		default:
			todo = append(todo, k)
		}
	}
	if full || all || a.unsettled == nil {
		for k := range view.Jobs.All() {
			add(k)
		}
		a.mu.Lock()
		var ownOnly []string
		for k := range a.ownJobs {
			if _, ok := view.Jobs.Get(k); !ok {
				ownOnly = append(ownOnly, k)
			}
		}
		a.mu.Unlock()
		for _, k := range ownOnly {
			add(k)
		}
	} else {
		// An incremental pass walks only the jobs that may need a look:
		// those whose view inputs or allocations here changed, those not
		// converged at the last pass (unsettled) and those whose wait just
		// ended. Every other job the walk above would visit is converged
		// and unchanged: it was in view at the last pass (a job key new to
		// the view is a change), and a job leaves the converged set only
		// as it is looked at. The walk over every job was a quarter of a
		// pass at 500 jobs, and on the way from a put to its start.
		inView := 0
		visit := func(k string) {
			if _, dup := a.visited[k]; dup {
				return
			}
			a.visited[k] = struct{}{}
			if _, ok := view.Jobs.Get(k); ok {
				inView++
			} else {
				a.mu.Lock()
				_, own := a.ownJobs[k]
				a.mu.Unlock()
				if !own {
					return // neither in view nor run here: not a job of this pass
				}
			}
			add(k)
		}
		clear(a.visited)
		for k, d := range viewDirty {
			if d {
				visit(k)
			}
		}
		for k, d := range ownDirty {
			if d {
				visit(k)
			}
		}
		for k := range a.unsettled {
			visit(k)
		}
		for _, k := range waited {
			visit(k)
		}
		// The converged jobs not visited, each one skipped (the own jobs
		// the view does not hold are not counted among them).
		unchanged += view.Jobs.Len() - inView
	}
	sort.Strings(fresh)
	sort.Strings(todo)
	sort.Strings(converged)
	sorted := append(append(fresh, todo...), converged...)

	var counts Counts
	var errs []error
	var orphaned []string
	// Converged and unchanged: a job converges only where its order is to
	// act (a kept or orphaned job never does), so each is one skipped job.
	counts.Jobs += unchanged
	counts.Skipped += unchanged
	loopStart := time.Now()
	a.cutChecked = view.Generation
	for i, k := range sorted {
		if i > 0 && time.Since(loopStart) >= passSlice && a.declarationWaiting() {
			// A job was put while this pass decides others (a full pass
			// decides every job: tens of milliseconds at 500 jobs): the
			// pass gives way, and the next one decides the new declaration
			// first (a job this node runs nothing of comes first) and then
			// the jobs left here, which are no longer taken as converged.
			// Each pass decides passSlice's worth at least, so the jobs
			// left are decided however fast jobs are put.
			for _, r := range sorted[i:] {
				delete(a.lastSig, r)
			}
			counts.Deferred = len(sorted) - i
			a.KickFor("kick: a pass gave way to a declaration")
			break
		}
		a.mu.Lock()
		stored := a.lastGood[k]
		a.mu.Unlock()
		st := view.Jobs.At(k)
		job, order := jobInForce(st, stored)
		switch order {
		case wanted.OrderNone:
			continue
		case wanted.OrderKeep:
			if a.hasOwn(k) {
				orphaned = append(orphaned, k)
			}
			continue
		}
		counts.Jobs++
		if a.cfg.PolicyPending != nil && !job.Stop {
			if pending, why := a.cfg.PolicyPending(job); pending {
				counts.PolicyHeld++
				a.log.Debug("job held until its policy is loaded", "job", job.ID, "why", why)
				delete(a.lastSig, k)
				continue
			}
		}
		own := a.ownOf(k)
		othersSig := a.index.othersSig(k) // the allocations themselves only when decided (below)
		viewDeps, viewDepsSig := a.index.depsOf(view, k)
		deps, depsSig := a.withWritten(k, viewDeps, view, viewDepsSig)
		// The job's slots are read before the signature only where the
		// summary's share of it depends on them (summaryMatters) or the
		// node watches every job whole (a small fleet, one node); a node
		// of a narrowed fleet that watches the job (its steward, its
		// deputies) reads them once its pass is not put off (deputyLast,
		// below): copying the job's held slots from the view on each of
		// its passes, most of which it puts off, was a third of a
		// 1,000-agent steward's CPU (BENCHMARKS.md, "The steward's
		// decision"). Put off before the signature is known, a pass arms
		// the put-off's timer also when nothing changed (one more pass).
		var slots []rollout.Slot
		var slotsSig uint64
		var slotsWatched, slotsRead bool
		readSlots := func() {
			slots, slotsSig, slotsWatched = a.slotsOf(view, job.Namespace, job.ID)
			slotsRead = true
		}
		if !a.narrowing() || !a.summaryNeedsNoSlots(k) {
			readSlots()
		}
		sum, sumSig := a.summaryOf(view, k, job.Namespace, job.ID)
		_, releasedSig := a.releasedFor(job)
		if !a.summaryMatters(k, job, own, slots) {
			sumSig = 0
		} else if a.narrowFor(view, job) && !summaryLists(sum, a.nodeID) {
			// Ranked by the summary alone (rollout.Facts.Narrow) and not
			// listed in it: no summary that does not list this node can
			// admit it (rollout.Held.Unlisted), so such a summary is no
			// change here. At 1,000 agents each summary otherwise made a
			// decision on every waiting node, most of them far down the
			// queue.
			sumSig = unlistedSig
		}
		if a.narrowing() && a.aheadJobs[k] {
			// Watching only for the next version (its record's first
			// nodes): the other nodes' allocations and the slots change
			// nothing this node decides for the version in force; its
			// passes for them cost a steward's (a tenth of a core at
			// 1,000 nodes) for nothing.
			othersSig, slotsSig = 0, 0
		}
		// quiet is the signature but for the other nodes' allocations and
		// the slots (what an idle deputy puts off: below).
		quiet := baseSig ^ mix(st.Applied) ^ mix(st.Revision+1)*3 ^ depsSig*7 ^ allocsSig(own) ^ sumSig*19 ^ releasedSig*31
		if a.filtered() && view.Watches(fleet.KindAllocs, wanted.AllocJobFilter(job.Namespace, job.ID)) {
			quiet ^= mix(23) // watched on every node, or not: a different decision
		}
		if a.filtered() && view.Watches(fleet.KindRollout, wanted.SlotFilter(job.Namespace, job.ID)) {
			quiet ^= mix(29) // its slots watched, or not
		}
		if stored != nil {
			quiet ^= mix(stored.Revision) * 11
		}
		// putOff: an idle deputy (below) whose job moved only in other
		// nodes' allocations or slots since it last decided, less than
		// deputyEvery ago (a steward under the handoff: stewardEvery),
		// decides again then.
		putOff := func() bool {
			d, ok := a.deputyLast[k]
			if !ok || d.quiet != quiet || !now.Before(d.at.Add(d.every)) {
				return false
			}
			at := d.at.Add(d.every)
			if t, set := a.retryAt[k]; !set || at.Before(t) {
				a.retryAt[k] = at
				a.wakeFor(k, at.Sub(now), "timer: a deputy's next decision")
			}
			counts.Skipped++
			return true
		}
		if !slotsRead {
			if putOff() {
				continue // whatever the slots say: they are not read
			}
			readSlots() // never an ahead-only job's: those were read above
		}
		sig := quiet ^ othersSig*5 ^ slotsSig*17
		if prev, ok := a.lastSig[k]; ok && prev == sig {
			counts.Skipped++
			continue
		}
		if putOff() {
			continue
		}
		others := a.index.othersOf(k)
		plan, err := a.plan(job, self, own, view, others, deps, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("reconciling job %s: %w", k, err))
			continue
		}
		// The rollout core licenses what the plan may do now and says which
		// shared writes to attempt; policies are asked by the worker.
		rf := a.rolloutFacts(job, self, view, own, others, deps, slots, plan, now)
		rf.OwnSlotsOnly = !slotsWatched
		if a.filtered() {
			w, slotsIn := true, view.Watches(fleet.KindRollout, wanted.SlotFilter(job.Namespace, job.ID))
			needSlots := true // both buckets whole (or being pulled again)
			if a.narrowing() {
				inForce, ahead := rollout.WatchRoles(&rf)
				w = (inForce || ahead) && !job.Stop
				a.watchJobs[k] = w
				a.aheadJobs[k] = w && !inForce
				// Until a pass has seen the job's slots whole since the
				// start, a node with allocations of the job may hold one
				// it does not know of (a take just before a restart). A
				// node whose first pass of the job finds none running
				// takes every slot it holds in this boot, and knows them.
				// Waiters and holders otherwise watch no slot key: the
				// summary says which are held, and a holder's own takes
				// are in its memory (docs/rollout.md, "Admission").
				if _, seen := a.slotsChecked[k]; !seen {
					a.slotsChecked[k] = !hasLive(own)
				}
				needSlots = w || (!a.slotsChecked[k] && hasLive(own))
				a.slotJobs[k] = needSlots
			}
			if slotsIn {
				a.slotsChecked[k] = true
			}
			if (w && rf.Narrow) || (needSlots && !slotsIn) {
				// A steward or creator candidate acts only with the job's
				// allocations on every node in view (and every node of a
				// small fleet is one), and a node that may take or hold a
				// slot only with the job's slots in view: the pull was just
				// asked for, and its end brings the next pass.
				counts.WatchHeld++
				delete(a.lastSig, k)
				continue
			}
		}
		dec := rollout.Decide(rf)
		a.decisions++
		a.noteDecision(dec, now, k)
		if dec.Hold != "" {
			counts.FenceHeld++
			a.log.Warn("job held: planning and writing nothing for it", "job", k, "why", dec.Hold)
			delete(a.lastSig, k)
			continue
		}
		startsBefore := counts.Place + counts.Update
		jobErrs := a.apply(ctx, job, plan, &dec, &counts)
		errs = append(errs, jobErrs...)
		if counts.Place+counts.Update > startsBefore {
			// Let the runners just started reach their drivers before this
			// pass goes on through the other jobs: a new goroutine runs only
			// when a processor is free, and the pass holds one.
			runtime.Gosched()
		}
		work := rolloutWork{job: job, jobRev: st.Revision, dec: dec, facts: rf}
		// A job with steward duties waiting on a deputy's timer is not
		// converged: the kick that ends the wait must find it looked at
		// again. One whose only work left is a wait (a summary held back
		// for SummaryLazy, a creator's delay: RetryIn) is converged until
		// the wait ends, or until its inputs change: deciding it on every
		// pass meanwhile decides the same (the decision reads the clock
		// only through the waits it reports), and with a few hundred jobs
		// finishing their rollouts on a node those re-decisions were most
		// of every pass.
		//
		// So is a running deployment whose steward has nothing to do but
		// ask the completion policy (Decision.Verdict): the verdict is
		// asked once, by the work queued below, and again when the job's
		// inputs change or verdictEvery later, whichever is first (the
		// policy reads the clock: its deadlines). Asked on every pass, a
		// node stewarding twenty rollouts asked twenty verdicts per pass.
		retry := dec.RetryIn
		verdictOnly := dec.Verdict && verdictAlone(work)
		if verdictOnly && (retry == 0 || retry > verdictEvery) {
			retry = verdictEvery
		}
		//
		// A deputy of the job's steward with nothing to do derives what
		// the steward should have done, to take over a duty left undone
		// for its rank's share of DeputyStep (Decision.Due). On every
		// change of the job's allocations, that derivation cost each of
		// the two deputies more than the steward's own work (a tenth of a
		// core and more at 1,000 nodes). Such a deputy decides again at
		// once when anything but the other nodes' allocations and slots
		// changes (its own allocations, the job, the records, the
		// summary, the node set: a dead steward's record expiring), and
		// otherwise at most each deputyEvery (above): a duty is seen
		// overdue at most that much later.
		planEmpty := len(plan.Place)+len(plan.Update)+len(plan.Stop)+len(plan.Migrate) == 0
		//
		// The steward itself, while the slot handoff is in force, decides
		// other nodes' allocation and slot changes at most each
		// stewardEvery (its work of this pass is queued as ever).
		//
		// A node watching the job only for its next version's sake (one of
		// that version's first nodes: aheadJobs) whose allocations wait
		// for a slot of the version in force watches every allocation of
		// the job, so each one's change made it derive the whole rollout
		// again: at 1,000 agents such a node decided its job 386 times in
		// a rollout, the costliest agent of the fleet, more than the
		// steward. It waits like any waiter: its admission also comes with
		// a summary or a release hint (both in quiet: at once), and it
		// decides other nodes' changes at most each stewardEvery.
		idle := len(jobErrs) == 0 && planEmpty && len(dec.Held) == 0 && dec.Disruption == ""
		switch {
		case idle && dec.StewardRank > 0 && dec.StewardRank < rollout.StewardDepth && work.empty():
			a.setDeputy(k, deputyDecision{quiet: quiet, at: now, every: deputyEvery})
		case idle && dec.StewardRank == 0 && dec.Record != nil && a.fleetLevel >= rollout.HandoffProtocol && clocksStarted(dec.Record.D):
			a.setDeputy(k, deputyDecision{quiet: quiet, at: now, every: stewardEvery})
		case a.narrowing() && a.aheadJobs[k] && len(jobErrs) == 0 && work.empty() && len(dec.Due) == 0 &&
			dec.Disruption == "" && waitsForSlots(plan, &dec):
			a.setDeputy(k, deputyDecision{quiet: quiet, at: now, every: stewardEvery})
		default:
			a.dropDeputy(k)
		}
		settled := len(jobErrs) == 0 && planEmpty &&
			len(dec.Held) == 0 && (work.empty() || verdictOnly) && len(dec.Due) == 0 && dec.Disruption == ""
		if !settled && len(jobErrs) == 0 && waitsUnlisted(plan, &dec) && work.empty() && len(dec.Due) == 0 && dec.Disruption == "" {
			// Its updates all wait for a summary that lists this node: as
			// converged as a settled job until its inputs change (the
			// summary's listing of this node among them: sumSig).
			settled = true
		}
		switch {
		case settled && retry == 0:
			a.lastSig[k] = sig // converged: nothing to redo until something changes
			delete(a.retryAt, k)
		case settled:
			a.lastSig[k] = sig
			a.retryAt[k] = now.Add(retry)
			if retry != dec.RetryIn {
				a.wakeFor(k, retry, "timer: a verdict asked again") // noteDecision asks for RetryIn only
			}
		default:
			delete(a.lastSig, k)
			delete(a.retryAt, k)
		}
		if st.Value != nil && st.Revision > 0 {
			a.rememberJob(k, st.Value, st.Revision) // after the starts: an fsync
		}
		a.queueRollout(k, work)
	}
	// The jobs looked at that did not converge are looked at again by the
	// next pass (the incremental walk above).
	if a.unsettled == nil {
		a.unsettled = map[string]struct{}{}
	}
	clear(a.unsettled)
	for _, k := range sorted {
		if _, ok := a.lastSig[k]; !ok {
			a.unsettled[k] = struct{}{}
		}
	}
	// A job key gone: nothing to steward, no slot to take or release,
	// nothing to wait for. The keys of these maps come from the views
	// passes decided, and a Source keeps every job key it has seen (a key
	// gone is an absent declaration, still decided: wanted-state.md), so
	// a walk finds a key to remove only in a view that lost one: its job
	// count went down, or its jobs bucket was re-created (the revision
	// went back). It is made then and on full passes (a view not made by
	// a Source that swapped one key for another), not on each new
	// declaration or job: with new jobs put back to back at 500 jobs that
	// walk of six maps was a quarter of the passes' CPU.
	if a.pruned.due(full, view) {
		forgetGone(a.watchJobs, view.Jobs)
		forgetGone(a.aheadJobs, view.Jobs)
		for k := range a.deputyLast {
			if _, ok := view.Jobs.Get(k); !ok {
				a.dropDeputy(k)
			}
		}
		forgetGone(a.retryAt, view.Jobs)
		forgetGone(a.slotJobs, view.Jobs)
		forgetGone(a.slotsChecked, view.Jobs)
	}
	a.setFilters()
	a.lossPass(view, self, now)
	counts.Errors = len(errs)
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Error())
		a.log.Error("reconcile pass error", "pass", a.passSeq, "err", e)
	}
	el := time.Since(start)
	a.mu.Lock()
	a.status.FailedClosed = ""
	a.status.LastPass = now
	a.status.LastPassMS = float64(el.Microseconds()) / 1000
	a.status.Passes = a.passSeq
	a.status.Decisions = a.decisions
	a.status.LastCounts = counts
	a.status.Errors = msgs
	a.status.Orphaned = orphaned
	a.status.LocalPlans = a.localPlans.Load()
	if view.ChangeGeneration != a.rejectionsGen || a.rejectionsGen == 0 {
		// Heartbeats reject nothing: only another change walks the records.
		a.status.Rejections = view.Rejections()
		a.rejectionsGen = view.ChangeGeneration
	}
	a.mu.Unlock()
	outcome := "ok"
	if len(errs) > 0 {
		outcome = "errors"
	}
	a.cfg.Metrics.ObserveReconcile(outcome, el)
	a.cfg.Metrics.SetEnumerationFailed(false)
	level := slog.LevelDebug // a pass that did nothing is not news
	if counts.Place+counts.Update+counts.InPlace+counts.Stop+counts.Migrate+counts.Errors > 0 {
		level = slog.LevelInfo
	}
	a.log.Log(ctx, level, "reconcile pass", "pass", a.passSeq, "jobs", counts.Jobs, "place", counts.Place, "update", counts.Update,
		"in_place", counts.InPlace, "stop", counts.Stop, "migrate", counts.Migrate, "lost", counts.Lost,
		"disconnecting", counts.Disconnecting, "reconnecting", counts.Reconnecting, "ignore", counts.Ignore,
		"awaiting_promotion", counts.Awaiting, "held", counts.Held, "watch_held", counts.WatchHeld, "skipped", counts.Skipped, "deferred", counts.Deferred, "policy_held", counts.PolicyHeld, "errors", counts.Errors, "orphaned", len(orphaned),
		"view_generation", view.Generation, "duration_ms", a.status.LastPassMS)
}

// passSlice is how long a pass decides jobs before it may give way to a
// job's declaration that came meanwhile (declarationWaiting).
// (A variable for the tests.)
var passSlice = 2 * time.Millisecond

// declarationWaiting reports whether a job's declaration changed in the
// source since the pass's view, or since the last time it was asked
// (a.cutChecked). Only the jobs bucket counts: heartbeats, allocation
// statuses and rollout writes wait for the pass under way.
func (a *Agent) declarationWaiting() bool {
	gen := a.cfg.Source.Generation()
	if gen <= a.cutChecked {
		return false
	}
	changes, ok := a.cfg.Source.ChangesSince(a.cutChecked, gen)
	a.cutChecked = gen
	if !ok {
		return false
	}
	for _, c := range changes {
		if c.Kind == fleet.KindJobs && c.Key != "" {
			return true
		}
	}
	return false
}

// clocksStarted reports whether every group of record d with a progress
// deadline has its progress clock started (T6): until then the steward
// decides other nodes' changes at once, so the clock starts with the first
// slot taken, not up to stewardEvery after it.
func clocksStarted(d *model.Deployment) bool {
	if d == nil {
		return false
	}
	for _, st := range d.TaskGroups {
		if st != nil && st.ProgressDeadline > 0 && st.RequireProgressBy.IsZero() {
			return false
		}
	}
	return true
}

// mix spreads a number over 64 bits (splitmix64's finaliser), so that sums
// and xors of mixed values make a usable signature.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// hashSeed seeds hashString: the signatures it makes are compared within
// this process only (lastSig, allocKick), never stored or sent.
var hashSeed = maphash.MakeSeed()

// hashString hashes s without allocating (it runs per allocation per pass:
// maphash's AES rounds cost a few nanoseconds for an ID where a byte loop
// cost ~40).
func hashString(s string) uint64 { return maphash.String(hashSeed, s) }

// countByStatus counts this node's allocations (live runners' snapshots and
// finished ones) by client status, for the allocations metric, which calls
// it when read (Metrics.CountAllocsWith), from any goroutine: a pass with
// its own allocations' changes used to count them all, a sixth of the
// passes' CPU at 500 jobs with puts back to back. It counts into counters:
// no list is built. The runners are read after a.mu is released, as
// ownAllocs reads them: no runner's lock is taken under a.mu (a runner's
// reports take a.mu under the runner's persist lock, and a.mu held across
// a thousand runners' locks would stall those reports).
func (a *Agent) countByStatus() map[string]int {
	n := make([]int, len(model.ClientStatuses))
	other := map[string]int{}
	add := func(s model.ClientStatus) {
		for i, c := range model.ClientStatuses {
			if c == s {
				n[i]++
				return
			}
		}
		other[string(s)]++ // not one of the known statuses: counted as it is
	}
	a.mu.Lock()
	runners := a.runnerListLocked()
	for _, t := range a.terminal {
		add(t.ClientStatus)
	}
	a.mu.Unlock()
	for _, r := range runners {
		add(r.Snapshot().ClientStatus)
	}
	for i, c := range model.ClientStatuses {
		if n[i] > 0 {
			other[string(c)] = n[i]
		}
	}
	return other
}

// pruneMark is the jobs bucket's revision and the view's job count when a
// pass last looked at them for gone jobs' keys.
type pruneMark struct {
	rev  uint64
	jobs int
	made bool
}

// due reports whether a pass over view walks the job-keyed maps: on a
// full pass, the first time, or when the job count went down or the jobs
// bucket's revision went back (a re-created bucket) since the last look.
// A revision that went forward with as many jobs or more is puts and
// deletes, which leave every key in a Source's view. It records the look.
func (m *pruneMark) due(full bool, view *fleet.View) bool {
	rev, jobs := view.Revisions[fleet.KindJobs], view.Jobs.Len()
	walk := full || !m.made || jobs < m.jobs || rev < m.rev
	*m = pruneMark{rev: rev, jobs: jobs, made: true}
	return walk
}

// forgetGone deletes from m the job keys jobs does not hold.
func forgetGone[V any](m map[string]V, jobs fleet.Map[wanted.JobState]) {
	for k := range m {
		if _, ok := jobs.Get(k); !ok {
			delete(m, k)
		}
	}
}

// nodeSig summarises what of this node's own record the reconciler reads
// (readiness, eligibility, drain, drivers), ignoring the heartbeat time.
func nodeSig(n *model.Node) uint64 {
	s := hashString(string(n.Status) + "|" + string(n.Eligibility) + "|" + n.Datacenter + "|" + n.NodePool)
	if n.Drain != nil {
		s ^= mix(1)
	}
	for name, d := range n.Drivers {
		v := hashString(name)
		if d.Detected {
			v ^= mix(2)
		}
		if d.Healthy {
			v ^= mix(3)
		}
		s += mix(v)
	}
	return s
}

// allocsSig summarises this node's allocations of a job: every persisted
// change moves ModifyTime.
func allocsSig(own []*model.Allocation) uint64 {
	var s uint64
	for _, al := range own {
		s += mix(hashString(al.ID) ^ uint64(al.ModifyTime.UnixNano()))
	}
	return s
}

// mayAct is the fail-closed check: "" when the node can enumerate what it
// runs, else the reason.
func (a *Agent) mayAct(ctx context.Context) string {
	a.mu.Lock()
	e := wanted.Enumeration{StoreErr: a.restoreErr, DriverErrs: map[string]error{}}
	used := make([]string, 0, len(a.driverUse))
	for name := range a.driverUse {
		used = append(used, name)
	}
	a.mu.Unlock()
	if e.StoreErr == nil {
		e.StoreErr = a.cfg.Store.Check()
	}
	for _, name := range used {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := a.cfg.Drivers.Driver(dctx, name)
		cancel()
		if err != nil {
			e.DriverErrs[name] = err
		}
	}
	v := wanted.MayAct(e)
	if v.Act {
		return ""
	}
	return v.Reason
}

func groupOf(job *model.Job, name string) *model.Group {
	if job == nil {
		return nil
	}
	return job.LookupGroup(name)
}

// rememberJob queues the last good declaration of a job for the state store;
// the writer goroutine keeps only the newest revision per job, off the pass
// (an fsync per job would delay every start behind it).
func (a *Agent) rememberJob(k string, job *model.Job, rev uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.storedRev[k] >= rev {
		return
	}
	a.storedRev[k] = rev
	rec := &state.JobRecord{Job: job, Revision: rev}
	a.lastGood[k] = rec
	a.jobsToSave[k] = rec
	select {
	case a.saveJobs <- struct{}{}:
	default:
	}
}

// saveJobsLoop writes queued last good declarations until ctx ends, then
// once more.
func (a *Agent) saveJobsLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			a.flushJobs()
			return
		case <-a.saveJobs:
			a.flushJobs()
		}
	}
}

func (a *Agent) flushJobs() {
	a.mu.Lock()
	batch := a.jobsToSave
	a.jobsToSave = map[string]*state.JobRecord{}
	a.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	recs := make([]*state.JobRecord, 0, len(batch))
	for _, rec := range batch {
		recs = append(recs, rec)
	}
	// One transaction, one fsync, for a burst: the store's single writer is
	// shared with every runner's status and handle writes.
	if err := a.cfg.Store.PutJobs(recs); err != nil {
		a.log.Error("storing last good jobs", "jobs", len(recs), "err", err)
	}
}

// plan is this node's reconcile plan for job. With the record of the
// job's version stored, the plan is made from this node's own allocations
// and the record (reconcile.ReconcileLocal: its cost does not grow with the
// fleet); before the record exists (its creation round needs the fleet's
// canary facts and proposes the record), or when the record does not yet
// settle a canary question, from the whole fleet view.
func (a *Agent) plan(job *model.Job, self *model.Node, own []*model.Allocation, view *fleet.View, others []*model.Allocation, deps []*model.Deployment, now time.Time) (*reconcile.Plan, error) {
	if d := recordOf(job, deps); d != nil {
		p, err := reconcile.ReconcileLocal(localInput(job, self, own, d, now))
		if err == nil {
			a.localPlans.Add(1)
			return p, nil
		}
		if !errors.Is(err, reconcile.ErrFleetFactsNeeded) {
			return nil, err
		}
	}
	in := inputFrom(job, self, own, a.fleetNodesOf(job, self, view), others, deps, now, nil)
	return reconcile.ReconcileNode(in, a.nodeID)
}

// summaryMatters reports whether the job's rollout summary can change this
// node's decisions, so that a new summary makes a pass of the job: on a
// node that may steward it (it watches every allocation for the version in
// force, not only for the next version's sake), that has an
// allocation of the job at an older version (a waiter: the summary ranks
// it and assigns its slot, and lists a slot whose take's answer was
// lost), or that holds one of its slots. A node whose allocations are all
// at the job's version has nothing the summary decides (it only paces
// updates): at 1,000 agents every summary made a pass on every node, most
// of them done or not yet admitted (under passMu).
func (a *Agent) summaryMatters(k string, job *model.Job, own []*model.Allocation, slots []rollout.Slot) bool {
	if a.summaryNeedsNoSlots(k) {
		return true
	}
	for _, al := range own {
		if !al.Terminal() && al.JobVersion < job.Version {
			return true
		}
	}
	return slices.ContainsFunc(slots, func(s rollout.Slot) bool { return s.Slot.Holder == a.nodeID })
}

// summaryNeedsNoSlots reports whether summaryMatters answers for job key k
// without the job's slots (true: the summary matters), as it does for a
// node that does not narrow its watches or watches the job for the version
// in force.
func (a *Agent) summaryNeedsNoSlots(k string) bool {
	return !a.narrowing() || (a.watchJobs[k] && !a.aheadJobs[k])
}

// unlistedSig stands for a summary that does not list this node, in the
// signature of a job ranked by the summary alone.
var unlistedSig = mix(0x756e6c6973746564)

// summaryLists reports whether summary s names node: among the waiters it
// ranks, or as a slot's holder.
func summaryLists(s *model.RolloutSummary, node string) bool {
	if s == nil {
		return false
	}
	for _, g := range s.Groups {
		if g != nil && slices.ContainsFunc(g.Waiting, func(w model.SummaryWaiter) bool { return w.Node == node }) {
			return true
		}
	}
	return listsHolder(s, node)
}

// waitsUnlisted reports whether everything plan asks of a job is updates
// that dec holds as unlisted waiters (rollout.Held.Unlisted): nothing to
// place, stop or migrate, and each update waiting for a summary that
// lists this node.
func waitsUnlisted(plan *reconcile.Plan, dec *rollout.Decision) bool {
	if !waitsForSlots(plan, dec) {
		return false
	}
	for _, h := range dec.Held {
		if !h.Unlisted {
			return false
		}
	}
	return true
}

// waitsForSlots reports whether the plan's only work is updates and the
// rollout core holds every one of them (a wait for an update slot, an
// admission or a promotion).
func waitsForSlots(plan *reconcile.Plan, dec *rollout.Decision) bool {
	return len(plan.Place)+len(plan.Stop)+len(plan.Migrate) == 0 && len(plan.Update) > 0 && len(dec.Held) == len(plan.Update)
}

// fleetNodesMemo is the node part of the last whole-fleet plan's input of
// one job, with what it was made from.
type fleetNodesMemo struct {
	copy  uint64 // View.NodesCopy
	sig   string // the job's scopeSig: classifyNodes reads the job through it alone
	self  *model.Node
	nodes *fleetNodes
}

// fleetNodesOf classifies the fleet's nodes for a whole-fleet plan of job
// (a job without a record yet, or whose record names no canary set). The
// classification of the job's last such plan is kept while the view's node
// records are the same map (View.NodesCopy: a heartbeat is kept beside
// them, and neither the classification nor the reconciler reads heartbeat
// times), the job's scope is the same (scopeSig: a new version that changes
// only its tasks keeps it) and this node's record says the same but
// for its heartbeat: with a thousand nodes, listing, sorting and
// classifying them took a whole-fleet pass's time again (under passMu).
func (a *Agent) fleetNodesOf(job *model.Job, self *model.Node, view *fleet.View) *fleetNodes {
	k := wanted.JobKey(job.Namespace, job.ID)
	sig := a.nodeFacts.scopes.of(job)
	if m := a.fleetNodes[k]; m != nil && view.NodesCopy != 0 && m.copy == view.NodesCopy && m.sig == sig && model.SameButHeartbeat(m.self, self) {
		return m.nodes
	}
	all := make([]*model.Node, 0, view.Nodes.Len())
	for _, st := range view.Nodes.All() {
		if n := wanted.NodeView(st); n != nil {
			all = append(all, n)
		}
	}
	fn := classifyNodes(job, self, all)
	if view.NodesCopy == 0 {
		return fn
	}
	if a.fleetNodes == nil || len(a.fleetNodes) >= 64 {
		a.fleetNodes = map[string]*fleetNodesMemo{} // jobs gone: each rebuilds once
	}
	a.fleetNodes[k] = &fleetNodesMemo{copy: view.NodesCopy, sig: sig, self: self, nodes: fn}
	return fn
}

// collectFinished moves runners whose allocation is terminal and whose
// goroutines ended to the terminal set, keeping only the newest terminal
// allocation per name (older ones are forgotten locally). It returns how
// many runners it found done but not terminal (detached), which it keeps.
func (a *Agent) collectFinished() (unfinished int) {
	a.mu.Lock()
	var done []*allocrunner.Runner
	for _, r := range a.runners {
		select {
		case <-r.Done():
			done = append(done, r)
		default:
		}
	}
	a.mu.Unlock()
	for _, r := range done {
		al := r.Alloc()
		if !al.Terminal() {
			unfinished++
			continue // detached, not finished
		}
		job := r.Job()
		a.mu.Lock()
		delete(a.runners, al.ID)
		delete(a.stopping, al.ID)
		delete(a.allocKick, al.ID)
		a.useDriversLocked(job, al.TaskGroup, -1)
		var older []string
		for id, t := range a.terminal {
			if t.Name == al.Name && t.JobID == al.JobID && t.Namespace == al.Namespace && !t.ModifyTime.After(al.ModifyTime) {
				older = append(older, id)
			}
		}
		for _, id := range older {
			delete(a.terminal, id)
			a.ownJobRemoveLocked(wanted.JobKey(al.Namespace, al.JobID), id)
		}
		a.terminal[al.ID] = al
		a.mu.Unlock()
		for _, id := range older {
			if err := a.cfg.Store.DeleteAlloc(id); err != nil {
				a.log.Error("forgetting an old allocation", "alloc_id", id, "err", err)
			}
			a.writer.forget(allocRef{namespace: al.Namespace, job: al.JobID, id: id})
		}
	}
	return unfinished
}

// runnerListLocked lists the live runners (a.mu held), for reading or
// stopping them once a.mu is released.
func (a *Agent) runnerListLocked() []*allocrunner.Runner {
	runners := make([]*allocrunner.Runner, 0, len(a.runners))
	for _, r := range a.runners {
		runners = append(runners, r)
	}
	return runners
}

// ownAllocs is this node's allocations (live runners' snapshots and
// finished ones), in no particular order.
func (a *Agent) ownAllocs() []*model.Allocation {
	a.mu.Lock()
	out := make([]*model.Allocation, 0, len(a.runners)+len(a.terminal))
	runners := a.runnerListLocked()
	for _, t := range a.terminal {
		out = append(out, t)
	}
	a.mu.Unlock()
	for _, r := range runners {
		out = append(out, r.Snapshot())
	}
	return out
}

// apply carries out this node's part of a plan, as the rollout core
// licensed it (dec): stops of allocations no longer required and migrations
// are the plan's own; placements, in-place updates and destructive updates
// (a stop, then the replacement's placement) are dec's. Errors are per
// allocation.
func (a *Agent) apply(ctx context.Context, job *model.Job, plan *reconcile.Plan, dec *rollout.Decision, c *Counts) []error {
	var errs []error
	c.Ignore += len(plan.Ignore)
	c.Awaiting += len(plan.AwaitingPromotion)
	c.Lost += len(plan.Lost)
	c.Disconnecting += len(plan.Disconnecting)
	c.Reconnecting += len(plan.Reconnecting)
	c.Held += len(dec.Held)

	depID := ""
	if r := dec.Record; r != nil && r.D.JobVersion == job.Version && r.D.Status.Active() {
		depID = r.D.ID
	}
	for _, e := range plan.Stop {
		if a.stopEntry(e, "not required by the job any more ("+e.Rule+")") {
			c.Stop++
		}
	}
	for _, e := range plan.Migrate {
		if a.stopEntry(e, "migrating off this node") {
			c.Migrate++
		}
	}
	// Lost, disconnecting and reconnecting concern other nodes' allocations
	// (this node is never tainted to itself): their status has one writer,
	// their node, so they are only counted here.

	for _, e := range dec.InPlace {
		a.mu.Lock()
		r := a.runners[e.AllocID]
		a.mu.Unlock()
		if r == nil {
			continue
		}
		al := r.Alloc()
		al.JobVersion = job.Version
		al.DeploymentID = depID
		if al.DeploymentStatus == nil {
			al.DeploymentStatus = &model.AllocDeploymentStatus{}
		}
		al.DeploymentStatus.Canary = e.Canary
		r.UpdateInPlace(al, job)
		c.InPlace++
	}
	for _, e := range dec.Stop {
		a.mu.Lock()
		r := a.runners[e.AllocID]
		a.mu.Unlock()
		if r == nil {
			// A sysbatch re-run of a finished allocation.
			if started, err := a.place(job, e, e.NewAllocID, e.AllocID, depID); err != nil {
				errs = append(errs, err)
			} else if started {
				c.Update++
			}
			continue
		}
		if a.stopEntry(e, fmt.Sprintf("replaced by job version %d", job.Version)) {
			c.Update++
		}
	}
	for _, e := range dec.Place {
		if started, err := a.place(job, e, e.AllocID, e.PreviousAllocID, depID); err != nil {
			errs = append(errs, err)
		} else if started {
			c.Place++
		}
	}
	if len(dec.PlaceStable) > 0 {
		// A node that joined during an unpromoted canary phase runs the
		// last stable version (rollout.md, "Semantics chosen").
		stable, err := a.stableJob(ctx, job.Namespace, job.ID, dec.StableVersion)
		if err != nil {
			errs = append(errs, fmt.Errorf("placing stable version %d of job %s: %w", dec.StableVersion, job.ID, err))
		} else {
			for _, e := range dec.PlaceStable {
				id := reconcile.AllocID(job.Namespace, job.ID, stable.Version, a.nodeID, e.Name, e.PreviousAllocID)
				if started, err := a.place(stable, e, id, e.PreviousAllocID, ""); err != nil {
					errs = append(errs, err)
				} else if started {
					c.Place++
				}
			}
		}
	}
	return errs
}

// failedHere reports whether id is an allocation of this node that failed
// while running this job version.
func (a *Agent) failedHere(id string, version uint64) bool {
	if id == "" {
		return false
	}
	a.mu.Lock()
	t, ok := a.terminal[id]
	r := a.runners[id]
	a.mu.Unlock()
	if !ok && r != nil {
		t, ok = r.Snapshot(), true
	}
	return ok && t.ClientStatus == model.ClientFailed && t.JobVersion == version
}

// stopEntry stops the allocation of an entry if this node runs it; it
// reports whether a stop was started now.
func (a *Agent) stopEntry(e reconcile.Entry, reason string) bool {
	a.mu.Lock()
	r := a.runners[e.AllocID]
	already := a.stopping[e.AllocID]
	a.mu.Unlock()
	if r == nil || already {
		return false
	}
	a.stopAsync(r, reason)
	return true
}

// place starts a new allocation (idempotent: an ID already known is left
// alone, and started is false).
func (a *Agent) place(job *model.Job, e reconcile.Entry, id, previous, depID string) (started bool, err error) {
	if id == "" {
		return false, fmt.Errorf("placing %s: the plan gave no allocation ID", e.Name)
	}
	a.mu.Lock()
	_, running := a.runners[id]
	_, finished := a.terminal[id]
	prev := a.runners[previous]
	a.mu.Unlock()
	if running || finished {
		return false, nil
	}
	if prev != nil && prev.Alloc().Terminal() {
		select {
		case <-prev.Done():
		default:
			// The allocation it replaces is stopping but its tasks still
			// run (kill_timeout): a destructive update starts the
			// replacement after them, never beside them. The stop kicks
			// a pass when they are gone.
			return false, nil
		}
	}
	if job.LookupGroup(e.Group) == nil {
		return false, fmt.Errorf("placing %s: group %q not in job %s", e.Name, e.Group, job.ID)
	}
	now := a.cfg.Now()
	al := &model.Allocation{
		ID:                 id,
		Name:               e.Name,
		Namespace:          job.Namespace,
		JobID:              job.ID,
		JobVersion:         job.Version,
		TaskGroup:          e.Group,
		NodeID:             a.nodeID,
		DesiredStatus:      model.DesiredRun,
		ClientStatus:       model.ClientPending,
		DeploymentID:       depID,
		PreviousAllocation: previous,
		CreateTime:         now,
		ModifyTime:         now,
		States:             []model.AllocState{{Field: model.AllocStateClientStatus, Value: string(model.ClientPending), Time: now}},
	}
	if e.Canary {
		al.DeploymentStatus = &model.AllocDeploymentStatus{Canary: true}
	}
	r := a.newRunner(al, job, nil)
	a.mu.Lock()
	if _, dup := a.runners[id]; dup {
		a.mu.Unlock()
		return false, nil
	}
	a.runners[id] = r
	a.allocKick[id] = planSig(al) // this pass knows it: its first write is no news
	a.useDriversLocked(job, e.Group, 1)
	a.ownJobAddLocked(wanted.JobKey(job.Namespace, job.ID), id)
	a.mu.Unlock()
	r.Run()
	return true, nil
}

// createDeployment writes a new deployment if absent (one per job version)
// and remembers what is stored.
func (a *Agent) createDeployment(ctx context.Context, job *model.Job, d *model.Deployment) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	key := wanted.DeploymentKey(d.Namespace, d.JobID, d.JobVersion)
	a.echoes.beginDeploymentWrite(key)
	cur, rev, created, err := a.cfg.Deployments.CreateDeployment(cctx, d)
	if !created {
		rev = 0 // another writer's record: not an echo
	}
	if a.echoes.endDeploymentWrite(key, rev) {
		defer a.KickFor("change: deployments, after this agent's write")
	}
	if err != nil {
		return fmt.Errorf("creating deployment %s of job %s: %w", d.ID, job.ID, err)
	}
	if created {
		a.log.Info("deployment created", "deployment_id", d.ID, "job", job.ID, "job_version", d.JobVersion)
	}
	a.written(cur, rev)
	return nil
}

func (a *Agent) modifyDeployment(ctx context.Context, ns, jobID string, version uint64, decide func(model.Deployment) (*model.Deployment, error)) error {
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	key := wanted.DeploymentKey(ns, jobID, version)
	// wrote: the last decision was a write, so a record returned without
	// an error is the one this agent wrote (ModifyDeployment returns the
	// stored record, not written by it, when the decision is nil).
	wrote := false
	a.echoes.beginDeploymentWrite(key)
	cur, rev, err := a.cfg.Deployments.ModifyDeployment(mctx, ns, jobID, version, 8, func(c model.Deployment) (*model.Deployment, error) {
		next, err := decide(c)
		wrote = next != nil && err == nil
		return next, err
	})
	if err != nil || !wrote {
		rev = 0
	}
	if a.echoes.endDeploymentWrite(key, rev) {
		defer a.KickFor("change: deployments, after this agent's write")
	}
	if errors.Is(err, fleet.ErrNotFound) {
		return nil // not created yet (or by a pass still in flight): the next pass retries
	}
	if errors.Is(err, rollout.ErrRefused) {
		return nil // the record moved on since the pass read it: nothing to do
	}
	if err == nil {
		a.written(cur, rev)
	}
	return err
}

// writtenDep is a deployment record as this agent last wrote or read it
// back, with the revision it holds in the bucket (0 when unknown).
type writtenDep struct {
	d   *model.Deployment
	rev uint64
}

// written remembers the newest deployment record this agent wrote or read
// back (at revision rev, 0 if unknown), so that passes plan against it
// before the watch delivers it.
func (a *Agent) written(d *model.Deployment, rev uint64) {
	if d == nil {
		return
	}
	k := wanted.JobKey(d.Namespace, d.JobID)
	a.mu.Lock()
	if a.depWritten[k] == nil {
		a.depWritten[k] = map[string]writtenDep{}
	}
	a.depWritten[k][d.ID] = writtenDep{d: d, rev: rev}
	a.ownDirty[k] = true
	a.mu.Unlock()
}

// withWritten overlays the deployments this agent wrote on the view's: a
// record the view lacks is added, and one the view holds at an older state
// (earlier ModifyTime, or a status still active where ours is final) is
// replaced. Records the view has caught up with are dropped from the
// overlay.
//
// It returns the records and their signature share: viewSig (the view's
// records' revisions, viewIndex.depsOf) with each record replaced or added
// counted by the revision this agent's write returned. So a record read
// from the overlay and the same record read later from the view sign the
// same: a job that converged against this agent's write is not decided
// again when its echo reaches the view (which makes no pass of its own:
// ownEchoes).
func (a *Agent) withWritten(jobKey string, fromView []*model.Deployment, view *fleet.View, viewSig uint64) ([]*model.Deployment, uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	sig := viewSig
	out := fromView
	for id, wd := range a.depWritten[jobKey] {
		w := wd.d
		idx := -1
		for i, v := range out {
			if v.ID == id {
				idx = i
				break
			}
		}
		var dropped uint64 // the view's record replaced: its share goes
		switch {
		case idx < 0:
			out = append(append([]*model.Deployment(nil), out...), w)
		case out[idx].ModifyTime.Before(w.ModifyTime) || (out[idx].Status.Active() && !w.Status.Active()):
			c := append([]*model.Deployment(nil), out...)
			c[idx] = w
			out = c
			dropped = mix(view.Deployments.At(wanted.DeploymentKey(w.Namespace, w.JobID, w.JobVersion)).Revision)
		default:
			a.echoes.forgetCreation(id)
			delete(a.depWritten[jobKey], id) // the view has it
			if len(a.depWritten[jobKey]) == 0 {
				delete(a.depWritten, jobKey)
			}
			continue
		}
		sig -= dropped
		if wd.rev != 0 {
			sig += mix(wd.rev) // as the view's record at that revision signs
		} else {
			sig += mix(hashString(id) ^ uint64(w.ModifyTime.UnixNano()) ^ hashString(string(w.Status)))
		}
	}
	return out, sig
}

// hasLive reports whether any of the allocations is not terminal.
func hasLive(allocs []*model.Allocation) bool {
	for _, al := range allocs {
		if !al.Terminal() {
			return true
		}
	}
	return false
}

// setDeputy and dropDeputy write deputyLast, noting the job for the next
// notePaced.
func (a *Agent) setDeputy(k string, d deputyDecision) {
	a.deputyLast[k] = d
	a.pacedDirty[k] = true
}

func (a *Agent) dropDeputy(k string) {
	if _, ok := a.deputyLast[k]; ok {
		delete(a.deputyLast, k)
		a.pacedDirty[k] = true
	}
}

// maxPacedOver is how many jobs' changes notePaced lays over the base it
// last built before it builds the whole again.
const maxPacedOver = 32

// notePaced publishes deputyLast for Run's wait (Agent.paced): the jobs
// whose other nodes' allocation and slot changes a pass would put off, and
// until when (under passMu).
//
// A job this node watches only for its next version's sake (aheadJobs,
// narrowed) and that converged (lastSig) is in it too, until the next
// resync: other nodes' allocations and slots are not in its signature
// (pass), so a pass for them alone would skip it. A pass for any other
// cause reads them.
//
// What it publishes is never written again, and a pass changes the
// entries of the few jobs it decided: a node stewarding 500 jobs rebuilt
// a map of all 500 after every pass (15 % of the bytes allocated by puts
// back to back, BenchmarkKVPutToDriverStartViaPlugin). The jobs changed
// since (pacedDirty) are laid over the base last built, up to
// maxPacedOver of them; an entry left as it was whose time has passed
// reads as not paced, as a dropped one (waitsUntil wants a time after
// now), and one decided ahead of the agent's clock when it was built (a
// clock set back) stays capped at its period from that build, where a
// whole build would cap it again from now: its pace ends sooner, never
// later. The whole is built again past maxPacedOver, when the agent's
// clock moved against the wall clock (a test's), and while aheadJobs are
// in it (their times move with every pass).
func (a *Agent) notePaced() {
	ahead := a.narrowing() && len(a.aheadJobs) > 0
	if len(a.deputyLast) == 0 && !ahead {
		if a.paced.Load() != nil {
			a.paced.Store(nil)
		}
		clear(a.pacedDirty)
		return
	}
	// Passes read the agent's clock (Config.Now), Run's wait the wall
	// clock: each time is carried over as what is left of it, never more
	// than its period.
	now, wall := a.cfg.Now(), time.Now()
	offset := wall.Sub(now)
	due := func(d deputyDecision) (time.Time, bool) {
		left := min(d.at.Add(d.every).Sub(now), d.every)
		return wall.Add(left), left > 0
	}
	cur := a.paced.Load()
	if cur != nil && !ahead && !a.pacedAhead && (offset-a.pacedOffset).Abs() < time.Millisecond &&
		len(cur.over)+len(a.pacedDirty) <= maxPacedOver {
		if len(a.pacedDirty) == 0 {
			return
		}
		over := make(pacedEvery, len(cur.over)+len(a.pacedDirty))
		maps.Copy(over, cur.over)
		for k := range a.pacedDirty {
			at := time.Time{} // not paced (any more)
			if d, ok := a.deputyLast[k]; ok {
				if t, ok := due(d); ok {
					at = t
				}
			}
			over[k] = at
		}
		clear(a.pacedDirty)
		a.paced.Store(&pacedJobs{base: cur.base, over: over})
		return
	}
	p := make(pacedEvery, len(a.deputyLast))
	if ahead {
		for k, only := range a.aheadJobs {
			if _, converged := a.lastSig[k]; only && converged {
				p[k] = wall.Add(a.cfg.Resync)
			}
		}
	}
	for k, d := range a.deputyLast {
		if t, ok := due(d); ok {
			p[k] = t
		}
	}
	a.pacedOffset, a.pacedAhead = offset, ahead
	clear(a.pacedDirty)
	a.paced.Store(&pacedJobs{base: p})
}
