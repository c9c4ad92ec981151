package rollout

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/host/wanted"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// world is a fleet of n nodes ("n1".."nN") each running one allocation of
// job web at version 1, with version 2 declared.
type world struct {
	job    *model.Job
	nodes  []Node
	allocs []*model.Allocation
	recs   []Record
	slots  []Slot
}

func newWorld(n, maxParallel, canary int) *world {
	w := &world{job: &model.Job{ID: "web", Type: model.JobTypeSystem, Version: 2, Groups: []*model.Group{{
		Name: "g", Count: 1, Update: &model.UpdateStrategy{MaxParallel: maxParallel, Canary: canary,
			MinHealthyTime: model.Duration(time.Second), HealthyDeadline: model.Duration(time.Minute), ProgressDeadline: model.Duration(10 * time.Minute)},
		Tasks: []*model.Task{{Name: "t", Driver: "mock"}},
	}}}}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		w.nodes = append(w.nodes, Node{ID: id, Live: true, Eligible: true, Ready: true, Protocol: Protocol})
		w.allocs = append(w.allocs, &model.Allocation{ID: "a-" + id, Name: "web.g[0]", JobID: "web", JobVersion: 1, TaskGroup: "g",
			NodeID: id, DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning})
	}
	return w
}

func (w *world) record(mod func(d *model.Deployment)) *model.Deployment {
	d := &model.Deployment{ID: reconcile.DeploymentID("", "web", 2), JobID: "web", JobVersion: 2, Status: model.DeploymentRunning,
		Protocol: Protocol, TaskGroups: map[string]*model.DeploymentState{"g": {MaxParallel: w.job.Groups[0].Update.MaxParallel,
			DesiredTotal: len(w.nodes), ProgressDeadline: model.Duration(10 * time.Minute)}}}
	if mod != nil {
		mod(d)
	}
	w.recs = append(w.recs, Record{D: d})
	return d
}

func (w *world) alloc(id string) *model.Allocation {
	for _, a := range w.allocs {
		if a.ID == id {
			return a
		}
	}
	return nil
}

// facts are node self's facts, with the plan a reconcile round for it
// would make (from the same fleet facts).
func (w *world) facts(t testing.TB, self string) Facts {
	t.Helper()
	in := reconcile.Input{Job: w.job, TaintedNodes: map[string]*model.Node{}, Now: t0}
	for _, n := range w.nodes {
		rec := &model.Node{ID: n.ID, Status: model.NodeStatusReady, Eligibility: model.Eligible, Attributes: map[string]string{}, Meta: map[string]string{}}
		switch {
		case !n.Live:
			rec.Status = model.NodeStatusDown
			in.TaintedNodes[n.ID] = rec
		case !n.Ready:
			in.NotReadyNodes = append(in.NotReadyNodes, n.ID)
		default:
			in.ReadyNodes = append(in.ReadyNodes, rec)
		}
	}
	for _, a := range w.allocs {
		if a.Terminal() {
			in.TerminalAllocs = append(in.TerminalAllocs, a)
		} else {
			in.LiveAllocs = append(in.LiveAllocs, a)
		}
	}
	for _, r := range w.recs {
		if r.D.JobVersion == w.job.Version {
			in.Deployment = r.D
		}
	}
	plan, err := reconcile.ReconcileNode(in, self)
	if err != nil {
		t.Fatal(err)
	}
	return Facts{Self: self, Job: w.job, Records: w.recs, Allocs: w.allocs, Nodes: w.nodes, Slots: w.slots, Plan: plan,
		Now: t0, NodeTTL: 30 * time.Second, Nonce: "nonce-" + self, SinceSeen: time.Hour}
}

func (w *world) take(t *testing.T, self string) []Take {
	t.Helper()
	return Decide(w.facts(t, self)).Takes
}

// holdSlot stores the slot self would take.
func (w *world) holdSlot(t *testing.T, tk Take) {
	t.Helper()
	w.slots = append(w.slots, Slot{Key: tk.Key, Revision: uint64(len(w.slots) + 1), Time: t0, Slot: tk.Slot})
}

func heldFor(dec Decision, alloc string) string {
	for _, h := range dec.Held {
		if h.Entry.AllocID == alloc {
			return h.Reason
		}
	}
	return ""
}

// I3: a record newer than the job held makes the node plan and write
// nothing; only a strictly newer job cancels a record. Control: the node
// that holds the newer job cancels the older record.
func TestAStaleJobViewHoldsTheJobAndNeverCancelsANewerRecord(t *testing.T) {
	w := newWorld(3, 1, 20)
	w.record(nil)     // version 2's record
	w.job.Version = 1 // this node still holds job version 1
	dec := Decide(w.facts(t, "n1"))
	if dec.Hold == "" || !strings.Contains(dec.Hold, "stale job view") {
		t.Fatalf("hold = %q", dec.Hold)
	}
	if len(dec.Transitions)+len(dec.Takes)+len(dec.Place)+len(dec.Stop) > 0 {
		t.Fatalf("a held job did something: %+v", dec)
	}
	// The cancel body refuses a job that is not newer, whoever calls it.
	if _, err := Cancel(*w.recs[0].D, w.job, t0, "x"); !errors.Is(err, ErrRefused) {
		t.Fatalf("cancel by an older job: %v", err)
	}
	// Control: a node holding version 3 cancels version 2's record.
	w.job.Version = 3
	dec = Decide(w.facts(t, "n1"))
	if dec.Hold != "" || len(dec.Transitions) != 1 || dec.Transitions[0].Kind != "cancel" {
		t.Fatalf("newer job: hold %q, transitions %+v", dec.Hold, dec.Transitions)
	}
	next, err := dec.Transitions[0].Apply(*w.recs[0].D)
	if err != nil || next.Status != model.DeploymentCancelled || next.StatusDescription != model.DescNewerJob {
		t.Fatalf("cancel: %+v %v", next, err)
	}
}

