package reconcile

import (
	"context"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// CanaryChooser makes the first judgement call of a rollout: which ready
// nodes of a group become canary nodes. The reconciler asks it only for the
// nodes still missing (Count), after keeping the existing canary nodes.
//
// Implementations must be deterministic functions of the request. The WASM
// policy engine (package policies) implements it; DefaultCanaryChooser is the
// built-in, native one. An error, or an answer that names an unknown or
// duplicate node or more than Count nodes, makes the reconciler fall back to
// DefaultCanaryChooser for that decision.
type CanaryChooser interface {
	ChooseCanaries(ctx context.Context, req CanaryRequest) (CanaryChoice, error)
}

// CanaryRequest is the input of a canary decision.
type CanaryRequest struct {
	JobID        string
	JobVersion   uint64
	DeploymentID string
	Group        string
	// Percent is the group's update.canary; Count is how many more nodes are
	// asked for (ceil(Percent*|ready|/100) minus the existing canary nodes).
	Percent int
	Count   int
	// Eligible are the ready nodes that are not already canary nodes, sorted
	// by node ID.
	Eligible []*model.Node
	// Existing are the node IDs already chosen as canary nodes, sorted.
	Existing []string
	// Policy is the group's update.canary_policy (nil: the default).
	Policy *model.PolicyRef
}

// CanaryChoice is the answer of a canary decision. Fewer nodes than asked
// are allowed only with a Reason.
type CanaryChoice struct {
	NodeIDs []string
	Reason  string
}

// CompletionDecider makes the second judgement call: whether a deployment
// continues, is promoted, succeeds or fails (and whether it reverts).
// Implemented by the WASM policy engine; the built-in default follows
// docs/reconciler-rules.md.
type CompletionDecider interface {
	DecideCompletion(ctx context.Context, in CompletionInput) (CompletionDecision, error)
}

// CompletionInput is the input of a completion decision.
type CompletionInput struct {
	Deployment *model.Deployment
	// Groups holds the health summary of every group of the deployment,
	// counted across all nodes from the allocations bucket.
	Groups map[string]GroupHealth
	// Policy is the completion policy named by the job (nil: the default).
	Policy *model.PolicyRef
	Now    time.Time
	// Disruption, when not empty, says why the disruption guard holds: many
	// of the job's nodes expired at once, or the asking agent just
	// reconnected to NATS. Counts over live nodes are then not evidence of
	// anything; the default continues (neither fails nor succeeds).
	Disruption string
}

// GroupHealth summarises the allocations of one group in a deployment.
type GroupHealth struct {
	Placed          int
	Healthy         int
	Unhealthy       int
	Pending         int
	CanariesHealthy int
	// LostInFlight counts the group's replacements whose node was lost in
	// the middle of them: a slot still held by an expired node, or an
	// expired node whose allocation at the deployment's version has no
	// health verdict. The rollout goes on without them; a policy may count
	// them (quorum).
	LostInFlight int
	// Lost and Disconnected count allocations of the job on nodes with a
	// loss verdict: lost once the group's disconnect.lost_after has passed
	// since the node went down (at once without one), disconnected before.
	Lost         int
	Disconnected int
	// Complete reports that the reconciler found nothing left to place,
	// migrate or update for this group on any node.
	Complete bool
}

// Decision is a completion policy's verdict.
type Decision string

const (
	DecisionContinue Decision = "continue"
	DecisionPromote  Decision = "promote"
	DecisionSucceed  Decision = "succeed"
	DecisionFail     Decision = "fail"
)

// CompletionDecision is the answer of a completion decision. Revert is only
// meaningful with DecisionFail.
type CompletionDecision struct {
	Decision Decision
	Revert   bool
	Reason   string
}
