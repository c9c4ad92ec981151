package wanted

import (
	"encoding/json"
	"testing"
	"unsafe"

	"github.com/hivelet/hivelet/host/model"
)

// sameBytes reports whether a and b are one string in memory, not two
// equal copies.
func sameBytes(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// A steward compares each allocation's node, job and status with the node
// records', the canary set's and its job's (model.Intern): decoded, the
// strings that repeat across the fleet share their bytes, and the values
// are unchanged.
func TestDecodedValuesShareTheStringsTheFleetRepeats(t *testing.T) {
	alloc := func(id string) *model.Allocation {
		t.Helper()
		a := model.Allocation{
			ID: id, Name: "web.g[0]", Namespace: "default", JobID: "web", JobVersion: 2, TaskGroup: "g",
			NodeID: "node-007", DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning,
			ClientDescription: "Tasks are running", DeploymentID: "dep-1",
		}
		raw, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeAlloc(AllocKey(a.NodeID, a.Namespace, a.JobID, a.ID), raw)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != a.ID || got.Name != a.Name || got.Namespace != a.Namespace || got.JobID != a.JobID ||
			got.TaskGroup != a.TaskGroup || got.NodeID != a.NodeID || got.DesiredStatus != a.DesiredStatus ||
			got.ClientStatus != a.ClientStatus || got.ClientDescription != a.ClientDescription || got.DeploymentID != a.DeploymentID {
			t.Fatalf("decoded %+v, stored %+v", got, a)
		}
		return got
	}
	a, b := alloc("a1"), alloc("a2")
	for _, f := range []struct {
		what string
		x, y string
	}{
		{"name", a.Name, b.Name},
		{"namespace", a.Namespace, b.Namespace},
		{"job", a.JobID, b.JobID},
		{"group", a.TaskGroup, b.TaskGroup},
		{"node", a.NodeID, b.NodeID},
		{"desired status", string(a.DesiredStatus), string(b.DesiredStatus)},
		{"client status", string(a.ClientStatus), string(b.ClientStatus)},
		{"client description", a.ClientDescription, b.ClientDescription},
		{"deployment", a.DeploymentID, b.DeploymentID},
	} {
		if !sameBytes(f.x, f.y) {
			t.Errorf("the two allocations' %s (%q) are two copies", f.what, f.x)
		}
	}

	raw, err := json.Marshal(model.Node{ID: "node-007", Status: model.NodeStatusReady, Eligibility: model.Eligible})
	if err != nil {
		t.Fatal(err)
	}
	n, err := DecodeNode("node-007", raw)
	if err != nil {
		t.Fatal(err)
	}
	if !sameBytes(n.ID, a.NodeID) {
		t.Error("the node record's ID and its allocation's node_id are two copies")
	}

	d := model.Deployment{ID: "dep-1", Namespace: "default", JobID: "web", JobVersion: 2, Status: model.DeploymentRunning,
		TaskGroups: map[string]*model.DeploymentState{"g": {CanaryNodes: []string{"node-003", "node-007"}}}}
	if raw, err = json.Marshal(d); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeDeployment(DeploymentKey(d.Namespace, d.JobID, d.JobVersion), raw)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.TaskGroups["g"].CanaryNodes; len(c) != 2 || c[0] != "node-003" || !sameBytes(c[1], a.NodeID) {
		t.Errorf("canary nodes %q: not the allocations' node IDs", c)
	}
}
