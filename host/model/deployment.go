package model

import (
	"slices"
	"time"
)

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

	// Protocol is the fleet rollout protocol level the record was created
	// at (see host/rollout): the lowest level every eligible node
	// advertised. An agent that does not know it holds the job.
	Protocol int `json:"protocol,omitempty"`
	// CreatedBy is the node that created the record.
	CreatedBy string `json:"created_by,omitempty"`
	// Nonce identifies the last write: a writer whose compare-and-set timed
	// out re-reads the record and recognises its own write by it.
	Nonce string `json:"nonce,omitempty"`
	// PausedAt is the server time of the pause in force (zero while not
	// paused); PausedTotal sums the earlier pauses.
	PausedAt    time.Time `json:"paused_at,omitzero"`
	PausedTotal Duration  `json:"paused_total,omitempty"`
	// RevertOf, when set, says this deployment rolls out a revert to the
	// stable version RevertOf (its canary phase is skipped).
	RevertOf *uint64 `json:"revert_of,omitempty"`
	// Revert is the auto-revert bookkeeping of a failed deployment.
	Revert *DeploymentRevert `json:"revert,omitempty"`
}

// RevertStatus is the state of an auto-revert.
type RevertStatus string

const (
	// RevertPending: the deployment failed with auto_revert and a stable
	// version to go back to; the new job version is not written yet.
	RevertPending RevertStatus = "pending"
	// RevertDone: the job was written again with the stable spec.
	RevertDone RevertStatus = "done"
	// RevertAbandoned: an operator pushed a newer version first (the human wins).
	RevertAbandoned RevertStatus = "abandoned"
	// RevertNone: auto_revert was asked for but there is nothing to go
	// back to; Reason says why.
	RevertNone RevertStatus = "none"
)

// RevertStatuses lists every RevertStatus value.
var RevertStatuses = []RevertStatus{RevertPending, RevertDone, RevertAbandoned, RevertNone}

func (s *RevertStatus) UnmarshalJSON(b []byte) error { return decodeEnum(b, s, RevertStatuses) }

