package reconcile

import (
	"context"
	"slices"
	"strings"

	"github.com/hivelet/hivelet/host/model"
)

// DefaultCompletion is the built-in CompletionDecider (see DecideDefault).
// The agent uses it for jobs that name no completion policy; the policy
// engine falls back to it on every fault.
type DefaultCompletion struct{}

// DecideCompletion implements CompletionDecider; it never fails.
func (DefaultCompletion) DecideCompletion(ctx context.Context, in CompletionInput) (CompletionDecision, error) {
	return DecideDefault(in), nil
}

// DecideDefault is the built-in completion decision of docs/reconciler-rules.md
// ("Deployments"), in native Go: what a job naming no completion policy
// gets, and the fallback of every policy fault (docs/reconciler-rules.md,
// "Deployments"). In order: a deployment that is not running, or asked about
// while the disruption guard holds, continues; a
// group with an unhealthy allocation, or past its require-progress-by
// without being complete, fails the deployment (revert when a failing group
// has auto_revert); while groups are canarying, promote when every canary
// is healthy and every canarying group has auto_promote, else continue;
// succeed when every group is complete with its desired healthy total;
// else continue.
func DecideDefault(in CompletionInput) CompletionDecision {
	d := in.Deployment
	if d == nil || d.Status != model.DeploymentRunning {
		return CompletionDecision{Decision: DecisionContinue, Reason: "deployment is not running"}
	}
	if in.Disruption != "" {
		// The guard pauses verdicts: what live nodes show says nothing
		// while many of them just went away.
		return CompletionDecision{Decision: DecisionContinue, Reason: "disruption guard holds: " + in.Disruption}
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
		return CompletionDecision{Decision: DecisionContinue, Reason: "deployment has no groups"}
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
		} else if !s.RequireProgressBy.IsZero() && s.RequireProgressBy.Before(in.Now) && !done(n) && !awaitingManual(s, h) {
			late = append(late, n)
			revert = revert || s.AutoRevert
		}
	}
	if len(unhealthy) > 0 {
		return CompletionDecision{Decision: DecisionFail, Revert: revert,
			Reason: model.DescFailedAllocations + " (groups " + strings.Join(unhealthy, ", ") + ")"}
	}
	if len(late) > 0 {
		return CompletionDecision{Decision: DecisionFail, Revert: revert,
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
			return CompletionDecision{Decision: DecisionContinue, Reason: "waiting for healthy canaries"}
		case allAuto:
			return CompletionDecision{Decision: DecisionPromote, Reason: model.DescAutoPromotionPending}
		default:
			return CompletionDecision{Decision: DecisionContinue, Reason: model.DescNeedsPromotion}
		}
	}
	for _, n := range names {
		if !done(n) {
			return CompletionDecision{Decision: DecisionContinue, Reason: model.DescRunning}
		}
	}
	return CompletionDecision{Decision: DecisionSucceed, Reason: model.DescSuccessful}
}

// awaitingManual reports whether a group waits for its promotion with every
// canary healthy: the progress deadline does not fail it (a manual
// promotion waits for the operator, not for the rollout; an automatic one
// is decided below).
func awaitingManual(s model.DeploymentState, h GroupHealth) bool {
	return s.DesiredCanaries > 0 && !s.Promoted && h.CanariesHealthy >= s.DesiredCanaries
}
