// Package rules holds the logic of hivelet's built-in policies, written
// against the public SDK (sdk/policy) exactly as a third-party author would
// write it. Each built-in module under policies/builtin/<name> is a two-line
// main package registering one of these functions; the same functions run
// natively in this package's tests and in the benchmarks' "same logic,
// native" comparison.
//
// Invariants: every function is a deterministic function of its input; none
// returns more node IDs than asked, a duplicate, or an ID that is not an
// eligible node; fewer than asked always comes with a reason. The table
// tests in rules_test.go enforce these on every canary rule.
//
// The ABI the modules speak is docs/policy-abi.md; the cases their tests run,
// docs/policy-cases.md.
package rules

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/hivelet/hivelet/sdk/policy"
)

// sortedNodes returns the nodes in ID order (the agent sends them sorted;
// a copy is sorted only when they are not).
func sortedNodes(nodes []policy.Node) []policy.Node {
	if slices.IsSortedFunc(nodes, func(a, b policy.Node) int { return strings.Compare(a.ID, b.ID) }) {
		return nodes
	}
	c := slices.Clone(nodes)
	slices.SortFunc(c, func(a, b policy.Node) int { return strings.Compare(a.ID, b.ID) })
	return c
}

func fewer(got, want int, what string) string {
	if got < want {
		return "only " + strconv.Itoa(got) + " " + what + " for " + strconv.Itoa(want) + " canaries"
	}
	return ""
}

// Percent is the spec's default canary choice: the first Count eligible
// nodes in node ID order.
func Percent(in policy.CanaryInput) (policy.CanaryOutput, error) {
	nodes := sortedNodes(in.Nodes)
	n := min(in.Count, len(nodes))
	ids := make([]string, n)
	for i := range n {
		ids[i] = nodes[i].ID
	}
	reason := fewer(n, in.Count, "eligible nodes")
	if reason == "" {
		reason = "first " + strconv.Itoa(n) + " eligible nodes by node ID"
	}
	return policy.CanaryOutput{NodeIDs: ids, Reason: reason}, nil
}

// SpreadReads is what Spread declares: the field named by its "attribute"
// parameter (default "datacenter").
var SpreadReads = []policy.Read{policy.FieldFromParam("attribute", "datacenter")}

// Spread spreads the canaries across the values of a node field (parameter
// "attribute": "datacenter", "node_pool", "class", "attr.<key>" or
// "meta.<key>"; default "datacenter"): round robin over the values in
// sorted order, nodes in ID order within a value. Nodes without the field
// share the empty value.
func Spread(in policy.CanaryInput) (policy.CanaryOutput, error) {
	field := policy.Param(in.Params, "attribute", "datacenter")
	nodes := sortedNodes(in.Nodes)
	in.Nodes = nodes
	get := in.FieldGetter(field)
	// Group node indices by value: one map lookup per node, groups in
	// first-seen order, then ordered by value.
	index := map[string]int{}
	var values []string
	var groups [][]int32
	for i := range nodes {
		v, _ := get(&nodes[i])
		g, ok := index[v]
		if !ok {
			g = len(values)
			index[v] = g
			values = append(values, v)
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], int32(i))
	}
	order := make([]int, len(values))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(values[a], values[b]) })
	want := min(in.Count, len(nodes))
	ids := make([]string, 0, want)
	for round := 0; len(ids) < want; round++ {
		for _, g := range order {
			if round < len(groups[g]) && len(ids) < want {
				ids = append(ids, nodes[groups[g][round]].ID)
			}
		}
	}
	reason := fewer(len(ids), in.Count, "eligible nodes")
	if reason == "" {
		reason = "spread across " + strconv.Itoa(len(values)) + " values of " + field
	}
	return policy.CanaryOutput{NodeIDs: ids, Reason: reason}, nil
}

// rendezvousScore is the node's weight for a deployment (highest random
// weight hashing): FNV-1a 64 of deployment ID, a zero byte and node ID.
func rendezvousScore(deployment, node string) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037) // FNV-1a 64 offset basis
	for i := 0; i < len(deployment); i++ {
		h = (h ^ uint64(deployment[i])) * prime
	}
	h *= prime // the zero byte separator: h ^ 0 == h
	for i := 0; i < len(node); i++ {
		h = (h ^ uint64(node[i])) * prime
	}
	return h
}

// Rendezvous chooses the Count nodes with the highest rendezvous hash of
// (deployment ID, node ID). Because a node's score does not depend on the
// other nodes, re-choosing after nodes join or leave moves the fewest
// canaries.
func Rendezvous(in policy.CanaryInput) (policy.CanaryOutput, error) {
	type scored struct {
		id    string
		score uint64
	}
	s := make([]scored, len(in.Nodes))
	for i := range in.Nodes {
		s[i] = scored{in.Nodes[i].ID, rendezvousScore(in.DeploymentID, in.Nodes[i].ID)}
	}
	slices.SortFunc(s, func(a, b scored) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.id, b.id)
	})
	n := min(in.Count, len(s))
	ids := make([]string, n)
	for i := range n {
		ids[i] = s[i].id
	}
	reason := fewer(n, in.Count, "eligible nodes")
	if reason == "" {
		reason = "highest rendezvous hash on deployment " + in.DeploymentID
	}
	return policy.CanaryOutput{NodeIDs: ids, Reason: reason}, nil
}

