package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// planEntry is one entry of a plan's buckets, as `hivelet reconcile` prints
// it.
type planEntry struct {
	NodeID string `json:"node_id"`
	Rule   string `json:"rule"`
	Canary bool   `json:"canary"`
	Reason string `json:"reason"`
}

// claimPlan is the part of a plan the claims read.
type claimPlan struct {
	Buckets           map[string][]planEntry
	DeploymentCreated bool `json:"deployment_created"`
	Deployment        *struct {
		Status     string `json:"status"`
		TaskGroups map[string]struct {
			CanaryNodes []string `json:"canary_nodes"`
		} `json:"task_groups"`
	} `json:"deployment"`
	Updates []struct {
		Status      string `json:"status"`
		Description string `json:"status_description"`
	} `json:"deployment_updates"`
	Groups []struct {
		Name        string `json:"name"`
		MaxParallel int    `json:"max_parallel"`
		UpdatesHeld string `json:"updates_held"`
		Complete    bool   `json:"complete"`
	} `json:"groups"`
}

var planBuckets = []string{"place", "update", "migrate", "stop", "ignore", "lost", "disconnecting", "reconnecting", "awaiting_promotion"}

// in is an expected bucket entry: "bucket node rule", with " canary" at the
// end for a canary entry.
type in string

// fixtureClaim is the plan's facts that make true the sentence a fixture of
// examples/reconcile says it must show (its "comment"). Every entry
// of every bucket must be listed (so a plan that adds, drops or moves an
// entry fails), and check reads the deployment side.
type fixtureClaim struct {
	entries []in
	check   func(p *claimPlan) error
}

func wantUpdate(status, descPart string) func(p *claimPlan) error {
	return func(p *claimPlan) error {
		for _, u := range p.Updates {
			if u.Status == status && strings.Contains(u.Description, descPart) {
				return nil
			}
		}
		return fmt.Errorf("no deployment update to %s saying %q: %+v", status, descPart, p.Updates)
	}
}

var fixtureClaims = map[string]fixtureClaim{
	"first-placement": {
		entries: []in{"place node-a name.3", "place node-b name.3", "place node-c name.3"},
		check: func(p *claimPlan) error {
			if !p.DeploymentCreated || p.Deployment == nil || p.Deployment.Status != "running" {
				return fmt.Errorf("deployment created %v: %+v", p.DeploymentCreated, p.Deployment)
			}
			return nil
		},
	},
	"rolling-update": {
		entries: []in{"update node-a alloc.13", "update node-b alloc.13", "update node-c alloc.13", "update node-d alloc.13"},
		check: func(p *claimPlan) error {
			if !p.DeploymentCreated || len(p.Groups) != 1 || p.Groups[0].MaxParallel != 2 {
				return fmt.Errorf("deployment created %v, groups %+v", p.DeploymentCreated, p.Groups)
			}
			return nil
		},
	},
	"canaries-first-round": {
		entries: []in{"update node-a alloc.12 canary", "update node-b alloc.12 canary",
			"awaiting_promotion node-c alloc.12", "awaiting_promotion node-d alloc.12"},
		check: func(p *claimPlan) error {
			if !p.DeploymentCreated || p.Deployment == nil || !slices.Equal(p.Deployment.TaskGroups["web"].CanaryNodes, []string{"node-a", "node-b"}) {
				return fmt.Errorf("deployment created %v, %+v", p.DeploymentCreated, p.Deployment)
			}
			return nil
		},
	},
	"canaries-awaiting-promotion": {
		entries: []in{"ignore node-a alloc.14 canary",
			"awaiting_promotion node-b alloc.12", "awaiting_promotion node-c alloc.12", "awaiting_promotion node-d alloc.12"},
		check: wantUpdate("running", "manual promotion"),
	},
	"canaries-single-node": {
		entries: []in{"awaiting_promotion node-c alloc.12"},
		check:   wantUpdate("running", "manual promotion"),
	},
	"node-down-lost": {
		entries: []in{"lost node-b alloc.8", "lost node-c alloc.8", "migrate node-e alloc.2",
			"ignore node-d alloc.9", "ignore node-a alloc.14"},
	},
	"node-not-ready": {
		entries: []in{"ignore node-b alloc.10", "stop node-c alloc.11", "ignore node-a alloc.14"},
	},
	"disconnected-client": {
		entries: []in{"disconnecting node-c alloc.7", "ignore node-d alloc.4", "lost node-e alloc.3",
			"reconnecting node-b alloc.5", "ignore node-a alloc.14"},
	},
	"sysbatch": {
		entries: []in{"update node-a name.1", "ignore node-b name.1", "place node-c name.3", "ignore node-d alloc.6"},
	},
	"job-stopped": {
		entries: []in{"stop node-a alloc.1", "stop node-b alloc.1"},
		check:   wantUpdate("cancelled", "job is stopped"),
	},
	"deployment-complete": {
		entries: []in{"ignore node-a alloc.14", "ignore node-b alloc.14"},
		check:   wantUpdate("successful", "completed"),
	},
	"paused-deployment": {
		entries: []in{"place node-c name.3", "ignore node-b alloc.13", "ignore node-a alloc.14"},
		check: func(p *claimPlan) error {
			if len(p.Groups) != 1 || !strings.Contains(p.Groups[0].UpdatesHeld, "paused") {
				return fmt.Errorf("groups %+v: want the update held because the deployment is paused", p.Groups)
			}
			return nil
		},
	},
}

