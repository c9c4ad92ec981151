package agent

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	hostnode "github.com/hivelet/hivelet/host/node"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/host/rollout"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/mock"
)

// filterOnly is a ViewSource that can change its filters (nothing else of
// it is called here).
type filterOnly struct{ ViewSource }

func (filterOnly) SetFilters(string, []string) {}

// The watch is narrowed only above the fleet size asked for, and only
// while every live node writes rollout summaries: a narrowed node would
// never be admitted by a steward that writes none. A node that is down
// does not count.
func TestNarrowingWaitsForTheFleetSizeAndForEveryLiveNodeToWriteSummaries(t *testing.T) {
	view := func(nodes map[string]int, down ...string) *fleet.View {
		v := &fleet.View{Nodes: fleet.MapOf(map[string]wanted.NodeState{})}
		for id, level := range nodes {
			v.Nodes = v.Nodes.With(id, wanted.NodeState{Value: &model.Node{ID: id, RolloutProtocol: level}})
		}
		for _, id := range down {
			st := v.Nodes.At(id)
			st.Absent = true
			v.Nodes = v.Nodes.With(id, st)
		}
		return v
	}
	cur := rollout.SummaryProtocol
	for _, c := range []struct {
		name   string
		above  int
		all    bool
		nodes  map[string]int
		down   []string
		narrow bool
	}{
		{"every node writes summaries, always narrowed", -1, false, map[string]int{"n1": cur, "n2": cur}, nil, true},
		{"an older live node", -1, false, map[string]int{"n1": cur, "n2": 1}, nil, false},
		{"an older node that is down", -1, false, map[string]int{"n1": cur, "n2": 1}, []string{"n2"}, true},
		{"a fleet at the limit", 2, false, map[string]int{"n1": cur, "n2": cur}, nil, false},
		{"a fleet above the limit", 1, false, map[string]int{"n1": cur, "n2": cur}, nil, true},
		{"told to watch everything", -1, true, map[string]int{"n1": cur, "n2": cur}, nil, false},
	} {
		a := &Agent{cfg: Config{Source: filterOnly{}, NarrowAbove: c.above, WatchAllAllocs: c.all}, nodeID: "n1"}
		a.decideNarrowing(view(c.nodes, c.down...))
		if a.narrowNow != c.narrow {
			t.Errorf("%s: narrowed %v, want %v", c.name, a.narrowNow, c.narrow)
		}
	}
	// Control: a source that cannot filter is never narrowed.
	a := &Agent{cfg: Config{Source: struct{ ViewSource }{}, NarrowAbove: -1}, nodeID: "n1"}
	a.decideNarrowing(view(map[string]int{"n1": cur, "n2": cur}))
	if a.narrowNow {
		t.Error("a source without filters narrowed")
	}
}

// filterLog is a filter source that records the filters set per kind.
type filterLog struct {
	ViewSource
	set map[string][][]string
}

func (l *filterLog) SetFilters(kind string, f []string) {
	l.set[kind] = append(l.set[kind], slices.Clone(f))
}

