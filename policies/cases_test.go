package policies

import (
	"context"
	"strings"
	"testing"
)

func TestACaseCanAssertTheReasonAndPropertiesOfTheChosenSet(t *testing.T) {
	two := 2
	canary := Outcome{Got: Expect{NodeIDs: []string{"n3", "n1"}}, Reason: "marked nodes spread over 2 datacenters"}
	cases := []struct {
		name string
		want Want
		out  Outcome
		fail string // a substring of the one failure; empty: passes
	}{
		{"exact ids pass", Want{Expect: Expect{NodeIDs: []string{"n3", "n1"}}}, canary, ""},
		{"exact ids are ordered", Want{Expect: Expect{NodeIDs: []string{"n1", "n3"}}}, canary, "node_ids"},
		{"absent ids assert none chosen", Want{}, canary, "node_ids"},
		{"reason substrings pass", Want{Expect: Expect{NodeIDs: []string{"n3", "n1"}}, ReasonContains: []string{"marked", "2 datacenters"}}, canary, ""},
		{"a missing reason substring fails", Want{Expect: Expect{NodeIDs: []string{"n3", "n1"}}, ReasonContains: []string{"marked", "3 datacenters"}}, canary, `contain "3 datacenters"`},
		{"chosen leaves ids free", Want{Chosen: &ChosenSet{Count: &two, Includes: []string{"n1"}, Excludes: []string{"n2"}, Within: []string{"n1", "n3", "n4"}}}, canary, ""},
		{"chosen count", Want{Chosen: &ChosenSet{Count: new(int)}}, canary, "want 0 nodes, got 2"},
		{"chosen includes", Want{Chosen: &ChosenSet{Includes: []string{"n2"}}}, canary, "want n2 among"},
		{"chosen excludes", Want{Chosen: &ChosenSet{Excludes: []string{"n3"}}}, canary, "want n3 not among"},
		{"chosen within", Want{Chosen: &ChosenSet{Within: []string{"n1"}}}, canary, "n3 is not within"},
		{"chosen with exact ids checks both", Want{Expect: Expect{NodeIDs: []string{"n1"}}, Chosen: &ChosenSet{}}, canary, "node_ids"},
		{"completion decision", Want{Expect: Expect{Decision: "promote"}, ReasonContains: []string{"healthy"}},
			Outcome{Got: Expect{Decision: "promote"}, Reason: "all canaries healthy"}, ""},
		{"completion decision differs", Want{Expect: Expect{Decision: "promote"}},
			Outcome{Got: Expect{Decision: "continue"}, Reason: "waiting"}, "decision"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := c.want.Check(c.out)
			switch {
			case c.fail == "" && len(d) > 0:
				t.Fatalf("want a pass, got %q", d)
			case c.fail != "" && (len(d) != 1 || !strings.Contains(d[0], c.fail)):
				t.Fatalf("want one failure containing %q, got %q", c.fail, d)
			}
		})
	}
}

func TestAnUnknownFieldOfACaseIsRefused(t *testing.T) {
	var cf CaseFile
	ok := `{"cases":[{"name":"x","input":{"canary":{"count":1}},"want":{"chosen":{"count":1},"reason_contains":["a"]}}]}`
	if err := DecodeStrict([]byte(ok), &cf); err != nil {
		t.Fatalf("control, every field known: %v", err)
	}
	bad := `{"cases":[{"name":"x","input":{"canary":{"count":1}},"want":{"reason_contain":["a"]}}]}`
	if err := DecodeStrict([]byte(bad), &cf); err == nil || !strings.Contains(err.Error(), "reason_contain") {
		t.Fatalf("a misspelt assertion was accepted (it would assert nothing): %v", err)
	}
}

// TestACompletionCaseCarriesTheDisruptionAndLossCountsToTheModule: a cases
// file's disruption and lost_in_flight reach the module: quorum with
// max_lost_in_flight 1 fails a group that lost 2 replacements (control),
// and continues, naming the disruption, when the case says the guard holds.
func TestACompletionCaseCarriesTheDisruptionAndLossCountsToTheModule(t *testing.T) {
	e, faults, _ := newTestEngine(t, Options{})
	m := loadBuiltin(t, e, "quorum")
	file := `{"cases": [
	  {"name": "two replacements lost", "input": {"completion": {
	    "deployment": {"id": "d1", "job_id": "web", "job_version": 2, "status": "running", "task_groups": {"web": {"desired_total": 3}}},
	    "groups": {"web": {"placed": 3, "healthy": 3, "lost_in_flight": 2, "lost": 1, "disconnected": 1, "complete": true}},
	    "now": "2026-12-01T10:00:00Z", "params": {"max_lost_in_flight": "1"}}},
	   "want": {"decision": "fail", "reason_contains": ["lost in flight"]}},
	  {"name": "the same during a disruption", "input": {"completion": {
	    "deployment": {"id": "d1", "job_id": "web", "job_version": 2, "status": "running", "task_groups": {"web": {"desired_total": 3}}},
	    "groups": {"web": {"placed": 3, "healthy": 3, "lost_in_flight": 2, "lost": 1, "disconnected": 1, "complete": true}},
	    "disruption": "3 of 5 nodes expired within 30s",
	    "now": "2026-12-01T10:00:00Z", "params": {"max_lost_in_flight": "1"}}},
	   "want": {"decision": "continue", "reason_contains": ["3 of 5 nodes expired"]}}
	]}`
	var cf CaseFile
	if err := DecodeStrict([]byte(file), &cf); err != nil {
		t.Fatal(err)
	}
	for _, c := range cf.Cases {
		out, err := m.Eval(context.Background(), c.Input)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if d := c.Want.Check(out); len(d) > 0 {
			t.Errorf("%s: %q (reason %q)", c.Name, d, out.Reason)
		}
	}
	if f := faults.all(); len(f) != 0 {
		t.Fatalf("faults: %v", f)
	}
}
