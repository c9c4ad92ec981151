package reconcile

import (
	"context"
	"fmt"
	"slices"

	"github.com/hivelet/hivelet/host/model"
)

// DefaultCanaryChooser is the built-in canary policy: the first Count
// eligible nodes in node ID order. It is the fallback for every other
// chooser, so it never fails.
type DefaultCanaryChooser struct{}

// ChooseCanaries implements CanaryChooser.
func (DefaultCanaryChooser) ChooseCanaries(_ context.Context, req CanaryRequest) (CanaryChoice, error) {
	return DefaultCanaries(req), nil
}

// DefaultCanaries is the built-in canary choice, as a pure function.
func DefaultCanaries(req CanaryRequest) CanaryChoice {
	if slices.IsSortedFunc(req.Eligible, func(a, b *model.Node) int {
		if a.ID <= b.ID { // a follows b: a repeat counts as out of order
			return -1
		}
		return 1
	}) {
		return firstEligible(req)
	}
	ids := make([]string, 0, len(req.Eligible))
	for _, n := range req.Eligible {
		ids = append(ids, n.ID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if req.Count < len(ids) {
		ids = ids[:max(req.Count, 0)]
	}
	return CanaryChoice{NodeIDs: ids}
}

// firstEligible is DefaultCanaries for a request whose eligible nodes are
// sorted by ID, each listed once (the reconciler's requests): the first
// Count are the answer, with no copy of every ID to sort.
func firstEligible(req CanaryRequest) CanaryChoice {
	n := min(max(req.Count, 0), len(req.Eligible))
	ids := make([]string, 0, n)
	for _, e := range req.Eligible[:n] {
		ids = append(ids, e.ID)
	}
	return CanaryChoice{NodeIDs: ids}
}

// ValidateCanaryChoice checks a canary policy's answer against its
// request: "" for a valid answer, else why it is refused (more nodes than
// asked, a node that is not eligible, a node twice, fewer than asked
// without a reason).
func ValidateCanaryChoice(req CanaryRequest, c CanaryChoice) string { return validateChoice(req, c) }

// validateChoice checks a chooser's answer against its request. It returns
// "" for a valid answer, else why it is refused.
func validateChoice(req CanaryRequest, c CanaryChoice) string {
	if len(c.NodeIDs) > req.Count {
		return fmt.Sprintf("chose %d nodes, %d asked", len(c.NodeIDs), req.Count)
	}
	eligible := make(map[string]bool, len(req.Eligible))
	for _, n := range req.Eligible {
		eligible[n.ID] = true
	}
	seen := make(map[string]bool, len(c.NodeIDs))
	for _, id := range c.NodeIDs {
		if !eligible[id] {
			return fmt.Sprintf("chose node %q, which is not an eligible node", id)
		}
		if seen[id] {
			return fmt.Sprintf("chose node %q twice", id)
		}
		seen[id] = true
	}
	if len(c.NodeIDs) < req.Count && len(c.NodeIDs) < len(req.Eligible) && c.Reason == "" {
		return fmt.Sprintf("chose %d nodes, %d asked, and gave no reason", len(c.NodeIDs), req.Count)
	}
	return ""
}

// settleCanaries decides the canary node set of one canarying group: keep
// the existing canary nodes, ask the chooser for the rest (unless choose is
// false: a held deployment chooses nothing new), validate its answer and
// fall back to the default on a bad one.
func settleCanaries(chooser CanaryChooser, req CanaryRequest, target int, choose bool) *CanaryDecision {
	d := &CanaryDecision{Target: target, Existing: slices.Clip(append([]string{}, req.Existing...)), Chosen: []string{}}
	if choose && req.Count > 0 && len(req.Eligible) > 0 {
		// The reconciler runs in memory: the chooser it is given (the
		// built-in default, or a fixture's) is asked without a deadline;
		// the agent asks real policies itself, with one (host/rollout).
		var c CanaryChoice
		var err error
		_, builtin := chooser.(DefaultCanaryChooser)
		if builtin {
			// The reconciler's eligible nodes are its ready nodes, sorted
			// and each once: DefaultCanaries need not check them.
			c = firstEligible(req)
		} else {
			c, err = chooser.ChooseCanaries(context.Background(), req)
		}
		why := ""
		if builtin {
			// the built-in answer is valid by construction
		} else if err != nil {
			why = fmt.Sprintf("canary policy failed: %v", err)
		} else if bad := validateChoice(req, c); bad != "" {
			why = "canary policy answer refused: " + bad
		}
		if why != "" {
			d.Fallback = why
			c = DefaultCanaries(req)
		}
		d.Chosen = nil // an empty answer is recorded as none (null), as ever
		switch {
		case len(c.NodeIDs) == 0:
		case builtin && why == "":
			d.Chosen = c.NodeIDs // a list of its own, in order
		default:
			d.Chosen = slices.Clone(c.NodeIDs)
			if !slices.IsSorted(d.Chosen) {
				slices.Sort(d.Chosen)
			}
		}
		if len(c.NodeIDs) < req.Count {
			d.Reason = c.Reason
		}
	}
	d.Nodes = union(d.Existing, d.Chosen)
	return d
}

// union returns the sorted union of a and b, both sorted, each without
// repeats (existing and chosen canary nodes); nil when both are empty.
func union(a, b []string) []string {
	switch {
	case len(a)+len(b) == 0:
		return nil
	case len(a) == 0:
		return slices.Clone(b)
	case len(b) == 0:
		return slices.Clone(a)
	}
	out := make([]string, 0, len(a)+len(b))
	add := func(s string) {
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if a[i] == b[j] || a[i] < b[j] {
			add(a[i])
			i++
		} else {
			add(b[j])
			j++
		}
	}
	for ; i < len(a); i++ {
		add(a[i])
	}
	for ; j < len(b); j++ {
		add(b[j])
	}
	return out
}

// canaryTarget is ceil(percent × ready / 100).
func canaryTarget(percent, ready int) int {
	if percent <= 0 || ready <= 0 {
		return 0
	}
	return (percent*ready + 99) / 100
}

// eligibleFor returns the ready nodes (sorted by ID) that are not in
// existing (sorted), in order: the first limit of them, or all for a
// negative limit.
func eligibleFor(ready []*model.Node, existing []string, limit int) []*model.Node {
	if limit < 0 || limit > len(ready) {
		limit = len(ready)
	}
	out := make([]*model.Node, 0, limit)
	j := 0
	for _, n := range ready {
		if len(out) == limit {
			break
		}
		for j < len(existing) && existing[j] < n.ID {
			j++
		}
		if j < len(existing) && existing[j] == n.ID {
			continue
		}
		out = append(out, n)
	}
	return out
}
