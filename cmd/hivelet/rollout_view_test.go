package main

import (
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/rollout"
)

var aggNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// aggFacts: nodes n1..n3 live, each with an allocation of web at version 1.
func aggFacts() *rollout.Facts {
	f := &rollout.Facts{Now: aggNow, NodeTTL: 30 * time.Second, Job: &model.Job{ID: "web", Version: 2,
		Groups: []*model.Group{{Name: "g", Count: 1}}}}
	for _, id := range []string{"n1", "n2", "n3"} {
		f.Nodes = append(f.Nodes, rollout.Node{ID: id, Live: true, Eligible: true, Ready: true})
		f.Allocs = append(f.Allocs, &model.Allocation{ID: "a-" + id, JobID: "web", JobVersion: 1, TaskGroup: "g", NodeID: id,
			DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning})
	}
	return f
}

func aggRecord(mod func(d *model.Deployment, g *model.DeploymentState)) *model.Deployment {
	g := &model.DeploymentState{MaxParallel: 1, ProgressDeadline: model.Duration(10 * time.Minute)}
	d := &model.Deployment{ID: "1de85714-b7eb", JobID: "web", JobVersion: 2, Status: model.DeploymentRunning,
		StatusDescription: model.DescRunning, TaskGroups: map[string]*model.DeploymentState{"g": g}}
	if mod != nil {
		mod(d, g)
	}
	return d
}

// A canary policy that chose nobody must say why in what the operator
// sees, not leave a silent rollout. Control: a policy that chose a node
// shows the node and the count.
func TestACanaryPolicyThatChoseNobodyShowsItsReason(t *testing.T) {
	d := aggRecord(func(_ *model.Deployment, g *model.DeploymentState) {
		g.CanaryPolicy, g.CanaryReason = "spread", "no ready node in datacenter dc9"
	})
	agg := aggregateOf(d, aggFacts())
	text := strings.Join(agg.lines(), "\n")
	if !strings.Contains(text, "canaries: none chosen (canary policy spread: no ready node in datacenter dc9)") {
		t.Fatalf("the policy's reason is missing:\n%s", text)
	}
	// The group still waits for a promotion (host/rollout): `job run` ends
	// saying why, with the command that goes on.
	if !agg.Done || agg.Code != 0 || !strings.Contains(agg.Reason, "canary policy spread chose no canary node (no ready node in datacenter dc9)") ||
		!strings.Contains(agg.Reason, "hivelet deployment promote web") {
		t.Fatalf("outcome: done %v code %d %q", agg.Done, agg.Code, agg.Reason)
	}
	d = aggRecord(func(_ *model.Deployment, g *model.DeploymentState) {
		g.CanaryPolicy, g.CanaryReason, g.CanaryNodes, g.DesiredCanaries = "spread", "one per datacenter", []string{"n2"}, 1
	})
	agg = aggregateOf(d, aggFacts())
	text = strings.Join(agg.lines(), "\n")
	if !strings.Contains(text, "canaries 0/1 healthy on n2 (canary policy spread: one per datacenter)") || agg.Done {
		t.Fatalf("control: done %v\n%s", agg.Done, text)
	}
}

func TestTheAggregatesOutcomeIsTheExitCodeOfRolloutMd(t *testing.T) {
	yes := true
	healthyCanary := func(f *rollout.Facts) {
		f.Allocs = append(f.Allocs, &model.Allocation{ID: "b-n1", JobID: "web", JobVersion: 2, TaskGroup: "g", NodeID: "n1",
			DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning, DeploymentStatus: &model.AllocDeploymentStatus{Healthy: &yes}})
	}
	canarying := func(auto bool) func(d *model.Deployment, g *model.DeploymentState) {
		return func(d *model.Deployment, g *model.DeploymentState) {
			d.StatusDescription = model.DescNeedsPromotion
			g.CanaryNodes, g.DesiredCanaries, g.AutoPromote = []string{"n1"}, 1, auto
		}
	}
	failed := func(r *model.DeploymentRevert) func(d *model.Deployment, g *model.DeploymentState) {
		return func(d *model.Deployment, _ *model.DeploymentState) {
			d.Status, d.StatusDescription, d.Revert = model.DeploymentFailed, model.DescFailedAllocations, r
		}
	}
	cases := []struct {
		name    string
		mod     func(d *model.Deployment, g *model.DeploymentState)
		facts   func(f *rollout.Facts)
		done    bool
		code    int
		reason  string
		pending bool
	}{
		{"running", nil, nil, false, 0, "", false},
		{"successful", func(d *model.Deployment, _ *model.DeploymentState) { d.Status = model.DeploymentSuccessful }, nil, true, 0, "successful", false},
		{"manual promotion, canary not healthy", canarying(false), nil, false, 0, "", false},
		{"manual promotion, canary healthy", canarying(false), healthyCanary, true, 0, "waiting for manual promotion: hivelet deployment promote web", false},
		{"auto promotion, canary healthy: the steward promotes", canarying(true), healthyCanary, false, 0, "", false},
		{"paused", func(d *model.Deployment, _ *model.DeploymentState) { d.Status = model.DeploymentPaused }, nil, false, 0, "", false},
		{"cancelled", func(d *model.Deployment, _ *model.DeploymentState) {
			d.Status, d.StatusDescription = model.DeploymentCancelled, model.DescNewerJob
		}, nil, true, 1, "cancelled: Cancelled due to newer version of job", false},
		{"failed, no auto_revert", failed(nil), nil, true, 1, "not rolled back (no group has auto_revert)", false},
		{"failed, revert pending", failed(&model.DeploymentRevert{Status: model.RevertPending, ToVersion: 1}), nil, true, 1, "rolling back to version 1", true},
		{"failed, revert done", failed(&model.DeploymentRevert{Status: model.RevertDone, ToVersion: 1, AsVersion: 3}), nil, true, 1, "rolled back to the spec of version 1 as version 3", false},
		{"failed, no stable version", failed(&model.DeploymentRevert{Status: model.RevertNone, Reason: "no stable version to revert to"}), nil, true, 1, "not rolled back: no stable version to revert to", false},
		{"failed, revert abandoned", failed(&model.DeploymentRevert{Status: model.RevertAbandoned, Reason: "version 4 was pushed"}), nil, true, 1, "revert abandoned: version 4 was pushed", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := aggFacts()
			if c.facts != nil {
				c.facts(f)
			}
			agg := aggregateOf(aggRecord(c.mod), f)
			if agg.Done != c.done || (c.done && agg.Code != c.code) || !strings.Contains(agg.Reason, c.reason) || agg.RevertPending != c.pending {
				t.Fatalf("done %v code %d reason %q pending %v", agg.Done, agg.Code, agg.Reason, agg.RevertPending)
			}
		})
	}
}

