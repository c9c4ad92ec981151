package rollout

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// narrow is node self's facts as a node that does not watch the job's
// allocations holds them: its own allocations only, and the summary.
func (w *world) narrow(t testing.TB, self string, sum *model.RolloutSummary) Facts {
	t.Helper()
	f := w.facts(t, self)
	f.Allocs = slices.DeleteFunc(slices.Clone(f.Allocs), func(a *model.Allocation) bool { return a.NodeID != self })
	f.Narrow, f.Summary = true, sum
	return f
}

// stewardOf is the node that steward()s the world's record.
func (w *world) stewardOf(t testing.TB) string {
	t.Helper()
	d := w.recs[len(w.recs)-1].D
	f := w.facts(t, "n1")
	return RankedNodes(d.ID, f.LiveEligible())[0]
}

// The summary lists the waiting allocations in the order admission ranks
// them (the order a full view computes), at most twice max_parallel; a
// narrowed node takes the slot its rank in the summary names, exactly the
// one it takes with the full view. Control: a node beyond the free slots
// holds, saying its rank.
func TestANarrowedNodeTakesTheSlotItsFullViewWouldTake(t *testing.T) {
	w := newWorld(12, 2, 0)
	w.record(nil)
	steward := w.stewardOf(t)
	full := w.facts(t, steward)
	dec := Decide(full)
	if dec.Summary == nil {
		t.Fatalf("the steward wrote no summary: %+v", dec)
	}
	g := dec.Summary.Groups["g"]
	if g == nil || g.WaitingTotal != 12 || len(g.Waiting) != 4 {
		t.Fatalf("summary group = %+v, want 12 waiting and the first 4 listed", g)
	}
	ws := full.waiters(w.recs[0].D, "g", map[string]bool{})
	for i, sw := range g.Waiting {
		if sw.Node != ws[i].node || sw.Alloc != ws[i].id {
			t.Fatalf("summary waiter %d = %+v, full view's = %+v", i, sw, ws[i])
		}
	}
	for _, n := range w.nodes {
		wantTakes := Decide(w.facts(t, n.ID)).Takes
		got := Decide(w.narrow(t, n.ID, dec.Summary))
		if len(got.Takes) != len(wantTakes) || (len(wantTakes) == 1 && got.Takes[0].Key != wantTakes[0].Key) {
			t.Fatalf("%s: narrowed takes %+v, full view takes %+v", n.ID, got.Takes, wantTakes)
		}
		if len(got.Takes) == 0 && !strings.Contains(heldFor(got, "a-"+n.ID), "waiting for an update slot") {
			t.Fatalf("%s: held for %q", n.ID, heldFor(got, "a-"+n.ID))
		}
	}
	// Without a summary (or with another deployment's) nobody narrowed
	// takes a slot, and says why.
	first := g.Waiting[0].Node
	for _, s := range []*model.RolloutSummary{nil, {DeploymentID: "other", Groups: dec.Summary.Groups}} {
		got := Decide(w.narrow(t, first, s))
		if len(got.Takes) != 0 || !strings.Contains(heldFor(got, "a-"+first), "no rollout summary of this deployment yet") {
			t.Fatalf("summary %v: takes %+v, held %q", s, got.Takes, heldFor(got, "a-"+first))
		}
	}
}