// I5: with max_parallel m, exactly the m first waiters by rendezvous rank
// try a slot, each a different index; while m slots are held nobody else
// tries; a slot of the job's previous version counts too.
func TestAdmissionNeverLicensesMoreThanMaxParallel(t *testing.T) {
	for _, m := range []int{1, 2, 3} {
		w := newWorld(6, m, 0)
		w.record(nil)
		var takers []Take
		for _, n := range w.nodes {
			takers = append(takers, w.take(t, n.ID)...)
		}
		if len(takers) != m {
			t.Fatalf("max_parallel %d: %d nodes try a slot: %+v", m, len(takers), takers)
		}
		idx := map[int]bool{}
		for _, tk := range takers {
			idx[tk.Slot.Index] = true
			if tk.Key != wanted.SlotKey("", "web", "g", tk.Slot.Index) || tk.TTL != time.Minute+5*time.Second+SlotGrace {
				t.Fatalf("take %+v", tk)
			}
		}
		if len(idx) != m {
			t.Fatalf("max_parallel %d: indices %v", m, idx)
		}
		for _, tk := range takers {
			w.holdSlot(t, tk)
		}
		for _, n := range w.nodes {
			if tk := w.take(t, n.ID); len(tk) != 0 {
				t.Fatalf("max_parallel %d with every slot held: %s tries %+v", m, n.ID, tk)
			}
		}
	}
	// Across versions: version 1's deployment still holds the only slot.
	w := newWorld(4, 1, 0)
	w.record(nil)
	w.slots = []Slot{{Key: wanted.SlotKey("", "web", "g", 0), Revision: 1, Slot: model.Slot{JobID: "web", JobVersion: 1, DeploymentID: "older",
		Group: "g", Index: 0, Holder: "n4", OldAlloc: "x", NewAlloc: "y"}}}
	for _, n := range w.nodes {
		if tk := w.take(t, n.ID); len(tk) != 0 {
			t.Fatalf("a previous version's slot did not count: %s tries %+v", n.ID, tk)
		}
	}
}

// I2: a destructive update is stopped only by a node holding a stored slot
// for that very allocation, and only while the record runs.
func TestOnlyAHeldSlotLicensesAStop(t *testing.T) {
	w := newWorld(3, 1, 0)
	d := w.record(nil)
	var taker string
	for _, n := range w.nodes {
		if tk := w.take(t, n.ID); len(tk) == 1 {
			taker = n.ID
			w.holdSlot(t, tk[0])
		}
	}
	for _, n := range w.nodes {
		dec := Decide(w.facts(t, n.ID))
		stops := len(dec.Stop)
		if (n.ID == taker) != (stops == 1) {
			t.Fatalf("%s (taker %s) stops %d", n.ID, taker, stops)
		}
		if n.ID != taker && !strings.Contains(heldFor(dec, "a-"+n.ID), "waiting for an update slot (1/1 in flight: "+taker) {
			t.Fatalf("%s held for %q", n.ID, heldFor(dec, "a-"+n.ID))
		}
	}
	d.Status = model.DeploymentPaused
	f := w.facts(t, taker)
	if dec := Decide(f); len(dec.Stop) != 0 || !strings.Contains(f.Plan.Groups[0].UpdatesHeld, "paused") {
		t.Fatalf("paused: the holder stops %d (plan says %q)", len(dec.Stop), f.Plan.Groups[0].UpdatesHeld)
	}
}

// T7: the holder releases its slot once the replacement's health verdict
// is written, not before.
func TestTheHolderReleasesAfterTheVerdict(t *testing.T) {
	w := newWorld(2, 1, 0)
	w.record(nil)
	tk := w.take(t, "n1")
	if len(tk) == 0 {
		tk = w.take(t, "n2")
	}
	w.holdSlot(t, tk[0])
	holder := tk[0].Slot.Holder
	old := w.alloc(tk[0].Slot.OldAlloc)
	old.DesiredStatus, old.ClientStatus = model.DesiredStop, model.ClientComplete
	nw := &model.Allocation{ID: tk[0].Slot.NewAlloc, Name: "web.g[0]", JobID: "web", JobVersion: 2, TaskGroup: "g", NodeID: holder,
		DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning, DeploymentID: tk[0].Slot.DeploymentID}
	w.allocs = append(w.allocs, nw)
	if dec := Decide(w.facts(t, holder)); len(dec.Releases) != 0 {
		t.Fatalf("released before the verdict: %+v", dec.Releases)
	}
	yes := true
	nw.DeploymentStatus = &model.AllocDeploymentStatus{Healthy: &yes}
	if dec := Decide(w.facts(t, holder)); len(dec.Releases) != 1 || dec.Releases[0].Key != tk[0].Key {
		t.Fatalf("not released after the verdict: %+v", dec.Releases)
	}
}

// Canary phase: only the stored canary nodes take slots; the others wait
// for promotion (the reconciler leaves them awaiting), and a node that
// joins during the phase places the stable version.
func TestBeforePromotionOnlyTheStoredCanaryNodesUpdate(t *testing.T) {
	w := newWorld(5, 5, 20)
	w.recs = append(w.recs, Record{D: &model.Deployment{ID: "v1", JobID: "web", JobVersion: 1, Status: model.DeploymentSuccessful}})
	w.record(func(d *model.Deployment) {
		d.TaskGroups["g"].CanaryNodes = []string{"n3"}
		d.TaskGroups["g"].DesiredCanaries = 1
		d.TaskGroups["g"].CanaryPolicy = "default"
	})
	for _, n := range w.nodes {
		tk := w.take(t, n.ID)
		if (n.ID == "n3") != (len(tk) == 1) {
			t.Fatalf("%s takes %+v", n.ID, tk)
		}
	}
	// A node that joins now places version 1, the stable one.
	w.nodes = append(w.nodes, Node{ID: "n6", Live: true, Eligible: true, Ready: true})
	dec := Decide(w.facts(t, "n6"))
	if len(dec.PlaceStable) != 1 || dec.StableVersion != 1 || len(dec.Place) != 0 {
		t.Fatalf("joining node: place %+v, stable %+v (version %d)", dec.Place, dec.PlaceStable, dec.StableVersion)
	}
	// Control: after promotion every node may take a slot, and a joining
	// node places the current version.
	w.recs[1].D.TaskGroups["g"].Promoted = true
	takers := 0
	for _, n := range w.nodes[:5] {
		takers += len(w.take(t, n.ID))
	}
	if takers != 5 {
		t.Fatalf("promoted: %d takers, want 5", takers)
	}
	if dec := Decide(w.facts(t, "n6")); len(dec.Place) != 1 || len(dec.PlaceStable) != 0 {
		t.Fatalf("promoted, joining node: %+v / %+v", dec.Place, dec.PlaceStable)
	}
}

