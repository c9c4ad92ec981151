package agent

import (
	"context"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/host/state"
	"github.com/hivelet/hivelet/host/wanted"
)

func TestConstraintsAgainstANode(t *testing.T) {
	n := &model.Node{ID: "n1", Name: "web-1", Datacenter: "dc1", NodePool: "default", Class: "small",
		Attributes: map[string]string{"kernel.name": "linux", "cpu.numcores": "8", "os.version": "22.04.3", "tags": "a,b,c"},
		Meta:       map[string]string{"rack": "r7"}}
	cases := []struct {
		attr string
		op   model.ConstraintOperator
		val  string
		want bool
	}{
		{"${attr.kernel.name}", model.OpEqual, "linux", true},
		{"${attr.kernel.name}", model.OpEqual, "windows", false},
		{"${attr.kernel.name}", model.OpNotEqual, "windows", true},
		{"${attr.cpu.numcores}", model.OpGreaterEq, "4", true},
		{"${attr.cpu.numcores}", model.OpLess, "10", true}, // numeric, not text ("8" > "10" as text)
		{"${attr.cpu.numcores}", model.OpGreater, "8", false},
		{"${meta.rack}", model.OpRegexp, "^r[0-9]+$", true},
		{"${meta.rack}", model.OpRegexp, "^x", false},
		{"${attr.os.version}", model.OpVersion, ">= 22.04, < 24", true},
		{"${attr.os.version}", model.OpSemver, ">= 24.0", false},
		{"${attr.tags}", model.OpSetContains, "a,c", true},
		{"${attr.tags}", model.OpSetContains, "a,d", false},
		{"${attr.tags}", model.OpSetContAny, "d,c", true},
		{"${meta.rack}", model.OpIsSet, "", true},
		{"${meta.missing}", model.OpIsSet, "", false},
		{"${meta.missing}", model.OpIsNotSet, "", true},
		{"${meta.missing}", model.OpEqual, "", false}, // an unset value matches nothing but is_not_set
		{"${node.datacenter}", model.OpEqual, "dc1", true},
		{"${node.unique.name}", model.OpEqual, "web-1", true},
		{"${node.class}", model.OpEqual, "small", true},
	}
	for _, c := range cases {
		if got := constraintHolds(n, model.Constraint{Attribute: c.attr, Operator: c.op, Value: c.val}); got != c.want {
			t.Errorf("%s %s %q = %v, want %v", c.attr, c.op, c.val, got, c.want)
		}
	}
}

func TestWhichNodesAJobPlacesOn(t *testing.T) {
	job := &model.Job{ID: "web", Type: model.JobTypeSystem, Datacenters: []string{"dc*"}, NodePool: "default",
		Constraints: []model.Constraint{{Attribute: "${attr.kernel.name}", Operator: model.OpEqual, Value: "linux"}},
		Groups:      []*model.Group{{Name: "g", Count: 1, Tasks: []*model.Task{{Name: "t", Driver: "mock"}}}}}
	ok := func() *model.Node {
		n := nodeRecord("n")
		return n
	}
	cases := []struct {
		name  string
		edit  func(n *model.Node)
		wants bool
	}{
		{"ready, matching", func(*model.Node) {}, true},
		{"other datacenter", func(n *model.Node) { n.Datacenter = "eu1" }, false},
		{"other pool", func(n *model.Node) { n.NodePool = "edge" }, false},
		{"constraint fails", func(n *model.Node) { n.Attributes["kernel.name"] = "darwin" }, false},
		{"ineligible", func(n *model.Node) { n.Eligibility = model.Ineligible }, false},
		{"draining", func(n *model.Node) { n.Drain = &model.DrainStrategy{} }, false},
		{"down", func(n *model.Node) { n.Status = model.NodeStatusDown }, false},
		{"driver unhealthy", func(n *model.Node) { n.Drivers["mock"] = model.DriverInfo{Detected: true} }, false},
		{"driver missing", func(n *model.Node) { delete(n.Drivers, "mock") }, false},
	}
	for _, c := range cases {
		n := ok()
		c.edit(n)
		if got := PlacesOn(job, n); got != c.wants {
			t.Errorf("%s: PlacesOn = %v, want %v", c.name, got, c.wants)
		}
	}
}

