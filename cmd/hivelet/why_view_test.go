package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

func whyNode(id, name string, drivers ...string) wanted.NodeState {
	st := progressNode(id)
	st.Key = wanted.NodeKey(id)
	st.Value.Name = name
	st.Value.Drivers = map[string]model.DriverInfo{}
	for _, d := range drivers {
		st.Value.Drivers[d] = model.DriverInfo{Detected: true, Healthy: true}
	}
	return st
}

// TestAJobThatPlacesNowhereSaysWhichFilterExcludedHowManyNodes: a misspelt
// driver is named with the driver the nodes have; a constraint names its
// attribute and the node's value; the job status control, a job that
// places everywhere, prints no placement section.
func TestAJobThatPlacesNowhereSaysWhichFilterExcludedHowManyNodes(t *testing.T) {
	v := &fleet.View{Nodes: fleet.MapOf(map[string]wanted.NodeState{})}
	for _, n := range []wanted.NodeState{whyNode("n1", "web-1", "docker"), whyNode("n2", "web-2", "docker"), whyNode("n3", "db-1", "docker", "exec")} {
		v.Nodes = v.Nodes.With(n.Key, n)
	}
	v.Nodes.At(wanted.NodeKey("n3")).Value.Attributes["kernel.name"] = "linux"
	typo := &model.Job{ID: "x", Type: model.JobTypeSystem, Groups: []*model.Group{{Name: "g", Count: 1,
		Tasks: []*model.Task{{Name: "t", Driver: "dokcer"}}}}}
	got := strings.Join(noPlacementLines(typo, v), "\n")
	want := `job "x" places on 0 of 3 node(s):
  3 node(s) excluded by driver: "dokcer" missing (did you mean docker?) [web-1 (n1), web-2 (n2), db-1 (n3)]`
	if got != want {
		t.Errorf("a misspelt driver:\n%s\nwant\n%s", got, want)
	}

	constrained := &model.Job{ID: "y", Type: model.JobTypeSystem, Constraints: []model.Constraint{{Attribute: "${attr.kernel.name}", Operator: model.OpEqual, Value: "linux"}},
		Groups: []*model.Group{{Name: "g", Count: 1, Tasks: []*model.Task{{Name: "t", Driver: "exec"}}}}}
	got = strings.Join(noPlacementLines(constrained, v), "\n")
	want = `job "y" places on 1 of 3 node(s):
  2 node(s) excluded by constraint: ${attr.kernel.name} = linux (the node has no ${attr.kernel.name}) [web-1 (n1), web-2 (n2)]`
	if got != want {
		t.Errorf("a constraint:\n%s\nwant\n%s", got, want)
	}

	var out bytes.Buffer
	everywhere := &model.Job{ID: "z", Type: model.JobTypeSystem, Groups: []*model.Group{{Name: "g", Count: 1, Tasks: []*model.Task{{Name: "t", Driver: "docker"}}}}}
	statusWhy(&out, everywhere, v)
	if out.Len() != 0 {
		t.Errorf("a job placed on every node printed:\n%s", out.String())
	}
	statusWhy(&out, typo, v)
	if !strings.Contains(out.String(), "Placement\n") || !strings.Contains(out.String(), "did you mean docker?") {
		t.Errorf("job status of the misspelt job:\n%s", out.String())
	}
	if lines := noPlacementLines(typo, &fleet.View{}); len(lines) != 1 || !strings.Contains(lines[0], "no registered node") {
		t.Errorf("an empty fleet: %q", lines)
	}
}

// TestAFailedDeploymentShowsEachFailingAllocationsNodeAndTellingEvent: the
// event shown is the failure (image missing), not the restart that came
// after it; a healthy allocation of the same version is not listed, nor a
// failed one of an older version.
func TestAFailedDeploymentShowsEachFailingAllocationsNodeAndTellingEvent(t *testing.T) {
	now := time.Unix(1000, 0)
	v := &fleet.View{Nodes: fleet.MapOf(map[string]wanted.NodeState{}), Allocs: fleet.MapOf(map[string]wanted.AllocState{})}
	for _, n := range []wanted.NodeState{whyNode("n1", "web-1", "docker"), whyNode("n2", "web-2", "docker")} {
		v.Nodes = v.Nodes.With(n.Key, n)
	}
	no, yes := false, true
	bad := progressAlloc("a-bad-0001", "n1", 3, model.ClientPending)
	bad.Value.DeploymentStatus = &model.AllocDeploymentStatus{Healthy: &no}
	bad.Value.TaskStates = map[string]*model.TaskState{"web": {State: "pending", Events: []model.TaskEvent{
		{Type: "Received", Time: now},
		{Type: "Driver Failure", Message: `starting task: image "example/web:9" not found`, Time: now},
		{Type: "Restarting", Message: "restart within policy; restarting in 15s", Time: now},
	}}}
	crashed := progressAlloc("a-crash-002", "n2", 3, model.ClientFailed)
	crashed.Value.TaskStates = map[string]*model.TaskState{"web": {State: "dead", Failed: true, Events: []model.TaskEvent{
		{Type: "Started", Time: now}, {Type: "Terminated", Message: "exit code 3", Time: now}, {Type: "Not Restarting", Message: "restart attempts exhausted", Time: now},
	}}}
	good := progressAlloc("a-good-003", "n2", 3, model.ClientRunning)
	good.Value.DeploymentStatus = &model.AllocDeploymentStatus{Healthy: &yes}
	old := progressAlloc("a-old-0004", "n2", 2, model.ClientFailed)
	for _, a := range []wanted.AllocState{bad, crashed, good, old} {
		v.Allocs = v.Allocs.With(a.Key, a)
	}
	job := &model.Job{ID: "web", Type: model.JobTypeSystem, Version: 3}
	got := strings.Join(failureLines(job, 3, v), "\n")
	want := `failing allocations of version 3:
  alloc a-bad-00 on node web-1 (n1): pending, unhealthy
    task web: Driver Failure: starting task: image "example/web:9" not found (then Restarting: restart within policy; restarting in 15s)
  alloc a-crash- on node web-2 (n2): failed
    task web: Terminated: exit code 3 (then Not Restarting: restart attempts exhausted)`
	if got != want {
		t.Errorf("failure lines:\n%s\nwant\n%s", got, want)
	}
}