// A deployment is complete only on positive evidence: a node whose driver
// is briefly unhealthy (not ready) still owes its allocation; a restart
// that shows nothing yet is not "nothing desired".
func TestCompletionNeedsPositiveEvidence(t *testing.T) {
	w := newWorld(3, 1, 0)
	d := w.record(nil)
	yes := true
	for _, a := range w.allocs[:2] {
		a.JobVersion, a.DeploymentStatus = 2, &model.AllocDeploymentStatus{Healthy: &yes}
	}
	w.nodes[2].Ready = false // n3's driver is unhealthy; it still runs version 1
	c := Derive(d, &Facts{Job: w.job, Allocs: w.allocs, Nodes: w.nodes})["g"]
	if c.Complete || c.Outdated != 1 || c.Desired != 3 {
		t.Fatalf("with an outdated allocation on a not-ready node: %+v", c)
	}
	// Nothing known at all (a fresh restart): not complete either.
	if c := Derive(d, &Facts{Job: w.job, Nodes: w.nodes})["g"]; c.Complete {
		t.Fatalf("complete on no evidence: %+v", c)
	}
	// Control: all three healthy at version 2.
	w.allocs[2].JobVersion, w.allocs[2].DeploymentStatus = 2, &model.AllocDeploymentStatus{Healthy: &yes}
	if c := Derive(d, &Facts{Job: w.job, Allocs: w.allocs, Nodes: w.nodes})["g"]; !c.Complete || c.Healthy != 3 {
		t.Fatalf("all healthy: %+v", c)
	}
	// A policy's "succeed" is refused without the evidence.
	w.allocs[2].JobVersion = 1
	counts := Derive(d, &Facts{Job: w.job, Allocs: w.allocs, Nodes: w.nodes})
	if next, _ := ApplyVerdict(*d, counts, reconcile.CompletionDecision{Decision: reconcile.DecisionSucceed}, false, nil, "n1", t0, "x"); next != nil {
		t.Fatalf("succeeded without evidence: %+v", next)
	}
}

// T4: promotion is refused until the derived healthy canaries reach the
// desired number, saying how many there are.
func TestPromotionNeedsItsHealthyCanaries(t *testing.T) {
	d := model.Deployment{ID: "d", Status: model.DeploymentRunning, TaskGroups: map[string]*model.DeploymentState{
		"g": {DesiredCanaries: 2, CanaryNodes: []string{"n1", "n2"}, ProgressDeadline: model.Duration(time.Minute)}}}
	_, err := Promote(d, map[string]Counts{"g": {CanariesHealthy: 1}}, nil, "cli", t0, "x")
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "group g has 1/2 healthy canaries") {
		t.Fatalf("promote with 1/2: %v", err)
	}
	next, err := Promote(d, map[string]Counts{"g": {CanariesHealthy: 2}}, nil, "cli", t0, "x")
	if err != nil || !next.TaskGroups["g"].Promoted || !next.TaskGroups["g"].RequireProgressBy.Equal(t0.Add(time.Minute)) || next.TaskGroups["g"].PromotedBy != "cli" {
		t.Fatalf("promote with 2/2: %+v %v", next, err)
	}
	if d.TaskGroups["g"].Promoted {
		t.Fatal("the record read was modified")
	}
	// I4: a terminal record is never moved.
	d.Status = model.DeploymentFailed
	if _, err := Promote(d, map[string]Counts{"g": {CanariesHealthy: 2}}, nil, "cli", t0, "x"); !errors.Is(err, ErrRefused) {
		t.Fatalf("promote a failed record: %v", err)
	}
}

// T3: pause stops the clock; resume moves every deadline by the time paused.
func TestResumeMovesTheDeadlinesByThePausedTime(t *testing.T) {
	d := model.Deployment{ID: "d", Status: model.DeploymentRunning, TaskGroups: map[string]*model.DeploymentState{
		"g": {RequireProgressBy: t0.Add(time.Minute)}}}
	p, err := Pause(d, t0, "x")
	if err != nil || p.Status != model.DeploymentPaused {
		t.Fatalf("pause: %+v %v", p, err)
	}
	r, err := Resume(*p, t0.Add(90*time.Second), "y")
	if err != nil || r.Status != model.DeploymentRunning || !r.TaskGroups["g"].RequireProgressBy.Equal(t0.Add(150*time.Second)) || r.PausedTotal.D() != 90*time.Second {
		t.Fatalf("resume: %+v %v", r, err)
	}
}

// T11: a failure with auto_revert points at the newest stable version, or
// says why there is none.
func TestAFailureRevertsToTheNewestStableVersion(t *testing.T) {
	d := model.Deployment{ID: "d", JobVersion: 4, Status: model.DeploymentRunning}
	recs := []Record{
		{D: &model.Deployment{JobVersion: 1, Status: model.DeploymentSuccessful}},
		{D: &model.Deployment{JobVersion: 2, Status: model.DeploymentSuccessful}},
		{D: &model.Deployment{JobVersion: 3, Status: model.DeploymentFailed}},
	}
	next, err := Fail(d, "bad", true, StableVersion(recs, 4), t0, "x")
	if err != nil || next.Revert == nil || next.Revert.Status != model.RevertPending || next.Revert.ToVersion != 2 {
		t.Fatalf("fail with revert: %+v %v", next, err)
	}
	next, _ = Fail(d, "bad", true, StableVersion(recs[2:], 4), t0, "x")
	if next.Revert == nil || next.Revert.Status != model.RevertNone || !strings.Contains(next.Revert.Reason, "no stable version") {
		t.Fatalf("fail with nothing to revert to: %+v", next.Revert)
	}
}

// Steward and deputies: one steward per record acts at once; deputy k acts
// on a duty overdue for k × 2 s.
func TestOneStewardActsAndADeputyOnlyWhenOverdue(t *testing.T) {
	w := newWorld(4, 1, 0)
	w.record(nil)
	var stewards []string
	var deputy string
	for _, n := range w.nodes {
		dec := Decide(w.facts(t, n.ID))
		if dec.Verdict {
			stewards = append(stewards, n.ID)
		}
		if dec.StewardRank == 1 {
			deputy = n.ID
			if len(dec.Due) == 0 {
				t.Fatalf("deputy %s has no due duty", n.ID)
			}
		}
	}
	if len(stewards) != 1 {
		t.Fatalf("stewards %v", stewards)
	}
	f := w.facts(t, deputy)
	f.Overdue = map[string]time.Duration{"verdict:" + w.recs[0].D.ID + "@" + strconv.FormatInt(w.recs[0].D.ModifyTime.UnixNano(), 10): 2 * time.Second}
	if !Decide(f).Verdict {
		t.Fatal("an overdue deputy does not act")
	}
}

