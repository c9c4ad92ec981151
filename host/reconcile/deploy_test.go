package reconcile

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
)

// depSummary renders the deployment part of a plan: "v<version>" (or
// "none"), " created"/" changed", then each status update.
func depSummary(p *Plan) string {
	short := func(id string) string {
		for v := uint64(0); v < 10; v++ {
			if id == DeploymentID("", "web", v) {
				return fmt.Sprintf("v%d", v)
			}
		}
		return id
	}
	s := "none"
	if p.Deployment != nil {
		s = short(p.Deployment.ID)
		if p.DeploymentCreated {
			s += " created"
		}
		if p.DeploymentChanged {
			s += " changed"
		}
	}
	for _, u := range p.DeploymentUpdates {
		s += fmt.Sprintf(" | %s→%s %s", short(u.DeploymentID), u.Status, u.StatusDescription)
	}
	return s
}

type depCase struct {
	name        string
	in          func() Input
	want        string
	decisions   map[string]string
	control     func(in *Input)
	controlWant string
}

func runDepCases(t *testing.T, cases []depCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := mustFleet(t, c.in())
			if got := depSummary(p); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
			checkDecisions(t, p, c.decisions)
			if c.control != nil {
				in := c.in()
				c.control(&in)
				if got := depSummary(mustFleet(t, in)); got != c.controlWant {
					t.Errorf("control: got  %s\ncontrol: want %s", got, c.controlWant)
				}
			}
		})
	}
}

func oneNodeV(version, allocVersion uint64) Input {
	in := fleetOf(sysJob(version, grp("web", 1)), rnode("n1"))
	in.LiveAllocs = []*model.Allocation{al("a1", "n1", "web", 0, allocVersion)}
	return in
}

func st(total int) map[string]*model.DeploymentState {
	return map[string]*model.DeploymentState{"web": {DesiredTotal: total}}
}