func TestBuildInputClassifiesNodesAndTakesThisNodesAllocationsFromItsOwnRecords(t *testing.T) {
	job := mockJob("web", 2, nil)
	self := nodeRecord("self")
	unhealthy := nodeRecord("sick")
	unhealthy.Drivers["mock"] = model.DriverInfo{Detected: true}
	down := nodeRecord("down")
	down.Status = model.NodeStatusDown
	other := nodeRecord("other")
	outOfScope := nodeRecord("far")
	outOfScope.Datacenter = "eu1"
	staleSelf := nodeRecord("self")
	staleSelf.Status = model.NodeStatusDown // the fleet's view of this node lags
	own := []*model.Allocation{{ID: "mine", JobID: "web", NodeID: "self", ClientStatus: model.ClientRunning, DesiredStatus: model.DesiredRun}}
	others := []*model.Allocation{
		{ID: "theirs", JobID: "web", NodeID: "other", ClientStatus: model.ClientRunning, DesiredStatus: model.DesiredRun},
		{ID: "ghost", JobID: "web", NodeID: "vanished", ClientStatus: model.ClientRunning, DesiredStatus: model.DesiredRun},
		{ID: "done", JobID: "web", NodeID: "other", ClientStatus: model.ClientComplete, DesiredStatus: model.DesiredStop},
		{ID: "self-copy", JobID: "web", NodeID: "self", ClientStatus: model.ClientRunning, DesiredStatus: model.DesiredRun},
		{ID: "other-job", JobID: "api", NodeID: "other", ClientStatus: model.ClientRunning, DesiredStatus: model.DesiredRun},
	}
	deps := []*model.Deployment{{ID: "d1", JobID: "web", JobVersion: 1}, {ID: "d2", JobID: "web", JobVersion: 2}, {ID: "x", JobID: "api", JobVersion: 9}}
	in := buildInput(job, self, own, fleetFacts{Nodes: []*model.Node{staleSelf, unhealthy, down, other, outOfScope}, OtherAllocs: others, Deployments: deps}, time.Unix(0, 0), nil)

	ready := map[string]bool{}
	for _, n := range in.ReadyNodes {
		ready[n.ID] = true
	}
	if len(ready) != 2 || !ready["self"] || !ready["other"] {
		t.Fatalf("ready nodes %v, want self and other", ready)
	}
	if len(in.NotReadyNodes) != 1 || in.NotReadyNodes[0] != "sick" {
		t.Fatalf("not ready %v, want [sick]", in.NotReadyNodes)
	}
	if _, ok := in.TaintedNodes["down"]; !ok {
		t.Fatal("a down node is not tainted")
	}
	if n, ok := in.TaintedNodes["vanished"]; !ok || n != nil {
		t.Fatal("an allocation's unknown node is not tainted as gone")
	}
	live := map[string]bool{}
	for _, a := range in.LiveAllocs {
		live[a.ID] = true
	}
	if len(live) != 3 || !live["mine"] || !live["theirs"] || !live["ghost"] {
		t.Fatalf("live allocations %v: want this node's own record, not the KV copy, and no other job's", live)
	}
	if len(in.TerminalAllocs) != 1 || in.TerminalAllocs[0].ID != "done" {
		t.Fatalf("terminal %v", in.TerminalAllocs)
	}
	if in.Deployment == nil || in.Deployment.ID != "d2" {
		t.Fatalf("deployment %+v, want the newest version's", in.Deployment)
	}
}

func TestTasksEqualDecidesInPlaceUpdates(t *testing.T) {
	base := func() *model.Group { return mockJob("web", 1, map[string]any{"run_for": "1h"}).Groups[0] }
	cases := []struct {
		name    string
		edit    func(g *model.Group)
		inPlace bool
	}{
		{"nothing", func(*model.Group) {}, true},
		{"restart policy", func(g *model.Group) { g.Restart.Attempts = 9 }, true},
		{"update strategy", func(g *model.Group) { g.Update.MinHealthyTime = model.Duration(time.Hour) }, true},
		{"count", func(g *model.Group) { g.Count = 3 }, true},
		{"task config", func(g *model.Group) { g.Tasks[0].Config["run_for"] = "2h" }, false},
		{"task env", func(g *model.Group) { g.Tasks[0].Env = map[string]string{"A": "b"} }, false},
		{"kill timeout", func(g *model.Group) { g.Tasks[0].KillTimeout = model.Duration(time.Minute) }, false},
		{"group meta (seen by tasks)", func(g *model.Group) { g.Meta = map[string]string{"x": "y"} }, false},
		{"a task added", func(g *model.Group) { g.Tasks = append(g.Tasks, &model.Task{Name: "u", Driver: "mock"}) }, false},
		{"a network port (the tasks' ports)", func(g *model.Group) {
			g.Network = &model.Network{Mode: model.NetworkHost, Ports: []model.Port{{Label: "http"}}}
		}, false},
		{"max_run_duration", func(g *model.Group) { g.MaxRunDuration = model.Duration(time.Minute) }, false},
		{"a group service", func(g *model.Group) { g.Services = []model.Service{{Name: "web", Port: "8080"}} }, false},
	}
	for _, c := range cases {
		g := base()
		c.edit(g)
		if got := tasksEqual(base(), g); got != c.inPlace {
			t.Errorf("%s: in place = %v, want %v", c.name, got, c.inPlace)
		}
	}
}