// T8 and the disruption guard: a slot whose holder expired is reclaimed by
// the steward, but not while many nodes expired at once.
func TestALostHoldersSlotIsReclaimedUnlessTheFleetIsDisrupted(t *testing.T) {
	w := newWorld(10, 1, 0)
	d := w.record(nil)
	w.slots = []Slot{{Key: wanted.SlotKey("", "web", "g", 0), Revision: 7, Slot: model.Slot{JobID: "web", JobVersion: 2, DeploymentID: d.ID,
		Group: "g", Index: 0, Holder: "n10", OldAlloc: "a-n10", NewAlloc: "b"}}}
	w.nodes[9].Live, w.nodes[9].DownSince = false, t0.Add(-5*time.Second)
	reclaims := 0
	for _, n := range w.nodes[:9] {
		reclaims += len(Decide(w.facts(t, n.ID)).Reclaims)
	}
	if reclaims != 1 {
		t.Fatalf("one lost holder: %d reclaims, want 1 (by the steward)", reclaims)
	}
	// Four of ten nodes expired within one TTL: no reclaim, no fail.
	for i := 6; i < 10; i++ {
		w.nodes[i].Live, w.nodes[i].DownSince = false, t0.Add(-5*time.Second)
	}
	for _, n := range w.nodes[:6] {
		dec := Decide(w.facts(t, n.ID))
		if len(dec.Reclaims) != 0 {
			t.Fatalf("reclaimed during a disruption: %+v", dec.Reclaims)
		}
		if dec.StewardRank == 0 && dec.Disruption == "" {
			t.Fatal("the steward does not see the disruption")
		}
	}
}

// T1: a creator waits its rank's delay; the canary policy's answer is
// stored with its reason, a bad answer replaced by the default's with the
// refusal as the reason, and a policy that picks nobody says why.
func TestTheRecordIsCreatedOnceWithThePolicysChoiceAndReason(t *testing.T) {
	w := newWorld(5, 1, 40)
	w.job.Version = 2
	var creators []Decision
	for _, n := range w.nodes {
		f := w.facts(t, n.ID)
		f.SinceSeen = 0
		dec := Decide(f)
		if dec.Create != nil {
			creators = append(creators, dec)
		} else if dec.RetryIn <= 0 || dec.RetryIn > CreateMax {
			t.Fatalf("%s neither creates nor waits: %+v", n.ID, dec)
		}
	}
	if len(creators) != 1 || creators[0].Create.Rank != 0 {
		t.Fatalf("%d creators at once", len(creators))
	}
	c := creators[0].Create
	if len(c.Canaries) != 1 || c.Canaries[0].Count != 2 {
		t.Fatalf("canary requests %+v", c.Canaries)
	}
	good := CreateRecord(c, map[string]CanaryAnswer{"g": {Choice: reconcile.CanaryChoice{NodeIDs: []string{"n4", "n2"}}, PolicyName: "builtin:spread"}})
	st := good.TaskGroups["g"]
	if !slices.Equal(st.CanaryNodes, []string{"n2", "n4"}) || st.DesiredCanaries != 2 || st.CanaryPolicy != "builtin:spread" ||
		good.StatusDescription != model.DescNeedsPromotion || !st.RequireProgressBy.IsZero() || good.Protocol != Protocol {
		t.Fatalf("record %+v / %+v", good, st)
	}
	bad := CreateRecord(c, map[string]CanaryAnswer{"g": {Choice: reconcile.CanaryChoice{NodeIDs: []string{"n9"}}}})
	if st := bad.TaskGroups["g"]; !slices.Equal(st.CanaryNodes, []string{"n1", "n2"}) || !strings.Contains(st.CanaryReason, "refused") {
		t.Fatalf("bad answer: %+v", st)
	}
	none := CreateRecord(c, map[string]CanaryAnswer{"g": {Choice: reconcile.CanaryChoice{Reason: "no node has rack=a"}}})
	if st := none.TaskGroups["g"]; len(st.CanaryNodes) != 0 || st.CanaryReason != "no node has rack=a" {
		t.Fatalf("nobody chosen: %+v", st)
	}
}

// A record is created only at a level every eligible node speaks: a node
// of an older agent holds the creation and says why. Control: without it
// the record is proposed.
func TestANodeOfAnOlderProtocolHoldsTheCreation(t *testing.T) {
	w := newWorld(3, 1, 0)
	w.nodes[2].Protocol = 0
	dec := Decide(w.facts(t, "n1"))
	if dec.Create != nil || !strings.Contains(heldFor(dec, "a-n1"), "node n3 speaks rollout protocol 0") {
		t.Fatalf("create %+v, held %q", dec.Create, heldFor(dec, "a-n1"))
	}
	w.nodes[2].Protocol = Protocol
	if dec := Decide(w.facts(t, "n1")); dec.Create == nil {
		t.Fatal("control: no record proposed")
	}
}

// A slot taken for an older version's deployment licenses no stop for the
// newer one, and is released only once what replaces its allocation has a
// verdict (before, a v2 slot let v3 stop its allocation and was released
// while v3's replacement was still pending: two in flight).
func TestAnOlderVersionsSlotLicensesNothingForTheNewOne(t *testing.T) {
	w := newWorld(3, 1, 0)
	w.job.Version = 3
	w.recs = append(w.recs, Record{D: &model.Deployment{ID: "v2", JobID: "web", JobVersion: 2, Status: model.DeploymentCancelled}})
	d := w.record(func(d *model.Deployment) { d.ID, d.JobVersion = reconcile.DeploymentID("", "web", 3), 3 })
	w.slots = []Slot{{Key: wanted.SlotKey("", "web", "g", 0), Revision: 4, Slot: model.Slot{JobID: "web", JobVersion: 2, DeploymentID: "v2",
		Group: "g", Index: 0, Holder: "n1", OldAlloc: "a-n1", NewAlloc: "planned-by-v2"}}}
	dec := Decide(w.facts(t, "n1"))
	if len(dec.Stop) != 0 {
		t.Fatalf("the v2 slot licensed a v3 stop: %+v", dec.Stop)
	}
	for _, n := range w.nodes {
		if tk := w.take(t, n.ID); len(tk) != 0 {
			t.Fatalf("%s takes a slot while v2's is held: %+v", n.ID, tk)
		}
	}
	// Its old allocation was stopped and v3's replacement (another ID) is
	// pending: the slot stays.
	old := w.alloc("a-n1")
	old.DesiredStatus, old.ClientStatus = model.DesiredStop, model.ClientComplete
	nw := &model.Allocation{ID: "v3-repl", Name: "web.g[0]", JobID: "web", JobVersion: 3, TaskGroup: "g", NodeID: "n1",
		DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning, PreviousAllocation: "a-n1", DeploymentID: d.ID}
	w.allocs = append(w.allocs, nw)
	if dec := Decide(w.facts(t, "n1")); len(dec.Releases) != 0 {
		t.Fatalf("released while the replacement is pending: %+v", dec.Releases)
	}
	yes := true
	nw.DeploymentStatus = &model.AllocDeploymentStatus{Healthy: &yes}
	if dec := Decide(w.facts(t, "n1")); len(dec.Releases) != 1 {
		t.Fatalf("control: not released after the replacement's verdict: %+v", dec.Releases)
	}
}

