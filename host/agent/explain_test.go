package agent

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/hivelet/hivelet/host/model"
)

func explainNode(id, dc string, drivers ...string) *model.Node {
	n := &model.Node{ID: id, Name: id, Datacenter: dc, NodePool: "default", Status: model.NodeStatusReady,
		Eligibility: model.Eligible, Attributes: map[string]string{"kernel.name": "linux"}, Meta: map[string]string{},
		Drivers: map[string]model.DriverInfo{}}
	for _, d := range drivers {
		n.Drivers[d] = model.DriverInfo{Detected: true, Healthy: true}
	}
	return n
}

func explainJob(driver string, edit func(*model.Job)) *model.Job {
	j := &model.Job{ID: "j", Type: model.JobTypeSystem, Groups: []*model.Group{{Name: "g", Count: 1,
		Tasks: []*model.Task{{Name: "t", Driver: driver}}}}}
	if edit != nil {
		edit(j)
	}
	return j
}

// TestEachExcludedNodeIsCountedUnderTheFirstFilterItFails: the report
// names the filter, its value and a suggestion (a driver or datacenter
// within two edits of one the fleet has), with the control node that runs
// the job in each case.
func TestEachExcludedNodeIsCountedUnderTheFirstFilterItFails(t *testing.T) {
	down := explainNode("down", "dc1", "docker")
	down.Status = model.NodeStatusDown
	drained := explainNode("drained", "dc1", "docker")
	drained.Drain = &model.DrainStrategy{}
	sick := explainNode("sick", "dc1", "docker")
	sick.Drivers["docker"] = model.DriverInfo{Detected: true, Healthy: false, HealthDesc: "engine unreachable"}
	windows := explainNode("win", "dc1", "docker")
	windows.Attributes["kernel.name"] = "windows"
	nodes := []*model.Node{explainNode("ok", "dc1", "docker"), explainNode("other-dc", "dc2", "docker"), down, drained, sick, windows, explainNode("noexec", "dc1")}

	cases := []struct {
		name string
		job  *model.Job
		want []Exclusion
	}{
		{"datacenter first, then constraint, state and driver", explainJob("docker", func(j *model.Job) {
			j.Datacenters = []string{"dc1"}
			j.Constraints = []model.Constraint{{Attribute: "${attr.kernel.name}", Operator: model.OpEqual, Value: "linux"}}
		}), []Exclusion{
			{Filter: FilterNotReady, What: "down", Nodes: []string{"down"}},
			{Filter: FilterDatacenter, What: "job wants dc1", Nodes: []string{"other-dc"}, Hint: "the node is in dc2"},
			{Filter: FilterNotReady, What: "draining", Nodes: []string{"drained"}},
			{Filter: FilterDriver, What: `"docker" unhealthy: engine unreachable`, Nodes: []string{"sick"}},
			{Filter: FilterConstraint, What: "${attr.kernel.name} = linux", Nodes: []string{"win"}, Hint: `the node's is "windows"`},
			{Filter: FilterDriver, What: `"docker" missing`, Nodes: []string{"noexec"}},
		}},
		{"a misspelt driver is missing everywhere, with a suggestion", explainJob("dokcer", nil), []Exclusion{
			{Filter: FilterDriver, What: `"dokcer" missing`, Nodes: []string{"ok", "other-dc", "sick", "win", "noexec"}, Hint: "did you mean docker?"},
			{Filter: FilterNotReady, What: "down", Nodes: []string{"down"}},
			{Filter: FilterNotReady, What: "draining", Nodes: []string{"drained"}},
		}},
		{"raw_exec on nodes that have it off says so, not missing", explainJob("raw_exec", nil), []Exclusion{
			{Filter: FilterDriver, What: `"raw_exec" off`, Nodes: []string{"ok", "other-dc", "sick", "win", "noexec"}, Hint: rawExecOff},
			{Filter: FilterNotReady, What: "down", Nodes: []string{"down"}},
			{Filter: FilterNotReady, What: "draining", Nodes: []string{"drained"}},
		}},
		{"a misspelt datacenter", explainJob("docker", func(j *model.Job) { j.Datacenters = []string{"dc3"} }), []Exclusion{
			{Filter: FilterDatacenter, What: "job wants dc3", Nodes: []string{"ok", "other-dc", "down", "drained", "sick", "win", "noexec"}, Hint: "did you mean dc1?"},
		}},
		{"a node pool nobody is in", explainJob("docker", func(j *model.Job) { j.NodePool = "gpu" }), []Exclusion{
			{Filter: FilterNodePool, What: "job wants gpu", Nodes: []string{"ok", "other-dc", "down", "drained", "sick", "win", "noexec"}, Hint: "the nodes are in default"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ExplainPlacement(tc.job, nodes)
			if r.Nodes != len(nodes) {
				t.Errorf("nodes %d, want %d", r.Nodes, len(nodes))
			}
			// Sorted by count, ties in node order: compare as a set of rows.
			got := map[string]Exclusion{}
			for _, e := range r.Excluded {
				got[e.Filter+"|"+e.What] = e
			}
			want := map[string]Exclusion{}
			for _, e := range tc.want {
				want[e.Filter+"|"+e.What] = e
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("excluded:\n got  %+v\n want %+v", r.Excluded, tc.want)
			}
			for i := 1; i < len(r.Excluded); i++ {
				if len(r.Excluded[i].Nodes) > len(r.Excluded[i-1].Nodes) {
					t.Errorf("not sorted by count: %+v", r.Excluded)
				}
			}
		})
	}
}

// TestTheReportAgreesWithPlacesOn: over every combination of the filters,
// a node is eligible in the report exactly when PlacesOn says the job
// places on it, and every other node is excluded once.
func TestTheReportAgreesWithPlacesOn(t *testing.T) {
	var nodes []*model.Node
	i := 0
	for _, dc := range []string{"dc1", "dc2"} {
		for _, pool := range []string{"default", "edge"} {
			for _, kernel := range []string{"linux", "darwin"} {
				for _, status := range []model.NodeStatus{model.NodeStatusReady, model.NodeStatusDown} {
					for _, drivers := range [][]string{{"docker"}, {"exec"}, {}} {
						n := explainNode(fmt.Sprintf("n%d", i), dc, drivers...)
						n.NodePool, n.Status, n.Attributes["kernel.name"] = pool, status, kernel
						nodes = append(nodes, n)
						i++
					}
				}
			}
		}
	}
	jobs := []*model.Job{
		explainJob("docker", nil),
		explainJob("exec", func(j *model.Job) { j.Datacenters = []string{"dc*"}; j.NodePool = "edge" }),
		explainJob("docker", func(j *model.Job) {
			j.Datacenters = []string{"dc2"}
			j.Groups[0].Constraints = []model.Constraint{{Attribute: "${attr.kernel.name}", Operator: model.OpNotEqual, Value: "darwin"}}
		}),
	}
	for ji, job := range jobs {
		r := ExplainPlacement(job, nodes)
		eligible := map[string]bool{}
		for _, id := range r.Eligible {
			eligible[id] = true
		}
		excluded := map[string]int{}
		for _, e := range r.Excluded {
			for _, id := range e.Nodes {
				excluded[id]++
			}
		}
		places := 0
		for _, n := range nodes {
			on := PlacesOn(job, n)
			if on {
				places++
			}
			if eligible[n.ID] != on || (on && excluded[n.ID] != 0) || (!on && excluded[n.ID] != 1) {
				t.Errorf("job %d, node %s (%s %s %s %s %v): PlacesOn %v, eligible %v, excluded %d times",
					ji, n.ID, n.Datacenter, n.NodePool, n.Attributes["kernel.name"], n.Status, n.Drivers, on, eligible[n.ID], excluded[n.ID])
			}
		}
		if places == 0 || places == len(nodes) {
			t.Errorf("job %d places on %d of %d nodes: the case tells nothing", ji, places, len(nodes))
		}
	}
}
