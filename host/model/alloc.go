package model

import (
	"fmt"
	"time"
)

// Allocation is one instance of a group placed on one node. The node running
// it is the only writer of its client-side fields.
type Allocation struct {
	ID                 string                 `json:"id"`
	Name               string                 `json:"name"` // "<job>.<group>[<index>]"
	Namespace          string                 `json:"namespace,omitempty"`
	JobID              string                 `json:"job_id"`
	JobVersion         uint64                 `json:"job_version"`
	TaskGroup          string                 `json:"task_group"`
	NodeID             string                 `json:"node_id"`
	DesiredStatus      DesiredStatus          `json:"desired_status"`
	DesiredDescription string                 `json:"desired_description,omitempty"`
	DesiredTransition  DesiredTransition      `json:"desired_transition,omitzero"`
	ClientStatus       ClientStatus           `json:"client_status"`
	ClientDescription  string                 `json:"client_description,omitempty"`
	DeploymentID       string                 `json:"deployment_id,omitempty"`
	DeploymentStatus   *AllocDeploymentStatus `json:"deployment_status,omitempty"`
	// States is the client-status history, oldest first.
	States             []AllocState          `json:"states,omitempty"`
	PreviousAllocation string                `json:"previous_allocation,omitempty"`
	TaskStates         map[string]*TaskState `json:"task_states,omitempty"`
	// Ports are the ports the allocation holds on its node (its group's
	// network), chosen once when it first runs.
	Ports      []AllocatedPort `json:"ports,omitempty"`
	CreateTime time.Time       `json:"create_time,omitzero"`
	ModifyTime time.Time       `json:"modify_time,omitzero"`
}

// DesiredTransition carries requests to move an allocation, set by an
// operator action such as a node drain.
type DesiredTransition struct {
	Migrate *bool `json:"migrate,omitempty"`
}

// ShouldMigrate reports whether the allocation is marked for migration.
func (t DesiredTransition) ShouldMigrate() bool { return t.Migrate != nil && *t.Migrate }

// AllocDeploymentStatus is an allocation's standing in its deployment.
type AllocDeploymentStatus struct {
	Healthy   *bool     `json:"healthy,omitempty"`
	Canary    bool      `json:"canary,omitempty"`
	Timestamp time.Time `json:"timestamp,omitzero"`
}

// IsHealthy reports whether the allocation was marked healthy.
func (s *AllocDeploymentStatus) IsHealthy() bool { return s != nil && s.Healthy != nil && *s.Healthy }

// IsUnhealthy reports whether the allocation was marked unhealthy.
func (s *AllocDeploymentStatus) IsUnhealthy() bool {
	return s != nil && s.Healthy != nil && !*s.Healthy
}

// IsCanary reports whether the allocation is a canary.
func (s *AllocDeploymentStatus) IsCanary() bool { return s != nil && s.Canary }

// AllocStateField names the field an AllocState records a transition of.
type AllocStateField string

const (
	AllocStateClientStatus AllocStateField = "client_status"
)

// AllocStateFields lists every AllocStateField value.
var AllocStateFields = []AllocStateField{AllocStateClientStatus}

func (f *AllocStateField) UnmarshalJSON(b []byte) error { return decodeEnum(b, f, AllocStateFields) }

// AllocState records one transition of an allocation field.
type AllocState struct {
	Field AllocStateField `json:"field"`
	Value string          `json:"value"`
	Time  time.Time       `json:"time"`
}

// TaskState is the client-side state of one task of an allocation.
type TaskState struct {
	State      string      `json:"state"` // pending, running, dead
	Failed     bool        `json:"failed,omitempty"`
	Restarts   int         `json:"restarts,omitempty"`
	StartedAt  time.Time   `json:"started_at,omitzero"`
	FinishedAt time.Time   `json:"finished_at,omitzero"`
	Events     []TaskEvent `json:"events,omitempty"`
	// MoreEvents is how many earlier events of the task its node holds
	// that this copy leaves out: the allocations bucket carries a task's
	// telling and last events only (allocrunner.ForWire), and the node
	// serves the whole history on request (`hivelet alloc status`).
	MoreEvents int `json:"more_events,omitempty"`
}

// TaskEvent is one event in a task's life (started, killed, restarting...).
type TaskEvent struct {
	Type    string    `json:"type"`
	Message string    `json:"message,omitempty"`
	Time    time.Time `json:"time"`
}

// Terminal reports whether the allocation is finished on the client or is
// no longer desired to run.
func (a *Allocation) Terminal() bool {
	if a.ClientStatus.Terminal() {
		return true
	}
	return a.DesiredStatus == DesiredStop || a.DesiredStatus == DesiredEvict
}

// LastClientTransition returns the newest recorded client-status transition.
func (a *Allocation) LastClientTransition() (AllocState, bool) {
	for i := len(a.States) - 1; i >= 0; i-- {
		if a.States[i].Field == AllocStateClientStatus {
			return a.States[i], true
		}
	}
	return AllocState{}, false
}

// AllocName returns the canonical allocation name "<job>.<group>[<index>]".
func AllocName(job, group string, index int) string {
	return fmt.Sprintf("%s.%s[%d]", job, group, index)
}
