package model

import (
	"encoding/json"
	"time"
)

// Job is a declared system or sysbatch job. Its JSON form is what `hivelet job
// run` puts into the jobs bucket and what every agent decodes.
type Job struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// Region is recorded and shown; a fleet is one region, so it changes
	// nothing else.
	Region      string            `json:"region,omitempty"`
	Type        JobType           `json:"type"`
	Version     uint64            `json:"version"`
	Stop        bool              `json:"stop,omitempty"`
	Stable      bool              `json:"stable,omitempty"`
	Multiregion bool              `json:"multiregion,omitempty"`
	Datacenters []string          `json:"datacenters,omitempty"`
	NodePool    string            `json:"node_pool,omitempty"`
	Priority    int               `json:"priority,omitempty"`
	Meta        map[string]string `json:"meta,omitempty"`
	Constraints []Constraint      `json:"constraints,omitempty"`
	// Update is the job-level update block as written. Each group's Update
	// already holds the effective (inherited, overridden, defaulted) strategy;
	// this one is kept so that `job inspect` round-trips what the author wrote.
	Update *UpdateStrategy `json:"update,omitempty"`
	Groups []*Group        `json:"groups"`
	// SubmitTime is stamped by the CLI when the job is written; the
	// reconciler never reads it.
	SubmitTime time.Time `json:"submit_time,omitzero"`
	// RevertOf, when set, marks a version written by a revert: it carries
	// the spec of the stable version RevertOf (its rollout skips canaries).
	RevertOf *uint64 `json:"revert_of,omitempty"`
}

// Group is a task group: Count copies of its tasks on every eligible node.
type Group struct {
	Name        string              `json:"name"`
	Count       int                 `json:"count"`
	Update      *UpdateStrategy     `json:"update,omitempty"`
	Restart     *RestartPolicy      `json:"restart,omitempty"`
	Disconnect  *DisconnectStrategy `json:"disconnect,omitempty"`
	Constraints []Constraint        `json:"constraints,omitempty"`
	Meta        map[string]string   `json:"meta,omitempty"`
	// Network is the ports the group's allocations hold on their node.
	Network *Network `json:"network,omitempty"`
	// Volumes are the host volumes the group's tasks mount: a node runs
	// the group only when it has each one (Node.HostVolumes).
	Volumes []Volume `json:"volumes,omitempty"`
	// Services are the group's own services (Nomad's group-level service
	// blocks): their checks run while every task of the group runs.
	Services []Service `json:"services,omitempty"`
	// ShutdownDelay is how long a stopping allocation waits, its services
	// deregistered, before its tasks are sent their kill signal.
	ShutdownDelay Duration `json:"shutdown_delay,omitempty"`
	// MaxRunDuration bounds how long a sysbatch allocation may run: its
	// tasks are stopped, and the allocation fails, when it is exceeded.
	MaxRunDuration Duration `json:"max_run_duration,omitempty"`
	Tasks          []*Task  `json:"tasks"`
}