// I4 does not rest on the summary: a summary that lists a node outside
// the canary set (stale, or written wrong) does not let it take a slot
// before promotion. Control: the canary node listed beside it takes one.
func TestASummaryCannotAdmitANonCanaryNodeBeforePromotion(t *testing.T) {
	w := newWorld(10, 2, 20)
	d := w.record(func(d *model.Deployment) {
		d.TaskGroups["g"].CanaryNodes = []string{"n3"}
		d.TaskGroups["g"].DesiredCanaries = 1
	})
	sum := &model.RolloutSummary{JobID: "web", JobVersion: 2, DeploymentID: d.ID, Time: t0,
		Groups: map[string]*model.GroupSummary{"g": {WaitingTotal: 2, Waiting: []model.SummaryWaiter{{Node: "n5", Alloc: "a-n5"}, {Node: "n3", Alloc: "a-n3"}}}}}
	got := Decide(w.narrow(t, "n5", sum))
	if len(got.Takes) != 0 || len(got.Stop) != 0 {
		t.Fatalf("a non-canary node took %+v / stopped %+v before promotion", got.Takes, got.Stop)
	}
	// The reconciler already leaves n5's update out of its plan; the
	// admission refuses it even with a plan that has it (made as if the
	// group were promoted).
	d.TaskGroups["g"].Promoted = true
	promoted := w.narrow(t, "n5", sum)
	d.TaskGroups["g"].Promoted = false
	if len(promoted.Plan.Update) != 1 {
		t.Fatalf("promoted plan: %+v", promoted.Plan.Update)
	}
	f := w.narrow(t, "n5", sum)
	f.Plan = promoted.Plan
	got = Decide(f)
	if len(got.Takes) != 0 || len(got.Stop) != 0 || !strings.Contains(heldFor(got, "a-n5"), "not a canary node") {
		t.Fatalf("with the update planned: takes %+v, stops %+v, held %q", got.Takes, got.Stop, heldFor(got, "a-n5"))
	}
	if len(got.Held) != 1 || !got.Held[0].Unlisted {
		t.Fatalf("the non-canary node's hold is not Unlisted (only the record's promotion lets it go): %+v", got.Held)
	}
	// The canary node is second in the list, but n5 is not waiting for
	// it (the record says so): it ranks first and takes slot 0.
	ctl := Decide(w.narrow(t, "n3", sum))
	if len(ctl.Takes) != 1 || !strings.HasSuffix(ctl.Takes[0].Key, ".0") {
		t.Fatalf("control: the canary node took %+v", ctl.Takes)
	}
}

// A narrowed node never creates a record nor carries out a steward's
// duty, even at rank 0: it cannot count the fleet. Control: the same node
// with the full view creates (or stewards).
func TestANarrowedNodeNeitherCreatesNorStewards(t *testing.T) {
	w := newWorld(5, 1, 0)
	w.recs = append(w.recs, Record{D: &model.Deployment{ID: "d1", JobID: "web", JobVersion: 1, Status: model.DeploymentSuccessful, Protocol: Protocol,
		TaskGroups: map[string]*model.DeploymentState{"g": {}}}})
	for _, n := range w.nodes {
		if dec := Decide(w.narrow(t, n.ID, nil)); dec.Create != nil {
			t.Fatalf("%s: a narrowed node created a record", n.ID)
		}
	}
	created := 0
	for _, n := range w.nodes {
		if Decide(w.facts(t, n.ID)).Create != nil {
			created++
		}
	}
	if created == 0 {
		t.Fatal("control: no node with the full view creates the record")
	}
	w.record(nil)
	steward := w.stewardOf(t)
	dec := Decide(w.narrow(t, steward, nil))
	if dec.StewardRank != 0 || dec.Verdict || dec.Summary != nil || len(dec.Transitions) > 0 || len(dec.Reclaims) > 0 || dec.Counts != nil {
		t.Fatalf("narrowed steward acted: %+v", dec)
	}
	if ctl := Decide(w.facts(t, steward)); !ctl.Verdict || ctl.Summary == nil {
		t.Fatalf("control: the steward with the full view asks no verdict / writes no summary: %+v", ctl)
	}
}