// A live node that is not ready or not eligible never holds a rank in the
// admission queue (it would never take its turn); control: once ready it
// takes part again.
func TestANodeThatCannotUpdateDoesNotBlockTheQueue(t *testing.T) {
	w := newWorld(4, 1, 0)
	d := w.record(nil)
	// Find the rank-0 waiter and make it not ready.
	var first string
	for _, n := range w.nodes {
		if len(w.take(t, n.ID)) == 1 {
			first = n.ID
		}
	}
	for i := range w.nodes {
		if w.nodes[i].ID == first {
			w.nodes[i].Ready = false
		}
	}
	takers := 0
	for _, n := range w.nodes {
		if n.ID != first {
			takers += len(w.take(t, n.ID))
		}
	}
	if takers != 1 {
		t.Fatalf("with the first waiter not ready, %d others take a slot, want 1", takers)
	}
	// It still owes the rollout: not complete.
	if c := Derive(d, &Facts{Job: w.job, Allocs: w.allocs, Nodes: w.nodes})["g"]; c.Outdated != 4 || c.Complete {
		t.Fatalf("counts %+v", c)
	}
}

// During a disruption the steward still asks the completion policy, and
// tells it: the default continues, and a success is never applied (the
// nodes that are left look complete). A failure a policy chooses is its
// call. Control: without the disruption the success applies.
func TestTheCompletionPolicyIsToldOfADisruptionAndNoSuccessApplies(t *testing.T) {
	w := newWorld(10, 1, 0)
	d := w.record(nil)
	yes := true
	for i, a := range w.allocs {
		if i < 6 {
			a.JobVersion, a.DeploymentStatus = 2, &model.AllocDeploymentStatus{Healthy: &yes}
		}
	}
	for i := 6; i < 10; i++ {
		w.nodes[i].Live, w.nodes[i].DownSince = false, t0.Add(-time.Second)
	}
	counts := Derive(d, &Facts{Job: w.job, Allocs: w.allocs, Nodes: w.nodes, Now: t0})
	if c := counts["g"]; !c.Complete || c.Disconnected != 4 || c.Lost != 0 || c.LostInFlight != 0 {
		t.Fatalf("the 6 live nodes are complete, 4 disconnected (no verdict yet): %+v", c)
	}
	if next, _ := ApplyVerdict(*d, counts, reconcile.CompletionDecision{Decision: reconcile.DecisionSucceed}, true, nil, "n1", t0, "x"); next != nil {
		t.Fatal("a success was applied during a disruption")
	}
	if next, _ := ApplyVerdict(*d, counts, reconcile.CompletionDecision{Decision: reconcile.DecisionFail, Reason: "quorum lost"}, true, nil, "n1", t0, "x"); next == nil || next.Status != model.DeploymentFailed {
		t.Fatal("a policy's failure during a disruption is its call")
	}
	asked := 0
	for _, n := range w.nodes[:6] {
		dec := Decide(w.facts(t, n.ID))
		if !dec.Verdict {
			continue
		}
		asked++
		if dec.Disruption == "" {
			t.Fatalf("%s asks for a verdict without saying there is a disruption", n.ID)
		}
		in := CompletionInput(d, counts, nil, t0, dec.Disruption)
		if in.Disruption == "" || in.Groups["g"].Disconnected != 4 {
			t.Fatalf("the policy's input: %+v", in)
		}
		if v := reconcile.DecideDefault(in); v.Decision != reconcile.DecisionContinue {
			t.Fatalf("the default during a disruption: %+v", v)
		}
	}
	if asked != 1 {
		t.Fatalf("%d stewards asked for a verdict, want 1", asked)
	}
	if next, _ := ApplyVerdict(*d, counts, reconcile.CompletionDecision{Decision: reconcile.DecisionSucceed}, false, nil, "n1", t0, "x"); next == nil || next.Status != model.DeploymentSuccessful {
		t.Fatal("control: no success without the disruption")
	}
}

// A canary policy that chose nobody leaves the group waiting for a
// promotion (with the policy's reason), never silently unvetted.
func TestAGroupWhosePolicyChoseNobodyStillWaitsForPromotion(t *testing.T) {
	w := newWorld(3, 3, 30)
	w.record(func(d *model.Deployment) {
		d.TaskGroups["g"].CanaryPolicy = "labelled"
		d.TaskGroups["g"].CanaryReason = "no node has canary=true"
	})
	for _, n := range w.nodes {
		if tk := w.take(t, n.ID); len(tk) != 0 {
			t.Fatalf("%s updates with no canary chosen and no promotion: %+v", n.ID, tk)
		}
	}
	w.recs[0].D.TaskGroups["g"].Promoted = true
	if tk := w.take(t, "n1"); len(tk) != 1 {
		t.Fatalf("control: after promotion n1 takes %+v", tk)
	}
}

// A first version (nothing running yet) gets no canary phase even when
// its group asks for canaries; control: a second version does.
func TestAFirstVersionIsPlacedNotCanaried(t *testing.T) {
	w := newWorld(4, 1, 50)
	w.allocs = nil
	w.job.Version = 0
	dec := Decide(w.facts(t, "n1"))
	if dec.Create == nil || len(dec.Create.Canaries) != 0 || len(dec.Place) != 1 {
		t.Fatalf("first version: create %+v, place %+v", dec.Create, dec.Place)
	}
	w2 := newWorld(4, 1, 50)
	if dec := Decide(w2.facts(t, "n1")); dec.Create == nil || len(dec.Create.Canaries) != 1 {
		t.Fatalf("control: second version's canary requests %+v", dec.Create)
	}
}