// A narrowed node watches, of the rollout bucket, the loss verdicts, the
// summaries and the slots of the jobs it needs them for; of the
// allocations, its own and those of the jobs it watches on every node.
// Widened again, both buckets are whole. Setting the same filters again
// asks the source for nothing.
func TestANarrowedNodeWatchesTheSlotsOnlyOfTheJobsItNeedsThemFor(t *testing.T) {
	src := &filterLog{set: map[string][][]string{}}
	a := &Agent{cfg: Config{Source: src}, nodeID: "n1", narrowNow: true,
		watchJobs: map[string]bool{"default.api": true, "default.web": false},
		slotJobs:  map[string]bool{"default.api": true, "default.web": true, "default.db": false}}
	a.setFilters()
	wantRoll := []string{wanted.DownFilter, wanted.SummaryFilter, wanted.SlotFilter("default", "api"), wanted.SlotFilter("default", "web")}
	slices.Sort(wantRoll)
	wantAllocs := []string{wanted.AllocJobFilter("default", "api"), wanted.AllocKeyPrefix("n1")}
	slices.Sort(wantAllocs)
	if got := src.set[fleet.KindRollout]; len(got) != 1 || !slices.Equal(got[0], wantRoll) {
		t.Fatalf("rollout filters set %q, want %q", got, wantRoll)
	}
	if got := src.set[fleet.KindAllocs]; len(got) != 1 || !slices.Equal(got[0], wantAllocs) {
		t.Fatalf("allocation filters set %q, want %q", got, wantAllocs)
	}
	a.setFilters()
	if len(src.set[fleet.KindRollout]) != 1 || len(src.set[fleet.KindAllocs]) != 1 {
		t.Fatalf("the same filters set again: %q", src.set)
	}
	a.slotJobs["default.web"] = false
	a.setFilters()
	if got := src.set[fleet.KindRollout]; len(got) != 2 || slices.Contains(got[1], wanted.SlotFilter("default", "web")) {
		t.Fatalf("web's slots still watched: %q", got)
	}
	a.narrowNow = false
	a.setFilters()
	if got := src.set[fleet.KindRollout]; len(got) != 3 || got[2] != nil {
		t.Fatalf("widened: rollout filters %q, want the whole bucket last", got)
	}
	if got := src.set[fleet.KindAllocs]; len(got) != 2 || got[1] != nil {
		t.Fatalf("widened: allocation filters %q, want the whole bucket last", got)
	}
}

// The fleet as counted for the heartbeat's liveness plan: live nodes
// only, grow only while every live node writes a TTL of its own (this
// node counts as one: it is the writer), and the longest TTL a live record
// says it was written with. Controls: a node down does not count, and an
// older live node stops the growth.
func TestTheFleetIsCountedForTheHeartbeatsTTL(t *testing.T) {
	beat := rollout.BeatProtocol
	v := &fleet.View{Nodes: fleet.MapOf(map[string]wanted.NodeState{
		"n1": {Value: &model.Node{ID: "n1"}}, // this node: its record may be older than its agent
		"n2": {Value: &model.Node{ID: "n2", RolloutProtocol: beat, HeartbeatTTL: model.Duration(60 * time.Second)}},
		"n3": {Value: &model.Node{ID: "n3", RolloutProtocol: beat, HeartbeatTTL: model.Duration(30 * time.Second)}},
		"n4": {Value: &model.Node{ID: "n4", RolloutProtocol: 1, HeartbeatTTL: model.Duration(time.Hour)}, Absent: true},
	})}
	a := &Agent{nodeID: "n1"}
	if f := a.Fleet(); f.Counted {
		t.Fatalf("counted before any pass: %+v", f)
	}
	a.countFleet(v)
	if f := a.Fleet(); f != (hostnode.FleetFacts{Live: 3, Grow: true, Counted: true, MaxTTL: 60 * time.Second}) {
		t.Fatalf("fleet %+v", f)
	}
	v.Nodes = v.Nodes.With("n5", wanted.NodeState{Value: &model.Node{ID: "n5", RolloutProtocol: rollout.SummaryProtocol}})
	a.countFleet(v)
	if f := a.Fleet(); f.Grow || f.Live != 4 {
		t.Fatalf("with a live node below level 3: %+v", f)
	}
}