// LabelledReads is what Labelled declares: the meta key named by its "key"
// parameter (default "canary").
var LabelledReads = []policy.Read{policy.MetaFromParam("key", "canary")}

// Labelled takes first the nodes whose meta key (parameter "key", default
// "canary") equals "value" (default "true"), then, unless "strict" is
// "true", the other nodes; each part in node ID order.
func Labelled(in policy.CanaryInput) (policy.CanaryOutput, error) {
	key := policy.Param(in.Params, "key", "canary")
	value := policy.Param(in.Params, "value", "true")
	strict := policy.Param(in.Params, "strict", "false") == "true"
	nodes := sortedNodes(in.Nodes)
	ids := make([]string, 0, min(in.Count, len(nodes)))
	for i := range nodes {
		if v, ok := nodes[i].Meta(key); ok && v == value && len(ids) < in.Count {
			ids = append(ids, nodes[i].ID)
		}
	}
	labelled := len(ids)
	if !strict {
		for i := range nodes {
			if v, ok := nodes[i].Meta(key); (!ok || v != value) && len(ids) < in.Count {
				ids = append(ids, nodes[i].ID)
			}
		}
	}
	reason := fewer(len(ids), in.Count, "eligible nodes with meta "+key+"="+value)
	if reason == "" {
		reason = strconv.Itoa(labelled) + " labelled by meta " + key + "=" + value + ", " + strconv.Itoa(len(ids)-labelled) + " unlabelled"
	}
	return policy.CanaryOutput{NodeIDs: ids, Reason: reason}, nil
}

// The spec's deployment status descriptions (host/model), repeated here
// because a policy imports nothing from the daemon.
const (
	descSuccessful        = "Deployment completed successfully"
	descFailedAllocations = "Failed due to unhealthy allocations"
	descProgressDeadline  = "Failed due to progress deadline"
	descNeedsPromotion    = "Deployment is running but requires manual promotion"
	descRunning           = "Deployment is running"
)

// descLostInFlight is quorum's own failure description: replacements whose
// node was lost in the middle of them.
const descLostInFlight = "Failed due to replacements lost in flight"

// groupDone reports whether a group has nothing left to do under a
// healthy-count threshold.
type groupDone func(g *policy.Group) bool

// groupFailed returns why a group fails the deployment, or "" when it does
// not.
type groupFailed func(g *policy.Group) string

// decide is the shared skeleton of the completion rules: no verdict while
// the deployment is not running or the disruption guard holds, then the
// failure checks, the progress deadline, canary promotion, then success.
func decide(in policy.CompletionInput, failed groupFailed, done groupDone) policy.CompletionOutput {
	if in.Status != "running" {
		return policy.CompletionOutput{Decision: policy.Continue, Reason: "deployment is " + in.Status}
	}
	if in.Disruption != "" {
		// The counts describe the nodes still alive, not the rollout.
		return policy.CompletionOutput{Decision: policy.Continue, Reason: "disruption guard holds: " + in.Disruption}
	}
	if len(in.Groups) == 0 {
		return policy.CompletionOutput{Decision: policy.Continue, Reason: "deployment has no groups"}
	}
	groups := in.Groups
	if !slices.IsSortedFunc(groups, func(a, b policy.Group) int { return strings.Compare(a.Name, b.Name) }) {
		groups = slices.Clone(groups)
		slices.SortFunc(groups, func(a, b policy.Group) int { return strings.Compare(a.Name, b.Name) })
	}
	// failures holds each failure reason with its groups, in the order the
	// reasons first occur.
	var failures []failure
	var lateGroups []string
	revert := false
	for i := range groups {
		g := &groups[i]
		if why := failed(g); why != "" {
			failures = addFailure(failures, why, g.Name)
		} else if !g.RequireProgressBy.IsZero() && g.RequireProgressBy.Before(in.Now) && !done(g) && !canariesReady(g) {
			lateGroups = append(lateGroups, g.Name)
		} else {
			continue
		}
		revert = revert || g.AutoRevert
	}
	if len(failures) > 0 {
		parts := make([]string, len(failures))
		for i, f := range failures {
			parts[i] = f.reason + " (groups " + strings.Join(f.groups, ", ") + ")"
		}
		return policy.CompletionOutput{Decision: policy.Fail, Revert: revert, Reason: strings.Join(parts, "; ")}
	}
	if len(lateGroups) > 0 {
		return policy.CompletionOutput{Decision: policy.Fail, Revert: revert, Reason: descProgressDeadline + " (groups " + strings.Join(lateGroups, ", ") + ")"}
	}
	canarying, ready, auto := 0, 0, 0
	for i := range groups {
		g := &groups[i]
		if g.DesiredCanaries > 0 && !g.Promoted {
			canarying++
			if g.CanariesHealthy >= g.DesiredCanaries {
				ready++
			}
			if g.AutoPromote {
				auto++
			}
		}
	}
	if canarying > 0 {
		switch {
		case ready < canarying:
			return policy.CompletionOutput{Decision: policy.Continue, Reason: "waiting for healthy canaries"}
		case auto == canarying:
			return policy.CompletionOutput{Decision: policy.Promote, Reason: "every canary is healthy: promoting automatically"}
		default:
			return policy.CompletionOutput{Decision: policy.Continue, Reason: descNeedsPromotion}
		}
	}
	for i := range groups {
		if !done(&groups[i]) {
			return policy.CompletionOutput{Decision: policy.Continue, Reason: descRunning}
		}
	}
	return policy.CompletionOutput{Decision: policy.Succeed, Reason: descSuccessful}
}

