package main

import (
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

func progressNode(id string) wanted.NodeState {
	return wanted.NodeState{Key: id, Value: &model.Node{ID: id, Datacenter: "dc1", NodePool: "default", Status: model.NodeStatusReady,
		Eligibility: model.Eligible, Attributes: map[string]string{}, Meta: map[string]string{},
		Drivers: map[string]model.DriverInfo{"mock": {Detected: true, Healthy: true}}}}
}

func progressAlloc(id, node string, version uint64, st model.ClientStatus) wanted.AllocState {
	return wanted.AllocState{Key: wanted.AllocKey(node, "", "web", id), Value: &model.Allocation{ID: id, NodeID: node, JobID: "web", JobVersion: version,
		TaskGroup: "g", DesiredStatus: model.DesiredRun, ClientStatus: st}}
}

func TestJobRunProgressDecidesTheExitCodeFromTheFleetView(t *testing.T) {
	job := &model.Job{ID: "web", Type: model.JobTypeSystem, Version: 2, Groups: []*model.Group{{Name: "g", Count: 1,
		Update: &model.UpdateStrategy{MaxParallel: 0}, Tasks: []*model.Task{{Name: "t", Driver: "mock"}}}}}
	dep := func(s model.DeploymentStatus) map[string]wanted.DeploymentState {
		k := wanted.DeploymentKey("", "web", 2)
		return map[string]wanted.DeploymentState{k: {Key: k, Value: &model.Deployment{ID: "d", JobID: "web", JobVersion: 2, Status: s}}}
	}
	nodes := fleet.MapOf(map[string]wanted.NodeState{"n1": progressNode("n1"), "n2": progressNode("n2")})
	// Waiting for manual promotion ends `job run` (exit 0) only once the
	// canaries are healthy.
	canarying := func() map[string]wanted.DeploymentState {
		m := dep(model.DeploymentRunning)
		for _, st := range m {
			st.Value.StatusDescription = model.DescNeedsPromotion
			st.Value.TaskGroups = map[string]*model.DeploymentState{"g": {CanaryNodes: []string{"n1"}, DesiredCanaries: 1, MaxParallel: 1}}
		}
		return m
	}
	healthy := func(s wanted.AllocState) wanted.AllocState {
		yes := true
		s.Value.DeploymentStatus = &model.AllocDeploymentStatus{Healthy: &yes}
		return s
	}
	cases := []struct {
		name     string
		view     fleet.View
		done, ok bool
	}{
		{"nothing yet", fleet.View{Nodes: nodes}, false, false},
		{"deployment running", fleet.View{Nodes: nodes, Deployments: fleet.MapOf(dep(model.DeploymentRunning))}, false, false},
		{"deployment successful", fleet.View{Nodes: nodes, Deployments: fleet.MapOf(dep(model.DeploymentSuccessful))}, true, true},
		{"deployment failed", fleet.View{Nodes: nodes, Deployments: fleet.MapOf(dep(model.DeploymentFailed))}, true, false},
		{"deployment cancelled", fleet.View{Nodes: nodes, Deployments: fleet.MapOf(dep(model.DeploymentCancelled))}, true, false},
		{"manual promotion, the canary not healthy yet", fleet.View{Nodes: nodes, Deployments: fleet.MapOf(canarying()),
			Allocs: fleet.MapOf(map[string]wanted.AllocState{"a": progressAlloc("a", "n1", 2, model.ClientRunning)})}, false, false},
		{"manual promotion, the canary healthy", fleet.View{Nodes: nodes, Deployments: fleet.MapOf(canarying()),
			Allocs: fleet.MapOf(map[string]wanted.AllocState{"a": healthy(progressAlloc("a", "n1", 2, model.ClientRunning))})}, true, true},
		{"no deployment, one of two nodes running", fleet.View{Nodes: nodes, Allocs: fleet.MapOf(map[string]wanted.AllocState{
			"a": progressAlloc("a", "n1", 2, model.ClientRunning)})}, false, false},
		{"no deployment, both nodes running", fleet.View{Nodes: nodes, Allocs: fleet.MapOf(map[string]wanted.AllocState{
			"a": progressAlloc("a", "n1", 2, model.ClientRunning), "b": progressAlloc("b", "n2", 2, model.ClientRunning)})}, true, true},
		{"no deployment, an older version still running", fleet.View{Nodes: nodes, Allocs: fleet.MapOf(map[string]wanted.AllocState{
			"a": progressAlloc("a", "n1", 2, model.ClientRunning), "b": progressAlloc("b", "n2", 2, model.ClientRunning),
			"c": progressAlloc("c", "n2", 1, model.ClientRunning)})}, false, false},
		{"no deployment, an allocation failed", fleet.View{Nodes: nodes, Allocs: fleet.MapOf(map[string]wanted.AllocState{
			"a": progressAlloc("a", "n1", 2, model.ClientFailed)})}, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := progressOf(job, 2, &c.view, time.Now(), 30*time.Second)
			if r.Done != c.done || r.OK != c.ok {
				t.Fatalf("done=%v ok=%v (%s), want done=%v ok=%v", r.Done, r.OK, r.Reason, c.done, c.ok)
			}
			if r.Target != 2 {
				t.Fatalf("target %d, want 2", r.Target)
			}
		})
	}
}