func TestTheAggregateShowsHoldersUnhealthyLostDeadlineAndSteward(t *testing.T) {
	no := false
	f := aggFacts()
	f.Nodes[2].Live, f.Nodes[2].Ready, f.Nodes[2].DownSince = false, false, aggNow.Add(-2*time.Minute)
	f.Allocs = append(f.Allocs, &model.Allocation{ID: "b-n1", JobID: "web", JobVersion: 2, TaskGroup: "g", NodeID: "n1",
		DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning, ClientDescription: "check http failed",
		DeploymentStatus: &model.AllocDeploymentStatus{Healthy: &no}})
	f.Slots = []rollout.Slot{{Key: "slot.default.web.g.0", Slot: model.Slot{JobID: "web", JobVersion: 2, Group: "g", Holder: "n2", OldAlloc: "a-n2", NewAlloc: "b-n2"}}}
	d := aggRecord(func(d *model.Deployment, g *model.DeploymentState) {
		g.RequireProgressBy = aggNow.Add(90 * time.Second)
		d.Events = []model.DeploymentEvent{{Time: aggNow, Kind: model.EventPromoted, Message: "groups g promoted by cli"}}
	})
	text := strings.Join(aggregateOf(d, f).lines(), "\n")
	for _, want := range []string{
		"updated 1/2 (healthy 0); in flight 1/1 (n2)",
		"unhealthy 1: n1: check http failed",
		"lost/disconnected: n3 (down 2m0s, no loss verdict yet)",
		"progress deadline: in 1m30s",
		"steward: " + rollout.RankedNodes(d.ID, []string{"n1", "n2"})[0], // the live eligible nodes only
		"promoted: groups g promoted by cli",
	} {
		if !strings.Contains(text, want) {
			t.Fatalf("missing %q in\n%s", want, text)
		}
	}
	// Paused: the deadline is stopped, not counting down.
	d.Status = model.DeploymentPaused
	if text := strings.Join(aggregateOf(d, f).lines(), "\n"); !strings.Contains(text, "stopped while paused") {
		t.Fatalf("paused:\n%s", text)
	}
}

// Above perNodeMax nodes `job run` prints the aggregate, not a line per
// node. Control: a small fleet gets both.
func TestJobRunPrintsTheAggregateAloneAboveTwentyNodes(t *testing.T) {
	job := &model.Job{ID: "web", Version: 2}
	agg := aggregateOf(aggRecord(nil), aggFacts())
	for _, c := range []struct {
		nodes     int
		nodeLines bool
	}{{perNodeMax + 1, false}, {3, true}} {
		r := runProgress{Fleet: &agg, Deployment: agg.Deployment}
		for i := range c.nodes {
			r.Nodes = append(r.Nodes, nodeProgress{Node: "n" + string(rune('a'+i))})
		}
		text := strings.Join(r.lines(job, 2), "\n")
		if strings.Contains(text, "  node na:") != c.nodeLines || !strings.Contains(text, "  group g:") {
			t.Fatalf("%d nodes:\n%s", c.nodes, text)
		}
	}
}

// A node down with a loss verdict: the aggregate says so, and the group's
// line counts its allocation lost, or disconnected while the group's
// disconnect.lost_after has not passed since the node went down.
func TestTheAggregateCountsAllocationsLostOrDisconnectedByTheVerdict(t *testing.T) {
	for _, c := range []struct {
		lostAfter time.Duration
		want      string
	}{{0, "allocations lost 1 (n3); disconnected 0"}, {time.Hour, "allocations lost 0; disconnected 1 (n3)"}} {
		f := aggFacts()
		if c.lostAfter > 0 {
			f.Job.Groups[0].Disconnect = &model.DisconnectStrategy{LostAfter: model.Duration(c.lostAfter)}
		}
		f.Nodes[2].Live, f.Nodes[2].Ready = false, false
		f.Nodes[2].DownSince, f.Nodes[2].LostSince = aggNow.Add(-2*time.Minute), aggNow.Add(-2*time.Minute)
		text := strings.Join(aggregateOf(aggRecord(nil), f).lines(), "\n")
		for _, want := range []string{"lost/disconnected: n3 (down 2m0s, loss verdict)", c.want} {
			if !strings.Contains(text, want) {
				t.Fatalf("lost_after %s: missing %q in\n%s", c.lostAfter, want, text)
			}
		}
	}
}