// failure is one reason a deployment fails and the groups failing for it.
type failure struct {
	reason string
	groups []string
}

func addFailure(fs []failure, reason, group string) []failure {
	for i := range fs {
		if fs[i].reason == reason {
			fs[i].groups = append(fs[i].groups, group)
			return fs
		}
	}
	return append(fs, failure{reason: reason, groups: []string{group}})
}

// canariesReady reports whether a group waits only for its promotion, every
// canary healthy: the progress deadline does not fail it (a manual
// promotion waits for the operator; an automatic one is decided below).
func canariesReady(g *policy.Group) bool {
	return g.DesiredCanaries > 0 && !g.Promoted && g.CanariesHealthy >= g.DesiredCanaries
}

// CompletionDefault is the spec's completion rule, the WASM twin of the
// agent's native default (reconcile.DecideDefault): no verdict while the
// deployment is not running or the disruption guard holds; fail on an
// unhealthy allocation or a passed progress deadline (reverting when the
// failing group has auto_revert), promote when every canary is healthy and
// every canarying group has auto_promote, succeed when every group is
// complete with its desired healthy total, else continue.
func CompletionDefault(in policy.CompletionInput) (policy.CompletionOutput, error) {
	return decide(in,
		func(g *policy.Group) string {
			if g.Unhealthy > 0 {
				return descFailedAllocations
			}
			return ""
		},
		func(g *policy.Group) bool { return g.Complete && g.Healthy >= g.DesiredTotal },
	), nil
}

// Quorum is CompletionDefault with three tolerances: a group succeeds once
// ceil(healthy_fraction × desired_total) allocations are healthy (parameter
// "healthy_fraction", or its alias "ratio", 0 < f <= 1, default 1); it
// fails only when more than "max_unhealthy" (default 0) of its allocations
// are unhealthy; and, when "max_lost_in_flight" is set, it also fails when
// more than that many of its replacements were lost in flight (their node
// went away mid-update: Group.LostInFlight). Unset, lost replacements never
// fail the deployment, as with the default. While the disruption guard
// holds, quorum continues like the default: mass node loss is the guard's
// business, not a verdict on the new version.
func Quorum(in policy.CompletionInput) (policy.CompletionOutput, error) {
	frac, err := strconv.ParseFloat(policy.Param(in.Params, "healthy_fraction", policy.Param(in.Params, "ratio", "1")), 64)
	if err != nil || !(frac > 0 && frac <= 1) {
		return policy.CompletionOutput{}, errors.New("healthy_fraction must be a number in (0, 1]")
	}
	maxUnhealthy, err := strconv.Atoi(policy.Param(in.Params, "max_unhealthy", "0"))
	if err != nil || maxUnhealthy < 0 {
		return policy.CompletionOutput{}, errors.New("max_unhealthy must be a non-negative integer")
	}
	maxLost := -1 // no limit
	if v, ok := in.Params["max_lost_in_flight"]; ok {
		if maxLost, err = strconv.Atoi(v); err != nil || maxLost < 0 {
			return policy.CompletionOutput{}, errors.New("max_lost_in_flight must be a non-negative integer")
		}
	}
	unhealthy := descFailedAllocations + " (more than " + strconv.Itoa(maxUnhealthy) + ")"
	lost := descLostInFlight + " (more than " + strconv.Itoa(maxLost) + ")"
	return decide(in,
		func(g *policy.Group) string {
			switch {
			case g.Unhealthy > maxUnhealthy:
				return unhealthy
			case maxLost >= 0 && g.LostInFlight > maxLost:
				return lost
			}
			return ""
		},
		func(g *policy.Group) bool {
			return g.Healthy >= int(math.Ceil(frac*float64(g.DesiredTotal)-1e-9))
		},
	), nil
}