// Watching names the first StewardDepth nodes of the record's ranking
// (the same before the record exists: its ID is known) and of the next
// version's, and no more; only the first act as steward or deputy, and the
// record's creator is the first of that same ranking.
func TestTheFirstNodesOfTheRankingWatchAndOnlyTheyAct(t *testing.T) {
	w := newWorld(9, 1, 0)
	count := func() (watching []string) {
		for _, n := range w.nodes {
			f := w.facts(t, n.ID)
			if Watching(&f) {
				watching = append(watching, n.ID)
			}
		}
		return watching
	}
	f0 := w.facts(t, "n1")
	ranked := RankedNodes(RankingKey("", "web", 2), f0.LiveEligible())
	next := RankedNodes(RankingKey("", "web", 3), f0.LiveEligible())
	want := slices.Sorted(slices.Values(slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(ranked[:StewardDepth]), next[:StewardDepth]...))))))
	if got := count(); !slices.Equal(got, want) {
		t.Fatalf("before the record: %v watch, want the first %d of this version's ranking %v and of the next's %v", got, StewardDepth, ranked, next)
	}
	creator := ""
	for _, n := range w.nodes {
		f := w.facts(t, n.ID)
		if dec := Decide(f); dec.Create != nil && dec.Create.Rank == 0 {
			creator = n.ID
		}
	}
	if creator != ranked[0] {
		t.Fatalf("the record's creator is %q, want the first of its steward ranking %q", creator, ranked[0])
	}
	d := w.record(nil)
	if d.ID != RankingKey("", "web", 2) {
		t.Fatalf("the record's ID %q is not its ranking key", d.ID)
	}
	if got := count(); !slices.Equal(got, want) {
		t.Fatalf("after the record: watching %v, want %v", got, want)
	}
	// Of those, the ones only the next version's ranking names watch
	// ahead only (no duty now); a node of both rankings does not.
	for _, n := range w.nodes {
		f := w.facts(t, n.ID)
		now, ahead := slices.Contains(ranked[:StewardDepth], n.ID), slices.Contains(next[:StewardDepth], n.ID)
		if gotNow, gotAhead := WatchRoles(&f); gotNow != now || gotAhead != ahead {
			t.Fatalf("%s: roles now %v, ahead %v; want %v, %v (first nodes of this version's and the next's rankings)", n.ID, gotNow, gotAhead, now, ahead)
		}
	}
	// Deputy 1 has the duties due (and acts once they are overdue); a
	// deputy beyond the depth has none, however overdue they are.
	dep1 := Decide(w.facts(t, ranked[1]))
	if len(dep1.Due) == 0 || dep1.Verdict {
		t.Fatalf("deputy 1: due %v, verdict %v", dep1.Due, dep1.Verdict)
	}
	overdue := map[string]time.Duration{}
	for _, k := range dep1.Due {
		overdue[k] = time.Hour
	}
	f := w.facts(t, ranked[1])
	f.Overdue = overdue
	if dec := Decide(f); !dec.Verdict {
		t.Fatalf("control: deputy 1, overdue, does not act: %+v", dec)
	}
	f = w.facts(t, ranked[StewardDepth])
	f.Overdue = overdue
	if dec := Decide(f); dec.Verdict || len(dec.Due) > 0 || len(dec.Transitions) > 0 || dec.Summary != nil {
		t.Fatalf("deputy %d acted or timed duties: %+v", StewardDepth, dec)
	}
}

// The steward writes a summary only when it says something new, at most
// once per SummaryEvery. A change that admits nobody new (a slot taken)
// waits up to SummaryLazy; one that does (the slot released, the next
// waiter ranked below the free count) is written once it settled for
// SummarySettle after the interval, and until then the steward asks to
// decide again when that ends.
func TestTheSummaryIsWrittenOnChangeAtMostOncePerInterval(t *testing.T) {
	w := newWorld(6, 1, 0)
	w.record(nil)
	steward := w.stewardOf(t)
	first := Decide(w.facts(t, steward)).Summary
	if first == nil {
		t.Fatal("no summary")
	}
	f := w.facts(t, steward)
	f.Summary = first
	if dec := Decide(f); dec.Summary != nil {
		t.Fatalf("an unchanged summary written again: %+v", dec.Summary)
	}
	// The first waiter takes the slot: nobody new is admitted.
	holder := first.Groups["g"].Waiting[0].Node
	w.holdSlot(t, w.take(t, holder)[0])
	for _, at := range []time.Duration{SummaryEvery / 2, SummaryEvery, SummaryLazy - time.Millisecond} {
		f = w.facts(t, steward)
		f.Summary, f.Now = first, t0.Add(at)
		dec := Decide(f)
		if dec.Summary != nil || dec.RetryIn != SummaryLazy-at {
			t.Fatalf("a take, %s after the summary: summary %v, retry in %s", at, dec.Summary, dec.RetryIn)
		}
	}
	f.Now = t0.Add(SummaryLazy)
	second := Decide(f).Summary
	if second == nil || len(second.Groups["g"].Slots) != 1 || second.Groups["g"].WaitingTotal != 5 {
		t.Fatalf("a take, after SummaryLazy: %+v", second)
	}
	// The replacement is healthy and the slot released: the next waiter
	// is admitted. Within the interval: not yet; after it, once settled.
	second.Time = t0
	w.slots = nil
	w.alloc("a-" + holder).JobVersion = 2
	f = w.facts(t, steward)
	f.Summary, f.Now = second, t0.Add(SummaryEvery/2)
	if dec := Decide(f); dec.Summary != nil || dec.RetryIn != SummaryEvery/2 {
		t.Fatalf("a release within the interval: summary %v, retry in %s", dec.Summary, dec.RetryIn)
	}
	f.Now = t0.Add(SummaryEvery)
	dec := Decide(f)
	if dec.Summary != nil || dec.RetryIn != SummarySettle || len(dec.Due) != 1 || !strings.HasPrefix(dec.Due[0], "settle:") {
		t.Fatalf("a release, not settled: summary %v, retry in %s, due %v", dec.Summary, dec.RetryIn, dec.Due)
	}
	f.Overdue = map[string]time.Duration{dec.Due[0]: SummarySettle}
	if dec := Decide(f); dec.Summary == nil || len(dec.Summary.Groups["g"].Slots) != 0 || dec.Summary.Groups["g"].WaitingTotal != 5 {
		t.Fatalf("a release, settled: %+v", dec.Summary)
	}
}

