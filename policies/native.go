package policies

import (
	"slices"
	"strings"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
)

// NativeCanary is the built-in default canary choice in native Go, the
// fallback of every canary decision: the first Count eligible nodes in node
// ID order (spec/reconcile.md, "Canary nodes"). It is written independently
// of the WASM `percent` module; TestWasmPercentAgreesWithNativeDefault
// compares them on a generated corpus.
func NativeCanary(req reconcile.CanaryRequest) reconcile.CanaryChoice {
	ids := make([]string, len(req.Eligible))
	for i, n := range req.Eligible {
		ids[i] = n.ID
	}
	slices.Sort(ids)
	n := min(max(req.Count, 0), len(ids))
	choice := reconcile.CanaryChoice{NodeIDs: ids[:n:n], Reason: "first eligible nodes by node ID"}
	if n < req.Count {
		choice.Reason = "fewer eligible nodes than canaries asked for"
	}
	return choice
}

// NativeCompletion is the built-in default completion decision in native
// Go, the fallback of every completion decision (spec/reconcile.md,
// "Deployments"). In order: a deployment that is not running continues; a
// group with an unhealthy allocation, or past its require-progress-by
// without being complete, fails the deployment (revert when a failing group
// has auto_revert); while groups are canarying, promote when every canary
// is healthy and every canarying group has auto_promote, else continue;
// succeed when every group is complete with its desired healthy total;
// else continue.
func NativeCompletion(in reconcile.CompletionInput) reconcile.CompletionDecision {
	d := in.Deployment
	if d == nil || d.Status != model.DeploymentRunning {
		return reconcile.CompletionDecision{Decision: reconcile.DecisionContinue, Reason: "deployment is not running"}
	}
	names := make([]string, 0, len(d.TaskGroups)+len(in.Groups))
	for n := range d.TaskGroups {
		names = append(names, n)
	}
	for n := range in.Groups {
		names = append(names, n)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) == 0 {
		return reconcile.CompletionDecision{Decision: reconcile.DecisionContinue, Reason: "deployment has no groups"}
	}
	state := func(n string) model.DeploymentState {
		if s := d.TaskGroups[n]; s != nil {
			return *s
		}
		return model.DeploymentState{}
	}
	done := func(n string) bool {
		h := in.Groups[n]
		return h.Complete && h.Healthy >= state(n).DesiredTotal
	}
	var unhealthy, late []string
	revert := false
	for _, n := range names {
		s, h := state(n), in.Groups[n]
		if h.Unhealthy > 0 {
			unhealthy = append(unhealthy, n)
			revert = revert || s.AutoRevert
		} else if !s.RequireProgressBy.IsZero() && s.RequireProgressBy.Before(in.Now) && !done(n) {
			late = append(late, n)
			revert = revert || s.AutoRevert
		}
	}
	if len(unhealthy) > 0 {
		return reconcile.CompletionDecision{Decision: reconcile.DecisionFail, Revert: revert,
			Reason: model.DescFailedAllocations + " (groups " + strings.Join(unhealthy, ", ") + ")"}
	}
	if len(late) > 0 {
		return reconcile.CompletionDecision{Decision: reconcile.DecisionFail, Revert: revert,
			Reason: model.DescProgressDeadline + " (groups " + strings.Join(late, ", ") + ")"}
	}
	canarying, allHealthy, allAuto := false, true, true
	for _, n := range names {
		s := state(n)
		if s.DesiredCanaries == 0 || s.Promoted {
			continue
		}
		canarying = true
		allHealthy = allHealthy && in.Groups[n].CanariesHealthy >= s.DesiredCanaries
		allAuto = allAuto && s.AutoPromote
	}
	if canarying {
		switch {
		case !allHealthy:
			return reconcile.CompletionDecision{Decision: reconcile.DecisionContinue, Reason: "waiting for healthy canaries"}
		case allAuto:
			return reconcile.CompletionDecision{Decision: reconcile.DecisionPromote, Reason: model.DescAutoPromotionPending}
		default:
			return reconcile.CompletionDecision{Decision: reconcile.DecisionContinue, Reason: model.DescNeedsPromotion}
		}
	}
	for _, n := range names {
		if !done(n) {
			return reconcile.CompletionDecision{Decision: reconcile.DecisionContinue, Reason: model.DescRunning}
		}
	}
	return reconcile.CompletionDecision{Decision: reconcile.DecisionSucceed, Reason: model.DescSuccessful}
}
