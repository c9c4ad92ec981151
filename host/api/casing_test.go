package api

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// snakeCase is a JSON key of the API's one casing (docs/api.md).
var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// casingProblems walks t and every struct type it reaches and returns each
// exported field whose JSON key is not snake_case: a field without a json
// tag is encoded under its Go name (CamelCase), the mistake this catches.
// An embedded struct without a tag is flattened by encoding/json, so its
// fields are checked as the parent's.
func casingProblems(t reflect.Type, seen map[reflect.Type]bool) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return nil
	}
	seen[t] = true
	if _, ok := reflect.PointerTo(t).MethodByName("MarshalJSON"); ok {
		return nil // it chooses its own form
	}
	if _, ok := t.MethodByName("MarshalJSON"); ok {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case name == "-":
			continue
		case f.Anonymous && name == "":
			out = append(out, casingProblems(f.Type, seen)...)
			continue
		case name == "":
			out = append(out, t.String()+"."+f.Name+": no json tag (encoded as "+f.Name+")")
		case !snakeCase.MatchString(name):
			out = append(out, t.String()+"."+f.Name+": json key "+name)
		}
		out = append(out, casingProblems(f.Type, seen)...)
	}
	return out
}

// TestEveryBodyTheAPIWritesOrReadsIsSnakeCase: one JSON casing across the
// API. Every type an endpoint encodes (docs/api.md, endpoint by endpoint)
// or decodes, and every type reachable from them (a node's drivers, an
// allocation's task states, a deployment's groups, a job's tasks), has a
// snake_case key for each field. Control: a type with an untagged field
// and one with a camelCase key are both caught.
func TestEveryBodyTheAPIWritesOrReadsIsSnakeCase(t *testing.T) {
	served := []any{
		model.Node{},               // GET /v1/node
		[]*model.Allocation{},      // GET /v1/allocations
		[]JobStatus{},              // GET /v1/jobs
		[]wanted.Rejection{},       // GET /v1/rejections
		Health{},                   // GET /v1/health
		JobWriteResult{},           // POST /v1/jobs, /v1/job/{job}/stop
		JobParseError{},            // POST /v1/jobs: 400
		ActionResult{},             // POST /v1/deployment/{job}/..., /v1/job/{job}/revert/{version}
		PromoteRequest{},           // POST /v1/deployment/{job}/promote: the body read
		model.Deployment{},         // inside ActionResult, and the wire format
		model.Job{},                // inside ActionResult
		map[string]string{"e": ""}, // errors: {"error": ...}
	}
	seen := map[reflect.Type]bool{}
	for _, v := range served {
		for _, p := range casingProblems(reflect.TypeOf(v), seen) {
			t.Error(p)
		}
	}
	if len(seen) < 20 {
		t.Fatalf("walked %d struct types: the walk does not reach the nested records", len(seen))
	}

	type untagged struct{ NodeID string }
	type camel struct {
		Inner untagged `json:"nodeId"`
	}
	if got := casingProblems(reflect.TypeOf(camel{}), map[reflect.Type]bool{}); len(got) != 2 {
		t.Fatalf("control: %q, want the camelCase key and the untagged field", got)
	}
}