// TestEveryReconcileFixtureShowsWhatItClaims checks the sentence each
// fixture says it must show (its "comment", one sentence) on the plan
// `hivelet reconcile` prints for it, independently of the golden plan bytes
// (which `-update` rewrites): each bucket holds exactly the entries the
// claim lists, and the deployment side says what the sentence says. A
// fixture without a sentence or without a claim fails.
func TestEveryReconcileFixtureShowsWhatItClaims(t *testing.T) {
	fixtures, err := filepath.Glob(filepath.Join(examplesDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, fx := range fixtures {
		if strings.HasSuffix(fx, ".plan.json") {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(fx), ".json")
		claim, ok := fixtureClaims[name]
		if !ok {
			t.Errorf("examples/reconcile/%s.json has no claim: add what it shows to fixtureClaims", name)
			continue
		}
		seen++
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(fx)
			if err != nil {
				t.Fatal(err)
			}
			var head struct{ Comment string }
			if err := json.Unmarshal(data, &head); err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(head.Comment, ".") || strings.Count(head.Comment, ". ") > 0 {
				t.Fatalf("examples/reconcile/%s.json: its comment %q is not one sentence saying what it must show", name, head.Comment)
			}
			code, out := runPluginCLI("reconcile", "-f", fx)
			if code != 0 {
				t.Fatalf("reconcile: exit %d: %s", code, out)
			}
			p, err := decodeClaimPlan([]byte(out))
			if err != nil {
				t.Fatal(err)
			}
			for _, problem := range claim.problems(p) {
				t.Errorf("it should show: %s\n%s", head.Comment, problem)
			}
		})
	}
	if seen != len(fixtureClaims) {
		t.Errorf("%d claims for %d fixtures: a claim names a fixture that is gone", len(fixtureClaims), seen)
	}
}

// problems lists how the plan fails the claim (none: it holds).
func (c fixtureClaim) problems(p *claimPlan) []string {
	var got []string
	for _, b := range planBuckets {
		for _, e := range p.Buckets[b] {
			s := b + " " + e.NodeID + " " + e.Rule
			if e.Canary {
				s += " canary"
			}
			got = append(got, s)
		}
	}
	want := make([]string, len(c.entries))
	for i, e := range c.entries {
		want[i] = string(e)
	}
	slices.Sort(got)
	slices.Sort(want)
	var out []string
	if !slices.Equal(got, want) {
		out = append(out, fmt.Sprintf("the plan's entries are %q, the claim's %q", got, want))
	}
	if c.check != nil {
		if err := c.check(p); err != nil {
			out = append(out, err.Error())
		}
	}
	return out
}