// A job whose only work left is a wait (its steward's summary held back
// for rollout.SummaryLazy after the deployment succeeded) is not decided
// again on every pass meanwhile: passes skip it. The pass at the end of the
// wait decides it and the summary is written. Full passes are off (a
// resync of an hour), so the wait's own deadline must bring the job back.
func TestAJobWaitingOnlyOnAClockIsSkippedUntilItsWaitEnds(t *testing.T) {
	w := newWorld(t)
	n := w.newNodeResync("n1", nil, "", time.Hour)
	defer n.stop(true)
	w.putJob(mockJob("web", 0, nil))
	testutil.Eventually(t, 10*time.Second, "deployment successful", func() bool {
		d := w.deployment("", "web", 0)
		return d != nil && d.Status == model.DeploymentSuccessful
	})
	parked := func() (time.Time, bool) {
		n.agent.passMu.Lock()
		defer n.agent.passMu.Unlock()
		at, ok := n.agent.retryAt["default.web"]
		return at, ok
	}
	var until time.Time
	testutil.Eventually(t, 10*time.Second, "the job waiting on its summary's clock", func() bool {
		var ok bool
		until, ok = parked()
		return ok
	})
	sumTime := func() time.Time {
		if s := n.src.View().Summaries.At(wanted.SummaryKey("", "web")); s.Value != nil && !s.Absent {
			return s.Value.Time
		}
		return time.Time{}
	}
	before := sumTime()
	// Passes while it waits skip it once nothing else runs on the node (a
	// kick for its own allocations' status may still be waiting
	// kickCoalesce: its pass decides the job, as it should).
	n.waitQuiet(t, 50*time.Millisecond)
	checked := 0
	for time.Until(until) > 500*time.Millisecond && checked < 3 {
		p := n.agent.Status().Passes
		n.agent.Kick()
		testutil.Eventually(t, 5*time.Second, "a pass", func() bool { return n.agent.Status().Passes > p })
		if _, still := parked(); !still {
			break
		}
		if c := n.agent.Status().LastCounts; c.Skipped != 1 || c.Ignore != 0 {
			t.Fatalf("a pass during the wait decided the job again: %+v", c)
		}
		checked++
	}
	if checked == 0 {
		t.Fatalf("no pass ran while the job waited (its wait ends %s)", time.Until(until))
	}
	testutil.Eventually(t, rollout.SummaryLazy+5*time.Second, "the summary written after the wait", func() bool {
		_, still := parked()
		return !still && sumTime().After(before)
	})
}

// A narrowed kind with more per-job filters than maxJobFilters is watched
// whole, and filtered again only at reJobFilters or fewer (no flapping
// around one number).
func TestManyJobFiltersWidenAKindWithHysteresis(t *testing.T) {
	src := &filterLog{set: map[string][][]string{}}
	a := &Agent{cfg: Config{Source: src}, nodeID: "n1", narrowNow: true, watchJobs: map[string]bool{}, slotJobs: map[string]bool{}}
	setJobs := func(n int) {
		clear(a.watchJobs)
		for i := range n {
			a.watchJobs[fmt.Sprintf("default.j%03d", i)] = true
		}
		a.setFilters()
	}
	last := func() []string { l := src.set[fleet.KindAllocs]; return l[len(l)-1] }
	for _, c := range []struct {
		jobs  int
		whole bool
	}{{10, false}, {maxJobFilters, false}, {maxJobFilters + 1, true}, {reJobFilters + 1, true}, {reJobFilters, false}, {maxJobFilters, false}} {
		setJobs(c.jobs)
		if got := last() == nil; got != c.whole {
			t.Fatalf("%d jobs: watched whole %v, want %v (%d filters)", c.jobs, got, c.whole, len(last()))
		}
		if !c.whole && len(last()) != c.jobs+1 {
			t.Fatalf("%d jobs: %d filters, want the node's own and one per job", c.jobs, len(last()))
		}
	}
	// The rollout bucket's count is its slot filters (the verdicts and
	// summaries always watched).
	for i := range maxJobFilters + 1 {
		a.slotJobs[fmt.Sprintf("default.j%03d", i)] = true
	}
	a.setFilters()
	if l := src.set[fleet.KindRollout]; l[len(l)-1] != nil {
		t.Fatalf("%d slot filters still filtered", maxJobFilters+1)
	}
}

// countingCompletion is the default completion policy, counting its calls.
type countingCompletion struct{ calls atomic.Int64 }

func (c *countingCompletion) DecideCompletion(ctx context.Context, in reconcile.CompletionInput) (reconcile.CompletionDecision, error) {
	c.calls.Add(1)
	return reconcile.DefaultCompletion{}.DecideCompletion(ctx, in)
}