// ownOnly is node self's narrowed facts when it watches no slot key: of
// the slots, only those it holds (its memory).
func (w *world) ownOnly(t testing.TB, self string, sum *model.RolloutSummary) Facts {
	t.Helper()
	f := w.narrow(t, self, sum)
	f.Slots = slices.DeleteFunc(slices.Clone(f.Slots), func(s Slot) bool { return s.Slot.Holder != self })
	f.OwnSlotsOnly = true
	return f
}

// A narrowed node that watches no slot key admits from the slots the
// summary lists: every node takes exactly what it takes with the full
// view, the holder no second slot. Control: the same narrowed node with
// the summary's slots list emptied sees a free index the summary's
// steward knows is held, and tries it (a Create the key refuses: I5 rests
// on the keys, the summary only saves the lost write).
func TestANarrowedNodeWithoutTheSlotKeysAdmitsFromTheSummarysSlots(t *testing.T) {
	w := newWorld(12, 2, 0)
	w.record(nil)
	steward := w.stewardOf(t)
	first := Decide(w.facts(t, steward)).Summary
	holder := first.Groups["g"].Waiting[0].Node
	tk := w.take(t, holder)
	if len(tk) != 1 || !strings.HasSuffix(tk[0].Key, ".0") {
		t.Fatalf("the first waiter takes %+v", tk)
	}
	w.holdSlot(t, tk[0])
	sum := Decide(w.facts(t, steward)).Summary
	if g := sum.Groups["g"]; len(g.Slots) != 1 || g.Slots[0] != (model.SummarySlot{Index: 0, Holder: holder}) || g.WaitingTotal != 11 {
		t.Fatalf("summary after the take: slots %+v, %d waiting", g.Slots, g.WaitingTotal)
	}
	takers := 0
	for _, n := range w.nodes {
		want := Decide(w.facts(t, n.ID)).Takes
		got := Decide(w.ownOnly(t, n.ID, sum)).Takes
		if len(got) != len(want) || (len(want) == 1 && got[0].Key != want[0].Key) {
			t.Fatalf("%s: own slots only takes %+v, full view takes %+v", n.ID, got, want)
		}
		takers += len(got)
	}
	if takers != 1 {
		t.Fatalf("%d nodes take a slot with one of two held, want 1", takers)
	}
	// The holder, with a summary from before its take: its memory keeps
	// it from a second take, and the next waiter takes index 1, not 0.
	if got := Decide(w.ownOnly(t, holder, first)).Takes; len(got) != 0 {
		t.Fatalf("the holder takes again on the older summary: %+v", got)
	}
	second := first.Groups["g"].Waiting[1].Node
	if got := Decide(w.ownOnly(t, second, first)).Takes; len(got) != 1 || !strings.HasSuffix(got[0].Key, ".1") {
		t.Fatalf("the second waiter on the older summary takes %+v, want index 1", got)
	}
	// Control: a summary that does not list the held slot lets the next
	// waiter try index 0.
	blind := *sum
	blind.Groups = map[string]*model.GroupSummary{"g": {WaitingTotal: 11, Waiting: sum.Groups["g"].Waiting}}
	next := sum.Groups["g"].Waiting[0].Node
	if got := Decide(w.ownOnly(t, next, &blind)).Takes; len(got) != 1 || !strings.HasSuffix(got[0].Key, ".0") {
		t.Fatalf("control: with no slot listed the first waiter takes %+v, want index 0", got)
	}
	// A slot of an older version at an index beyond today's max_parallel
	// still counts (I5 across versions): with both indices of the
	// summary's count taken, nobody narrowed takes.
	full := *sum
	full.Groups = map[string]*model.GroupSummary{"g": {WaitingTotal: 11, Waiting: sum.Groups["g"].Waiting,
		Slots: []model.SummarySlot{{Index: 0, Holder: holder}, {Index: 3, Holder: "n-old"}}}}
	for _, n := range w.nodes {
		if got := Decide(w.ownOnly(t, n.ID, &full)).Takes; len(got) != 0 {
			t.Fatalf("%s takes %+v with max_parallel slots held", n.ID, got)
		}
	}
}

