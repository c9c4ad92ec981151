package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/policywire"
)

// nodeList lets the tests encode SDK nodes as the agent encodes its node
// records.
type nodeList []Node

func (l nodeList) Len() int { return len(l) }
func (l nodeList) Fixed(i int) policywire.NodeFields {
	n := &l[i]
	return policywire.NodeFields{ID: n.ID, Name: n.Name, Datacenter: n.Datacenter, NodePool: n.NodePool, Class: n.Class}
}
func (l nodeList) Attribute(i int, key string) (string, bool) { return l[i].Attribute(key) }
func (l nodeList) Meta(i int, key string) (string, bool)      { return l[i].Meta(key) }

func encodeCanary(in CanaryInput, fields byte, attr, meta []string) []byte {
	c := policywire.Canary{JobID: in.JobID, JobVersion: in.JobVersion, DeploymentID: in.DeploymentID, Group: in.Group,
		Percent: in.Percent, Count: in.Count, Params: in.Params, Existing: in.Existing}
	return policywire.AppendCanaryInput(nil, &c, fields, attr, meta, nodeList(in.Nodes))
}

func TestADecodedCanaryInputShowsOnlyTheDeclaredKeys(t *testing.T) {
	in := CanaryInput{JobID: "web", JobVersion: 1 << 40, DeploymentID: "d1", Group: "g", Percent: 25, Count: 2,
		Params:   map[string]string{"b": "2", "a": "1"},
		Existing: []string{"x"},
		Nodes: []Node{
			NewNode("n1", "host1", "dc1", "pool", "gpu", map[string]string{"kernel.name": "linux", "secret": "s"}, map[string]string{"rack": "r1"}),
			NewNode("n2", "host2", "dc2", "pool", "", nil, nil),
		}}
	got, err := decodeCanaryInput(encodeCanary(in, policywire.FieldDatacenter, []string{"kernel.name"}, []string{"rack"}))
	if err != nil {
		t.Fatal(err)
	}
	if got.JobID != "web" || got.JobVersion != 1<<40 || got.Count != 2 || got.Percent != 25 || !reflect.DeepEqual(got.Params, in.Params) || !reflect.DeepEqual(got.Existing, in.Existing) {
		t.Fatalf("header: %+v", got)
	}
	n1, n2 := got.Nodes[0], got.Nodes[1]
	if n1.ID != "n1" || n1.Datacenter != "dc1" || n1.Name != "" || n1.Class != "" {
		t.Fatalf("fixed fields: only the ID and the declared datacenter are sent: %+v", n1)
	}
	if v, ok := n1.Attribute("kernel.name"); !ok || v != "linux" {
		t.Errorf("declared attribute: %q %v", v, ok)
	}
	if _, ok := n1.Attribute("secret"); ok {
		t.Error("an undeclared attribute was sent")
	}
	if v, ok := n1.Field("meta.rack"); !ok || v != "r1" {
		t.Errorf("meta via Field: %q %v", v, ok)
	}
	if _, ok := n2.Meta("rack"); ok {
		t.Error("n2 has no rack, but it is reported present")
	}
	if _, ok := n1.Field("name"); ok {
		t.Error("an unsent field is reported present")
	}
}

func TestADecodedCompletionInputCarriesTheDisruptionAndLossCounts(t *testing.T) {
	now := time.Unix(1_800_000_000, 5).UTC()
	c := policywire.Completion{DeploymentID: "d", JobID: "j", JobVersion: 3, Status: "running", Disruption: "many nodes expired", Now: now,
		Params: map[string]string{"k": "v"},
		Groups: []policywire.Group{{Name: "a", DesiredTotal: 5, DesiredCanaries: 1, AutoRevert: true, Promoted: true, Complete: true,
			ProgressDeadline: time.Minute, RequireProgressBy: now.Add(time.Minute), Placed: 5, Healthy: 4, Unhealthy: 1, Pending: 2,
			CanariesHealthy: 1, LostInFlight: 2, Lost: 3, Disconnected: 4}}}
	got, err := decodeCompletionInput(policywire.AppendCompletionInput(nil, &c, ABIVersion))
	want := CompletionInput{DeploymentID: "d", JobID: "j", JobVersion: 3, Status: "running", Disruption: "many nodes expired", Now: now,
		Params: map[string]string{"k": "v"}, Groups: []Group{Group(c.Groups[0])}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v\nwant %+v", got, err, want)
	}
	if got.Groups[0].LostInFlight != 2 || got.Groups[0].Disconnected != 4 {
		t.Fatalf("loss counts: %+v", got.Groups[0])
	}
}