// A steward whose running deployment asks nothing of it but the completion
// verdict asks the policy once for what it reads, not on every pass: passes
// caused by nothing of the job's ask nothing. The policy reads the clock
// (its deadlines), so with nothing changing it is asked again each
// verdictEvery; and the deployment still ends when its allocation turns
// healthy. Full passes are off (a resync of an hour).
func TestAStewardAsksTheCompletionVerdictOnChangesAndOnItsClockNotPerPass(t *testing.T) {
	w := newWorld(t)
	policy := &countingCompletion{}
	n := w.newNodeWith("n1", nil, "", time.Hour, func(n *node) { n.completion = policy })
	defer n.stop(true)
	j := mockJob("web", 0, nil)
	j.Groups[0].Update.MinHealthyTime = model.Duration(10 * time.Second)
	j.Groups[0].Update.HealthyDeadline = model.Duration(30 * time.Second)
	j.Groups[0].Update.ProgressDeadline = model.Duration(time.Minute)
	w.putJob(j)
	testutil.Eventually(t, 10*time.Second, "the deployment running and its verdict asked", func() bool {
		d := w.deployment("", "web", 0)
		return d != nil && d.Status == model.DeploymentRunning && policy.calls.Load() > 0
	})
	testutil.Eventually(t, 5*time.Second, "the job waiting on its verdict's clock", func() bool {
		n.agent.passMu.Lock()
		defer n.agent.passMu.Unlock()
		_, ok := n.agent.retryAt["default.web"]
		return ok
	})
	// Ten passes: the verdict is asked again only as often as verdictEvery
	// ends among them (once or twice in ~0.5 s; more on a loaded machine
	// that makes them slower), and for a change (the allocation's own
	// writes, one or two).
	before, began := policy.calls.Load(), time.Now()
	for range 10 {
		p := n.agent.Status().Passes
		n.agent.Kick()
		testutil.Eventually(t, 5*time.Second, "a pass", func() bool { return n.agent.Status().Passes > p })
		time.Sleep(50 * time.Millisecond)
	}
	if asked, most := policy.calls.Load()-before, int64(time.Since(began)/verdictEvery)+3; asked > most {
		t.Fatalf("the verdict was asked %d times in ten passes that changed nothing of the job (%s: at most %d)", asked, time.Since(began).Round(time.Millisecond), most)
	}
	// Nothing changes for 3.5 s: the clock alone asks again.
	if d := w.deployment("", "web", 0); d == nil || d.Status != model.DeploymentRunning {
		t.Fatalf("the deployment ended early: %+v", d)
	}
	before = policy.calls.Load()
	time.Sleep(3500 * time.Millisecond)
	if asked := policy.calls.Load() - before; asked < 2 {
		t.Fatalf("the verdict was asked %d times in 3.5 s of nothing changing (every %s expected)", asked, verdictEvery)
	}
	testutil.Eventually(t, 20*time.Second, "the deployment successful", func() bool {
		d := w.deployment("", "web", 0)
		return d != nil && d.Status == model.DeploymentSuccessful
	})
}

