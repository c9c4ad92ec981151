package agent

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/hivelet/hivelet/host/model"
)

// TestScopeSigSeesEverythingTheScopeReads: a job's edits that can change
// which nodes are in its scope or have its drivers change its scopeSig;
// edits of what only its tasks run or how it rolls out do not (so the
// node lists derived from the scope outlive such a version).
func TestScopeSigSeesEverythingTheScopeReads(t *testing.T) {
	base := func() *model.Job {
		j := mockJob("web", 1, map[string]any{"image": "a"})
		j.Groups = append(j.Groups, &model.Group{Name: "h", Count: 1, Tasks: []*model.Task{{Name: "u", Driver: "exec"}}})
		return j
	}
	sig := scopeSig(base())
	changes := map[string]func(j *model.Job){
		"a datacenter":        func(j *model.Job) { j.Datacenters = []string{"dc2"} },
		"a second datacenter": func(j *model.Job) { j.Datacenters = append(j.Datacenters, "dc2") },
		"the node pool":       func(j *model.Job) { j.NodePool = "gpu" },
		"a job constraint": func(j *model.Job) {
			j.Constraints = []model.Constraint{{Attribute: "${meta.rack}", Operator: model.OpEqual, Value: "r1"}}
		},
		"a group constraint": func(j *model.Job) {
			j.Groups[1].Constraints = []model.Constraint{{Attribute: "${meta.rack}", Operator: model.OpIsSet}}
		},
		"a host volume": func(j *model.Job) {
			j.Groups[0].Volumes = []model.Volume{{Name: "d", Type: model.VolumeHost, Source: "data"}}
		},
		"a port's host network": func(j *model.Job) {
			j.Groups[0].Network = &model.Network{Ports: []model.Port{{Label: "http", HostNetwork: "public"}}}
		},
		"a task's driver": func(j *model.Job) { j.Groups[1].Tasks[0].Driver = "docker" },
		"a task with a driver": func(j *model.Job) {
			j.Groups[0].Tasks = append(j.Groups[0].Tasks, &model.Task{Name: "s", Driver: "docker"})
		},
		"a group": func(j *model.Job) {
			j.Groups = append(j.Groups, &model.Group{Name: "i", Tasks: []*model.Task{{Name: "v", Driver: "raw"}}})
		},
	}
	for what, edit := range changes {
		j := base()
		edit(j)
		if scopeSig(j) == sig {
			t.Errorf("changing %s leaves the scopeSig as it was", what)
		}
	}
	withC := base()
	withC.Constraints = []model.Constraint{{Attribute: "${meta.rack}", Operator: model.OpEqual, Value: "r1"}}
	for _, c := range []model.Constraint{{Attribute: "${meta.row}", Operator: model.OpEqual, Value: "r1"}, {Attribute: "${meta.rack}", Operator: model.OpNotEqual, Value: "r1"}, {Attribute: "${meta.rack}", Operator: model.OpEqual, Value: "r2"}} {
		j := base()
		j.Constraints = []model.Constraint{c}
		if scopeSig(j) == scopeSig(withC) {
			t.Errorf("constraint %+v has the scopeSig of %+v", c, withC.Constraints[0])
		}
	}
	same := map[string]func(j *model.Job){
		"the version":         func(j *model.Job) { j.Version = 2 },
		"a task's config":     func(j *model.Job) { j.Groups[0].Tasks[0].Config = map[string]any{"image": "b"} },
		"the count":           func(j *model.Job) { j.Groups[0].Count = 3 },
		"the update strategy": func(j *model.Job) { j.Groups[0].Update.MaxParallel = 7 },
		"a port's number": func(j *model.Job) {
			j.Groups[0].Network = &model.Network{Ports: []model.Port{{Label: "http", Static: 8080}}}
		},
		"the job's meta": func(j *model.Job) { j.Meta = map[string]string{"owner": "x"} },
	}
	for what, edit := range same {
		j := base()
		edit(j)
		if scopeSig(j) != sig {
			t.Errorf("changing %s changes the scopeSig", what)
		}
	}
}