func decodeClaimPlan(b []byte) (*claimPlan, error) {
	var p claimPlan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("decoding the plan: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	p.Buckets = map[string][]planEntry{}
	for _, name := range planBuckets {
		var es []planEntry
		if r, ok := raw[name]; ok {
			if err := json.Unmarshal(r, &es); err != nil {
				return nil, fmt.Errorf("decoding bucket %s: %w", name, err)
			}
		}
		p.Buckets[name] = es
	}
	return &p, nil
}

// TestTheClaimCheckSeesAMovedEntry is the control: the claims' check fails
// a plan with one entry moved to another bucket and a plan whose
// deployment says something else, so the claims cannot pass on a check
// that reads nothing.
func TestTheClaimCheckSeesAMovedEntry(t *testing.T) {
	code, out := runPluginCLI("reconcile", "-f", filepath.Join(examplesDir, "job-stopped.json"))
	if code != 0 {
		t.Fatalf("reconcile: exit %d: %s", code, out)
	}
	p, err := decodeClaimPlan([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	claim := fixtureClaims["job-stopped"]
	if got := claim.problems(p); len(got) != 0 {
		t.Fatalf("control: the real plan fails its claim: %q", got)
	}
	moved := *p
	moved.Buckets = map[string][]planEntry{"stop": p.Buckets["stop"][:1], "ignore": p.Buckets["stop"][1:]}
	if got := claim.problems(&moved); len(got) != 1 || !strings.Contains(got[0], "ignore node-b alloc.1") {
		t.Errorf("an entry moved from stop to ignore: %q", got)
	}
	other := *p
	other.Updates = nil
	if got := claim.problems(&other); len(got) != 1 || !strings.Contains(got[0], "cancelled") {
		t.Errorf("a plan without the cancellation: %q", got)
	}
}

// TestEveryRuleOfTheRulesPageIsShownByItsFixture reads the rule tables of
// docs/reconciler-rules.md and checks that each rule's fixture shows it: a
// claim of one of the fixtures the row names (claims the test above checks
// on the real plan) has an entry that rule put there. A rule whose outcome
// is "nothing" puts no entry anywhere, so its row must say so and no claim
// may show it. The control is the count of rows: the page has 17 rules.
func TestEveryRuleOfTheRulesPageIsShownByItsFixture(t *testing.T) {
	page, err := os.ReadFile("../../docs/reconciler-rules.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, line := range strings.Split(string(page), "\n") {
		if !strings.HasPrefix(line, "| `alloc.") && !strings.HasPrefix(line, "| `name.") {
			continue
		}
		cols := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cols) != 4 {
			t.Fatalf("a rule row without its four columns (rule, when, goes to, fixture): %s", line)
		}
		rows++
		rule := strings.Trim(cols[0], "`")
		var fixtures []string
		for i, part := range strings.Split(cols[3], "`") {
			if i%2 == 1 {
				fixtures = append(fixtures, part)
			}
		}
		if len(fixtures) == 0 {
			t.Errorf("rule %s names no fixture", rule)
			continue
		}
		shown := false
		for _, fx := range fixtures {
			claim, ok := fixtureClaims[fx]
			if !ok {
				t.Errorf("rule %s names fixture %s, which has no claim (or does not exist)", rule, fx)
				continue
			}
			for _, e := range claim.entries {
				if f := strings.Fields(string(e)); len(f) >= 3 && f[2] == rule {
					shown = true
				}
			}
		}
		nothing := strings.HasPrefix(cols[2], "nothing")
		switch {
		case nothing && shown:
			t.Errorf("rule %s says it goes to nothing, but %v shows an entry of it", rule, fixtures)
		case !nothing && !shown:
			t.Errorf("rule %s: none of its fixtures %v shows an entry of it", rule, fixtures)
		}
	}
	if rows != 17 {
		t.Fatalf("read %d rule rows from docs/reconciler-rules.md, want 17 (alloc.1-14, name.1-3)", rows)
	}
}
