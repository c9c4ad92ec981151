package agent

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
)

// With the job's record stored, a pass plans from this node's allocations
// and the record alone (localInput, reconcile.ReconcileLocal); the plan's
// buckets must be the ones the whole fleet view gives (buildInput,
// reconcile.ReconcileNode), for this node as the agent classifies it:
// ready, driver down, draining past its deadline, out of the job's scope,
// a stopped job, canary and non-canary nodes before promotion, a
// duplicate, a finished allocation.
func TestALocalPlanEqualsTheFleetViewPlanForThisNode(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	yes := true
	alloc := func(id, node string, v uint64, status model.ClientStatus) *model.Allocation {
		return &model.Allocation{ID: id, Name: "web.g[0]", JobID: "web", JobVersion: v, TaskGroup: "g", NodeID: node,
			DesiredStatus: model.DesiredRun, ClientStatus: status, CreateTime: now.Add(-time.Hour),
			DeploymentStatus: &model.AllocDeploymentStatus{Healthy: &yes}}
	}
	type world struct {
		job    *model.Job
		self   *model.Node
		nodes  []*model.Node
		own    []*model.Allocation
		others []*model.Allocation
		dep    *model.Deployment
	}
	base := func(canary int, canaryNodes []string) world {
		w := world{job: mockJob("web", 2, nil)}
		w.job.Groups[0].Update.Canary = canary
		for i := 1; i <= 4; i++ {
			n := nodeRecord(fmt.Sprintf("n%d", i))
			w.nodes = append(w.nodes, n)
			a := alloc(fmt.Sprintf("a%d", i), n.ID, 1, model.ClientRunning)
			if i == 1 {
				w.own = append(w.own, a)
			} else {
				w.others = append(w.others, a)
			}
		}
		w.self = w.nodes[0]
		w.dep = &model.Deployment{ID: reconcile.DeploymentID("", "web", 2), JobID: "web", JobVersion: 2, Status: model.DeploymentRunning,
			TaskGroups: map[string]*model.DeploymentState{"g": {DesiredTotal: 4, DesiredCanaries: len(canaryNodes), CanaryNodes: canaryNodes}}}
		return w
	}
	cases := map[string]func() world{
		"ready, outdated": func() world { return base(0, nil) },
		"ready, up to date": func() world {
			w := base(0, nil)
			w.own[0].JobVersion = 2
			return w
		},
		"canary node before promotion":       func() world { return base(25, []string{"n1"}) },
		"not a canary node before promotion": func() world { return base(25, []string{"n3"}) },
		"driver down": func() world {
			w := base(0, nil)
			w.self.Drivers["mock"] = model.DriverInfo{Detected: true, Healthy: false}
			return w
		},
		"draining past its deadline": func() world {
			w := base(0, nil)
			w.self.Drain = &model.DrainStrategy{Started: now.Add(-time.Hour)}
			return w
		},
		"out of the job's scope": func() world {
			w := base(0, nil)
			w.self.Datacenter = "dc9"
			return w
		},
		"a stopped job": func() world {
			w := base(0, nil)
			w.job.Stop = true
			return w
		},
		"a duplicate and a finished one": func() world {
			w := base(0, nil)
			w.own = append(w.own, alloc("a1b", "n1", 2, model.ClientRunning), alloc("a1c", "n1", 1, model.ClientComplete))
			w.own[2].Name = "web.g[1]"
			return w
		},
		"nothing here yet": func() world {
			w := base(0, nil)
			w.own = nil
			return w
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			w := mk()
			deps := []*model.Deployment{w.dep}
			local, err := reconcile.ReconcileLocal(localInput(w.job, w.self, w.own, recordOf(w.job, deps), now))
			if err != nil {
				t.Fatalf("local plan: %v", err)
			}
			fleet, err := reconcile.ReconcileNode(buildInput(w.job, w.self, w.own, fleetFacts{Nodes: w.nodes, OtherAllocs: w.others, Deployments: deps}, now, nil), w.self.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := buckets(t, local), buckets(t, fleet); got != want {
				t.Fatalf("local plan\n%s\nfleet view plan\n%s", got, want)
			}
			// The cases decide something: the comparison is not of empties.
			want := map[string]int{"ready, outdated": len(local.Update), "nothing here yet": len(local.Place),
				"draining past its deadline": len(local.Migrate), "a stopped job": len(local.Stop),
				"not a canary node before promotion": len(local.AwaitingPromotion), "canary node before promotion": len(local.Update)}
			if n, ok := want[name]; ok && n != 1 {
				t.Fatalf("%s: the plan does not decide what the case is about:\n%s", name, buckets(t, local))
			}
		})
	}
}

func buckets(t *testing.T, p *reconcile.Plan) string {
	t.Helper()
	b, err := json.MarshalIndent(struct {
		Place, Update, Migrate, Stop, Ignore, Lost, Disconnecting, Reconnecting, AwaitingPromotion []reconcile.Entry
	}{p.Place, p.Update, p.Migrate, p.Stop, p.Ignore, p.Lost, p.Disconnecting, p.Reconnecting, p.AwaitingPromotion}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// BenchmarkPlanOneNodeOfALargeFleet: one node's plan for a job being
// rolled out across n nodes, its record stored: from the node's own
// allocations and the record (local, what a pass does now) against the
// whole fleet view (fleet, what it did before and still does before a
// record exists). The input's construction is included in each.
func BenchmarkPlanOneNodeOfALargeFleet(b *testing.B) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, n := range []int{1000, 10000} {
		job := mockJob("web", 2, nil)
		var nodes []*model.Node
		var others, own []*model.Allocation
		for i := range n {
			nd := nodeRecord(fmt.Sprintf("n%05d", i))
			nodes = append(nodes, nd)
			a := &model.Allocation{ID: fmt.Sprintf("a%05d", i), Name: "web.g[0]", JobID: "web", JobVersion: 1, TaskGroup: "g",
				NodeID: nd.ID, DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning}
			if i == 0 {
				own = append(own, a)
			} else {
				others = append(others, a)
			}
		}
		self := nodes[0]
		deps := []*model.Deployment{{ID: reconcile.DeploymentID("", "web", 2), JobID: "web", JobVersion: 2, Status: model.DeploymentRunning,
			TaskGroups: map[string]*model.DeploymentState{"g": {DesiredTotal: n}}}}
		b.Run(fmt.Sprintf("nodes=%d/local", n), func(b *testing.B) {
			for b.Loop() {
				if p, err := reconcile.ReconcileLocal(localInput(job, self, own, recordOf(job, deps), now)); err != nil || len(p.Update) != 1 {
					b.Fatalf("%v %+v", err, p)
				}
			}
		})
		b.Run(fmt.Sprintf("nodes=%d/fleet", n), func(b *testing.B) {
			for b.Loop() {
				in := buildInput(job, self, own, fleetFacts{Nodes: nodes, OtherAllocs: others, Deployments: deps}, now, nil)
				if p, err := reconcile.ReconcileNode(in, self.ID); err != nil || len(p.Update) != 1 {
					b.Fatalf("%v %+v", err, p)
				}
			}
		})
	}
}
