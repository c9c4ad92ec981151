package policywire

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testNode is a caller's node type, as the SDK's Node is.
type testNode struct {
	f   NodeFields
	t   *Tables
	off int32
}

type testNodes []map[string]string // per node: "id", "name", ..., "attr.K", "meta.K"

func (l testNodes) Len() int { return len(l) }
func (l testNodes) Fixed(i int) NodeFields {
	n := l[i]
	return NodeFields{ID: n["id"], Name: n["name"], Datacenter: n["datacenter"], NodePool: n["node_pool"], Class: n["class"]}
}
func (l testNodes) Attribute(i int, k string) (string, bool) { v, ok := l[i]["attr."+k]; return v, ok }
func (l testNodes) Meta(i int, k string) (string, bool)      { v, ok := l[i]["meta."+k]; return v, ok }

func TestACanaryInputRoundTripsWithOnlyTheSentFieldsAndKeys(t *testing.T) {
	c := Canary{JobID: "web", JobVersion: 1 << 40, DeploymentID: "d1", Group: "g", Percent: 25, Count: 2,
		Params: map[string]string{"b": "2", "a": "1"}, Existing: []string{"x", "y"}}
	nodes := testNodes{
		{"id": "n1", "name": "h1", "datacenter": "dc1", "class": "gpu", "attr.k": "v1", "attr.secret": "s", "meta.rack": "r1"},
		{"id": "n2", "name": "h2", "datacenter": "dc2", "attr.k": ""},
	}
	buf := AppendCanaryInput(nil, &c, FieldDatacenter|FieldClass, []string{"k"}, []string{"rack"}, nodes)
	got, decoded, err := DecodeCanaryInput(buf, func(n *testNode, f NodeFields, t *Tables, off int32) { *n = testNode{f, t, off} })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("header: got %+v, want %+v", got, c)
	}
	if len(decoded) != 2 || decoded[0].f != (NodeFields{ID: "n1", Datacenter: "dc1", Class: "gpu"}) || decoded[1].f != (NodeFields{ID: "n2", Datacenter: "dc2"}) {
		t.Fatalf("fixed fields (name not sent): %+v", decoded)
	}
	tb := decoded[0].t
	if tb != decoded[1].t || tb.Fields != FieldDatacenter|FieldClass || !reflect.DeepEqual(tb.Attr, []string{"k"}) || !reflect.DeepEqual(tb.Meta, []string{"rack"}) {
		t.Fatalf("tables: %+v", tb)
	}
	// Values: n1 (k=v1, rack=r1), n2 (k="" present, rack absent).
	if !reflect.DeepEqual(tb.Vals, []string{"v1", "r1", "", ""}) || !reflect.DeepEqual(tb.Has, []bool{true, true, true, false}) || decoded[1].off != 2 {
		t.Fatalf("values %q %v, n2 at %d", tb.Vals, tb.Has, decoded[1].off)
	}
}

func TestACompletionInputRoundTripsAndVersion1LeavesOutTheNewFields(t *testing.T) {
	now := time.Unix(1_800_000_000, 5).UTC()
	in := Completion{DeploymentID: "d", JobID: "j", JobVersion: 3, Status: "running", Disruption: "many nodes expired", Now: now,
		Params: map[string]string{"k": "v"},
		Groups: []Group{{Name: "a", DesiredTotal: 5, DesiredCanaries: 1, AutoRevert: true, Promoted: true, Complete: true,
			ProgressDeadline: time.Minute, RequireProgressBy: now.Add(time.Minute), Placed: 5, Healthy: 4, Unhealthy: 1, Pending: 2,
			CanariesHealthy: 1, LostInFlight: 2, Lost: 3, Disconnected: 4}}}
	v2 := AppendCompletionInput(nil, &in, ABIVersion)
	got, err := DecodeCompletionInput(v2)
	if err != nil || !reflect.DeepEqual(got, in) {
		t.Fatalf("got %+v, %v\nwant %+v", got, err, in)
	}
	plain := in
	plain.Disruption = ""
	plain.Groups = []Group{in.Groups[0]}
	plain.Groups[0].LostInFlight, plain.Groups[0].Lost, plain.Groups[0].Disconnected = 0, 0, 0
	v1 := AppendCompletionInput(nil, &in, 1)
	if !reflect.DeepEqual(v1, AppendCompletionInput(nil, &plain, 1)) {
		t.Fatal("the version 1 layout carries the disruption or the loss counts")
	}
	if want := len(v1) + 4 + len(in.Disruption) + 3; len(v2) != want {
		t.Fatalf("version 2 is %d bytes, want version 1's %d plus the disruption and three counts (%d)", len(v2), len(v1), want)
	}
	if _, err := DecodeCompletionInput(v1); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a version 1 input decoded as version 2: %v", err)
	}
}

// TestDecodersRefuseMalformedMessages: every malformed answer is refused;
// the control (the well-formed answer) is accepted.
func TestDecodersRefuseMalformedMessages(t *testing.T) {
	good := AppendCompletionOutput(nil, CompletionOutput{Decision: Fail, Revert: true, Reason: "r"})
	if out, err := DecodeCompletionOutput(good); err != nil || out.Decision != Fail || !out.Revert || out.Reason != "r" {
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
		"error with trailing": append(AppendError(nil, "x"), 0),
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
	if _, err := DecodeCompletionOutput(AppendError(nil, "nope")); !errors.As(err, &pe) || pe.Message != "nope" {
		t.Errorf("completion error answer: %v", err)
	}
}

func TestInputDecodersRefuseMalformedInputs(t *testing.T) {
	bind := func(*testNode, NodeFields, *Tables, int32) {}
	good := AppendCanaryInput(nil, &Canary{Count: 1}, 0, nil, nil, testNodes{{"id": "a"}})
	if _, n, err := DecodeCanaryInput(good, bind); err != nil || len(n) != 1 {
		t.Fatalf("control: %v", err)
	}
	unknownBit := AppendCanaryInput(nil, &Canary{}, 0, nil, nil, testNodes{})
	unknownBit[4+1+4+4+1+1+1] = 0x10 // the fields byte, after the header's empty strings and zero varints
	for name, b := range map[string][]byte{
		"truncated":         good[:len(good)-1],
		"trailing":          append(good, 0),
		"unknown field bit": unknownBit,
	} {
		if _, _, err := DecodeCanaryInput(b, bind); !errors.Is(err, ErrMalformed) {
			t.Errorf("canary %s: got %v, want ErrMalformed", name, err)
		}
	}
	in := Completion{Groups: []Group{{Name: "g"}}}
	bad := AppendCompletionInput(nil, &in, ABIVersion)
	flag := 4 + 4 + 1 + 4 + 4 + 1 + 1 + 1 + 4 + 1 // the group's flags byte
	bad[flag] = 0x80
	if _, err := DecodeCompletionInput(bad); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "unknown group flag") {
		t.Errorf("unknown group flag: %v", err)
	}
	if _, _, err := DecodeCanaryInput(unknownBit, bind); err == nil || !strings.Contains(err.Error(), "unknown node field bit") {
		t.Errorf("unknown node field bit: %v", err)
	}
}

func TestDecisionNames(t *testing.T) {
	for d, want := range map[Decision]string{Continue: "continue", Promote: "promote", Succeed: "succeed", Fail: "fail", 7: "unknown"} {
		if d.String() != want {
			t.Errorf("%d: %q, want %q", d, d.String(), want)
		}
	}
}
