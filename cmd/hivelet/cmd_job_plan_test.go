package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/agent"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

func planJob(image string, count int) *model.Job {
	u := model.DefaultUpdateStrategy()
	return &model.Job{ID: "web", Type: model.JobTypeSystem, Groups: []*model.Group{{Name: "g", Count: count, Update: u,
		Tasks: []*model.Task{{Name: "t", Driver: "mock", Config: map[string]any{"image": image}, Env: map[string]string{"A": "1"}}}}}}
}

// TestTheDiffNamesGroupsAndTasksByName: a changed value, an added and a
// removed key are each one change at a path that names the group and the
// task; the stamps of a write (version, submit time) are no change; the
// control, the same job, has no change.
func TestTheDiffNamesGroupsAndTasksByName(t *testing.T) {
	old := planJob("web:1", 1)
	old.Version, old.SubmitTime = 3, time.Unix(100, 0)
	new := planJob("web:2", 1)
	new.Groups[0].Tasks[0].Env = map[string]string{"B": "2"}
	got, err := jobDiff(old, new)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, c := range got {
		lines = append(lines, c.String())
	}
	want := []string{
		`~ groups[g].tasks[t].config.image: "web:1" => "web:2"`,
		`- groups[g].tasks[t].env.A = "1"`,
		`+ groups[g].tasks[t].env.B = "2"`,
	}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("diff:\n got  %q\n want %q", lines, want)
	}
	same, err := jobDiff(old, planJob("web:1", 1))
	if err != nil || len(same) != 0 {
		t.Errorf("the same spec: %v %v", same, err)
	}
}

func planView(nodes []*model.Node, allocs ...*model.Allocation) *fleet.View {
	v := &fleet.View{Nodes: fleet.MapOf(map[string]wanted.NodeState{}), Allocs: fleet.MapOf(map[string]wanted.AllocState{})}
	for _, n := range nodes {
		v.Nodes = v.Nodes.With(wanted.NodeKey(n.ID), wanted.NodeState{Key: wanted.NodeKey(n.ID), Value: n})
	}
	for _, a := range allocs {
		k := wanted.AllocKey(a.NodeID, a.Namespace, a.JobID, a.ID)
		v.Allocs = v.Allocs.With(k, wanted.AllocState{Key: k, Value: a})
	}
	return v
}

// TestThePlanSummarisesEachNodeClassesDecisions: a new image updates the
// node running the old version and places on the new one; the summary is
// per class; the text says the version it would write; the control, the
// same file, would write nothing and change no allocation.
func TestThePlanSummarisesEachNodeClassesDecisions(t *testing.T) {
	mk := func(id, class string) *model.Node {
		n := progressNode(id).Value
		n.Name, n.Class = id, class
		return n
	}
	nodes := []*model.Node{mk("n1", "web"), mk("n2", "web"), mk("n3", "batch")}
	running := planJob("web:1", 1)
	running.Version = 4
	yes := true
	var allocs []*model.Allocation
	for _, n := range []string{"n1", "n3"} {
		allocs = append(allocs, &model.Allocation{ID: "a-" + n, Name: model.AllocName("web", "g", 0), JobID: "web", JobVersion: 4, TaskGroup: "g",
			NodeID: n, DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning, DeploymentStatus: &model.AllocDeploymentStatus{Healthy: &yes}})
	}
	v := planView(nodes, allocs...)
	now := time.Unix(1000, 0)
	p, err := makeJobPlan(planJob("web:2", 1), running, 0, v, now)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Changed || p.Version != 5 || *p.Running != 4 || len(p.Diff) != 1 {
		t.Fatalf("plan %+v", p)
	}
	got := map[string]map[string]int{}
	for _, c := range p.Classes {
		got[fmt.Sprintf("%s/%d", c.Class, c.Nodes)] = c.Actions
	}
	want := map[string]map[string]int{"batch/1": {agent.ActionUpdate: 1}, "web/2": {agent.ActionUpdate: 1, agent.ActionPlace: 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("classes %v, want %v", got, want)
	}
	text := strings.Join(p.lines(nodeNamer(v)), "\n")
	for _, s := range []string{`version 4 in force; ` + "`job run`" + ` would write version 5`, `~ groups[g].tasks[t].config.image: "web:1" => "web:2"`,
		"web: 2 node(s): place 1, update 1", "n2: place web.g[0]", "n1: update web.g[0] (alloc a-n1)", "at most 1 node(s) updated at a time"} {
		if !strings.Contains(text, s) {
			t.Errorf("the text lacks %q:\n%s", s, text)
		}
	}
	if _, err := json.Marshal(p); err != nil {
		t.Fatal(err)
	}

	same, err := makeJobPlan(planJob("web:1", 1), running, 0, v, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range same.Classes {
		if c.Actions[agent.ActionUpdate]+c.Actions[agent.ActionInPlace]+c.Actions[agent.ActionStop] != 0 {
			t.Errorf("the same file changes class %q: %v", c.Class, c.Actions)
		}
	}
	if same.Changed || same.Version != 4 || !strings.Contains(strings.Join(same.lines(nodeNamer(v)), "\n"), "would write nothing") {
		t.Errorf("the same file: %+v", same)
	}
	// Even the same file would place on n2, which runs none yet: exit 1.
	if !p.createsOrDestroys() || !same.createsOrDestroys() {
		t.Errorf("creates or destroys: the new image %v, the same file (a place on n2) %v, want both true", p.createsOrDestroys(), same.createsOrDestroys())
	}
}

// TestJobPlanExitsOneOnlyWhenAnAllocationWouldBeCreatedOrDestroyed: Nomad's
// convention, which scripts written for `nomad job plan` test: every action
// that starts or stops an allocation answers 1, the others 0 (an in-place
// update changes the version but moves nothing).
func TestJobPlanExitsOneOnlyWhenAnAllocationWouldBeCreatedOrDestroyed(t *testing.T) {
	for _, c := range []struct {
		actions []string
		want    bool
	}{
		{nil, false},
		{[]string{agent.ActionIgnore}, false},
		{[]string{agent.ActionInPlace, agent.ActionIgnore}, false},
		{[]string{agent.ActionAwaiting, agent.ActionDisconnect, agent.ActionReconnected}, false},
		{[]string{agent.ActionIgnore, agent.ActionPlace}, true},
		{[]string{agent.ActionUpdate}, true},
		{[]string{agent.ActionInPlace, agent.ActionStop}, true},
		{[]string{agent.ActionMigrate}, true},
		{[]string{agent.ActionLost}, true},
	} {
		p := &jobPlan{}
		for i, a := range c.actions {
			// one node per action: the answer is over every node.
			p.Nodes = append(p.Nodes, agent.NodeDryRun{NodeID: fmt.Sprint("n", i), Entries: []agent.DryRunEntry{{Action: a}}})
		}
		if got := p.createsOrDestroys(); got != c.want {
			t.Errorf("%v: creates or destroys %v, want %v", c.actions, got, c.want)
		}
	}
}