func TestTheAgentsDefaultCompletionFollowsTheSpec(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dep := func(st model.DeploymentState) *model.Deployment {
		return &model.Deployment{ID: "d", Status: model.DeploymentRunning, TaskGroups: map[string]*model.DeploymentState{"g": &st}}
	}
	cases := []struct {
		name string
		st   model.DeploymentState
		h    reconcile.GroupHealth
		want reconcile.Decision
	}{
		{"complete", model.DeploymentState{DesiredTotal: 2}, reconcile.GroupHealth{Placed: 2, Healthy: 2, Complete: true}, reconcile.DecisionSucceed},
		{"in progress", model.DeploymentState{DesiredTotal: 2}, reconcile.GroupHealth{Placed: 2, Healthy: 1}, reconcile.DecisionContinue},
		{"an unhealthy allocation", model.DeploymentState{DesiredTotal: 2}, reconcile.GroupHealth{Placed: 2, Healthy: 1, Unhealthy: 1}, reconcile.DecisionFail},
		{"progress deadline passed", model.DeploymentState{DesiredTotal: 2, RequireProgressBy: now.Add(-time.Second)}, reconcile.GroupHealth{Placed: 2}, reconcile.DecisionFail},
		{"progress deadline ahead", model.DeploymentState{DesiredTotal: 2, RequireProgressBy: now.Add(time.Minute)}, reconcile.GroupHealth{Placed: 2}, reconcile.DecisionContinue},
		{"canaries healthy, auto_promote", model.DeploymentState{DesiredCanaries: 1, AutoPromote: true}, reconcile.GroupHealth{CanariesHealthy: 1}, reconcile.DecisionPromote},
		{"canaries healthy, manual promotion", model.DeploymentState{DesiredCanaries: 1}, reconcile.GroupHealth{CanariesHealthy: 1, Complete: true}, reconcile.DecisionContinue},
		{"canaries promoted and complete", model.DeploymentState{DesiredCanaries: 1, Promoted: true}, reconcile.GroupHealth{Complete: true}, reconcile.DecisionSucceed},
	}
	for _, c := range cases {
		got, err := reconcile.DefaultCompletion{}.DecideCompletion(context.Background(), reconcile.CompletionInput{Deployment: dep(c.st), Groups: map[string]reconcile.GroupHealth{"g": c.h}, Now: now})
		if err != nil || got.Decision != c.want {
			t.Errorf("%s: %+v %v, want %s", c.name, got, err, c.want)
		}
	}
}

func TestTheLastGoodJobIsInForceWhenTheViewHasNone(t *testing.T) {
	stored := &state.JobRecord{Job: &model.Job{ID: "web", Version: 3}, Revision: 7}
	cases := []struct {
		name    string
		st      wanted.JobState
		stored  *state.JobRecord
		version uint64
		order   wanted.Order
	}{
		{"accepted in the view", wanted.JobState{Key: "k", Value: &model.Job{ID: "web", Version: 4}, Revision: 9}, stored, 4, wanted.OrderRun},
		{"rejected at boot, stored version runs", wanted.JobState{Key: "k", Rejection: &wanted.Rejection{Reason: "x"}}, stored, 3, wanted.OrderRun},
		{"rejected, never good anywhere", wanted.JobState{Key: "k", Rejection: &wanted.Rejection{Reason: "x"}}, nil, 0, wanted.OrderNone},
		{"not in the view at all: orphaned, not stopped", wanted.JobState{}, stored, 3, wanted.OrderKeep},
		{"stopped", wanted.JobState{Key: "k", Value: &model.Job{ID: "web", Version: 5, Stop: true}, Revision: 10}, stored, 5, wanted.OrderStop},
	}
	for _, c := range cases {
		job, order := jobInForce(c.st, c.stored)
		if order != c.order || (job != nil && job.Version != c.version) {
			t.Errorf("%s: %v %+v, want %v version %d", c.name, order, job, c.order, c.version)
		}
	}
}

func TestADrainingNodeMigratesItsAllocationsAtTheDeadline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	job := mockJob("web", 1, nil)
	own := []*model.Allocation{{ID: "mine", Name: "web.g[0]", JobID: "web", JobVersion: 1, TaskGroup: "g", NodeID: "self", ClientStatus: model.ClientRunning, DesiredStatus: model.DesiredRun}}
	cases := []struct {
		name    string
		drain   *model.DrainStrategy
		now     time.Time
		migrate bool
	}{
		{"not draining", nil, t0, false},
		{"draining, before the deadline", &model.DrainStrategy{Deadline: model.Duration(time.Minute), Started: t0}, t0.Add(30 * time.Second), false},
		{"draining, deadline passed", &model.DrainStrategy{Deadline: model.Duration(time.Minute), Started: t0}, t0.Add(time.Minute), true},
		{"draining without a deadline", &model.DrainStrategy{}, t0, true},
	}
	for _, c := range cases {
		self := nodeRecord("self")
		self.Drain = c.drain
		if c.drain != nil {
			self.Eligibility = model.Ineligible
		}
		in := buildInput(job, self, own, fleetFacts{}, c.now, nil)
		plan, err := reconcile.ReconcileNode(in, "self")
		if err != nil {
			t.Fatal(err)
		}
		if got := len(plan.Migrate) == 1; got != c.migrate {
			t.Errorf("%s: migrate = %v (plan migrate %d, ignore %d), want %v", c.name, got, len(plan.Migrate), len(plan.Ignore), c.migrate)
		}
		if own[0].DesiredTransition.Migrate != nil {
			t.Fatal("buildInput modified the runner's snapshot")
		}
	}
}