func TestEachDeploymentRuleDecides(t *testing.T) {
	held := func(s model.DeploymentStatus, want string) depCase {
		return depCase{
			name: "a " + string(s) + " deployment creates nothing new and holds updates",
			in: func() Input {
				in := oneNodeV(2, 1)
				in.Deployment = dep(2, s, st(1))
				return in
			},
			want:      want,
			decisions: map[string]string{"a1": "ignore alloc.13"},
			control: func(in *Input) {
				in.Deployment.Status = model.DeploymentRunning
			},
			controlWant: "v2",
		}
	}
	runDepCases(t, []depCase{
		{
			name: "an active deployment of an older version is cancelled and the new version's created",
			in: func() Input {
				in := oneNodeV(2, 1)
				in.Deployment = dep(1, model.DeploymentRunning, st(1))
				return in
			},
			want:      "v2 created | v1→cancelled " + model.DescNewerJob,
			decisions: map[string]string{"a1": "update alloc.13"},
		},
		{
			name: "a stopped job's deployment is cancelled and nothing is created",
			in: func() Input {
				in := oneNodeV(1, 1)
				in.Job.Stop = true
				in.Deployment = dep(1, model.DeploymentRunning, st(1))
				return in
			},
			want:      "none | v1→cancelled " + model.DescStoppedJob,
			decisions: map[string]string{"a1": "stop alloc.1"},
		},
		{
			name: "a finished deployment of an older version is not cancelled",
			in: func() Input {
				in := oneNodeV(2, 2)
				in.Deployment = dep(1, model.DeploymentSuccessful, st(1))
				return in
			},
			want:        "none",
			control:     func(in *Input) { in.Deployment.Status = model.DeploymentPaused },
			controlWant: "none | v1→cancelled " + model.DescNewerJob,
		},
		held(model.DeploymentPaused, "v2"),
		held(model.DeploymentPending, "v2"),
		held(model.DeploymentFailed, "v2"),
		held(model.DeploymentInitializing, "v2 | v2→pending "+model.DescPending),
		{
			name: "the first placement of a version creates its deployment",
			in: func() Input {
				return fleetOf(sysJob(1, grp("web", 1)), rnode("n1"))
			},
			want:      "v1 created",
			decisions: map[string]string{"n1/web.web[0]": "place name.3"},
		},
		{
			name: "creating is idempotent: an existing deployment of the version is kept, not created again",
			in: func() Input {
				in := fleetOf(sysJob(1, grp("web", 1)), rnode("n1"), rnode("n2"))
				in.Deployment = dep(1, model.DeploymentRunning, st(2))
				return in
			},
			want: "v1",
			// Control: without it, one is created, under the same ID.
			control:     func(in *Input) { in.Deployment = nil },
			controlWant: "v1 created",
		},
		{
			name: "a cancelled deployment of the current version is not created again",
			in: func() Input {
				in := oneNodeV(2, 1)
				in.Deployment = dep(2, model.DeploymentCancelled, st(1))
				return in
			},
			want:        "v2",
			decisions:   map[string]string{"a1": "update alloc.13"},
			control:     func(in *Input) { in.Deployment.JobVersion = 1 },
			controlWant: "v2 created",
		},
		{
			name: "no deployment for the re-placement of a version that already ran on the node",
			in: func() Input {
				in := fleetOf(sysJob(1, grp("web", 1)), rnode("n1"))
				in.TerminalAllocs = []*model.Allocation{terminal(al("t1", "n1", "web", 0, 1), model.ClientFailed)}
				return in
			},
			want:      "none",
			decisions: map[string]string{"n1/web.web[0]": "place name.3"},
			// Control: the terminal allocation ran an older version: a spec change.
			control:     func(in *Input) { in.TerminalAllocs[0].JobVersion = 0 },
			controlWant: "v1 created",
		},
		{
			name: "max_parallel 0 means no deployment: everything updates at once",
			in: func() Input {
				in := oneNodeV(2, 1)
				in.Job.Groups[0] = withUpdate(in.Job.Groups[0], func(u *model.UpdateStrategy) { u.MaxParallel = 0 })
				return in
			},
			want:        "none",
			decisions:   map[string]string{"a1": "update alloc.13"},
			control:     func(in *Input) { in.Job.Groups[0].Update.MaxParallel = 1 },
			controlWant: "v2 created",
		},
		{
			name: "sysbatch jobs never get a deployment",
			in: func() Input {
				in := oneNodeV(2, 1)
				in.Job.Type = model.JobTypeSysbatch
				return in
			},
			want:        "none",
			decisions:   map[string]string{"a1": "update alloc.13"},
			control:     func(in *Input) { in.Job.Type = model.JobTypeSystem },
			controlWant: "v2 created",
		},
		{
			name: "nothing desired (no ready node): no deployment",
			in: func() Input {
				in := fleetOf(sysJob(2, grp("web", 1)))
				in.TaintedNodes["n1"] = nodeWith("n1", model.NodeStatusDown)
				in.LiveAllocs = []*model.Allocation{al("a1", "n1", "web", 0, 1)}
				return in
			},
			want: "none",
			control: func(in *Input) {
				in.TaintedNodes = nil
				in.ReadyNodes = []*model.Node{rnode("n1")}
			},
			controlWant: "v2 created",
		},
		{
			name: "a complete deployment becomes successful",
			in: func() Input {
				in := fleetOf(sysJob(2, grp("web", 1)), rnode("n1"), rnode("n9"))
				in.Deployment = dep(2, model.DeploymentRunning, st(2))
				id := in.Deployment.ID
				in.LiveAllocs = []*model.Allocation{healthy(al("a1", "n1", "web", 0, 2), id, false),
					healthy(al("a9", "n9", "web", 0, 2), id, false)}
				return in
			},
			want: "v2 | v2→successful " + model.DescSuccessful,
			// Control: the last node (in ID order) is not done: counting
			// must not stop at the first node that looks complete.
			control:     func(in *Input) { in.LiveAllocs[1].JobVersion = 1 },
			controlWant: "v2",
		},
		{
			name: "completion needs desired_total healthy allocations, not just nothing left to do",
			in: func() Input {
				in := fleetOf(sysJob(2, grp("web", 1)), rnode("n1"), rnode("n2"))
				in.Deployment = dep(2, model.DeploymentRunning, st(2))
				in.LiveAllocs = []*model.Allocation{healthy(al("a1", "n1", "web", 0, 2), in.Deployment.ID, false),
					al("a2", "n2", "web", 0, 2)}
				return in
			},
			want:        "v2",
			control:     func(in *Input) { healthy(in.LiveAllocs[1], in.Deployment.ID, false) },
			controlWant: "v2 | v2→successful " + model.DescSuccessful,
		},
		{
			name: "a complete multi-region deployment becomes blocked",
			in: func() Input {
				in := fleetOf(sysJob(2, grp("web", 1)), rnode("n1"))
				in.Deployment = dep(2, model.DeploymentRunning, st(1))
				in.Deployment.IsMultiregion = true
				in.LiveAllocs = []*model.Allocation{healthy(al("a1", "n1", "web", 0, 2), in.Deployment.ID, false)}
				return in
			},
			want:        "v2 | v2→blocked " + model.DescBlocked,
			control:     func(in *Input) { in.Deployment.Status = model.DeploymentUnblocking },
			controlWant: "v2",
		},
		{
			name: "an already successful multi-region deployment gets no update",
			in: func() Input {
				in := fleetOf(sysJob(2, grp("web", 1)), rnode("n1"))
				in.Deployment = dep(2, model.DeploymentSuccessful, st(1))
				in.Deployment.IsMultiregion = true
				in.LiveAllocs = []*model.Allocation{healthy(al("a1", "n1", "web", 0, 2), in.Deployment.ID, false)}
				return in
			},
			want:        "v2",
			control:     func(in *Input) { in.Deployment.Status = model.DeploymentRunning },
			controlWant: "v2 | v2→blocked " + model.DescBlocked,
		},
		{
			name:      "a deployment needing promotion says so, and gets no other update that round",
			in:        canaryWaiting(false),
			want:      "v2 | v2→running " + model.DescNeedsPromotion,
			decisions: map[string]string{"a1": "ignore alloc.14 canary", "a2": "awaiting alloc.12"},
			// Control: once the description says so, it is not repeated.
			control:     func(in *Input) { in.Deployment.StatusDescription = model.DescNeedsPromotion },
			controlWant: "v2",
		},
		{
			name: "with auto_promote the description is auto-promotion pending",
			in:   canaryWaiting(true),
			want: "v2 | v2→running " + model.DescAutoPromotionPending,
			// Control: promoted, and n2 updated and healthy: successful.
			control: func(in *Input) {
				in.Deployment.TaskGroups["web"].Promoted = true
				in.LiveAllocs[1].JobVersion = 2
				in.LiveAllocs[1].DeploymentID = in.Deployment.ID
			},
			controlWant: "v2 | v2→successful " + model.DescSuccessful,
		},
		{
			name: "an initializing deployment needing promotion gets no pending update that round",
			in: func() Input {
				in := canaryWaiting(false)()
				in.Deployment.Status = model.DeploymentInitializing
				return in
			},
			want:        "v2",
			control:     func(in *Input) { in.Deployment.TaskGroups["web"].DesiredCanaries = 0 },
			controlWant: "v2 | v2→pending " + model.DescPending,
		},
	})
}

