package rules

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/sdk/policy"
)

func nodes(n int, dc func(i int) string, meta func(i int) map[string]string) []policy.Node {
	out := make([]policy.Node, n)
	for i := range out {
		var m map[string]string
		if meta != nil {
			m = meta(i)
		}
		out[i] = policy.NewNode(fmt.Sprintf("n%02d", i), "", dc(i), "default", "", nil, m)
	}
	return out
}

func ids(ns ...int) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = fmt.Sprintf("n%02d", n)
	}
	return out
}

func dcOf(i int) string { return []string{"dc-a", "dc-b", "dc-c"}[i%3] }

// TestCanaryRules is the table of the built-in canary policies.
func TestCanaryRules(t *testing.T) {
	everyThird := func(i int) map[string]string {
		if i%3 == 2 {
			return map[string]string{"canary": "true"}
		}
		return map[string]string{"canary": "false"}
	}
	cases := []struct {
		name string
		fn   func(policy.CanaryInput) (policy.CanaryOutput, error)
		in   policy.CanaryInput
		want []string
	}{
		{"percent takes the first nodes by ID", Percent, policy.CanaryInput{Count: 3, Nodes: nodes(10, dcOf, nil)}, ids(0, 1, 2)},
		{"percent takes what there is", Percent, policy.CanaryInput{Count: 5, Nodes: nodes(2, dcOf, nil)}, ids(0, 1)},
		{"percent zero", Percent, policy.CanaryInput{Count: 0, Nodes: nodes(2, dcOf, nil)}, ids()},
		{"spread round-robins datacenters", Spread, policy.CanaryInput{Count: 4, Nodes: nodes(9, dcOf, nil)}, ids(0, 1, 2, 3)},
		{"spread on a skewed fleet", Spread, policy.CanaryInput{Count: 3, Nodes: nodes(6, func(i int) string {
			if i < 4 {
				return "dc-a"
			}
			return "dc-b"
		}, nil)}, ids(0, 4, 1)},
		{"spread on a Nomad interpolation", Spread, policy.CanaryInput{Count: 2, Params: map[string]string{"attribute": "${meta.canary}"}, Nodes: nodes(6, dcOf, everyThird)}, ids(0, 2)},
		{"spread on a meta key", Spread, policy.CanaryInput{Count: 2, Params: map[string]string{"attribute": "meta.canary"}, Nodes: nodes(6, dcOf, everyThird)}, ids(0, 2)},
		{"labelled takes marked nodes first", Labelled, policy.CanaryInput{Count: 3, Nodes: nodes(9, dcOf, everyThird)}, ids(2, 5, 8)},
		{"labelled tops up with unmarked nodes", Labelled, policy.CanaryInput{Count: 4, Nodes: nodes(9, dcOf, everyThird)}, ids(2, 5, 8, 0)},
		{"labelled strict does not top up", Labelled, policy.CanaryInput{Count: 4, Params: map[string]string{"strict": "true"}, Nodes: nodes(9, dcOf, everyThird)}, ids(2, 5, 8)},
		{"labelled on another key and value", Labelled, policy.CanaryInput{Count: 1, Params: map[string]string{"key": "canary", "value": "false"}, Nodes: nodes(9, dcOf, everyThird)}, ids(0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.fn(tc.in)
			if err != nil || !slices.Equal(got.NodeIDs, tc.want) {
				t.Fatalf("got %v (%q), %v; want %v", got.NodeIDs, got.Reason, err, tc.want)
			}
			if got.Reason == "" {
				t.Error("no reason")
			}
			if len(got.NodeIDs) < tc.in.Count && !strings.Contains(got.Reason, "only") {
				t.Errorf("fewer than asked must say so: %q", got.Reason)
			}
		})
	}
}