// A version whose update strategy asks for a deployment record is placed
// before its record exists (a first version at once): `job run` does not
// take every node running it for the end of a rollout without a record
// until recordGrace has passed since the last placement. Controls: the
// record, once there, decides; the same view with max_parallel 0 is done
// at once.
func TestJobRunWaitsForTheRecordAVersionsUpdateStrategyAsksFor(t *testing.T) {
	nodes := fleet.MapOf(map[string]wanted.NodeState{"n1": progressNode("n1"), "n2": progressNode("n2")})
	now := time.Now()
	placedAt := func(at time.Time) map[string]wanted.AllocState {
		out := map[string]wanted.AllocState{}
		for _, n := range []string{"n1", "n2"} {
			st := progressAlloc("a-"+n, n, 0, model.ClientRunning)
			st.Value.CreateTime = at
			out["a-"+n] = st
		}
		return out
	}
	withUpdate := func(maxParallel int) *model.Job {
		return &model.Job{ID: "web", Type: model.JobTypeSystem, Version: 0, Groups: []*model.Group{{Name: "g", Count: 1,
			Update: &model.UpdateStrategy{MaxParallel: maxParallel}, Tasks: []*model.Task{{Name: "t", Driver: "mock"}}}}}
	}
	d := &model.Deployment{ID: "d0", JobID: "web", JobVersion: 0, Status: model.DeploymentSuccessful,
		TaskGroups: map[string]*model.DeploymentState{"g": {}}}
	for _, c := range []struct {
		name     string
		job      *model.Job
		view     fleet.View
		done, ok bool
	}{
		{"every node running, no record yet", withUpdate(1), fleet.View{Nodes: nodes, Allocs: fleet.MapOf(placedAt(now.Add(-time.Second)))}, false, false},
		{"every node running, no record a grace after the last placement", withUpdate(1), fleet.View{Nodes: nodes, Allocs: fleet.MapOf(placedAt(now.Add(-recordGrace - time.Second)))}, true, true},
		{"the record, successful", withUpdate(1), fleet.View{Nodes: nodes, Allocs: fleet.MapOf(placedAt(now.Add(-time.Second))),
			Deployments: fleet.MapOf(map[string]wanted.DeploymentState{wanted.DeploymentKey("", "web", 0): {Key: wanted.DeploymentKey("", "web", 0), Value: d}})}, true, true},
		{"control: max_parallel 0, no record asked", withUpdate(0), fleet.View{Nodes: nodes, Allocs: fleet.MapOf(placedAt(now.Add(-time.Second)))}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := progressOf(c.job, 0, &c.view, now, 30*time.Second)
			if r.Done != c.done || r.OK != c.ok {
				t.Fatalf("done=%v ok=%v (%s), want done=%v ok=%v", r.Done, r.OK, r.Reason, c.done, c.ok)
			}
		})
	}
}

func TestSameSpecIgnoresOnlyVersionSubmitTimeAndStable(t *testing.T) {
	a := &model.Job{ID: "web", Type: model.JobTypeSystem, Version: 1, Stable: true}
	b := &model.Job{ID: "web", Type: model.JobTypeSystem, Version: 7}
	if !model.SameSpec(a, b) {
		t.Fatal("jobs differing only in version and stable are not the same spec")
	}
	c := &model.Job{ID: "web", Type: model.JobTypeSystem, Version: 1, Priority: 60}
	if model.SameSpec(a, c) {
		t.Fatal("control: a priority change is a spec change")
	}
}

func TestGoStyleFlagsBecomeLongFlags(t *testing.T) {
	got := goStyleFlags([]string{"agent", "-dev", "-config=x.hcl", "-f", "--detach", "-1", "--", "-literal"})
	want := []string{"agent", "--dev", "--config=x.hcl", "-f", "--detach", "-1", "--", "-literal"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}
