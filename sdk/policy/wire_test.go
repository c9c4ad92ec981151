package policy

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestCanaryInputRoundTripsAndSendsOnlyDeclaredKeys(t *testing.T) {
	in := CanaryInput{JobID: "web", JobVersion: 1 << 40, DeploymentID: "d1", Group: "g", Percent: 25, Count: 2,
		Params:   map[string]string{"b": "2", "a": "1"},
		Existing: []string{"x"},
		Nodes: []Node{
			NewNode("n1", "host1", "dc1", "pool", "gpu", map[string]string{"kernel.name": "linux", "secret": "s"}, map[string]string{"rack": "r1"}),
			NewNode("n2", "host2", "dc2", "pool", "", nil, nil),
		}}
	buf := AppendCanaryInput(nil, in, FieldDatacenter, []string{"kernel.name"}, []string{"rack"})
	got, err := DecodeCanaryInput(buf)
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

func TestCompletionInputRoundTrips(t *testing.T) {
	now := time.Unix(1_800_000_000, 5).UTC()
	in := CompletionInput{DeploymentID: "d", JobID: "j", JobVersion: 3, Status: "running", Disruption: "many nodes expired", Now: now, Params: map[string]string{"k": "v"},
		Groups: []Group{{Name: "a", DesiredTotal: 5, DesiredCanaries: 1, AutoRevert: true, Promoted: true, Complete: true,
			ProgressDeadline: time.Minute, RequireProgressBy: now.Add(time.Minute), Placed: 5, Healthy: 4, Unhealthy: 1, Pending: 2, CanariesHealthy: 1,
			LostInFlight: 2, Lost: 3, Disconnected: 4}}}
	got, err := DecodeCompletionInput(AppendCompletionInput(nil, in, ABIVersion))
	if err != nil || !reflect.DeepEqual(got, in) {
		t.Fatalf("got %+v, %v\nwant %+v", got, err, in)
	}
}

// TestDecodersRefuseMalformedMessages: every malformed answer is refused;
// the control (the well-formed answer) is accepted.
func TestDecodersRefuseMalformedMessages(t *testing.T) {
	good := AppendCompletionOutput(nil, CompletionOutput{Decision: Fail, Revert: true, Reason: "r"})
	if out, err := DecodeCompletionOutput(good); err != nil || out.Decision != Fail || !out.Revert {
		t.Fatalf("control: %+v %v", out, err)
	}
	goodCanary := AppendCanaryOutput(nil, CanaryOutput{NodeIDs: []string{"a", "b"}, Reason: "r"})
	if out, err := DecodeCanaryOutput(goodCanary); err != nil || len(out.NodeIDs) != 2 {
		t.Fatalf("control: %+v %v", out, err)
	}
	for name, b := range map[string][]byte{
		"empty":               {},
		"trailing bytes":      append(AppendCompletionOutput(nil, CompletionOutput{}), 0),
		"unknown decision":    {0, 9, 0, 0, 0, 0, 0},
		"revert flag 2":       {0, 3, 2, 0, 0, 0, 0},
		"revert without fail": {0, 2, 1, 0, 0, 0, 0},
		"unknown status":      {5, 0, 0, 0, 0, 0, 0},
		"truncated reason":    {0, 0, 0, 9, 0, 0, 0, 'a'},
	} {
		if _, err := DecodeCompletionOutput(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("completion %s: got %v, want ErrMalformed", name, err)
		}
	}
	for name, b := range map[string][]byte{
		"huge count":     {0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"truncated id":   {0, 1, 5, 0, 0, 0, 'a'},
		"trailing bytes": append(goodCanary, 1),
	} {
		if _, err := DecodeCanaryOutput(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("canary %s: got %v, want ErrMalformed", name, err)
		}
	}
	var pe *PolicyError
	if _, err := DecodeCanaryOutput(AppendError(nil, "nope")); !errors.As(err, &pe) || pe.Message != "nope" {
		t.Errorf("error answer: %v", err)
	}
}

func TestFieldGetterReadsDeclaredFieldsOfDecodedNodes(t *testing.T) {
	in := CanaryInput{Nodes: []Node{
		NewNode("n1", "h1", "dc1", "p", "c", map[string]string{"k": "a1"}, map[string]string{"rack": "r1"}),
		NewNode("n2", "h2", "dc2", "p", "c", nil, map[string]string{"rack": "r2"}),
	}}
	got, err := DecodeCanaryInput(AppendCanaryInput(nil, in, FieldDatacenter, []string{"k"}, []string{"rack"}))
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