// An idle deputy of a job's steward decides the job again at most each
// deputyEvery when only other nodes' allocations changed, and then does
// decide it: twenty changes of another node's allocation 25 ms apart cost
// it at most a few decisions (one per deputyEvery, and two more). The
// steward, with the slot handoff in force (every node at protocol 5),
// decides such changes at most each stewardEvery: more often than the
// deputy (it acts on them), and it too decides the last one.
func TestAnIdleDeputyDecidesOtherNodesChangesAtMostEachDeputyEvery(t *testing.T) {
	w := newWorld(t)
	nodes := settledFleet(t, w, 15*time.Second, "n1", "n2", "n3")
	every := func(n *node) time.Duration {
		n.agent.passMu.Lock()
		defer n.agent.passMu.Unlock()
		return n.agent.deputyLast["default.web"].every
	}
	var deputy, steward *node
	testutil.Eventually(t, 10*time.Second, "two idle deputies and a steward", func() bool {
		deputy, steward = nil, nil
		deputies := 0
		for _, n := range nodes {
			switch every(n) {
			case deputyEvery:
				deputies++
				deputy = n
			case stewardEvery:
				steward = n
			}
		}
		return deputies == 2 && steward != nil
	})
	// A finished allocation of the job on a node that left the fleet,
	// written again and again: a change of another node's allocation,
	// which asks nothing of anyone.
	start := time.Now()
	dBefore, sBefore := deputy.agent.Status().LocalPlans, steward.agent.Status().LocalPlans
	dPasses, sPasses := deputy.agent.Status().Passes, steward.agent.Status().Passes
	dCauses, sCauses := deputy.agent.Status().PassCauses, steward.agent.Status().PassCauses
	lastPut := changeAGoneNodesAlloc(t, w)
	took := time.Since(start)
	// Nor do they pass for each change: the changes wait for the job's
	// timed decision (Agent.waitsUntil). Twenty changes made a pass each
	// on both before.
	if n, most := deputy.agent.Status().Passes-dPasses, uint64(took/deputyEvery)+3; n > most {
		t.Fatalf("the idle deputy passed %d times in %s of other nodes' changes (at most %d)", n, took.Round(time.Millisecond), most)
	}
	if n, most := steward.agent.Status().Passes-sPasses, uint64(took/stewardEvery)+3; n > most {
		t.Fatalf("the steward passed %d times in %s of other nodes' changes (at most %d)", n, took.Round(time.Millisecond), most)
	}
	// Under load the steward's passes coalesce changes further: two
	// decisions are enough to show the changes were delivered and decided.
	testutil.Eventually(t, 5*time.Second, "the steward's decisions of the changes", func() bool {
		return steward.agent.Status().LocalPlans-sBefore >= 2
	})
	testutil.Eventually(t, 10*stewardEvery, "the steward's decision after the last change", func() bool {
		return deputyDecidedSince(steward, lastPut)
	})
	dAfter, sAfter := deputy.agent.Status().LocalPlans, steward.agent.Status().LocalPlans
	// What the changes bring besides (the steward's summary counting the
	// gone node's allocation, a wait of the rollout ending) is decided at
	// once, as it should be: a pass each, not counted against the rate.
	dElse, sElse := passesForElse(dCauses, deputy.agent.Status().PassCauses), passesForElse(sCauses, steward.agent.Status().PassCauses)
	if most := uint64(took/deputyEvery) + 2 + dElse; dAfter-dBefore > most {
		t.Fatalf("the idle deputy decided the job %d times in %s of other nodes' changes (at most %d: %d passes for other causes)", dAfter-dBefore, took.Round(time.Millisecond), most, dElse)
	}
	if most := uint64(time.Since(start)/stewardEvery) + 2 + sElse; sAfter-sBefore > most {
		t.Fatalf("the steward decided the job %d times in %s of other nodes' changes (at most %d: %d passes for other causes)", sAfter-sBefore, time.Since(start).Round(time.Millisecond), most, sElse)
	}
	// The last change is not lost: the deputy decides it at its next
	// turn. The wait allows for a loaded machine (it once took over 3
	// turns beside two benchmarks); the rate is what the bound above tests.
	testutil.Eventually(t, 10*deputyEvery, "the deputy's decision after the last change", func() bool {
		return deputyDecidedSince(deputy, lastPut)
	})
}