// TestRendezvousMovesFewCanariesWhenTheFleetChanges: removing one
// non-canary node and adding two changes no canary; removing a canary
// replaces only that one. The control (Percent) does move canaries when a
// node sorting first joins.
func TestRendezvousMovesFewCanariesWhenTheFleetChanges(t *testing.T) {
	base := nodes(40, dcOf, nil)
	in := policy.CanaryInput{DeploymentID: "d-1", Count: 5, Nodes: base}
	first, _ := Rendezvous(in)
	chosen := map[string]bool{}
	for _, id := range first.NodeIDs {
		chosen[id] = true
	}
	var changed []policy.Node
	removedCanary := ""
	for _, n := range base {
		if chosen[n.ID] && removedCanary == "" {
			removedCanary = n.ID
			continue
		}
		changed = append(changed, n)
	}
	changed = append(changed, policy.NewNode("zz-new-1", "", "dc-a", "", "", nil, nil), policy.NewNode("zz-new-2", "", "dc-b", "", "", nil, nil))
	second, _ := Rendezvous(policy.CanaryInput{DeploymentID: "d-1", Count: 5, Nodes: changed})
	kept := 0
	for _, id := range second.NodeIDs {
		if chosen[id] {
			kept++
		}
	}
	if kept != 4 {
		t.Fatalf("rendezvous kept %d of 5 canaries after one canary left; want 4 (first %v, second %v)", kept, first.NodeIDs, second.NodeIDs)
	}
	other, _ := Rendezvous(policy.CanaryInput{DeploymentID: "d-2", Count: 5, Nodes: base})
	if slices.Equal(other.NodeIDs, first.NodeIDs) {
		t.Fatal("another deployment chose the same canaries: the hash ignores the deployment")
	}
	// Control: percent moves when a node sorting first joins.
	p1, _ := Percent(in)
	p2, _ := Percent(policy.CanaryInput{Count: 5, Nodes: append([]policy.Node{policy.NewNode("a-first", "", "", "", "", nil, nil)}, base...)})
	if slices.Equal(p1.NodeIDs, p2.NodeIDs) {
		t.Fatal("control: percent should have moved")
	}
}

func group(name string, mut func(g *policy.Group)) policy.Group {
	g := policy.Group{Name: name, DesiredTotal: 10, Placed: 10, Healthy: 10, Complete: true}
	if mut != nil {
		mut(&g)
	}
	return g
}

// TestCompletionRules is the table of the built-in completion policies.
func TestCompletionRules(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	in := func(params map[string]string, gs ...policy.Group) policy.CompletionInput {
		return policy.CompletionInput{Status: "running", Now: now, Params: params, Groups: gs}
	}
	cases := []struct {
		name   string
		fn     func(policy.CompletionInput) (policy.CompletionOutput, error)
		in     policy.CompletionInput
		want   policy.Decision
		revert bool
	}{
		{"all complete and healthy succeeds", CompletionDefault, in(nil, group("a", nil), group("b", nil)), policy.Succeed, false},
		{"one incomplete group continues", CompletionDefault, in(nil, group("a", nil), group("b", func(g *policy.Group) { g.Complete = false })), policy.Continue, false},
		{"complete but short of healthy continues", CompletionDefault, in(nil, group("a", func(g *policy.Group) { g.Healthy = 9 })), policy.Continue, false},
		{"an unhealthy allocation fails", CompletionDefault, in(nil, group("a", func(g *policy.Group) { g.Unhealthy = 1 })), policy.Fail, false},
		{"fail reverts with auto_revert", CompletionDefault, in(nil, group("a", func(g *policy.Group) { g.Unhealthy = 1; g.AutoRevert = true })), policy.Fail, true},
		{"a passed deadline fails", CompletionDefault, in(nil, group("a", func(g *policy.Group) { g.Complete = false; g.RequireProgressBy = now.Add(-time.Second) })), policy.Fail, false},
		{"a future deadline continues", CompletionDefault, in(nil, group("a", func(g *policy.Group) { g.Complete = false; g.RequireProgressBy = now.Add(time.Second) })), policy.Continue, false},
		{"a done group ignores its deadline", CompletionDefault, in(nil, group("a", func(g *policy.Group) { g.RequireProgressBy = now.Add(-time.Second) })), policy.Succeed, false},
		{"healthy canaries with auto_promote promote", CompletionDefault, in(nil, group("a", func(g *policy.Group) { g.DesiredCanaries = 2; g.CanariesHealthy = 2; g.AutoPromote = true })), policy.Promote, false},
		{"healthy canaries without auto_promote wait", CompletionDefault, in(nil, group("a", func(g *policy.Group) { g.DesiredCanaries = 2; g.CanariesHealthy = 2 })), policy.Continue, false},
		{"unhealthy canaries wait", CompletionDefault, in(nil, group("a", func(g *policy.Group) { g.DesiredCanaries = 2; g.CanariesHealthy = 1; g.AutoPromote = true })), policy.Continue, false},
		{"promoted groups do not canary", CompletionDefault, in(nil, group("a", func(g *policy.Group) { g.DesiredCanaries = 2; g.Promoted = true })), policy.Succeed, false},
		{"paused continues", CompletionDefault, policy.CompletionInput{Status: "paused", Groups: []policy.Group{group("a", nil)}}, policy.Continue, false},
		{"quorum succeeds at its fraction", Quorum, in(map[string]string{"healthy_fraction": "0.8"}, group("a", func(g *policy.Group) { g.Healthy = 8; g.Complete = false })), policy.Succeed, false},
		{"quorum takes ratio as an alias", Quorum, in(map[string]string{"ratio": "0.8"}, group("a", func(g *policy.Group) { g.Healthy = 8; g.Complete = false })), policy.Succeed, false},
		{"quorum below its fraction continues", Quorum, in(map[string]string{"healthy_fraction": "0.8"}, group("a", func(g *policy.Group) { g.Healthy = 7; g.Complete = false })), policy.Continue, false},
		{"quorum tolerates max_unhealthy", Quorum, in(map[string]string{"healthy_fraction": "0.8", "max_unhealthy": "2"}, group("a", func(g *policy.Group) { g.Healthy = 8; g.Unhealthy = 2 })), policy.Succeed, false},
		{"quorum fails past max_unhealthy", Quorum, in(map[string]string{"max_unhealthy": "2"}, group("a", func(g *policy.Group) { g.Unhealthy = 3; g.AutoRevert = true })), policy.Fail, true},
		{"quorum ignores lost replacements without max_lost_in_flight", Quorum, in(nil, group("a", func(g *policy.Group) { g.LostInFlight = 5 })), policy.Succeed, false},
		{"quorum tolerates max_lost_in_flight", Quorum, in(map[string]string{"max_lost_in_flight": "2"}, group("a", func(g *policy.Group) { g.LostInFlight = 2 })), policy.Succeed, false},
		{"quorum fails past max_lost_in_flight", Quorum, in(map[string]string{"max_lost_in_flight": "2"}, group("a", func(g *policy.Group) { g.LostInFlight = 3; g.AutoRevert = true })), policy.Fail, true},
		{"default ignores lost replacements", CompletionDefault, in(nil, group("a", func(g *policy.Group) { g.LostInFlight = 3; g.Lost = 2; g.Disconnected = 1 })), policy.Succeed, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.fn(tc.in)
			if err != nil || got.Decision != tc.want || got.Revert != tc.revert || got.Reason == "" {
				t.Fatalf("got %+v, %v; want %s revert=%v with a reason", got, err, tc.want, tc.revert)
			}
		})
	}
	if _, err := Quorum(in(map[string]string{"healthy_fraction": "1.5"}, group("a", nil))); err == nil {
		t.Error("quorum accepted healthy_fraction 1.5")
	}
	for _, v := range []string{"-1", "two", ""} {
		if _, err := Quorum(in(map[string]string{"max_lost_in_flight": v}, group("a", nil))); err == nil {
			t.Errorf("quorum accepted max_lost_in_flight %q", v)
		}
	}
}