// canaryWaiting: two nodes, 50% canaries, n1 runs a healthy canary of v2,
// n2 still runs v1 and waits for promotion.
func canaryWaiting(auto bool) func() Input {
	return func() Input {
		g := withUpdate(grp("web", 1), func(u *model.UpdateStrategy) { u.Canary = 50; u.AutoPromote = auto })
		in := fleetOf(sysJob(2, g), rnode("n1"), rnode("n2"))
		in.Deployment = dep(2, model.DeploymentRunning, map[string]*model.DeploymentState{"web": {
			AutoPromote: auto, CanaryNodes: []string{"n1"}, DesiredCanaries: 1, DesiredTotal: 2}})
		in.LiveAllocs = []*model.Allocation{healthy(al("a1", "n1", "web", 0, 2), in.Deployment.ID, true),
			healthy(al("a2", "n2", "web", 0, 1), "", false)}
		return in
	}
}

func TestDesiredTotalCountsEveryRequiredNameOnEveryReadyNode(t *testing.T) {
	in := fleetOf(sysJob(1, grp("web", 2)), rnode("n1"), rnode("n2"), rnode("n3"))
	in.NotReadyNodes = []string{"n4"}
	p := mustFleet(t, in)
	if p.Deployment == nil || p.Deployment.TaskGroups["web"].DesiredTotal != 6 {
		t.Fatalf("desired_total: %s", jsonOf(t, p.Deployment))
	}
	// The deployment in force is brought up to date when a node joins.
	in.Deployment = p.Deployment
	in.ReadyNodes = append(in.ReadyNodes, rnode("n5"))
	p2 := mustFleet(t, in)
	if !p2.DeploymentChanged || p2.Deployment.TaskGroups["web"].DesiredTotal != 8 {
		t.Errorf("after a node joined: changed=%v %s", p2.DeploymentChanged, jsonOf(t, p2.Deployment))
	}
	if p.Deployment.TaskGroups["web"].DesiredTotal != 6 {
		t.Errorf("the input deployment was modified")
	}
}