// DeploymentRevert records an auto-revert.
type DeploymentRevert struct {
	Status RevertStatus `json:"status"`
	// ToVersion is the stable version whose spec is written again.
	ToVersion uint64 `json:"to_version,omitempty"`
	// AsVersion is the job version the revert was written as (RevertDone).
	AsVersion uint64 `json:"as_version,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// Clone returns a copy of d that shares nothing a transition changes
// (group states, canary lists, events, revert).
func (d *Deployment) Clone() *Deployment {
	c := *d
	c.TaskGroups = make(map[string]*DeploymentState, len(d.TaskGroups))
	for name, st := range d.TaskGroups {
		if st == nil {
			continue
		}
		s := *st
		s.CanaryNodes = slices.Clone(st.CanaryNodes)
		s.PlacedCanaries = slices.Clone(st.PlacedCanaries)
		c.TaskGroups[name] = &s
	}
	c.Events = slices.Clone(d.Events)
	if d.Revert != nil {
		r := *d.Revert
		c.Revert = &r
	}
	if d.RevertOf != nil {
		v := *d.RevertOf
		c.RevertOf = &v
	}
	return &c
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
	// EventPromoted, EventPaused, EventResumed, EventFailed, EventReclaimed,
	// EventRevert: the rollout's transitions (host/rollout).
	EventPromoted  = "promoted"
	EventPaused    = "paused"
	EventResumed   = "resumed"
	EventFailed    = "failed"
	EventReclaimed = "slot_reclaimed"
	EventRevert    = "revert"
	EventCanary    = "canary_set"
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

	// MaxParallel is the group's update.max_parallel at creation: the
	// number of update slots (host/rollout).
	MaxParallel int `json:"max_parallel,omitempty"`
	// CanaryPolicy names the canary policy that chose CanaryNodes, and
	// CanaryReason is what it said (always set when it chose fewer than
	// asked, so a rollout that picks nobody says why).
	CanaryPolicy string `json:"canary_policy,omitempty"`
	CanaryReason string `json:"canary_reason,omitempty"`
	// PromotedAt (server time) and PromotedBy ("cli" or the steward node)
	// record the promotion.
	PromotedAt time.Time `json:"promoted_at,omitzero"`
	PromotedBy string    `json:"promoted_by,omitempty"`
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
	DescFailedByUser         = "Deployment marked as failed"
	DescPromoted             = "Deployment is running (promoted)"
)

// Slot is one max_parallel update slot of a job group (docs/rollout.md,
// I5): whoever holds it may replace one outdated allocation. It lives in
// the rollout bucket under a key that names the job, group and index but
// not the version, so that a new version of a job never exceeds
// max_parallel across versions; it expires with its TTL.
type Slot struct {
	Namespace    string `json:"namespace,omitempty"`
	JobID        string `json:"job_id"`
	JobVersion   uint64 `json:"job_version"`
	DeploymentID string `json:"deployment_id"`
	Group        string `json:"group"`
	Index        int    `json:"index"`
	// Holder is the node replacing OldAlloc by NewAlloc; BootID the boot of
	// its agent that took the slot.
	Holder   string `json:"holder"`
	BootID   string `json:"boot_id,omitempty"`
	OldAlloc string `json:"old_alloc"`
	NewAlloc string `json:"new_alloc"`
	Nonce    string `json:"nonce"`
}

// LossVerdict records one loss of a node (docs/rollout.md, T13): written
// once per loss, under `down.<node>.<nodes-revision>` in the rollout
// bucket, by the node's loss steward; the node deletes it when it returns.
// It keeps "down since" after the expiry marker is gone, so an agent that
// boots later still counts lost_after right.
type LossVerdict struct {
	Node string `json:"node"`
	// DownSince is the server time of the node's heartbeat key expiry.
	DownSince time.Time `json:"down_since"`
	// WrittenBy is the loss steward that wrote it.
	WrittenBy string `json:"written_by"`
}

// RolloutSummary is what the steward of a running deployment derives for
// the nodes that do not watch the job's allocations (docs/rollout.md,
// "The rollout summary"): the waiting allocations in admission order and
// the derived counts. It is stored under `sum.<ns>.<job>` in the rollout
// bucket, written at most once a second by one writer (the steward, or an
// overdue deputy); it is derived, never a fact of its own: a stale summary
// can only delay an admission (every take is still a create-if-absent of a
// slot key, and a node checks its own canary membership in the record).
type RolloutSummary struct {
	Namespace    string `json:"namespace,omitempty"`
	JobID        string `json:"job_id"`
	JobVersion   uint64 `json:"job_version"`
	DeploymentID string `json:"deployment_id"`
	// Steward is the node that wrote it; Time the server time it was
	// derived at.
	Steward string    `json:"steward"`
	Time    time.Time `json:"time"`
	// Groups are the deployment's groups, by name.
	Groups map[string]*GroupSummary `json:"groups,omitempty"`
}

// GroupSummary is one group's part of a RolloutSummary.
type GroupSummary struct {
	// Waiting are the first waiting allocations in admission order (at
	// most twice max_parallel); WaitingTotal counts them all.
	Waiting      []SummaryWaiter `json:"waiting,omitempty"`
	WaitingTotal int             `json:"waiting_total"`
	// Assigned are the update slot indices the steward assigned to the
	// first len(Assigned) waiters, the ones admitted: Assigned[i] is
	// Waiting[i]'s (rollout protocol 4, rollout.AssignProtocol; absent in
	// an older steward's summary). An admitted waiter keeps its index from
	// one summary to the next until the steward sees it taken, so a
	// waiter that acts on an older summary and one that acts on the newer
	// try different keys.
	Assigned []int `json:"assigned,omitempty"`
	// Next are the held update slot indices the steward queued the waiters
	// after the admitted ones on: Next[j] is Waiting[len(Assigned)+j]'s,
	// the waiter that takes that slot once its holder releases it (rollout
	// protocol 5, rollout.HandoffProtocol). The holder tells that waiter
	// of its release (SlotReleased), so the slot is taken again without
	// waiting for the next summary; a waiter never told waits for the
	// summary that shows the slot free (and assigns it to the same waiter).
	Next []int `json:"next,omitempty"`
	// Slots are the group's held update slots (any version), by index:
	// what a narrowed waiter counts as occupied when it does not watch the
	// slot keys (docs/rollout.md, "Admission").
	Slots []SummarySlot `json:"slots,omitempty"`
	// The derived counts, as the steward saw them.
	Desired   int `json:"desired"`
	Placed    int `json:"placed"`
	Healthy   int `json:"healthy"`
	Unhealthy int `json:"unhealthy"`
	Pending   int `json:"pending"`
	Outdated  int `json:"outdated"`
	InFlight  int `json:"in_flight"`
}

// SummarySlot is one held update slot: its index and holder.
type SummarySlot struct {
	Index  int    `json:"i"`
	Holder string `json:"node"`
}

// SlotReleased is what a slot's holder (or the steward reclaiming it)
// tells the waiter a summary queued on the slot (GroupSummary.Next) once
// the slot's key is deleted: a hint, sent over core NATS and never stored.
// The waiter still takes the slot by create-if-absent of its key, so a
// hint that is stale, repeated or forged costs at most a refused create.
type SlotReleased struct {
	Namespace string `json:"namespace,omitempty"`
	JobID     string `json:"job_id"`
	// Key is the slot's key; Holder the node whose take was released.
	Key    string `json:"key"`
	Holder string `json:"holder"`
	// DeploymentID is the deployment of the summary that named the waiter.
	DeploymentID string `json:"deployment_id"`
}

// SummaryWaiter is one waiting allocation: its node and ID.
type SummaryWaiter struct {
	Node  string `json:"node"`
	Alloc string `json:"alloc"`
}