// A node that watches a job's allocations only for its next version's sake
// (one of that version's first nodes: aheadJobs) and whose allocation waits
// in the rollout in force (here for the one slot, held for a minute)
// decides other nodes' changes at most each stewardEvery, and does decide
// the last one: forty changes of another node's allocation 25 ms apart cost
// it a few decisions, not one each (at 1,000 agents such a node was the
// fleet's costliest, deciding the whole rollout on every allocation's
// change).
func TestAWaiterWatchingAheadDecidesOtherNodesChangesAtMostEachStewardEvery(t *testing.T) {
	w := newWorld(t)
	nodes := settledFleet(t, w, 20*time.Second, "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8")
	v1 := mockJob("web", 1, nil)
	v1.Groups[0].Tasks[0].Env = map[string]string{"V": "1"} // a destructive update
	// The first node admitted holds the one slot for a minute: the
	// others wait for it.
	v1.Groups[0].Update.MinHealthyTime = model.Duration(time.Minute)
	v1.Groups[0].Update.HealthyDeadline = model.Duration(2 * time.Minute)
	v1.Groups[0].Update.ProgressDeadline = model.Duration(5 * time.Minute)
	w.putJob(v1)
	// Watching ahead, and waiting: its allocation still at v0 and
	// running, no v1 allocation here.
	aheadWaiting := func(n *node) bool {
		waiting := false
		for _, a := range n.agent.Allocs() {
			if a.JobID != "web" {
				continue
			}
			if a.JobVersion > 0 {
				return false
			}
			waiting = a.DesiredStatus == model.DesiredRun && a.ClientStatus == model.ClientRunning
		}
		n.agent.passMu.Lock()
		defer n.agent.passMu.Unlock()
		return waiting && n.agent.aheadJobs["default.web"]
	}
	testutil.Eventually(t, 20*time.Second, "v1's first replacement placed: the slot held", func() bool {
		for _, n := range nodes {
			for _, a := range n.agent.Allocs() {
				if a.JobID == "web" && a.JobVersion == 1 {
					return true
				}
			}
		}
		return false
	})
	ahead := eventuallyNode(t, 10*time.Second, "a waiter watching for v2's sake", nodes, aheadWaiting)
	// The rollout's own changes (the take, the summary, the record's
	// clock) are this node's to decide at once: measure once they are
	// over, when it has decided nothing for half a second.
	waitStill(t, 20*time.Second, "the ahead waiter quiet", 500*time.Millisecond, func() uint64 { return ahead.agent.Status().LocalPlans })
	start := time.Now()
	before, passes := ahead.agent.Status().LocalPlans, ahead.agent.Status().Passes
	lastPut := changeAGoneNodesAlloc(t, w)
	lastPut = changeAGoneNodesAlloc(t, w) // forty changes in all
	time.Sleep(2 * stewardEvery)          // the decision put off past the last change, if any
	if decided, most := ahead.agent.Status().LocalPlans-before, uint64(time.Since(start)/stewardEvery)+2; decided > most {
		t.Fatalf("%s, waiting and watching only for v2, decided the job %d times in %s of other nodes' changes (at most %d)",
			ahead.id, decided, time.Since(start).Round(time.Millisecond), most)
	}
	// Nor did it pass for each change (Agent.waitsUntil): forty changes
	// made forty passes before.
	if n, most := ahead.agent.Status().Passes-passes, uint64(time.Since(start)/stewardEvery)+3; n > most {
		t.Fatalf("%s, waiting and watching only for v2, passed %d times in %s of other nodes' changes (at most %d)",
			ahead.id, n, time.Since(start).Round(time.Millisecond), most)
	}
	// The last change is not lost: it is decided at the waiter's next turn.
	testutil.Eventually(t, 10*stewardEvery, "the ahead waiter's decision after the last change", func() bool {
		return deputyDecidedSince(ahead, lastPut)
	})
	if d := w.deployment("", "web", 1); d == nil || d.Status != model.DeploymentRunning {
		t.Fatalf("v1's deployment is no longer running: %+v", d)
	}
}

// A node that watches a job only for its next version's sake, with
// nothing left to do for the version in force (converged), makes no pass
// for other nodes' allocation changes at all: they are not in its job's
// signature. Twenty of them made twenty passes before (Agent.waitsUntil).
// The changes are read by its next pass for another cause: here the next
// version's put, which it creates or stewards.
func TestAConvergedNodeWatchingAheadMakesNoPassForOtherNodesChanges(t *testing.T) {
	w := newWorld(t)
	nodes := settledFleet(t, w, 20*time.Second, "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8")
	aheadOnly := func(n *node) bool {
		n.agent.passMu.Lock()
		defer n.agent.passMu.Unlock()
		_, converged := n.agent.lastSig["default.web"]
		_, timed := n.agent.deputyLast["default.web"]
		return n.agent.narrowing() && n.agent.aheadJobs["default.web"] && converged && !timed
	}
	ahead := eventuallyNode(t, 10*time.Second, "a converged node watching for v1's sake", nodes, aheadOnly)
	waitStill(t, 20*time.Second, "the ahead watcher quiet", 500*time.Millisecond, func() uint64 { return ahead.agent.Status().Passes })
	before, causes := ahead.agent.Status().Passes, ahead.agent.Status().PassCauses
	changeAGoneNodesAlloc(t, w)
	time.Sleep(2 * stewardEvery)
	if n, most := ahead.agent.Status().Passes-before, passesForElse(causes, ahead.agent.Status().PassCauses)+1; n > most {
		t.Fatalf("%s, converged and watching only for v1, passed %d times for twenty changes of another node's allocation (at most %d); causes %v",
			ahead.id, n, most, ahead.agent.Status().PassCauses)
	}
	// The next version: created and rolled out.
	w.putJob(mockJob("web", 1, nil))
	testutil.Eventually(t, 20*time.Second, "web v1 successful", func() bool {
		d := w.deployment("", "web", 1)
		return d != nil && d.Status == model.DeploymentSuccessful
	})
}

