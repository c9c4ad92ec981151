package agent

import (
	"fmt"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

func dryJob(version uint64, image string, maxParallel int) *model.Job {
	u := model.DefaultUpdateStrategy()
	u.MaxParallel = maxParallel
	return &model.Job{ID: "web", Type: model.JobTypeSystem, Version: version, Groups: []*model.Group{{
		Name: "g", Count: 1, Update: u,
		Tasks: []*model.Task{{Name: "t", Driver: "docker", Config: map[string]any{"image": image}}}}}}
}

func dryAlloc(id, node string, version uint64) *model.Allocation {
	yes := true
	return &model.Allocation{ID: id, Name: model.AllocName("web", "g", 0), JobID: "web", JobVersion: version, TaskGroup: "g",
		NodeID: node, DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning,
		DeploymentStatus: &model.AllocDeploymentStatus{Healthy: &yes}}
}

// actions flattens a dry run into node → actions.
func actions(runs []NodeDryRun) map[string][]string {
	out := map[string][]string{}
	for _, r := range runs {
		out[r.NodeID] = []string{}
		for _, e := range r.Entries {
			out[r.NodeID] = append(out[r.NodeID], e.Action)
		}
	}
	return out
}

// TestTheDryRunSaysWhatEachNodesAgentWouldDo: a changed image is a
// destructive update on the nodes that run the old version and a placement
// on a new node; a change of the update block only is in place; a down
// node's allocation is lost, reported once, under its node; a node out of
// the job's scope with nothing of it is left out; the control, the same
// spec, ignores every allocation.
func TestTheDryRunSaysWhatEachNodesAgentWouldDo(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	nodes := []*model.Node{explainNode("n1", "dc1", "docker"), explainNode("n2", "dc1", "docker"), explainNode("n3", "dc1", "docker"),
		explainNode("n4", "dc1", "docker"), explainNode("other", "dc2", "docker")}
	nodes[3].Status = model.NodeStatusDown
	running := dryJob(1, "web:1", 1)
	running.Datacenters = []string{"dc1"}
	allocs := []*model.Allocation{dryAlloc("a1", "n1", 1), dryAlloc("a2", "n2", 1), dryAlloc("a4", "n4", 1)}
	run := func(job *model.Job) map[string][]string {
		job.Datacenters = []string{"dc1"}
		runs, err := DryRun(DryRunInput{Job: job, Running: running, Nodes: nodes, Allocs: allocs, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return actions(runs)
	}
	cases := []struct {
		name string
		job  *model.Job
		want map[string][]string
	}{
		{"a new image", dryJob(2, "web:2", 1), map[string][]string{
			"n1": {ActionUpdate}, "n2": {ActionUpdate}, "n3": {ActionPlace}, "n4": {ActionLost}}},
		{"only the update block", dryJob(2, "web:1", 3), map[string][]string{
			"n1": {ActionInPlace}, "n2": {ActionInPlace}, "n3": {ActionPlace}, "n4": {ActionLost}}},
		{"the same spec", dryJob(1, "web:1", 1), map[string][]string{
			"n1": {ActionIgnore}, "n2": {ActionIgnore}, "n3": {ActionPlace}, "n4": {ActionLost}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := run(tc.job)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("dry run:\n got  %v\n want %v", got, tc.want)
			}
		})
	}
}