// A canary node lost before promotion: the steward asks the canary policy
// for a replacement among the ready non-canary nodes; its answer replaces
// the lost node in the stored set (the one change I4 allows), and without
// an answer the group fails, saying why.
func TestALostCanaryNodeIsReplacedByThePolicyOrFailsTheGroup(t *testing.T) {
	w := newWorld(4, 1, 25)
	d := w.record(func(d *model.Deployment) {
		d.TaskGroups["g"].CanaryNodes = []string{"n2"}
		d.TaskGroups["g"].DesiredCanaries = 1
		d.TaskGroups["g"].CanaryPolicy = "default"
	})
	w.nodes[1].Live, w.nodes[1].DownSince = false, t0.Add(-time.Minute)
	var r *CanaryReplacement
	for _, n := range []string{"n1", "n3", "n4"} {
		if dec := Decide(w.facts(t, n)); dec.CanaryReplace != nil {
			r = dec.CanaryReplace
		}
	}
	if r == nil || r.Lost != "n2" || r.Request.Count != 1 || len(r.Request.Eligible) != 3 {
		t.Fatalf("replacement request %+v", r)
	}
	next, err := ReplaceCanary(*d, r, CanaryAnswer{Choice: reconcile.CanaryChoice{NodeIDs: []string{"n4"}, Reason: "same rack"}}, t0, "x")
	if err != nil || next.Status != model.DeploymentRunning || !slices.Equal(next.TaskGroups["g"].CanaryNodes, []string{"n4"}) || next.TaskGroups["g"].DesiredCanaries != 1 {
		t.Fatalf("replaced: %+v %v", next, err)
	}
	// A second try on the record that already has the replacement: nothing.
	if again, _ := ReplaceCanary(*next, r, CanaryAnswer{Choice: reconcile.CanaryChoice{NodeIDs: []string{"n3"}}}, t0, "y"); again != nil {
		t.Fatalf("replaced twice: %+v", again.TaskGroups["g"])
	}
	// No replacement named, or a bad one: the group fails, saying why.
	for _, a := range []CanaryAnswer{{Choice: reconcile.CanaryChoice{Reason: "no other rack"}}, {Choice: reconcile.CanaryChoice{NodeIDs: []string{"n2"}}}} {
		failed, err := ReplaceCanary(*d, r, a, t0, "z")
		if err != nil || failed.Status != model.DeploymentFailed || !strings.Contains(failed.StatusDescription, "canary node n2 of group g lost before promotion") {
			t.Fatalf("answer %+v: %+v %v", a, failed, err)
		}
	}
}

// T13/T14: one verdict per loss, written by the lost node's loss steward
// alone, none during a disruption; the node deletes its own on return.
func TestALossGetsOneVerdictFromItsLossStewardAndTheNodeDeletesItOnReturn(t *testing.T) {
	nodes := []Node{}
	for i := 1; i <= 10; i++ {
		nodes = append(nodes, Node{ID: fmt.Sprintf("n%d", i), Live: true})
	}
	nodes[9] = Node{ID: "n10", Live: false, DownSince: t0.Add(-time.Minute), LossRevision: 42}
	writers := 0
	for _, n := range nodes[:9] {
		dec := Losses(n.ID, nodes, nil, t0, 30*time.Second, time.Time{})
		writers += len(dec.Writes)
		for _, w := range dec.Writes {
			if w.Key != wanted.DownKey("n10", 42) || w.V.Node != "n10" || !w.V.DownSince.Equal(t0.Add(-time.Minute)) || w.V.WrittenBy != n.ID {
				t.Fatalf("verdict %+v", w)
			}
		}
	}
	if writers != 1 {
		t.Fatalf("%d agents write the verdict, want 1", writers)
	}
	// Written already: nobody writes it again.
	held := []Verdict{{Key: wanted.DownKey("n10", 42), Revision: 7, V: model.LossVerdict{Node: "n10"}}}
	for _, n := range nodes[:9] {
		if dec := Losses(n.ID, nodes, held, t0, 30*time.Second, time.Time{}); len(dec.Writes) != 0 {
			t.Fatalf("%s writes a verdict that exists", n.ID)
		}
	}
	// The node is back: it deletes its verdict.
	if dec := Losses("n10", nodes, held, t0, 30*time.Second, time.Time{}); len(dec.Deletes) != 1 {
		t.Fatalf("the returning node deletes %+v", dec.Deletes)
	}
	// Four of ten expired within one TTL: a disruption, no verdict.
	for i := 6; i < 10; i++ {
		nodes[i] = Node{ID: nodes[i].ID, Live: false, DownSince: t0.Add(-time.Second), LossRevision: uint64(100 + i)}
	}
	for _, n := range nodes[:6] {
		if dec := Losses(n.ID, nodes, nil, t0, 30*time.Second, time.Time{}); len(dec.Writes) != 0 || dec.Disruption == "" {
			t.Fatalf("%s during a disruption: %+v", n.ID, dec)
		}
	}
}