// settledFleet starts agents with the given IDs (full passes off: a
// resync of an hour), stopped when the test ends, and runs job web at
// version 0 on them until its deployment is successful, within limit.
func settledFleet(t *testing.T, w *world, limit time.Duration, ids ...string) []*node {
	t.Helper()
	var nodes []*node
	for _, id := range ids {
		n := w.newNodeResync(id, nil, "", time.Hour)
		t.Cleanup(func() { n.stop(true) })
		nodes = append(nodes, n)
	}
	w.putJob(mockJob("web", 0, nil))
	testutil.Eventually(t, limit, "web v0 successful", func() bool {
		d := w.deployment("", "web", 0)
		return d != nil && d.Status == model.DeploymentSuccessful
	})
	return nodes
}

// changeAGoneNodesAlloc writes a finished allocation of job web on a node
// that left the fleet twenty times, 25 ms apart: a change of another node's
// allocation that asks nothing of anyone. It returns when the last was
// written.
func changeAGoneNodesAlloc(t *testing.T, w *world) time.Time {
	t.Helper()
	other := w.store.ForNode("gone")
	for i := range 20 {
		a := &model.Allocation{ID: "old-alloc", NodeID: "gone", Namespace: "default", JobID: "web", TaskGroup: "g",
			DesiredStatus: model.DesiredStop, ClientStatus: model.ClientComplete, ModifyTime: time.Now().Add(time.Duration(i))}
		if _, err := other.PutAlloc(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		time.Sleep(25 * time.Millisecond)
	}
	return time.Now().Add(-25 * time.Millisecond)
}

// passesForElse counts the passes made between two readings of an agent's
// PassCauses for causes other than other nodes' allocation changes and the
// timed decisions they wait for.
func passesForElse(before, after map[string]uint64) uint64 {
	var n uint64
	for why, k := range after {
		switch why {
		case "change: " + fleet.KindAllocs + ": another node's", causePaced, "timer: a deputy's next decision":
			continue
		}
		n += k - before[why]
	}
	return n
}

func deputyDecidedSince(n *node, t time.Time) bool {
	n.agent.passMu.Lock()
	defer n.agent.passMu.Unlock()
	d, ok := n.agent.deputyLast["default.web"]
	return ok && !d.at.Before(t)
}

// A narrowed waiter that the rollout summary does not list decides its job
// once and then waits, converged: a summary that still does not list it
// cannot admit it (rollout.Held.Unlisted), so it is no change to the job
// (the pass signs it as unlistedSig). Each summary used to bring a decision
// on every such node. Full passes are off (a resync of an hour), so every
// decision counted has a cause; a summary that comes with a change of the
// job's deployment records is not counted (that change is the job's). The
// fleet: fourteen nodes, max_parallel 1, so the summary lists two waiters
// and the narrowed others wait unlisted through several summaries (the
// control). Without the unlistedSig line each of them brings a decision
// (36 of 36 when measured).
func TestAnUnlistedWaiterIsNotDecidedAgainOnEachSummary(t *testing.T) {
	const nodes = 14
	f := &testFleet{w: newWorldTTL(t, 0), rec: &recorder{tasks: map[string]string{}}}
	for i := 1; i <= nodes; i++ {
		id := fmt.Sprintf("node-%02d", i)
		drv := &countingDriver{Driver: &recordingDriver{Driver: mock.New(), node: id, rec: f.rec}}
		f.nodes = append(f.nodes, f.w.newNodeResync(id, drv, "", time.Hour))
	}
	t.Cleanup(func() {
		for _, n := range f.nodes {
			n.stopOnce(true)
		}
	})
	mod := func(g *model.Group) {
		g.Update.MaxParallel = 1
		g.Update.MinHealthyTime = model.Duration(300 * time.Millisecond)
	}
	f.atV1(t, mod)
	job := fleetJob(2, mod)

	// Each node's timeline while it waits unlisted: the summaries it saw,
	// with the job's deployment records as they were then (a change of
	// those is a change of the job: a pause, a failure), and its decision
	// count at the last sight of each. The count is read before the view:
	// a view still showing what it showed means the pass for the next
	// change had not begun.
	type sight struct {
		rev, deps uint64
		decisions uint64
		hints     uint64            // release hints heard by then (Status.HandoffsHeard)
		causes    map[string]uint64 // its passes by cause by then (Status.PassCauses)
	}
	timelines := make([][]sight, len(f.nodes))
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for i, n := range f.nodes {
				st := n.agent.Status()
				d, h := st.Decisions, st.HandoffsHeard
				view := n.src.View()
				s := view.Summaries.At(wanted.SummaryKey("", "web"))
				live := n.live("web")
				if s.Value == nil || s.Absent || s.Value.JobVersion != 2 || len(live) != 1 || live[0].JobVersion != 1 ||
					!n.agent.narrowFor(view, job) || summaryLists(s.Value, n.id) {
					continue
				}
				var deps uint64
				for _, st := range view.Deployments.All() {
					deps += mix(st.Revision)
				}
				tl := timelines[i]
				if len(tl) > 0 && tl[len(tl)-1].rev == s.Revision && tl[len(tl)-1].deps == deps {
					tl[len(tl)-1].decisions, tl[len(tl)-1].hints, tl[len(tl)-1].causes = d, h, st.PassCauses
				} else {
					tl = append(tl, sight{s.Revision, deps, d, h, st.PassCauses})
				}
				timelines[i] = tl
			}
		}
	}()
	f.w.putJob(fleetJob(2, mod))
	f.waitStatus(t, 2, model.DeploymentSuccessful, 60*time.Second)
	close(stop)
	<-polled
	// Each later unlisted summary that came with the same deployment
	// records: the decisions from the last sight of the one before to the
	// last sight of it are the ones it brought, if the node's passes in
	// between were for changes of the rollout bucket alone. A change of
	// the records seen at the earlier sight can have its pass after it,
	// when the summary came right behind (the steward writes the record,
	// then the summary): that decision is the record's (seen beside a busy
	// loop: "change: deployments" among the passes of the interval, 1 to 5
	// runs in 45). Not once the node has heard a release hint: a holder
	// hints the waiters its own summary queues behind the slot, and the
	// hint and its expiry are changes of the job with decisions of their own.
	onlyRollout := func(a, b map[string]uint64) bool {
		for k, v := range b {
			if v != a[k] && k != "change: rollout" {
				return false
			}
		}
		return true
	}
	later, decided := 0, uint64(0)
	for i, tl := range timelines {
		l, d := 0, uint64(0)
		for j := 1; j < len(tl); j++ {
			if tl[j].hints != 0 {
				break
			}
			if tl[j].deps == tl[j-1].deps && onlyRollout(tl[j-1].causes, tl[j].causes) {
				l++
				d += tl[j].decisions - tl[j-1].decisions
			}
		}
		later += l
		decided += d
		if l > 0 {
			t.Logf("%s: %d later unlisted summaries, %d decisions on them", f.nodes[i].id, l, d)
		}
	}
	if later < 3 {
		t.Fatalf("control: only %d later unlisted summaries seen by narrowed waiters; the test shows nothing", later)
	}
	if decided != 0 {
		t.Fatalf("narrowed waiters made %d decisions on %d summaries that did not list them, want none", decided, later)
	}
}

// eventuallyNode waits, within limit, until is holds of one of nodes, and
// returns the first such node.
func eventuallyNode(t *testing.T, limit time.Duration, what string, nodes []*node, is func(*node) bool) *node {
	t.Helper()
	var found *node
	testutil.Eventually(t, limit, what, func() bool {
		for _, n := range nodes {
			if is(n) {
				found = n
				return true
			}
		}
		return false
	})
	return found
}
