package reconcile_test

import (
	"fmt"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
)

// A rollout with canaries: version 2 of a system job on three nodes that
// run version 1, with 33% canaries. ceil(33% × 3) = 1 node (the first in
// ID order, by the default canary policy) is updated as a canary; the
// others wait for promotion, and the canary set is recorded in the new
// deployment.
func ExampleReconcileFleet() {
	upd := model.DefaultUpdateStrategy()
	upd.Canary = 33
	job := &model.Job{ID: "web", Type: model.JobTypeSystem, Version: 2,
		Groups: []*model.Group{{Name: "web", Count: 1, Update: upd}}}
	in := reconcile.Input{Job: job, Now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	for _, id := range []string{"n3", "n1", "n2"} {
		in.ReadyNodes = append(in.ReadyNodes, &model.Node{ID: id, Status: model.NodeStatusReady})
		in.LiveAllocs = append(in.LiveAllocs, &model.Allocation{ID: "a-" + id, Name: "web.web[0]", JobID: "web",
			JobVersion: 1, TaskGroup: "web", NodeID: id, DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning})
	}
	plan, err := reconcile.ReconcileFleet(in)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range plan.Update {
		fmt.Println("update", e.AllocID, "on", e.NodeID, "canary:", e.Canary, "rule", e.Rule)
	}
	for _, e := range plan.AwaitingPromotion {
		fmt.Println("awaiting", e.AllocID, "on", e.NodeID)
	}
	st := plan.Deployment.TaskGroups["web"]
	fmt.Println("created:", plan.DeploymentCreated, "canary nodes:", st.CanaryNodes, "desired canaries:", st.DesiredCanaries)
	// Output:
	// update a-n1 on n1 canary: true rule alloc.12
	// awaiting a-n2 on n2
	// awaiting a-n3 on n3
	// created: true canary nodes: [n1] desired canaries: 1
}

// The same rollout, one round later, planned by node n2 from what it runs
// and the deployment record alone: the record holds the canary set (n1),
// so n2 knows its allocation waits, without a view of n1 or n3.
func ExampleReconcileLocal() {
	upd := model.DefaultUpdateStrategy()
	upd.Canary = 33
	job := &model.Job{ID: "web", Type: model.JobTypeSystem, Version: 2,
		Groups: []*model.Group{{Name: "web", Count: 1, Update: upd}}}
	record := &model.Deployment{ID: reconcile.DeploymentID("", "web", 2), JobID: "web", JobVersion: 2,
		Status: model.DeploymentRunning, TaskGroups: map[string]*model.DeploymentState{
			"web": {CanaryNodes: []string{"n1"}, DesiredCanaries: 1, DesiredTotal: 3}}}
	own := &model.Allocation{ID: "a-n2", Name: "web.web[0]", JobID: "web", JobVersion: 1, TaskGroup: "web",
		NodeID: "n2", DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning}
	plan, err := reconcile.ReconcileLocal(reconcile.NodeInput{Job: job, NodeID: "n2", Class: reconcile.NodeReady,
		LiveAllocs: []*model.Allocation{own}, Deployment: record, Now: time.Date(2026, 1, 1, 12, 1, 0, 0, time.UTC)})
	if err != nil {
		fmt.Println(err) // errors.Is(err, reconcile.ErrFleetFactsNeeded): plan this round with ReconcileNode
		return
	}
	for _, e := range plan.AwaitingPromotion {
		fmt.Println("awaiting", e.AllocID, "on", e.NodeID, "rule", e.Rule)
	}
	fmt.Println("updates:", len(plan.Update), "deployment in the plan:", plan.Deployment != nil)
	// Output:
	// awaiting a-n2 on n2 rule alloc.12
	// updates: 0 deployment in the plan: false
}
