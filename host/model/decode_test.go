package model

import (
	"errors"
	"strings"
	"testing"
)

func TestEveryEnumRejectsUnknownValues(t *testing.T) {
	cases := []struct {
		name, doc, wantPath string
		into                func() any
	}{
		{"job type", `{"id":"a","type":"service","groups":[]}`, "type", func() any { return &Job{} }},
		{"restart mode", `{"id":"a","type":"system","groups":[{"name":"g","count":1,"tasks":[],"restart":{"attempts":1,"interval":"1m","delay":"1s","mode":"retry"}}]}`, "groups[0].restart.mode", func() any { return &Job{} }},
		{"constraint op", `{"id":"a","type":"system","constraints":[{"attribute":"x","operator":"distinct_hosts"}],"groups":[]}`, "constraints[0].operator", func() any { return &Job{} }},
		{"reconcile mode", `{"id":"a","type":"system","groups":[{"name":"g","count":1,"tasks":[],"disconnect":{"reconcile":"coin_flip"}}]}`, "groups[0].disconnect.reconcile", func() any { return &Job{} }},
		{"check type", `{"id":"a","type":"system","groups":[{"name":"g","count":1,"tasks":[{"name":"t","driver":"mock","services":[{"checks":[{"type":"grpc","interval":"1s","timeout":"1s"}]}]}]}]}`, "groups[0].tasks[0].services[0].checks[0].type", func() any { return &Job{} }},
		{"network mode", `{"id":"a","type":"system","groups":[{"name":"g","count":1,"tasks":[],"network":{"mode":"cni/x"}}]}`, "groups[0].network.mode", func() any { return &Job{} }},
		{"node status", `{"id":"n","status":"zombie"}`, "status", func() any { return &Node{} }},
		{"eligibility", `{"id":"n","eligibility":"maybe"}`, "eligibility", func() any { return &Node{} }},
		{"desired status", `{"id":"a","desired_status":"dance"}`, "desired_status", func() any { return &Allocation{} }},
		{"client status", `{"id":"a","client_status":"sleeping"}`, "client_status", func() any { return &Allocation{} }},
		{"alloc state field", `{"id":"a","states":[{"field":"desired","value":"x","time":"2026-01-01T00:00:00Z"}]}`, "states[0].field", func() any { return &Allocation{} }},
		{"deployment status", `{"id":"d","status":"exploded","task_groups":{}}`, "status", func() any { return &Deployment{} }},
		{"duration", `{"id":"a","type":"system","groups":[{"name":"g","count":1,"tasks":[{"name":"t","driver":"d","kill_timeout":"ten"}]}]}`, "groups[0].tasks[0].kill_timeout", func() any { return &Job{} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Decode([]byte(c.doc), c.into())
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("want *DecodeError, got %v", err)
			}
			if de.Path != c.wantPath {
				t.Fatalf("path = %q, want %q (err %v)", de.Path, c.wantPath, err)
			}
		})
	}
	// Control: the same documents with known values decode.
	if err := Decode([]byte(`{"id":"a","type":"sysbatch","groups":[]}`), &Job{}); err != nil {
		t.Fatalf("control failed: %v", err)
	}
	if err := Decode([]byte(`{"id":"a","client_status":"running","desired_status":"run"}`), &Allocation{}); err != nil {
		t.Fatalf("control failed: %v", err)
	}
}

func TestErrorsWithoutAPathFromEncodingJSONStillNameTheirField(t *testing.T) {
	doc := `{"id":"a","groups":[{"name":"g","count":1,"tasks":[]},{"name":"h","count":1,"tasks":[{"name":"t","driver":"d","kill_timeout":"5s"}]}],"type":"system","submit_time":"noon"}`
	var de *DecodeError
	if err := Decode([]byte(doc), &Job{}); !errors.As(err, &de) || de.Path != "submit_time" {
		t.Fatalf("time field: got %v", err)
	}
	doc = `{"id":"a","type":"system","groups":[{"name":"g","count":1,"tasks":[]},{"name":"h","count":"two","tasks":[]}]}`
	if err := Decode([]byte(doc), &Job{}); !errors.As(err, &de) || de.Path != "groups[1].count" {
		t.Fatalf("indexed path: got %v", err)
	}
	doc = `{"id":"a","type":"system","groups":[{"name":"g","count":1,"tasks":[],"colour":"red"}]}`
	if err := Decode([]byte(doc), &Job{}); !errors.As(err, &de) || de.Path != "groups[0]" || !strings.Contains(err.Error(), `"colour"`) {
		t.Fatalf("unknown nested field: got %v", err)
	}
	// Control: the same document with a good time decodes.
	doc = `{"id":"a","type":"system","groups":[],"submit_time":"2026-11-30T10:00:00Z"}`
	if err := Decode([]byte(doc), &Job{}); err != nil {
		t.Fatalf("control: %v", err)
	}
}

func TestUnknownFieldsAndTrailingDataFailTheWholeDocument(t *testing.T) {
	err := Decode([]byte(`{"id":"a","type":"system","groups":[],"colour":"red"}`), &Job{})
	if err == nil || !strings.Contains(err.Error(), `"colour"`) {
		t.Fatalf("unknown field: got %v", err)
	}
	if err := Decode([]byte(`{"id":"a","type":"system","groups":[]} {}`), &Job{}); err == nil {
		t.Fatal("trailing data accepted")
	}
	if err := Decode([]byte(`{"id":"a","type":"system","groups":[]}`), &Job{}); err != nil {
		t.Fatalf("control: %v", err)
	}
}

func TestKeysThatEncodingJSONWouldMergeFailTheWholeDocument(t *testing.T) {
	cases := []struct{ name, doc, path, reason string }{
		{"case variant of a field", `{"id":"a","type":"system","groups":[],"STOP":true}`, "STOP", `must be spelled "stop"`},
		{"case variant repeating a field", `{"id":"a","type":"system","groups":[],"stop":false,"Stop":true}`, "", `repeats "stop"`},
		{"repeated field", `{"id":"a","type":"system","groups":[{"name":"g","count":1,"count":2,"tasks":[]}]}`, "groups[0]", `repeats "count"`},
		{"repeated map key", `{"id":"a","type":"system","groups":[],"meta":{"x":"1","x":"2"}}`, "meta", `repeats "x"`},
		{"repeated key inside a driver config", `{"id":"a","type":"system","groups":[{"name":"g","count":1,"tasks":[{"name":"t","driver":"d","config":{"image":"a","image":"b"}}]}]}`, "groups[0].tasks[0].config", `repeats "image"`},
	}
	for _, c := range cases {
		err := Decode([]byte(c.doc), &Job{})
		var de *DecodeError
		if !errors.As(err, &de) || de.Path != c.path || !strings.Contains(de.Reason, c.reason) {
			t.Errorf("%s: got %v (path %q), want path %q and %q", c.name, err, pathOf(de), c.path, c.reason)
		}
	}
	// Controls: keys that differ only in case are distinct data in a map,
	// and the exact spelling of every field decodes.
	var j Job
	err := Decode([]byte(`{"id":"a","type":"system","stop":true,"groups":[],"meta":{"Rack":"1","rack":"2"}}`), &j)
	if err != nil || !j.Stop || j.Meta["Rack"] != "1" || j.Meta["rack"] != "2" {
		t.Fatalf("control: %v %+v", err, j)
	}
}

func pathOf(de *DecodeError) string {
	if de == nil {
		return "<nil>"
	}
	return de.Path
}
