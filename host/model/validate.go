package model

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FieldError is one semantic problem with a job, located by the path of the
// offending field in the job's JSON form ("groups[0].update.canary"). It
// carries no file position: the HCL parser maps the path back to the line and
// column it read the field from, the JSON parser prints the path.
type FieldError struct {
	Path    string
	Message string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

// ValidationErrors is every problem Validate found, in the order the fields
// appear in the job.
type ValidationErrors []*FieldError

func (es ValidationErrors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// MaxGroupCount bounds a group's count: the copies of a system group on one
// node. Every agent allocates per required name, so an unbounded count in one
// bad declaration could exhaust every node's memory.
const MaxGroupCount = 1000

// Validate checks the semantic rules of a job that a strict decode cannot:
// ranges, required fields, unique names, the ordering of the update
// deadlines, and what each job type accepts. It reports every problem, not
// only the first, as ValidationErrors; nil means the job is valid.
//
// Validate expects the effective form (each group's Update already inherited
// and defaulted, as jobspec produces it) but does not require it: a nil group
// Update or Restart is not an error.
func (j *Job) Validate() error {
	v := &validator{}
	v.job(j)
	if len(v.errs) == 0 {
		return nil
	}
	return v.errs
}

type validator struct{ errs ValidationErrors }

func (v *validator) add(path, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// nameRE is what IDs and group/task names may contain: they become NATS KV
// keys and allocation names ("<job>.<group>[<index>]").
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

const maxNameLen = 128

func (v *validator) name(path, what, s string) {
	switch {
	case s == "":
		v.add(path, "%s must not be empty", what)
	case len(s) > maxNameLen:
		v.add(path, "%s %q is longer than %d characters", what, s, maxNameLen)
	case !nameRE.MatchString(s):
		v.add(path, "%s %q may contain only letters, digits, '_', '-' and '.', and must not start with '-' or '.' (it becomes a NATS key)", what, s)
	}
}

func (v *validator) job(j *Job) {
	v.name("id", "job id", j.ID)
	if j.Type == "" {
		v.add("type", "job type is missing: add type = \"system\" or type = \"sysbatch\" (hivelet has no central scheduler, so it runs only node-bound job types; Nomad's default, service, is not one)")
	} else if !validEnum(j.Type, JobTypes) {
		v.add("type", "job type %q is not supported: hivelet has no central scheduler, so it runs only node-bound job types (%s)", j.Type, joinEnum(JobTypes))
	}
	if j.Priority < 0 || j.Priority > 100 {
		v.add("priority", "priority must be between 1 and 100, got %d", j.Priority)
	}
	for i, dc := range j.Datacenters {
		if strings.TrimSpace(dc) == "" {
			v.add(fmt.Sprintf("datacenters[%d]", i), "datacenter names must not be empty")
		}
	}
	v.meta("meta", j.Meta)
	v.constraints("constraints", j.Constraints)
	if strings.TrimSpace(j.Region) == "" && j.Region != "" {
		v.add("region", "region must not be blank")
	}
	if j.Update != nil {
		if j.Type == JobTypeSysbatch {
			v.add("update", "sysbatch jobs take no update block: each node runs the batch to completion, there is no rollout to pace")
		} else {
			v.update("update", j.Update)
		}
	}
	if len(j.Groups) == 0 {
		v.add("groups", "a job needs at least one group")
	}
	seen := map[string]bool{}
	for i, g := range j.Groups {
		path := fmt.Sprintf("groups[%d]", i)
		if g == nil {
			v.add(path, "group must not be null")
			continue
		}
		if g.Name != "" && seen[g.Name] {
			v.add(join(path, "name"), "duplicate group name %q: group names must be unique within a job", g.Name)
		}
		seen[g.Name] = true
		v.group(path, j.Type, g)
	}
}

func (v *validator) group(path string, jt JobType, g *Group) {
	v.name(join(path, "name"), "group name", g.Name)
	if g.Count < 0 {
		v.add(join(path, "count"), "count must be 0 or more, got %d", g.Count)
	}
	if g.Count > MaxGroupCount {
		v.add(join(path, "count"), "count must be at most %d (copies of the group on every node), got %d", MaxGroupCount, g.Count)
	}
	if g.Update != nil {
		if jt == JobTypeSysbatch {
			v.add(join(path, "update"), "sysbatch jobs take no update block: each node runs the batch to completion, there is no rollout to pace")
		} else {
			v.update(join(path, "update"), g.Update)
		}
	}
	if g.Restart != nil {
		v.restart(join(path, "restart"), g.Restart)
	}
	if d := g.Disconnect; d != nil {
		if d.LostAfter < 0 {
			v.add(join(path, "disconnect.lost_after"), "lost_after must not be negative, got %s", d.LostAfter)
		}
		if d.Reconcile != "" && !validEnum(d.Reconcile, ReconcileModes) {
			v.add(join(path, "disconnect.reconcile"), "unknown reconcile mode %q (allowed: %s)", d.Reconcile, joinEnum(ReconcileModes))
		}
	}
	v.constraints(join(path, "constraints"), g.Constraints)
	v.meta(join(path, "meta"), g.Meta)
	if g.Network != nil {
		v.network(join(path, "network"), g.Network)
		v.bridge(join(path, "network"), g)
	}
	v.volumes(path, g)
	if g.ShutdownDelay < 0 {
		v.add(join(path, "shutdown_delay"), "shutdown_delay must not be negative, got %s", g.ShutdownDelay)
	}
	if g.MaxRunDuration < 0 {
		v.add(join(path, "max_run_duration"), "max_run_duration must not be negative, got %s", g.MaxRunDuration)
	} else if g.MaxRunDuration > 0 && jt != JobTypeSysbatch {
		v.add(join(path, "max_run_duration"), "max_run_duration applies to sysbatch jobs only: a system job's tasks run until the job is stopped")
	}
	if len(g.Tasks) == 0 {
		v.add(join(path, "tasks"), "group %q needs at least one task", g.Name)
	}
	mains := 0
	for _, t := range g.Tasks {
		if t != nil && !t.IsInit() && !t.IsPoststart() && !t.IsPoststop() {
			mains++
		}
	}
	if len(g.Tasks) > 0 && mains == 0 {
		v.add(join(path, "tasks"), "group %q has only lifecycle hooks: it needs a main task (one without a lifecycle block, or a prestart sidecar) for them to run around", g.Name)
	}
	seen := map[string]bool{}
	for i, t := range g.Tasks {
		tp := fmt.Sprintf("%s.tasks[%d]", path, i)
		if t == nil {
			v.add(tp, "task must not be null")
			continue
		}
		if t.Name != "" && seen[t.Name] {
			v.add(join(tp, "name"), "duplicate task name %q: task names must be unique within a group", t.Name)
		}
		seen[t.Name] = true
		v.task(tp, t)
		for j, s := range t.Services {
			v.servicePorts(fmt.Sprintf("%s.services[%d]", tp, j), s, g.Network)
		}
	}
	for i, s := range g.Services {
		sp := fmt.Sprintf("%s.services[%d]", path, i)
		v.service(sp, s)
		v.servicePorts(sp, s, g.Network)
		for j, c := range s.Checks {
			if c.CheckRestart != nil && c.CheckRestart.Limit > 0 {
				v.add(fmt.Sprintf("%s.checks[%d].check_restart", sp, j), "check_restart on a group service's check: hivelet's group checks name no task to restart; declare the service inside the task it checks")
			}
			if c.Type == CheckScript {
				v.add(fmt.Sprintf("%s.checks[%d].type", sp, j), "a script check on a group service: a script runs inside a task, and hivelet's group checks name none; declare the service inside the task it checks")
			}
		}
	}
}

// servicePorts checks that a service or check port written as a label names
// a port of the group's network.
func (v *validator) servicePorts(path string, s Service, n *Network) {
	check := func(p, port string) {
		if !IsPortLabel(port) {
			return
		}
		var labels []string
		if n != nil {
			for _, np := range n.Ports {
				if np.Label == port {
					return
				}
				if q := strconv.Quote(np.Label); !slices.Contains(labels, q) {
					labels = append(labels, q)
				}
			}
		}
		if len(labels) == 0 {
			v.add(p, "port %q is not a port label of the group's network block (write network { port %q {} } in the group, or give a number)", port, port)
			return
		}
		v.add(p, "port %q is not a port label of the group's network block, which has %s (add port %q {} to it, or give a number)", port, strings.Join(labels, ", "), port)
	}
	check(join(path, "port"), s.Port)
	for i, c := range s.Checks {
		check(fmt.Sprintf("%s.checks[%d].port", path, i), c.Port)
	}
}

// IsPortLabel reports whether a service or check port is written as a port
// label (not a number, not host:port, not an interpolation).
func IsPortLabel(port string) bool {
	if port == "" || !portLabelRE.MatchString(port) {
		return false
	}
	_, err := strconv.Atoi(port)
	return err != nil
}

func (v *validator) task(path string, t *Task) {
	v.name(join(path, "name"), "task name", t.Name)
	if strings.TrimSpace(t.Driver) == "" {
		v.add(join(path, "driver"), "task %q needs a driver (for example \"docker\", \"exec\" or \"mock\")", t.Name)
	}
	if t.KillTimeout < 0 {
		v.add(join(path, "kill_timeout"), "kill_timeout must not be negative, got %s", t.KillTimeout)
	}
	if t.Resources.CPU < 0 {
		v.add(join(path, "resources.cpu"), "cpu must be 0 or more MHz, got %d", t.Resources.CPU)
	}
	if t.Resources.MemoryMB < 0 {
		v.add(join(path, "resources.memory_mb"), "memory must be 0 or more MiB, got %d", t.Resources.MemoryMB)
	}
	for _, k := range slices.Sorted(maps.Keys(t.Env)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			v.add(join(path, "env"), "environment variable name %q must be non-empty and contain no '=' or NUL", k)
		}
	}
	v.meta(join(path, "meta"), t.Meta)
	v.artifacts(path, t.Artifacts)
	v.templates(path, t.Templates)
	if t.Lifecycle != nil && !validEnum(t.Lifecycle.Hook, LifecycleHooks) {
		v.add(join(path, "lifecycle.hook"), "lifecycle hook %q is not supported (allowed: %s)", t.Lifecycle.Hook, joinEnum(LifecycleHooks))
	}
	if t.IsPoststop() && t.Lifecycle.Sidecar {
		v.add(join(path, "lifecycle.sidecar"), "a poststop task runs once the others are gone, to completion: it cannot be a sidecar")
	}
	for i, s := range t.Services {
		v.service(fmt.Sprintf("%s.services[%d]", path, i), s)
	}
}

func (v *validator) service(path string, s Service) {
	for i, c := range s.Checks {
		cp := fmt.Sprintf("%s.checks[%d]", path, i)
		if !validEnum(c.Type, CheckTypes) {
			v.add(join(cp, "type"), "check type %q is not supported (allowed: %s)", c.Type, joinEnum(CheckTypes))
		}
		if c.Type == CheckHTTP && c.Path == "" {
			v.add(join(cp, "path"), "an http check needs a path, for example \"/health\"")
		}
		if c.Type == CheckScript {
			if strings.TrimSpace(c.Command) == "" {
				v.add(join(cp, "command"), "a script check needs a command, run inside the task (for example \"/bin/sh\" with args)")
			}
		} else {
			if c.Port == "" && s.Port == "" {
				v.add(join(cp, "port"), "a check needs a port: set port on the service or on the check")
			}
			if c.Command != "" || len(c.Args) > 0 {
				v.add(join(cp, "command"), "command and args belong to a script check (type = \"script\"), this one is %s", c.Type)
			}
		}
		if c.SuccessBeforePassing < 0 {
			v.add(join(cp, "success_before_passing"), "success_before_passing must not be negative (got %d)", c.SuccessBeforePassing)
		}
		if c.FailuresBeforeCritical < 0 {
			v.add(join(cp, "failures_before_critical"), "failures_before_critical must not be negative (got %d)", c.FailuresBeforeCritical)
		}
		if c.Interval <= 0 {
			v.add(join(cp, "interval"), "a check needs a positive interval, for example \"10s\" (got %s)", c.Interval)
		}
		if c.Timeout <= 0 {
			v.add(join(cp, "timeout"), "a check needs a positive timeout, for example \"2s\" (got %s)", c.Timeout)
		} else if c.Interval > 0 && c.Timeout > c.Interval {
			v.add(join(cp, "timeout"), "check timeout (%s) must not be longer than its interval (%s)", c.Timeout, c.Interval)
		}
		if cr := c.CheckRestart; cr != nil {
			if cr.Limit < 0 {
				v.add(join(cp, "check_restart.limit"), "check_restart limit must not be negative (got %d; 0 restarts nothing)", cr.Limit)
			}
			if cr.Grace < 0 {
				v.add(join(cp, "check_restart.grace"), "check_restart grace must not be negative (got %s)", cr.Grace)
			}
		}
	}
}

// HealthCheck values an update strategy accepts ("" means checks).
var healthChecks = []string{"checks", "task_states", "manual"}

func (v *validator) update(path string, u *UpdateStrategy) {
	if u.MaxParallel < 0 {
		v.add(join(path, "max_parallel"), "max_parallel must be 0 or more, got %d (0 means: no deployment, update every node at once)", u.MaxParallel)
	}
	if u.Canary < 0 || u.Canary > 100 {
		v.add(join(path, "canary"), "canary is a percentage of the ready nodes and must be between 0 and 100, got %d", u.Canary)
	} else if u.Canary > 0 && u.MaxParallel == 0 {
		v.add(join(path, "canary"), "canary needs max_parallel > 0: with max_parallel = 0 there is no deployment to promote the canaries")
	}
	for _, d := range []struct {
		field string
		val   Duration
	}{{"min_healthy_time", u.MinHealthyTime}, {"healthy_deadline", u.HealthyDeadline}, {"progress_deadline", u.ProgressDeadline}} {
		if d.val < 0 {
			v.add(join(path, d.field), "%s must not be negative, got %s", d.field, d.val)
		}
	}
	if u.HealthyDeadline > 0 && u.MinHealthyTime >= u.HealthyDeadline {
		v.add(join(path, "min_healthy_time"), "min_healthy_time (%s) must be shorter than healthy_deadline (%s): an allocation could never stay healthy long enough in time", u.MinHealthyTime, u.HealthyDeadline)
	}
	if u.ProgressDeadline > 0 && u.HealthyDeadline >= u.ProgressDeadline {
		v.add(join(path, "healthy_deadline"), "healthy_deadline (%s) must be shorter than progress_deadline (%s), or the deployment fails before an allocation may turn healthy", u.HealthyDeadline, u.ProgressDeadline)
	}
	if u.HealthCheck != "" && !slices.Contains(healthChecks, u.HealthCheck) {
		v.add(join(path, "health_check"), "unknown health_check %q (allowed: %s)", u.HealthCheck, strings.Join(healthChecks, ", "))
	}
	if u.CanaryPolicy != nil {
		v.policy(join(path, "canary_policy"), u.CanaryPolicy)
	}
	if u.CompletionPolicy != nil {
		v.policy(join(path, "completion_policy"), u.CompletionPolicy)
	}
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func (v *validator) policy(path string, p *PolicyRef) {
	v.name(join(path, "name"), "policy name", p.Name)
	if p.Digest != "" && !digestRE.MatchString(p.Digest) {
		v.add(join(path, "digest"), "digest %q must be \"sha256:\" followed by 64 lowercase hex digits", p.Digest)
	}
	for _, k := range slices.Sorted(maps.Keys(p.Params)) {
		if k == "" {
			v.add(join(path, "params"), "policy parameter names must not be empty")
		}
	}
}

func (v *validator) restart(path string, r *RestartPolicy) {
	if r.Attempts < 0 {
		v.add(join(path, "attempts"), "attempts must be 0 or more, got %d", r.Attempts)
	}
	if r.Delay < 0 {
		v.add(join(path, "delay"), "delay must not be negative, got %s", r.Delay)
	}
	if r.Interval < 0 {
		v.add(join(path, "interval"), "interval must not be negative, got %s", r.Interval)
	}
	if !validEnum(r.Mode, RestartModes) {
		v.add(join(path, "mode"), "unknown restart mode %q (allowed: %s)", r.Mode, joinEnum(RestartModes))
	}
	if r.Attempts > 0 && r.Delay >= 0 && r.Interval >= 0 {
		if total := time.Duration(r.Delay) * time.Duration(r.Attempts); total > time.Duration(r.Interval) || total < 0 {
			v.add(join(path, "interval"), "interval (%s) must be at least attempts × delay (%d × %s): the attempts could not fit in the interval", r.Interval, r.Attempts, r.Delay)
		}
	}
}

func (v *validator) constraints(path string, cs []Constraint) {
	for i, c := range cs {
		v.constraint(fmt.Sprintf("%s[%d]", path, i), c)
	}
}

// versionRE matches one clause of a version constraint such as ">= 1.2.0".
// The pessimistic operator "~>" is not accepted: the node's constraint
// check (host/agent) does not evaluate it, and a constraint that can never
// match is better refused here than silently unmet on every node.
var versionRE = regexp.MustCompile(`^\s*(=|!=|>|<|>=|<=)?\s*v?[0-9]+(\.[0-9]+)*(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?\s*$`)

func (v *validator) constraint(path string, c Constraint) {
	if c.Operator == "distinct_hosts" || c.Operator == "distinct_property" {
		v.add(join(path, "operator"), "constraint operator %q has no meaning for hivelet: a system job already runs at most once per node; remove the constraint", c.Operator)
		return
	}
	if !validEnum(c.Operator, ConstraintOperators) {
		v.add(join(path, "operator"), "unknown constraint operator %q (allowed: %s)", c.Operator, joinEnum(ConstraintOperators))
		return
	}
	if strings.TrimSpace(c.Attribute) == "" {
		v.add(join(path, "attribute"), "constraint needs an attribute, for example \"${attr.kernel.name}\"")
	}
	switch c.Operator {
	case OpIsSet, OpIsNotSet:
		if c.Value != "" {
			v.add(join(path, "value"), "operator %q takes no value", c.Operator)
		}
		return
	}
	if c.Value == "" {
		v.add(join(path, "value"), "operator %q needs a value", c.Operator)
		return
	}
	if strings.Contains(c.Value, "${") {
		return // resolved on the node at run time; checked there
	}
	switch c.Operator {
	case OpRegexp:
		if _, err := regexp.Compile(c.Value); err != nil {
			v.add(join(path, "value"), "bad regular expression %q: %v", c.Value, err)
		}
	case OpVersion, OpSemver:
		for _, clause := range strings.Split(c.Value, ",") {
			if !versionRE.MatchString(clause) {
				v.add(join(path, "value"), "bad version constraint %q: write clauses such as \">= 1.2.0, < 2.0\" (operators =, !=, >, >=, <, <=)", c.Value)
				break
			}
		}
	}
}

func (v *validator) meta(path string, m map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k == "" {
			v.add(path, "meta keys must not be empty")
		}
	}
}

func joinEnum[T ~string](vals []T) string {
	s := make([]string, len(vals))
	for i, x := range vals {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}