// TestCompletionRulesContinueWhileTheDisruptionGuardHolds: with the guard
// holding, neither rule fails a group with unhealthy allocations or lost
// replacements, nor succeeds a complete one, and the reason names the
// disruption. Control: the same inputs without the disruption fail, then
// succeed.
func TestCompletionRulesContinueWhileTheDisruptionGuardHolds(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	strict := map[string]string{"max_lost_in_flight": "0"}
	for _, tc := range []struct {
		name string
		fn   func(policy.CompletionInput) (policy.CompletionOutput, error)
		g    policy.Group
		want policy.Decision
	}{
		{"default, unhealthy", CompletionDefault, group("a", func(g *policy.Group) { g.Unhealthy = 1 }), policy.Fail},
		{"default, complete", CompletionDefault, group("a", nil), policy.Succeed},
		{"quorum, lost in flight", Quorum, group("a", func(g *policy.Group) { g.LostInFlight = 1 }), policy.Fail},
		{"quorum, complete", Quorum, group("a", nil), policy.Succeed},
	} {
		in := policy.CompletionInput{Status: "running", Now: now, Params: strict, Groups: []policy.Group{tc.g}}
		if got, err := tc.fn(in); err != nil || got.Decision != tc.want {
			t.Fatalf("%s, control without disruption: %+v, %v; want %s", tc.name, got, err, tc.want)
		}
		in.Disruption = "4 of 6 nodes expired within 30s"
		got, err := tc.fn(in)
		if err != nil || got.Decision != policy.Continue || !strings.Contains(got.Reason, "4 of 6 nodes expired") {
			t.Fatalf("%s, during the disruption: %+v, %v; want continue naming it", tc.name, got, err)
		}
	}
}

// TestRendezvousScoreIsFNV1a: the inlined hash equals hash/fnv's FNV-1a 64
// of deployment, a zero byte and node (the documented score).
func TestRendezvousScoreIsFNV1a(t *testing.T) {
	for _, tc := range [][2]string{{"d-1", "n01"}, {"", ""}, {"deployment-x", "node-with-a-long-id-0123456789"}} {
		h := fnv.New64a()
		h.Write([]byte(tc[0] + "\x00" + tc[1]))
		if got := rendezvousScore(tc[0], tc[1]); got != h.Sum64() {
			t.Errorf("%q %q: %x, want %x", tc[0], tc[1], got, h.Sum64())
		}
	}
}