// Readers derive another node's allocations as disconnected or lost from
// the loss verdict and the group's disconnect.lost_after: no verdict yet
// → disconnected; a verdict younger than lost_after → disconnected; older,
// or no disconnect block → lost. A node that went away mid-replacement
// (holding a slot, or with its new allocation not yet healthy) counts as
// lost in flight, and stays counted once its slot is reclaimed.
func TestAnotherNodesAllocationsAreLostOrDisconnectedByVerdictAndLostAfter(t *testing.T) {
	for _, c := range []struct {
		name      string
		lostAfter time.Duration
		verdict   time.Duration // how long ago the node went down; 0: no verdict
		lost      bool
	}{
		{"no verdict yet", time.Minute, 0, false},
		{"verdict within lost_after", time.Minute, 30 * time.Second, false},
		{"verdict past lost_after", time.Minute, 2 * time.Minute, true},
		{"verdict, no disconnect block", 0, time.Second, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(4, 1, 0)
			if c.lostAfter > 0 {
				w.job.Groups[0].Disconnect = &model.DisconnectStrategy{LostAfter: model.Duration(c.lostAfter)}
			}
			d := w.record(nil)
			w.nodes[3].Live, w.nodes[3].DownSince = false, t0.Add(-c.verdict-time.Second)
			if c.verdict > 0 {
				w.nodes[3].LostSince = t0.Add(-c.verdict)
			}
			got := Derive(d, &Facts{Job: w.job, Allocs: w.allocs, Nodes: w.nodes, Now: t0})["g"]
			wantLost, wantDisc := 0, 1
			if c.lost {
				wantLost, wantDisc = 1, 0
			}
			if got.Lost != wantLost || got.Disconnected != wantDisc || got.LostInFlight != 0 {
				t.Fatalf("lost %d disconnected %d in flight %d, want %d, %d, 0 (%+v)", got.Lost, got.Disconnected, got.LostInFlight, wantLost, wantDisc, got)
			}
			if c.lost && !slices.Equal(got.LostNodes, []string{"n4"}) || !c.lost && !slices.Equal(got.DisconnectedNodes, []string{"n4"}) {
				t.Fatalf("nodes: lost %v disconnected %v", got.LostNodes, got.DisconnectedNodes)
			}
			// The node was replacing its allocation when it went: its new
			// allocation is pending. Lost in flight, with or without the slot.
			w.alloc("a-n4").JobVersion = 2
			w.slots = []Slot{{Key: "slot..web.g.0", Revision: 1, Time: t0, Slot: model.Slot{Holder: "n4", JobID: "web", Group: "g", DeploymentID: d.ID, NewAlloc: "a-n4"}}}
			if got := Derive(d, &Facts{Job: w.job, Allocs: w.allocs, Nodes: w.nodes, Slots: w.slots, Now: t0})["g"]; got.LostInFlight != 1 || got.ExpiredHolders != 1 {
				t.Fatalf("holding a slot: %+v", got)
			}
			got = Derive(d, &Facts{Job: w.job, Allocs: w.allocs, Nodes: w.nodes, Now: t0})["g"]
			if got.LostInFlight != 1 {
				t.Fatalf("slot reclaimed: %+v", got)
			}
			in := CompletionInput(d, map[string]Counts{"g": got}, nil, t0, "")
			if g := in.Groups["g"]; g.LostInFlight != 1 || g.Lost != wantLost || g.Disconnected != wantDisc {
				t.Fatalf("the completion input: %+v", g)
			}
			// Control: live, it is neither lost nor in flight.
			w.nodes[3].Live = true
			if got := Derive(d, &Facts{Job: w.job, Allocs: w.allocs, Nodes: w.nodes, Now: t0})["g"]; got.Lost+got.Disconnected+got.LostInFlight != 0 {
				t.Fatalf("a live node: %+v", got)
			}
		})
	}
}

// A first rollout takes no slot (nothing to replace): its progress clock
// starts once the version is placed, so a placement that never turns
// healthy fails it by the deadline. Control: while nothing of the version
// is placed the clock does not start.
func TestAFirstRolloutStartsItsProgressClockOncePlaced(t *testing.T) {
	w := newWorld(3, 1, 0)
	w.job.Version = 1
	w.allocs = nil
	d := w.record(nil)
	d.JobVersion, d.ID = 1, reconcile.DeploymentID("", "web", 1)
	steward := func() Decision {
		for _, n := range w.nodes {
			if dec := Decide(w.facts(t, n.ID)); dec.StewardRank == 0 {
				return dec
			}
		}
		t.Fatal("no steward")
		return Decision{}
	}
	clock := func(dec Decision) *Transition {
		for i, tr := range dec.Transitions {
			if tr.Kind == "start_clock" {
				return &dec.Transitions[i]
			}
		}
		return nil
	}
	if tr := clock(steward()); tr != nil {
		t.Fatal("the clock started with nothing placed")
	}
	for _, n := range w.nodes {
		w.allocs = append(w.allocs, &model.Allocation{ID: "a-" + n.ID, Name: "web.g[0]", JobID: "web", JobVersion: 1, TaskGroup: "g",
			NodeID: n.ID, DesiredStatus: model.DesiredRun, ClientStatus: model.ClientPending, DeploymentID: d.ID})
	}
	tr := clock(steward())
	if tr == nil {
		t.Fatal("placed, no slot, and no clock started")
	}
	next, err := tr.Apply(*d)
	if err != nil || next == nil || !next.TaskGroups["g"].RequireProgressBy.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("start clock: %+v (%v)", next, err)
	}
}

// T14 on the returning node's own allocations: within lost_after they
// reconnect; past it, or without a disconnect block, they are lost. An
// allocation created after the loss, already terminal, or whose reconnect
// is already recorded is left alone (carrying the returns out twice
// changes nothing); another node's verdict concerns nobody here.
func TestAReturningNodeSettlesItsOwnAllocationsByItsVerdict(t *testing.T) {
	since := t0.Add(-90 * time.Second)
	v := Verdict{Key: "down.n1.7", Revision: 3, V: model.LossVerdict{Node: "n1", DownSince: since, WrittenBy: "n2"}}
	grp := func(lostAfter time.Duration) *model.Group {
		g := &model.Group{Name: "g"}
		if lostAfter > 0 {
			g.Disconnect = &model.DisconnectStrategy{LostAfter: model.Duration(lostAfter)}
		}
		return g
	}
	al := func(id string) *model.Allocation {
		return &model.Allocation{ID: id, NodeID: "n1", DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning}
	}
	recorded := al("recorded")
	recorded.States = []model.AllocState{{Field: model.AllocStateClientStatus, Value: string(model.ClientUnknown), Time: since}}
	stopped := al("stopped")
	stopped.DesiredStatus = model.DesiredStop
	early := t0.Add(-time.Hour)
	allocs := []ReturnAlloc{
		{Alloc: al("keep"), Group: grp(5 * time.Minute), Created: early},
		{Alloc: al("late"), Group: grp(time.Minute), Created: early},
		{Alloc: al("none"), Group: grp(0), Created: early},
		{Alloc: al("new"), Group: grp(0), Created: since.Add(time.Minute)},
		{Alloc: recorded, Group: grp(5 * time.Minute), Created: early},
		{Alloc: stopped, Group: grp(0), Created: early},
	}
	got := map[string]bool{}
	for _, r := range Returning("n1", []Verdict{v}, allocs, t0) {
		if r.Verdict != v.Key || !r.Since.Equal(since) || r.Why == "" {
			t.Fatalf("return %+v", r)
		}
		got[r.AllocID] = r.Lost
	}
	want := map[string]bool{"keep": false, "late": true, "none": true}
	if len(got) != len(want) {
		t.Fatalf("returns %v, want %v", got, want)
	}
	for id, lost := range want {
		if l, ok := got[id]; !ok || l != lost {
			t.Fatalf("%s: lost %v (present %v), want %v", id, l, ok, lost)
		}
	}
	if r := Returning("n2", []Verdict{v}, allocs, t0); len(r) != 0 {
		t.Fatalf("another node's verdict: %+v", r)
	}
}