// The steward assigns each waiter it admits a slot index, and keeps a
// waiter's index from one summary to the next until it sees the take: a
// waiter that acts late, on the older summary, and the waiter the newer
// one admits next try different keys. The run: four slots, S1 admits
// W0..W3 (indices 0..3); W0..W2 take, W3 lags; W0's replacement finishes
// and releases index 0; S2 admits W3 and W4. Each tries its own index (W3
// 3 on either summary, W4 0). Control: the same history with a node below
// protocol 4 in the fleet (no assignment, the index a rank names in the
// free list): W3 on S1 and W4 on S2 both try index 3, one Create refused
// and one waiter held an interval for nothing.
func TestASummaryAssignsSlotsAndAWaiterKeepsItsIndexUntilItTakes(t *testing.T) {
	for _, assign := range []bool{true, false} {
		w := newWorld(12, 4, 0)
		for i := range w.nodes {
			w.nodes[i].Protocol = AssignProtocol
		}
		if !assign {
			w.nodes[len(w.nodes)-1].Protocol = BeatProtocol
		}
		w.record(nil)
		steward := w.stewardOf(t)
		s1 := Decide(w.facts(t, steward)).Summary
		g1 := s1.Groups["g"]
		if assign && !slices.Equal(g1.Assigned, []int{0, 1, 2, 3}) {
			t.Fatalf("S1 assigns %v to %v, want 0..3", g1.Assigned, g1.Waiting)
		}
		if !assign && g1.Assigned != nil {
			t.Fatalf("control: S1 assigns %v with a node below protocol %d live", g1.Assigned, AssignProtocol)
		}
		ws := g1.Waiting
		var tk0 Take
		for i := range 3 { // W0..W2 take on S1, and the steward sees it
			got := Decide(w.ownOnly(t, ws[i].Node, s1)).Takes
			if len(got) != 1 || !strings.HasSuffix(got[0].Key, "."+itoa(i)) {
				t.Fatalf("assign %v: W%d on S1 takes %+v, want index %d", assign, i, got, i)
			}
			w.holdSlot(t, got[0])
			if i == 0 {
				tk0 = got[0]
			}
		}
		// W0's replacement finishes: its slot released, its allocation new.
		w.slots = slices.DeleteFunc(w.slots, func(s Slot) bool { return s.Key == tk0.Key })
		w.alloc(ws[0].Alloc).JobVersion = 2
		w.alloc(ws[0].Alloc).DeploymentStatus = &model.AllocDeploymentStatus{Healthy: new(true)}
		// The steward reads S1 as stored, two seconds on, the change
		// settled.
		f := w.facts(t, steward)
		f.Summary, f.Now = s1, s1.Time.Add(2*time.Second)
		f.Overdue = map[string]time.Duration{"settle:summary:" + strconv.FormatInt(s1.Time.UnixNano(), 10): time.Second}
		s2 := Decide(f).Summary
		if s2 == nil {
			t.Fatalf("assign %v: no second summary", assign)
		}
		g2 := s2.Groups["g"]
		if g2.Waiting[0] != ws[3] {
			t.Fatalf("assign %v: S2 lists %v first, want the lagging W3 %v", assign, g2.Waiting[0], ws[3])
		}
		late := Decide(w.ownOnly(t, ws[3].Node, s1)).Takes
		next := Decide(w.ownOnly(t, g2.Waiting[1].Node, s2)).Takes
		if len(late) != 1 || len(next) != 1 {
			t.Fatalf("assign %v: W3 on S1 takes %+v, the next on S2 %+v", assign, late, next)
		}
		if assign {
			if !slices.Equal(g2.Assigned, []int{3, 0}) {
				t.Fatalf("S2 assigns %v to %v, want W3 its 3 kept and the next 0", g2.Assigned, g2.Waiting[:2])
			}
			if onS2 := Decide(w.ownOnly(t, ws[3].Node, s2)).Takes; len(onS2) != 1 || onS2[0].Key != late[0].Key {
				t.Fatalf("W3 takes %+v on S2 and %+v on S1: not the same key", onS2, late)
			}
			if late[0].Key == next[0].Key {
				t.Fatalf("W3 on S1 and the next waiter on S2 both try %s", late[0].Key)
			}
		} else if late[0].Key != next[0].Key {
			t.Fatalf("control: without assignment W3 on S1 tries %s and the next on S2 %s: the conflict this test guards is gone", late[0].Key, next[0].Key)
		}
	}
}