// A call decodes the input, runs the registered function and encodes its
// answer as the module's export does; a malformed input and the function's
// own error both become error answers, which the agent reads as a
// *policywire.PolicyError.
func TestACallRunsTheFunctionThroughTheWireFormat(t *testing.T) {
	onlyMarked := func(in CanaryInput) (CanaryOutput, error) {
		var ids []string
		for i := range in.Nodes {
			if v, _ := in.Nodes[i].Meta("canary"); v == "true" {
				ids = append(ids, in.Nodes[i].ID)
			}
		}
		if len(ids) == 0 {
			return CanaryOutput{}, errors.New("no marked node")
		}
		return CanaryOutput{NodeIDs: ids, Reason: "marked"}, nil
	}
	in := CanaryInput{Count: 1, Nodes: []Node{
		NewNode("a", "", "", "", "", nil, nil),
		NewNode("b", "", "", "", "", nil, map[string]string{"canary": "true"}),
	}}
	out, err := policywire.DecodeCanaryOutput(callCanary(onlyMarked, encodeCanary(in, 0, nil, []string{"canary"}), nil))
	if err != nil || !reflect.DeepEqual(out.NodeIDs, []string{"b"}) || out.Reason != "marked" {
		t.Fatalf("control: %+v, %v", out, err)
	}
	var pe *policywire.PolicyError
	// The key not declared: the function sees no marked node and errs.
	if _, err := policywire.DecodeCanaryOutput(callCanary(onlyMarked, encodeCanary(in, 0, nil, nil), nil)); !errors.As(err, &pe) || pe.Message != "no marked node" {
		t.Errorf("the function's error: %v", err)
	}
	if _, err := policywire.DecodeCanaryOutput(callCanary(onlyMarked, []byte{1, 2, 3}, nil)); !errors.As(err, &pe) || !strings.Contains(pe.Message, "malformed") {
		t.Errorf("a malformed input: %v", err)
	}

	halt := func(in CompletionInput) (CompletionOutput, error) {
		if in.Disruption != "" {
			return CompletionOutput{Decision: Continue, Reason: "guard: " + in.Disruption}, nil
		}
		return CompletionOutput{Decision: Fail, Revert: true, Reason: "lost " + in.Groups[0].Name}, nil
	}
	c := policywire.Completion{Status: "running", Groups: []policywire.Group{{Name: "web", LostInFlight: 1}}}
	got, err := policywire.DecodeCompletionOutput(callCompletion(halt, policywire.AppendCompletionInput(nil, &c, ABIVersion), nil))
	if err != nil || got.Decision != policywire.Fail || !got.Revert || got.Reason != "lost web" {
		t.Fatalf("completion control: %+v, %v", got, err)
	}
	c.Disruption = "reconnected"
	got, err = policywire.DecodeCompletionOutput(callCompletion(halt, policywire.AppendCompletionInput(nil, &c, ABIVersion), nil))
	if err != nil || got.Decision != policywire.Continue || got.Reason != "guard: reconnected" {
		t.Fatalf("completion during a disruption: %+v, %v", got, err)
	}
	// A version 1 input is malformed for this SDK: it lacks the new fields.
	if _, err := policywire.DecodeCompletionOutput(callCompletion(halt, policywire.AppendCompletionInput(nil, &c, 1), nil)); !errors.As(err, &pe) {
		t.Errorf("a version 1 input: %v", err)
	}
}

func TestFieldGetterReadsDeclaredFieldsOfDecodedNodes(t *testing.T) {
	in := CanaryInput{Nodes: []Node{
		NewNode("n1", "h1", "dc1", "p", "c", map[string]string{"k": "a1"}, map[string]string{"rack": "r1"}),
		NewNode("n2", "h2", "dc2", "p", "c", nil, map[string]string{"rack": "r2"}),
	}}
	got, err := decodeCanaryInput(encodeCanary(in, policywire.FieldDatacenter, []string{"k"}, []string{"rack"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref      string
		want1    string
		ok1, ok2 bool
		want2    string
	}{
		{"meta.rack", "r1", true, true, "r2"},
		{"${meta.rack}", "r1", true, true, "r2"},
		{"attr.k", "a1", true, false, ""},
		{"datacenter", "dc1", true, true, "dc2"},
		{"${node.datacenter}", "dc1", true, true, "dc2"},
		{"name", "", false, false, ""}, // not sent
		{"meta.undeclared", "", false, false, ""},
	} {
		get := got.FieldGetter(tc.ref)
		v1, ok1 := get(&got.Nodes[0])
		v2, ok2 := get(&got.Nodes[1])
		if v1 != tc.want1 || ok1 != tc.ok1 || v2 != tc.want2 || ok2 != tc.ok2 {
			t.Errorf("%s: got (%q %v) (%q %v)", tc.ref, v1, ok1, v2, ok2)
		}
	}
}

// TestTheSDKsConstantsAreTheWiresValues: the SDK spells its constants out
// for its readers; they must be the codec's.
func TestTheSDKsConstantsAreTheWiresValues(t *testing.T) {
	for _, c := range []struct {
		name      string
		sdk, wire int
	}{
		{"ABIVersion", ABIVersion, policywire.ABIVersion},
		{"KindCanary", KindCanary, policywire.KindCanary},
		{"KindCompletion", KindCompletion, policywire.KindCompletion},
		{"Continue", int(Continue), int(policywire.Continue)},
		{"Promote", int(Promote), int(policywire.Promote)},
		{"Succeed", int(Succeed), int(policywire.Succeed)},
		{"Fail", int(Fail), int(policywire.Fail)},
	} {
		if c.sdk != c.wire {
			t.Errorf("%s is %d in the SDK, %d on the wire", c.name, c.sdk, c.wire)
		}
	}
	for d := Continue; d <= Fail; d++ {
		if back, ok := ParseDecision(d.String()); !ok || back != d {
			t.Errorf("%d: String %q does not parse back", d, d.String())
		}
	}
}