func TestACanaryingGroupRecordsItsCanaryNodesAndDesiredCanaries(t *testing.T) {
	g := withUpdate(grp("web", 2), func(u *model.UpdateStrategy) { u.Canary = 25 })
	in := fleetOf(sysJob(2, g), rnode("n1"), rnode("n2"), rnode("n3"), rnode("n4"), rnode("n5"))
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
		in.LiveAllocs = append(in.LiveAllocs, al(n+"-0", n, "web", 0, 1), al(n+"-1", n, "web", 1, 1))
	}
	p := mustFleet(t, in)
	s := p.Deployment.TaskGroups["web"]
	// ceil(25% of 5) = 2 nodes, 2 allocations each.
	if strings.Join(s.CanaryNodes, ",") != "n1,n2" || s.DesiredCanaries != 4 || s.DesiredTotal != 10 {
		t.Fatalf("state: %s", jsonOf(t, s))
	}
	checkDecisions(t, p, map[string]string{"n1-0": "update alloc.12 canary", "n2-1": "update alloc.12 canary",
		"n3-0": "awaiting alloc.12", "n5-1": "awaiting alloc.12"})
	// Control: a group without canaries records none and updates all.
	in.Job.Groups[0].Update.Canary = 0
	p = mustFleet(t, in)
	if s := p.Deployment.TaskGroups["web"]; len(s.CanaryNodes) != 0 || s.DesiredCanaries != 0 || len(p.Update) != 10 {
		t.Errorf("no canaries: %s, %d updates", jsonOf(t, s), len(p.Update))
	}
}

func TestStatusUpdatesOnlyNameTheInputDeployment(t *testing.T) {
	// A new deployment is returned, never announced by a status update:
	// updates only concern a deployment that already exists.
	in := oneNodeV(2, 1)
	in.Deployment = dep(1, model.DeploymentRunning, st(1))
	p := mustFleet(t, in)
	if !p.DeploymentCreated || len(p.DeploymentUpdates) != 1 || p.DeploymentUpdates[0].DeploymentID != in.Deployment.ID {
		t.Errorf("%s", depSummary(p))
	}
}