// A summary that admits waiters, once it may be written, is held up to
// SummaryCatch for slots whose replacements are due to turn healthy (and
// be released) within it, so that one summary admits the whole wave
// (BENCHMARKS.md, "2026-12-06": without it a wave split across two
// summaries stays split). A release already late (its replacement turned
// healthy, its holder has not released yet: a loaded fleet's lag) is
// waited for too, expected releaseLag from now (BENCHMARKS.md,
// "2026-12-07"). Controls: a replacement due later than SummaryCatch, a
// release later than releaseLate, one not running yet and one judged by
// hand hold nothing, and the hold ends at SummaryCatch whatever the holder
// does.
func TestASummaryWaitsBrieflyForTheReleasesOfItsWave(t *testing.T) {
	setup := func(t *testing.T, startedAfter time.Duration, mod func(a *model.Allocation, w *world)) (Facts, string) {
		t.Helper()
		w := newWorld(6, 2, 0)
		w.record(nil)
		steward := w.stewardOf(t)
		first := Decide(w.facts(t, steward)).Summary
		a, b := first.Groups["g"].Waiting[0].Node, first.Groups["g"].Waiting[1].Node
		tkA, tkB := w.take(t, a), w.take(t, b)
		if len(tkA) != 1 || len(tkB) != 1 || tkA[0].Key == tkB[0].Key {
			t.Fatalf("the two admitted waiters take %+v and %+v", tkA, tkB)
		}
		w.holdSlot(t, tkA[0])
		w.holdSlot(t, tkB[0])
		f := w.facts(t, steward)
		f.Summary, f.Now = first, t0.Add(SummaryLazy)
		second := Decide(f).Summary
		if second == nil || len(second.Groups["g"].Slots) != 2 {
			t.Fatalf("the takes' summary: %+v", second)
		}
		second.Time = t0
		// a's replacement turned healthy and released its slot; b's runs,
		// started startedAfter after the summary.
		w.slots = slices.DeleteFunc(w.slots, func(s Slot) bool { return s.Slot.Holder == a })
		w.alloc("a-" + a).JobVersion = 2
		old := w.alloc("a-" + b)
		old.DesiredStatus, old.ClientStatus = model.DesiredStop, model.ClientComplete
		repl := &model.Allocation{ID: tkB[0].Slot.NewAlloc, Name: "web.g[0]", JobID: "web", JobVersion: 2, TaskGroup: "g",
			NodeID: b, DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning,
			TaskStates: map[string]*model.TaskState{"t": {State: "running", StartedAt: t0.Add(startedAfter)}}}
		if mod != nil {
			mod(repl, w)
		}
		w.allocs = append(w.allocs, repl)
		f = w.facts(t, steward)
		f.Summary, f.Now = second, t0.Add(SummaryEvery)
		dec := Decide(f)
		if dec.Summary != nil || len(dec.Due) != 1 || !strings.HasPrefix(dec.Due[0], "settle:") {
			t.Fatalf("a release, not settled: summary %v, due %v", dec.Summary, dec.Due)
		}
		f.Overdue = map[string]time.Duration{dec.Due[0]: SummarySettle}
		return f, dec.Due[0]
	}
	mht := time.Second // newWorld's min_healthy_time
	// b's replacement turns healthy 100 ms after the summary could be
	// written: its release is expected 150 ms after, and the summary waits.
	f, _ := setup(t, SummaryEvery-mht+100*time.Millisecond, nil)
	dec := Decide(f)
	if dec.Summary != nil || dec.RetryIn != 100*time.Millisecond+releaseLag || !slices.ContainsFunc(dec.Due, func(k string) bool { return strings.HasPrefix(k, "catch:") }) {
		t.Fatalf("a release due in 150 ms: summary %v, retry in %s, due %v", dec.Summary, dec.RetryIn, dec.Due)
	}
	// Waited SummaryCatch (the release did not come): written.
	var catch string
	for _, k := range dec.Due {
		if strings.HasPrefix(k, "catch:") {
			catch = k
		}
	}
	f.Overdue[catch] = SummaryCatch
	if dec := Decide(f); dec.Summary == nil || len(dec.Summary.Groups["g"].Slots) != 1 {
		t.Fatalf("held past SummaryCatch: %+v", dec.Summary)
	}
	// b's replacement turned healthy 400 ms before the summary could be
	// written and its release has not come: it may come at any moment, and
	// the summary waits for it, releaseLag at a time, up to SummaryCatch.
	f, _ = setup(t, SummaryEvery-mht-400*time.Millisecond, nil)
	dec = Decide(f)
	if dec.Summary != nil || dec.RetryIn != releaseLag || !slices.ContainsFunc(dec.Due, func(k string) bool { return strings.HasPrefix(k, "catch:") }) {
		t.Fatalf("a release 400 ms late: summary %v, retry in %s, due %v", dec.Summary, dec.RetryIn, dec.Due)
	}
	for _, k := range dec.Due {
		if strings.HasPrefix(k, "catch:") {
			f.Overdue[k] = SummaryCatch
		}
	}
	if dec := Decide(f); dec.Summary == nil || len(dec.Summary.Groups["g"].Slots) != 1 {
		t.Fatalf("a late release held the summary past SummaryCatch: %+v", dec.Summary)
	}
	for name, c := range map[string]struct {
		after time.Duration
		mod   func(a *model.Allocation, w *world)
	}{
		"due after SummaryCatch": {after: SummaryEvery - mht + SummaryCatch, mod: nil},
		"later than releaseLate": {after: SummaryEvery - mht - releaseLate - releaseLag - time.Millisecond, mod: nil},
		"not running yet": {after: SummaryEvery - mht + 100*time.Millisecond, mod: func(a *model.Allocation, _ *world) {
			a.ClientStatus = model.ClientPending
			a.TaskStates["t"].State = "pending"
		}},
		"health judged by hand": {after: SummaryEvery - mht + 100*time.Millisecond, mod: func(_ *model.Allocation, w *world) {
			w.job.Groups[0].Update.HealthCheck = "manual"
		}},
		"already judged": {after: SummaryEvery - mht + 100*time.Millisecond, mod: func(a *model.Allocation, _ *world) {
			healthy := true
			a.DeploymentStatus = &model.AllocDeploymentStatus{Healthy: &healthy}
		}},
	} {
		f, _ := setup(t, c.after, c.mod)
		if dec := Decide(f); dec.Summary == nil || len(dec.Summary.Groups["g"].Slots) != 1 {
			t.Fatalf("%s: the summary was not written at once: %+v, due %v", name, dec.Summary, dec.Due)
		}
	}
}