// TestJobsOfOneScopeSigPlaceEveryNodeAlike holds scopeSig to inScope and
// driversOK on random jobs and nodes: two jobs with the same sig agree on
// every node. Control: some pairs of different jobs share a sig and some
// of those with different sigs disagree on a node, so the agreement is not
// vacuous.
func TestJobsOfOneScopeSigPlaceEveryNodeAlike(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	constraints := func() []model.Constraint {
		pool := []model.Constraint{
			{Attribute: "${meta.rack}", Operator: model.OpEqual, Value: "r1"},
			{Attribute: "${meta.rack}", Operator: model.OpNotEqual, Value: "r1"},
			{Attribute: "${meta.rack}", Operator: model.OpIsSet},
			{Attribute: "${attr.kernel.name}", Operator: model.OpEqual, Value: "linux"},
			{Attribute: "${node.datacenter}", Operator: model.OpRegexp, Value: "^dc[12]$"},
		}
		var out []model.Constraint
		for range r.IntN(3) {
			out = append(out, pool[r.IntN(len(pool))])
		}
		return out
	}
	randomJob := func() *model.Job {
		j := mockJob("web", uint64(1+r.IntN(3)), map[string]any{"image": pick("a", "b")})
		j.Datacenters = [][]string{nil, {"dc1"}, {"dc*"}, {"dc2", "dc1"}}[r.IntN(4)]
		j.NodePool = pick("", "all", "p1")
		j.Constraints = constraints()
		j.Groups[0].Count = 1 + r.IntN(3)
		j.Groups[0].Constraints = constraints()
		j.Groups[0].Tasks[0].Driver = pick("mock", "exec")
		if r.IntN(2) == 0 {
			j.Groups[0].Volumes = []model.Volume{{Name: "d", Type: model.VolumeHost, Source: pick("v1", "v2")}}
		}
		if r.IntN(2) == 0 {
			j.Groups[0].Network = &model.Network{Ports: []model.Port{{Label: "p", Static: r.IntN(2) * 80, HostNetwork: pick("", "n1")}}}
		}
		return j
	}
	var nodes []*model.Node
	for i := range 60 {
		n := &model.Node{ID: fmt.Sprintf("n%d", i), Datacenter: pick("dc1", "dc2", "dc3"), NodePool: pick("default", "p1"),
			Attributes: map[string]string{"kernel.name": pick("linux", "darwin")}, Meta: map[string]string{},
			Drivers: map[string]model.DriverInfo{}, HostVolumes: map[string]model.HostVolume{}, HostNetworks: map[string]model.HostNetwork{}}
		if r.IntN(2) == 0 {
			n.Meta["rack"] = pick("r1", "r2")
		}
		for _, d := range []string{"mock", "exec"} {
			if r.IntN(4) > 0 {
				n.Drivers[d] = model.DriverInfo{Detected: true, Healthy: r.IntN(5) > 0}
			}
		}
		if r.IntN(2) == 0 {
			n.HostVolumes[pick("v1", "v2")] = model.HostVolume{Path: "/x"}
		}
		if r.IntN(2) == 0 {
			n.HostNetworks["n1"] = model.HostNetwork{Address: "10.0.0.1"}
		}
		nodes = append(nodes, n)
	}
	var jobs []*model.Job
	for range 4000 {
		jobs = append(jobs, randomJob())
	}
	bySig := map[string][]*model.Job{}
	for _, j := range jobs {
		bySig[scopeSig(j)] = append(bySig[scopeSig(j)], j)
	}
	placed := func(j *model.Job, n *model.Node) [2]bool { return [2]bool{inScope(j, n), driversOK(j, n)} }
	shared := 0
	for _, group := range bySig {
		for _, j := range group[1:] {
			shared++
			for _, n := range nodes {
				if placed(j, n) != placed(group[0], n) {
					t.Fatalf("jobs of one scopeSig place node %+v differently:\n%+v\n%+v", n, j, group[0])
				}
			}
		}
	}
	// Control.
	differ := 0
	for i := 0; i+1 < len(jobs); i += 2 {
		if scopeSig(jobs[i]) == scopeSig(jobs[i+1]) {
			continue
		}
		for _, n := range nodes {
			if placed(jobs[i], n) != placed(jobs[i+1], n) {
				differ++
				break
			}
		}
	}
	t.Logf("%d jobs, %d sigs, %d jobs sharing a sig with another, %d pairs of different sigs placing a node differently", len(jobs), len(bySig), shared, differ)
	if shared < 500 || differ < 500 {
		t.Fatalf("control: %d jobs share a sig, %d pairs differ: the test does not reach both", shared, differ)
	}
}