// The holder's old allocation is stopped and no replacement is known yet
// while its plan places nothing (an agent restarted between the two, whose
// first plans come before its own record is seen ready again): the slot is
// kept, since the replacement is still owed. Released (controls) once the
// record stops running, once the node leaves the job's scope, or once the
// name is no longer one the job runs. Before, the slot was released there
// and the replacement placed next went beside another node's (the rollout
// fault suite's kill points).
func TestAHolderThatStillOwesTheReplacementKeepsItsSlotThroughAnEmptyPlan(t *testing.T) {
	setup := func() (*world, Take) {
		w := newWorld(2, 1, 0)
		w.record(nil)
		tk := w.take(t, "n1")
		if len(tk) == 0 {
			tk = w.take(t, "n2")
		}
		w.holdSlot(t, tk[0])
		old := w.alloc(tk[0].Slot.OldAlloc)
		old.DesiredStatus, old.ClientStatus = model.DesiredStop, model.ClientComplete
		return w, tk[0]
	}
	emptyPlan := func(w *world, holder string) Facts {
		f := w.facts(t, holder)
		f.Plan = &reconcile.Plan{}
		return f
	}
	w, tk := setup()
	if dec := Decide(emptyPlan(w, tk.Slot.Holder)); len(dec.Releases) != 0 {
		t.Fatalf("released while the replacement is owed: %+v", dec.Releases)
	}
	// Controls.
	w, tk = setup()
	w.recs[len(w.recs)-1].D.Status = model.DeploymentCancelled
	if dec := Decide(emptyPlan(w, tk.Slot.Holder)); len(dec.Releases) != 1 {
		t.Fatalf("record cancelled: not released: %+v", dec.Releases)
	}
	w, tk = setup()
	f := emptyPlan(w, tk.Slot.Holder)
	for i := range f.Nodes {
		if f.Nodes[i].ID == tk.Slot.Holder {
			f.Nodes[i].Eligible, f.Nodes[i].Ready = false, false
		}
	}
	if dec := Decide(f); len(dec.Releases) != 1 {
		t.Fatalf("holder made ineligible: not released: %+v", dec.Releases)
	}
	w, tk = setup()
	w.job.Groups[0].Count = 0
	if dec := Decide(emptyPlan(w, tk.Slot.Holder)); len(dec.Releases) != 1 {
		t.Fatalf("the name no longer in the job: not released: %+v", dec.Releases)
	}
}

// Progress above the watermark (T9) is recorded once the record has been
// unchanged for ProgressEvery, not at every newly healthy allocation (each
// write reaches every node of the fleet), and at once when the progress
// deadline is within two such intervals; until then the steward is told
// when to look again, and its deputy finds nothing overdue. A group
// without a progress deadline waits ProgressEveryMax.
func TestProgressIsRecordedCoalescedAndAtOnceNearTheDeadline(t *testing.T) {
	healthy := true
	build := func(modifiedAgo, deadlineIn, progressDeadline time.Duration) *world {
		w := newWorld(4, 4, 0)
		for _, id := range []string{"n1", "n2"} {
			a := w.alloc("a-" + id)
			a.ID, a.JobVersion, a.DeploymentID = "b-"+id, 2, reconcile.DeploymentID("", "web", 2)
			a.DeploymentStatus = &model.AllocDeploymentStatus{Healthy: &healthy}
		}
		w.record(func(d *model.Deployment) {
			d.ModifyTime = t0.Add(-modifiedAgo)
			st := d.TaskGroups["g"]
			st.ProgressDeadline = model.Duration(progressDeadline)
			if deadlineIn != 0 {
				st.RequireProgressBy = t0.Add(deadlineIn)
			}
		})
		return w
	}
	decide := func(w *world, rank int) Decision {
		for _, n := range w.nodes {
			if dec := Decide(w.facts(t, n.ID)); dec.StewardRank == rank {
				return dec
			}
		}
		t.Fatalf("no node of steward rank %d", rank)
		return Decision{}
	}
	progress := func(dec Decision) bool {
		return slices.ContainsFunc(dec.Transitions, func(tr Transition) bool { return tr.Kind == "progress" })
	}
	for _, c := range []struct {
		name                                      string
		modifiedAgo, deadlineIn, progressDeadline time.Duration
		wantNow                                   bool
		wantRetryAtMost                           time.Duration
	}{
		{"recorded 2 s ago, deadline far", 2 * time.Second, 5 * time.Minute, 10 * time.Minute, false, 8 * time.Second},
		{"recorded 11 s ago", 11 * time.Second, 5 * time.Minute, 10 * time.Minute, true, 0},
		{"deadline within two intervals", 2 * time.Second, 15 * time.Second, 10 * time.Minute, true, 0},
		{"clock not started", 2 * time.Second, 0, 10 * time.Minute, false, 8 * time.Second},
		{"a short deadline: every second", 1500 * time.Millisecond, 9 * time.Second, 5 * time.Second, true, 0},
		{"no deadline", 2 * time.Second, 0, 0, false, 8 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := build(c.modifiedAgo, c.deadlineIn, c.progressDeadline)
			dec := decide(w, 0)
			if got := progress(dec); got != c.wantNow {
				t.Fatalf("progress recorded now: %v, want %v (transitions %+v)", got, c.wantNow, dec.Transitions)
			}
			if !c.wantNow && (dec.RetryIn <= 0 || dec.RetryIn > c.wantRetryAtMost) {
				t.Fatalf("retry in %v, want within (0, %v]", dec.RetryIn, c.wantRetryAtMost)
			}
			deputy := decide(w, 1)
			if progress(deputy) || !c.wantNow && slices.ContainsFunc(deputy.Due, func(k string) bool { return strings.HasPrefix(k, "progress:") }) {
				t.Fatalf("the deputy: transitions %+v, due %v", deputy.Transitions, deputy.Due)
			}
		})
	}
	if got := ProgressEvery(2 * time.Minute); got != 10*time.Second {
		t.Fatalf("ProgressEvery(2 min) = %v", got)
	}
	if got := ProgressEvery(30 * time.Second); got != 3*time.Second {
		t.Fatalf("ProgressEvery(30 s) = %v", got)
	}
}