// catchWait holds a summary only when the releases it catches save more
// slot time than the slots it frees lose: three freed and seven due in
// 80 ms wait (the split wave); 82 freed and a straggler due in 250 ms do
// not; releases beyond the waiters left to take them count for nothing.
func TestCatchWaitWeighsTheSlotsFreedAgainstTheReleasesDue(t *testing.T) {
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	for _, c := range []struct {
		name        string
		dues        []time.Time
		more, spare int
		want        time.Duration
	}{
		{"nothing due", nil, 3, 10, 0},
		{"a wave's late half", at(60, 70, 70, 75, 80, 80, 80), 3, 90, 80 * time.Millisecond},
		{"one release for one freed slot", at(150), 1, 3, 150 * time.Millisecond},
		{"stragglers of a wave mostly freed", at(250, 280), 82, 800, 0},
		{"a release nobody waits for", at(100), 3, 0, 0},
		{"the early ones are worth it, the late one is not", at(20, 30, 290), 2, 10, 30 * time.Millisecond},
	} {
		if got := catchWait(t0, c.dues, c.more, c.spare); got != c.want {
			t.Errorf("%s: waits %s, want %s", c.name, got, c.want)
		}
	}
}

// A narrowed waiter the summary does not list is held Unlisted, and its
// decision is the same whatever else an unlisting summary says (the agent
// skips such a job until a summary lists it: pass.go's unlistedSig). A
// listed waiter beyond the free slots is held but not Unlisted; so is a
// full-view waiter. A node outside the canary set before the promotion is
// Unlisted too (the steward never lists it).
func TestAnUnlistedWaitersDecisionDoesNotDependOnTheSummary(t *testing.T) {
	w := newWorld(12, 2, 0)
	w.record(nil)
	steward := w.stewardOf(t)
	sum := Decide(w.facts(t, steward)).Summary
	g := sum.Groups["g"]
	listed := map[string]bool{}
	for _, sw := range g.Waiting {
		listed[sw.Node] = true
	}
	if len(listed) != 4 {
		t.Fatalf("listed %v, want the first 4 of 12", listed)
	}
	// Another summary that does not list the same nodes: slots held,
	// other counts, the listed waiters moved on.
	other := *sum
	other.Groups = map[string]*model.GroupSummary{"g": {WaitingTotal: 9, Waiting: g.Waiting[2:], Desired: 12, Placed: 3,
		Slots: []model.SummarySlot{{Index: 0, Holder: g.Waiting[0].Node}, {Index: 1, Holder: g.Waiting[1].Node}}}}
	unlisted := 0
	for _, n := range w.nodes {
		got := Decide(w.narrow(t, n.ID, sum))
		h := slices.IndexFunc(got.Held, func(h Held) bool { return h.Entry.AllocID == "a-"+n.ID })
		switch {
		case listed[n.ID]:
			if h >= 0 && got.Held[h].Unlisted {
				t.Fatalf("%s is listed and held Unlisted: %+v", n.ID, got.Held[h])
			}
		default:
			unlisted++
			if h < 0 || !got.Held[h].Unlisted || len(got.Takes) != 0 {
				t.Fatalf("%s is not listed: held %+v, takes %+v", n.ID, got.Held, got.Takes)
			}
			if slices.ContainsFunc(other.Groups["g"].Waiting, func(sw model.SummaryWaiter) bool { return sw.Node == n.ID }) {
				continue // other lists it
			}
			again := Decide(w.narrow(t, n.ID, &other))
			if len(again.Takes) != 0 || len(again.Held) != len(got.Held) || !again.Held[0].Unlisted {
				t.Fatalf("%s, another unlisting summary: takes %+v, held %+v", n.ID, again.Takes, again.Held)
			}
		}
		// Control: with the full view nobody is Unlisted.
		if full := Decide(w.facts(t, n.ID)); slices.ContainsFunc(full.Held, func(h Held) bool { return h.Unlisted }) {
			t.Fatalf("%s with the full view held Unlisted: %+v", n.ID, full.Held)
		}
	}
	if unlisted != 8 {
		t.Fatalf("%d unlisted waiters, want 8", unlisted)
	}
	// Listed beyond the free slots (the two the summary lists held; the
	// node watches no slot key): held, not Unlisted.
	third := g.Waiting[2].Node
	got := Decide(w.ownOnly(t, third, &other))
	if h := slices.IndexFunc(got.Held, func(h Held) bool { return h.Entry.AllocID == "a-"+third }); h < 0 || got.Held[h].Unlisted || len(got.Takes) != 0 {
		t.Fatalf("a listed waiter with no free slot: held %+v, takes %+v", got.Held, got.Takes)
	}
}
