package model

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// decodeEnum decodes a JSON string into one of the allowed values of a closed
// enum. An unknown value is reported as a *json.UnmarshalTypeError so that
// encoding/json fills in the path of the field being decoded; Decode then turns
// it into a readable *DecodeError.
func decodeEnum[T ~string](data []byte, dst *T, allowed []T) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return &json.UnmarshalTypeError{Value: "non-string " + string(data), Type: reflect.TypeFor[T]()}
	}
	for _, a := range allowed {
		if string(a) == s {
			*dst = a
			return nil
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return &json.UnmarshalTypeError{
		Value: fmt.Sprintf("unknown value %q (allowed: %s)", s, strings.Join(names, ", ")),
		Type:  reflect.TypeFor[T](),
	}
}

func validEnum[T ~string](v T, allowed []T) bool {
	for _, a := range allowed {
		if a == v {
			return true
		}
	}
	return false
}

// JobType is the kind of job. hivelet runs only node-bound job types.
type JobType string

const (
	JobTypeSystem   JobType = "system"
	JobTypeSysbatch JobType = "sysbatch"
)

// JobTypes lists every JobType value.
var JobTypes = []JobType{JobTypeSystem, JobTypeSysbatch}

func (t *JobType) UnmarshalJSON(b []byte) error { return decodeEnum(b, t, JobTypes) }

// ConstraintOperator is the comparison a Constraint applies.
type ConstraintOperator string

const (
	OpEqual       ConstraintOperator = "="
	OpNotEqual    ConstraintOperator = "!="
	OpLess        ConstraintOperator = "<"
	OpLessEq      ConstraintOperator = "<="
	OpGreater     ConstraintOperator = ">"
	OpGreaterEq   ConstraintOperator = ">="
	OpRegexp      ConstraintOperator = "regexp"
	OpVersion     ConstraintOperator = "version"
	OpSemver      ConstraintOperator = "semver"
	OpSetContains ConstraintOperator = "set_contains"
	OpSetContAny  ConstraintOperator = "set_contains_any"
	OpIsSet       ConstraintOperator = "is_set"
	OpIsNotSet    ConstraintOperator = "is_not_set"
)

// ConstraintOperators lists every supported operator. distinct_hosts and
// distinct_property are deliberately absent: a system job already runs at
// most once per node, so they have no meaning here.
var ConstraintOperators = []ConstraintOperator{OpEqual, OpNotEqual, OpLess, OpLessEq, OpGreater, OpGreaterEq,
	OpRegexp, OpVersion, OpSemver, OpSetContains, OpSetContAny, OpIsSet, OpIsNotSet}

func (o *ConstraintOperator) UnmarshalJSON(b []byte) error {
	return decodeEnum(b, o, ConstraintOperators)
}

// RestartMode says what a task does once its restart attempts are used up.
type RestartMode string

const (
	RestartModeFail  RestartMode = "fail"
	RestartModeDelay RestartMode = "delay"
)

// RestartModes lists every RestartMode value.
var RestartModes = []RestartMode{RestartModeFail, RestartModeDelay}

func (m *RestartMode) UnmarshalJSON(b []byte) error { return decodeEnum(b, m, RestartModes) }

// ReconcileMode is how a reconnecting allocation is weighed against its
// replacement (disconnect.reconcile).
type ReconcileMode string

const (
	ReconcileBestScore       ReconcileMode = "best_score"
	ReconcileKeepOriginal    ReconcileMode = "keep_original"
	ReconcileKeepReplacement ReconcileMode = "keep_replacement"
	ReconcileLongestRunning  ReconcileMode = "longest_running"
)

// ReconcileModes lists every ReconcileMode value.
var ReconcileModes = []ReconcileMode{ReconcileBestScore, ReconcileKeepOriginal, ReconcileKeepReplacement, ReconcileLongestRunning}

func (m *ReconcileMode) UnmarshalJSON(b []byte) error { return decodeEnum(b, m, ReconcileModes) }

// CheckType is the kind of a service health check.
type CheckType string

const (
	CheckHTTP CheckType = "http"
	CheckTCP  CheckType = "tcp"
	// CheckScript runs Command with Args inside the check's task, through
	// its driver; exit 0 passes, 1 is a warning, anything else fails
	// (Nomad's and Consul's reading).
	CheckScript CheckType = "script"
)

// CheckTypes lists every CheckType value.
var CheckTypes = []CheckType{CheckHTTP, CheckTCP, CheckScript}

func (c *CheckType) UnmarshalJSON(b []byte) error { return decodeEnum(b, c, CheckTypes) }

// NodeStatus is a node's liveness as seen by the fleet.
type NodeStatus string

const (
	NodeStatusInitializing NodeStatus = "initializing"
	NodeStatusReady        NodeStatus = "ready"
	NodeStatusDown         NodeStatus = "down"
	NodeStatusDisconnected NodeStatus = "disconnected"
)

// NodeStatuses lists every NodeStatus value.
var NodeStatuses = []NodeStatus{NodeStatusInitializing, NodeStatusReady, NodeStatusDown, NodeStatusDisconnected}

func (s *NodeStatus) UnmarshalJSON(b []byte) error { return decodeEnum(b, s, NodeStatuses) }

// Eligibility says whether new work may be placed on a node.
type Eligibility string

const (
	Eligible   Eligibility = "eligible"
	Ineligible Eligibility = "ineligible"
)

// Eligibilities lists every Eligibility value.
var Eligibilities = []Eligibility{Eligible, Ineligible}

func (e *Eligibility) UnmarshalJSON(b []byte) error { return decodeEnum(b, e, Eligibilities) }

// DesiredStatus is what the scheduler (here: the node's reconciler) wants an
// allocation to be.
type DesiredStatus string

const (
	DesiredRun   DesiredStatus = "run"
	DesiredStop  DesiredStatus = "stop"
	DesiredEvict DesiredStatus = "evict"
)

// DesiredStatuses lists every DesiredStatus value.
var DesiredStatuses = []DesiredStatus{DesiredRun, DesiredStop, DesiredEvict}

func (s *DesiredStatus) UnmarshalJSON(b []byte) error { return decodeEnum(b, s, DesiredStatuses) }

// ClientStatus is what the node reports an allocation actually is.
type ClientStatus string

const (
	ClientPending  ClientStatus = "pending"
	ClientRunning  ClientStatus = "running"
	ClientComplete ClientStatus = "complete"
	ClientFailed   ClientStatus = "failed"
	ClientLost     ClientStatus = "lost"
	ClientUnknown  ClientStatus = "unknown"
)

// ClientStatuses lists every ClientStatus value.
var ClientStatuses = []ClientStatus{ClientPending, ClientRunning, ClientComplete, ClientFailed, ClientLost, ClientUnknown}

func (s *ClientStatus) UnmarshalJSON(b []byte) error { return decodeEnum(b, s, ClientStatuses) }

// Terminal reports whether the client status is final.
func (s ClientStatus) Terminal() bool {
	return s == ClientComplete || s == ClientFailed || s == ClientLost
}

// DeploymentStatus is the life-cycle state of a deployment.
type DeploymentStatus string

const (
	DeploymentRunning      DeploymentStatus = "running"
	DeploymentPaused       DeploymentStatus = "paused"
	DeploymentFailed       DeploymentStatus = "failed"
	DeploymentSuccessful   DeploymentStatus = "successful"
	DeploymentCancelled    DeploymentStatus = "cancelled"
	DeploymentPending      DeploymentStatus = "pending"
	DeploymentInitializing DeploymentStatus = "initializing"
	DeploymentBlocked      DeploymentStatus = "blocked"
	DeploymentUnblocking   DeploymentStatus = "unblocking"
)

// DeploymentStatuses lists every DeploymentStatus value.
var DeploymentStatuses = []DeploymentStatus{DeploymentRunning, DeploymentPaused, DeploymentFailed, DeploymentSuccessful,
	DeploymentCancelled, DeploymentPending, DeploymentInitializing, DeploymentBlocked, DeploymentUnblocking}

func (s *DeploymentStatus) UnmarshalJSON(b []byte) error { return decodeEnum(b, s, DeploymentStatuses) }

// Active reports whether a deployment in this status is still in progress
// (it may still place, update or be promoted).
func (s DeploymentStatus) Active() bool {
	switch s {
	case DeploymentRunning, DeploymentPaused, DeploymentPending, DeploymentInitializing, DeploymentBlocked, DeploymentUnblocking:
		return true
	}
	return false
}