// Task is one process or container of a group.
type Task struct {
	Name   string `json:"name"`
	Driver string `json:"driver"`
	// Config is the driver's own configuration, validated by the driver's
	// schema when the task is started, not by the job parser.
	Config      map[string]any    `json:"config,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Resources   Resources         `json:"resources,omitzero"`
	KillTimeout Duration          `json:"kill_timeout,omitempty"`
	KillSignal  string            `json:"kill_signal,omitempty"`
	User        string            `json:"user,omitempty"`
	Services    []Service         `json:"services,omitempty"`
	Meta        map[string]string `json:"meta,omitempty"`
	// Artifacts are downloaded into the task's directory, once per
	// allocation, before the templates are rendered.
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Templates are rendered into the task's directory before it starts.
	Templates []Template `json:"templates,omitempty"`
	// VolumeMounts mount volumes of the group into the task.
	VolumeMounts []VolumeMount `json:"volume_mounts,omitempty"`
	// Lifecycle makes the task a prestart hook of its group.
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
}

// Resources are a task's resource limits.
type Resources struct {
	CPU      int `json:"cpu,omitempty"`       // MHz
	MemoryMB int `json:"memory_mb,omitempty"` // MiB
}

// Service is a named endpoint of a task with its health checks.
type Service struct {
	Name string `json:"name,omitempty"`
	// Port is a port label of the group's network, a number (on loopback)
	// or host:port.
	Port string `json:"port,omitempty"`
	// Tags are recorded with the service.
	Tags   []string `json:"tags,omitempty"`
	Checks []Check  `json:"checks,omitempty"`
}

// Check is a health check on a service.
type Check struct {
	Name string    `json:"name,omitempty"`
	Type CheckType `json:"type"`
	Path string    `json:"path,omitempty"`
	Port string    `json:"port,omitempty"`
	// Command and Args are a script check's: run inside the task.
	Command  string   `json:"command,omitempty"`
	Args     []string `json:"args,omitempty"`
	Interval Duration `json:"interval"`
	Timeout  Duration `json:"timeout"`
	// SuccessBeforePassing and FailuresBeforeCritical are Nomad's: how many
	// probes in a row must pass before a failing check counts as passing,
	// and fail before a passing one counts as failing (0 and 1 alike: the
	// first).
	SuccessBeforePassing   int `json:"success_before_passing,omitempty"`
	FailuresBeforeCritical int `json:"failures_before_critical,omitempty"`
	// CheckRestart restarts the check's task when the check keeps failing
	// (Nomad's check_restart; a service-level block is copied into each of
	// its checks by the job-file parser). nil: a failing check restarts
	// nothing, it only makes the allocation unhealthy.
	CheckRestart *CheckRestart `json:"check_restart,omitempty"`
}

// CheckRestart is Nomad's check_restart: after Limit failing results of
// the check in a row, not counting those within Grace of the task's
// (re)start, the task is restarted through its group's restart policy (the
// restart counts against its attempts; when the policy gives up, the
// allocation fails). A passing result starts the count again.
type CheckRestart struct {
	// Limit is how many failing results in a row restart the task; 0
	// restarts nothing.
	Limit int `json:"limit,omitempty"`
	// Grace is how long after the task starts or restarts its results are
	// not counted.
	Grace Duration `json:"grace,omitempty"`
	// IgnoreWarnings counts a warning result (an http check answered 429
	// Too Many Requests) as passing. The check still reports it failing
	// for the allocation's health.
	IgnoreWarnings bool `json:"ignore_warnings,omitempty"`
}

// Constraint restricts the nodes a job or group may run on.
type Constraint struct {
	Attribute string             `json:"attribute,omitempty"`
	Operator  ConstraintOperator `json:"operator"`
	Value     string             `json:"value,omitempty"`
}

// UpdateStrategy governs how a new job version rolls out. Canary is a
// percentage of the ready nodes (0–100), not a count.
type UpdateStrategy struct {
	MaxParallel      int      `json:"max_parallel"`
	Canary           int      `json:"canary,omitempty"`
	AutoPromote      bool     `json:"auto_promote,omitempty"`
	AutoRevert       bool     `json:"auto_revert,omitempty"`
	MinHealthyTime   Duration `json:"min_healthy_time,omitempty"`
	HealthyDeadline  Duration `json:"healthy_deadline,omitempty"`
	ProgressDeadline Duration `json:"progress_deadline,omitempty"`
	HealthCheck      string   `json:"health_check,omitempty"`
	// CanaryPolicy and CompletionPolicy name the WASM policies that make the
	// rollout's two judgement calls (hivelet's extension); nil means the
	// built-in defaults.
	CanaryPolicy     *PolicyRef `json:"canary_policy,omitempty"`
	CompletionPolicy *PolicyRef `json:"completion_policy,omitempty"`
}

// PolicyRef names a policy module: a built-in by name, or a pushed module by
// name and, optionally, pinned SHA-256 digest, with parameters.
type PolicyRef struct {
	Name   string            `json:"name"`
	Digest string            `json:"digest,omitempty"`
	Params map[string]string `json:"params,omitempty"`
}

// Defaults of a system job's update strategy when no update block is given.
const (
	DefaultMaxParallel      = 1
	DefaultMinHealthyTime   = Duration(10 * time.Second)
	DefaultHealthyDeadline  = Duration(5 * time.Minute)
	DefaultProgressDeadline = Duration(10 * time.Minute)
)

// EffectiveUpdate is group g's update strategy: the group's, else the
// job's, else DefaultUpdateStrategy (the job parser stores the effective
// strategy on each group; a hand-written job may not). A sysbatch job has
// none.
func EffectiveUpdate(job *Job, g *Group) *UpdateStrategy {
	switch {
	case job.Type == JobTypeSysbatch:
		return nil
	case g.Update != nil:
		return g.Update
	case job.Update != nil:
		return job.Update
	}
	return DefaultUpdateStrategy()
}

// DefaultUpdateStrategy returns the strategy a system job gets when neither
// the job nor the group has an update block.
func DefaultUpdateStrategy() *UpdateStrategy {
	return &UpdateStrategy{
		MaxParallel:      DefaultMaxParallel,
		MinHealthyTime:   DefaultMinHealthyTime,
		HealthyDeadline:  DefaultHealthyDeadline,
		ProgressDeadline: DefaultProgressDeadline,
	}
}

// Rolling reports whether the strategy creates deployments (max_parallel > 0).
func (u *UpdateStrategy) Rolling() bool { return u != nil && u.MaxParallel > 0 }

// RestartPolicy governs restarts of a failed task on the same node.
type RestartPolicy struct {
	Attempts int         `json:"attempts"`
	Interval Duration    `json:"interval"`
	Delay    Duration    `json:"delay"`
	Mode     RestartMode `json:"mode"`
}

// DefaultRestartPolicy is Nomad's default for system/service jobs.
func DefaultRestartPolicy(t JobType) *RestartPolicy {
	if t == JobTypeSysbatch {
		return &RestartPolicy{Attempts: 3, Interval: Duration(24 * time.Hour), Delay: Duration(15 * time.Second), Mode: RestartModeFail}
	}
	return &RestartPolicy{Attempts: 2, Interval: Duration(30 * time.Minute), Delay: Duration(15 * time.Second), Mode: RestartModeFail}
}

// DisconnectStrategy governs allocations on a node that lost contact.
type DisconnectStrategy struct {
	LostAfter Duration      `json:"lost_after,omitempty"`
	Replace   *bool         `json:"replace,omitempty"`
	Reconcile ReconcileMode `json:"reconcile,omitempty"`
}

// LookupGroup returns the named group, or nil.
func (j *Job) LookupGroup(name string) *Group {
	for _, g := range j.Groups {
		if g.Name == name {
			return g
		}
	}
	return nil
}

// LookupTask returns the named task, or nil.
func (g *Group) LookupTask(name string) *Task {
	for _, t := range g.Tasks {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// SameSpec reports whether two versions declare the same job: everything
// but the version, the submit time, the stable flag and the revert mark.
func SameSpec(a, b *Job) bool {
	ca, cb := *a, *b
	ca.Version, cb.Version = 0, 0
	ca.SubmitTime, cb.SubmitTime = time.Time{}, time.Time{}
	ca.Stable, cb.Stable = false, false
	ca.RevertOf, cb.RevertOf = nil, nil
	ja, erra := json.Marshal(&ca)
	jb, errb := json.Marshal(&cb)
	return erra == nil && errb == nil && string(ja) == string(jb)
}
