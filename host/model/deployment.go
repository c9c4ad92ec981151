package model

import "time"

// Deployment tracks the rollout of one job version across the fleet. It is a
// shared record: it changes only by compare-and-set on its KV revision.
type Deployment struct {
	ID                string                      `json:"id"`
	Namespace         string                      `json:"namespace,omitempty"`
	JobID             string                      `json:"job_id"`
	JobVersion        uint64                      `json:"job_version"`
	Status            DeploymentStatus            `json:"status"`
	StatusDescription string                      `json:"status_description,omitempty"`
	IsMultiregion     bool                        `json:"is_multiregion,omitempty"`
	TaskGroups        map[string]*DeploymentState `json:"task_groups"`
	CreateTime        time.Time                   `json:"create_time,omitzero"`
	ModifyTime        time.Time                   `json:"modify_time,omitzero"`
	// Events are notable things that happened to the rollout (a policy
	// fault and its fallback, ...), oldest first, at most MaxDeploymentEvents:
	// AppendDeploymentEvent drops the oldest.
	Events []DeploymentEvent `json:"events,omitempty"`
}

// MaxDeploymentEvents caps Deployment.Events.
const MaxDeploymentEvents = 10

// DeploymentEvent is one entry of Deployment.Events.
type DeploymentEvent struct {
	Time time.Time `json:"time"`
	// Kind is a stable identifier, e.g. "policy_fault".
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// Deployment event kinds.
const (
	// EventPolicyFault: a policy module faulted (or could not be loaded)
	// and the native default decided instead.
	EventPolicyFault = "policy_fault"
)

// AppendDeploymentEvent returns events with ev appended, keeping only the
// last MaxDeploymentEvents. It never modifies events' backing array.
func AppendDeploymentEvent(events []DeploymentEvent, ev DeploymentEvent) []DeploymentEvent {
	out := make([]DeploymentEvent, 0, min(len(events)+1, MaxDeploymentEvents))
	if drop := len(events) + 1 - MaxDeploymentEvents; drop > 0 {
		events = events[drop:]
	}
	out = append(out, events...)
	return append(out, ev)
}

// DeploymentState is the per-group state of a deployment.
type DeploymentState struct {
	AutoRevert       bool     `json:"auto_revert,omitempty"`
	AutoPromote      bool     `json:"auto_promote,omitempty"`
	ProgressDeadline Duration `json:"progress_deadline,omitempty"`
	Promoted         bool     `json:"promoted,omitempty"`
	// CanaryNodes is the canary node set, chosen once by the canary policy and
	// reused by every later round and every other host.
	CanaryNodes       []string  `json:"canary_nodes,omitempty"`
	PlacedCanaries    []string  `json:"placed_canaries,omitempty"` // allocation IDs
	DesiredCanaries   int       `json:"desired_canaries,omitempty"`
	DesiredTotal      int       `json:"desired_total"`
	PlacedAllocs      int       `json:"placed_allocs,omitempty"`
	HealthyAllocs     int       `json:"healthy_allocs,omitempty"`
	UnhealthyAllocs   int       `json:"unhealthy_allocs,omitempty"`
	RequireProgressBy time.Time `json:"require_progress_by,omitzero"`
}

// DeploymentStatusUpdate is a status change the reconciler asks for.
type DeploymentStatusUpdate struct {
	DeploymentID      string           `json:"deployment_id"`
	Status            DeploymentStatus `json:"status"`
	StatusDescription string           `json:"status_description"`
}

// Descriptions used in deployment status updates.
const (
	DescRunning              = "Deployment is running"
	DescNeedsPromotion       = "Deployment is running but requires manual promotion"
	DescAutoPromotionPending = "Deployment is running pending automatic promotion"
	DescSuccessful           = "Deployment completed successfully"
	DescBlocked              = "Deployment is complete but waiting for peer region"
	DescPending              = "Deployment is pending, waiting for peer region"
	DescStoppedJob           = "Cancelled because job is stopped"
	DescNewerJob             = "Cancelled due to newer version of job"
	DescFailedAllocations    = "Failed due to unhealthy allocations"
	DescProgressDeadline     = "Failed due to progress deadline"
	DescPaused               = "Deployment is paused"
)
