package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// On a node that is not a ready node, two live allocations of one name
// each go through the rule table: a drain migrates both, a down node marks
// both lost. Control: on a ready node the older one is stopped as a
// duplicate.
func TestTwoAllocationsOfOneNameOnATaintedNodeEachGoThroughTheTable(t *testing.T) {
	mk := func() []*model.Allocation {
		older := al("old", "n1", "web", 0, 1)
		newer := al("new", "n1", "web", 0, 2)
		older.CreateTime, newer.CreateTime = t0, t0.Add(time.Second)
		return []*model.Allocation{older, newer}
	}
	yes := true
	// Drained: both marked for migration.
	in := fleetOf(sysJob(2, grp("web", 1)))
	in.TaintedNodes["n1"] = draining("n1")
	in.LiveAllocs = mk()
	for _, a := range in.LiveAllocs {
		a.DesiredTransition.Migrate = &yes
	}
	checkDecisions(t, mustFleet(t, in), map[string]string{"old": "migrate alloc.2", "new": "migrate alloc.2"})
	// Down: both lost.
	in = fleetOf(sysJob(2, grp("web", 1)))
	in.TaintedNodes["n1"] = nodeWith("n1", model.NodeStatusDown)
	in.LiveAllocs = mk()
	checkDecisions(t, mustFleet(t, in), map[string]string{"old": "lost alloc.8", "new": "lost alloc.8"})
	// Control: a ready node keeps the newest version and stops the other.
	in = fleetOf(sysJob(2, grp("web", 1)), rnode("n1"))
	in.LiveAllocs = mk()
	checkDecisions(t, mustFleet(t, in), map[string]string{"old": "stop duplicate", "new": "ignore alloc.14"})
	// Ties on version: the one created last stays.
	in = fleetOf(sysJob(2, grp("web", 1)), rnode("n1"))
	in.LiveAllocs = mk()
	in.LiveAllocs[0].JobVersion = 2
	checkDecisions(t, mustFleet(t, in), map[string]string{"old": "stop duplicate", "new": "ignore alloc.14"})
}

// A deployment created needing promotion carries that description in the
// round that creates it. Control: without canaries it is plain running.
func TestADeploymentCreatedNeedingPromotionSaysSoInItsFirstRound(t *testing.T) {
	for _, c := range []struct {
		canary int
		auto   bool
		want   string
	}{{50, false, model.DescNeedsPromotion}, {50, true, model.DescAutoPromotionPending}, {0, false, model.DescRunning}} {
		in := canaryFleet()
		in.Job.Groups[0].Update.Canary = c.canary
		in.Job.Groups[0].Update.AutoPromote = c.auto
		p := mustFleet(t, in)
		if !p.DeploymentCreated || p.Deployment.StatusDescription != c.want {
			t.Errorf("canary %d auto %v: created %v, description %q, want %q", c.canary, c.auto, p.DeploymentCreated, p.Deployment.StatusDescription, c.want)
		}
	}
}

// A deployment whose canaries are all healthy and that waits for manual
// promotion is not failed by its progress deadline (with auto_promote it
// is promoted). Control: with a canary not healthy the deadline fails it.
func TestAHealthyCanaryAwaitingManualPromotionOutlivesItsDeadline(t *testing.T) {
	d := dep(2, model.DeploymentRunning, map[string]*model.DeploymentState{"web": {
		DesiredCanaries: 1, DesiredTotal: 4, CanaryNodes: []string{"n1"}, RequireProgressBy: t0.Add(-time.Minute)}})
	in := CompletionInput{Deployment: d, Now: t0, Groups: map[string]GroupHealth{"web": {Placed: 1, Healthy: 1, CanariesHealthy: 1}}}
	if got := DecideDefault(in); got.Decision != DecisionContinue || got.Reason != model.DescNeedsPromotion {
		t.Fatalf("healthy canaries awaiting manual promotion: %+v", got)
	}
	in.Groups["web"] = GroupHealth{Placed: 1, Pending: 1}
	if got := DecideDefault(in); got.Decision != DecisionFail {
		t.Fatalf("control, canary not healthy: %+v", got)
	}
	in.Groups["web"] = GroupHealth{Placed: 1, Healthy: 1, CanariesHealthy: 1}
	d.TaskGroups["web"].AutoPromote = true
	if got := DecideDefault(in); got.Decision != DecisionPromote {
		t.Fatalf("auto_promote with healthy canaries past the deadline: %+v", got)
	}
}

// While the disruption guard holds the default decides nothing: an
// unhealthy allocation does not fail the deployment and a group complete
// on the live nodes does not succeed it. Control: the same inputs without
// the disruption fail, then succeed.
func TestTheDefaultCompletionContinuesDuringADisruption(t *testing.T) {
	d := dep(2, model.DeploymentRunning, map[string]*model.DeploymentState{"web": {DesiredTotal: 2}})
	for _, c := range []struct {
		h    GroupHealth
		want Decision
	}{{GroupHealth{Placed: 2, Healthy: 1, Unhealthy: 1}, DecisionFail}, {GroupHealth{Placed: 2, Healthy: 2, Complete: true}, DecisionSucceed}} {
		in := CompletionInput{Deployment: d, Now: t0, Groups: map[string]GroupHealth{"web": c.h}}
		if got := DecideDefault(in); got.Decision != c.want {
			t.Fatalf("control %+v: %+v, want %s", c.h, got, c.want)
		}
		in.Disruption = "many nodes expired at once"
		got := DecideDefault(in)
		if got.Decision != DecisionContinue || !strings.Contains(got.Reason, "many nodes expired") {
			t.Fatalf("during a disruption %+v: %+v, want continue naming the disruption", c.h, got)
		}
	}
}
