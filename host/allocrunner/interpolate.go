package allocrunner

import (
	"maps"
	"strconv"
	"strings"

	"github.com/hivelet/hivelet/host/model"
)

// TaskEnv is what a task's `${...}` references resolve against: the node, the
// allocation, the task, and their directories. Building it and applying it
// are pure functions.
type TaskEnv struct {
	vars map[string]string
	// ports are the allocation's ports by label; their variables (fixed)
	// are set by the node and win over the task's own env.
	ports map[string]model.AllocatedPort
	fixed map[string]string
}

// NewTaskEnv builds the interpolation variables of one task of an allocation:
//   - node.unique.id, node.unique.name, node.datacenter, node.class,
//     node.pool (node.region is "global"),
//   - attr.<key> for each node attribute, meta.<key> for node meta, then group
//     and task meta (task wins),
//   - NOMAD_* and HIVELET_* for the allocation (ALLOC_ID, ALLOC_NAME,
//     ALLOC_INDEX, JOB_ID, JOB_NAME, GROUP_NAME, TASK_NAME, ALLOC_DIR,
//     TASK_DIR, DC, NODE_ID, JOB_VERSION),
//   - for each port the allocation holds (its group's network):
//     NOMAD_PORT_<label> and NOMAD_ALLOC_PORT_<label> (the port inside the
//     task: `to`, else the node's port), NOMAD_HOST_PORT_<label> (the
//     node's port), NOMAD_IP_<label> and NOMAD_HOST_IP_<label> (the node
//     address it is published on), NOMAD_ADDR_<label> and
//     NOMAD_HOST_ADDR_<label> (ip:node port); HIVELET_ spellings too.
func NewTaskEnv(node *model.Node, alloc *model.Allocation, job *model.Job, group *model.Group, task *model.Task, allocDir, taskDir string) TaskEnv {
	v := map[string]string{}
	if node != nil {
		v["node.unique.id"] = node.ID
		v["node.unique.name"] = node.Name
		v["node.datacenter"] = node.Datacenter
		v["node.class"] = node.Class
		v["node.pool"] = node.NodePool
		v["node.region"] = "global"
		for k, val := range node.Attributes {
			v["attr."+k] = val
		}
		for k, val := range node.Meta {
			v["meta."+k] = val
		}
	}
	if group != nil {
		for k, val := range group.Meta {
			v["meta."+k] = val
		}
	}
	if task != nil {
		for k, val := range task.Meta {
			v["meta."+k] = val
		}
	}
	rt := map[string]string{
		"ALLOC_ID":   alloc.ID,
		"ALLOC_NAME": alloc.Name,
		"ALLOC_DIR":  allocDir,
		"TASK_DIR":   taskDir,
		"GROUP_NAME": alloc.TaskGroup,
		"JOB_ID":     alloc.JobID,
		"NODE_ID":    alloc.NodeID,
	}
	if idx, ok := allocIndex(alloc.Name); ok {
		rt["ALLOC_INDEX"] = strconv.Itoa(idx)
	}
	if job != nil {
		name := job.Name
		if name == "" {
			name = job.ID
		}
		rt["JOB_NAME"] = name
		rt["JOB_VERSION"] = strconv.FormatUint(job.Version, 10)
	}
	if task != nil {
		rt["TASK_NAME"] = task.Name
	}
	if node != nil {
		rt["DC"] = node.Datacenter
	}
	for k, val := range rt {
		v["NOMAD_"+k] = val
		v["HIVELET_"+k] = val
	}
	e := TaskEnv{vars: v, ports: map[string]model.AllocatedPort{}, fixed: map[string]string{}}
	for _, p := range alloc.Ports {
		e.ports[p.Label] = p
		for k, val := range portVars(p) {
			if strings.Contains(k, "-") {
				// the job file's spelling: interpolation only
				v["NOMAD_"+k], v["HIVELET_"+k] = val, val
				continue
			}
			e.fixed["NOMAD_"+k] = val
			e.fixed["HIVELET_"+k] = val
		}
	}
	maps.Copy(v, e.fixed)
	return e
}

// portVars are the variables of one allocated port, without prefix,
// under the label as the environment writes it (model.EnvLabel: '-' as
// '_'); a label with a '-' also has them under its own spelling, for
// `${NOMAD_PORT_jaeger-thrift}` in the job file, never in the process
// environment (RuntimeEnv).
func portVars(p model.AllocatedPort) map[string]string {
	inTask := strconv.Itoa(p.InTask())
	host := strconv.Itoa(p.Value)
	out := map[string]string{}
	for _, l := range []string{model.EnvLabel(p.Label), p.Label} {
		out["PORT_"+l] = inTask
		out["ALLOC_PORT_"+l] = inTask
		out["HOST_PORT_"+l] = host
		out["IP_"+l] = p.HostIP
		out["HOST_IP_"+l] = p.HostIP
		out["ADDR_"+l] = p.Addr()
		out["HOST_ADDR_"+l] = p.Addr()
	}
	return out
}

// Port returns the allocation's port with the label.
func (e TaskEnv) Port(label string) (model.AllocatedPort, bool) {
	p, ok := e.ports[label]
	return p, ok
}

// allocIndex parses the index out of "<job>.<group>[<index>]".
func allocIndex(name string) (int, bool) {
	i := strings.LastIndexByte(name, '[')
	if i < 0 || !strings.HasSuffix(name, "]") {
		return 0, false
	}
	n, err := strconv.Atoi(name[i+1 : len(name)-1])
	return n, err == nil
}

// Vars returns a copy of the variables.
func (e TaskEnv) Vars() map[string]string { return maps.Clone(e.vars) }

// RuntimeEnv returns the NOMAD_*/HIVELET_* variables a task gets in its
// process environment.
func (e TaskEnv) RuntimeEnv() map[string]string {
	out := map[string]string{}
	for k, v := range e.vars {
		if (strings.HasPrefix(k, "NOMAD_") || strings.HasPrefix(k, "HIVELET_")) && !strings.Contains(k, "-") {
			out[k] = v
		}
	}
	return out
}

// Replace substitutes every `${name}` in s whose name is known. An unknown
// reference is left as written, so a typo shows in the task's output rather
// than silently becoming empty.
func (e TaskEnv) Replace(s string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		name := s[i+2 : i+j]
		b.WriteString(s[:i])
		if v, ok := e.vars[name]; ok {
			b.WriteString(v)
		} else {
			b.WriteString(s[i : i+j+1])
		}
		s = s[i+j+1:]
	}
}

// ReplaceAll interpolates every string inside a driver config value (maps
// and lists recursively), returning a new value; the input is not modified.
func (e TaskEnv) ReplaceAll(v any) any {
	switch x := v.(type) {
	case string:
		return e.Replace(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[k] = e.ReplaceAll(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = e.ReplaceAll(val)
		}
		return out
	case []string:
		out := make([]string, len(x))
		for i, val := range x {
			out[i] = e.Replace(val)
		}
		return out
	case map[string]string:
		out := make(map[string]string, len(x))
		for k, val := range x {
			out[k] = e.Replace(val)
		}
		return out
	default:
		return v
	}
}

// Env builds a task's process environment: the runtime variables, then the
// task's own env (interpolated), which wins, except over the port
// variables: drivers read the allocation's ports from them (docker's
// ports = ["label"]), so they stay what the node allocated.
func (e TaskEnv) Env(taskEnv map[string]string) map[string]string {
	out := e.RuntimeEnv()
	for k, v := range taskEnv {
		out[k] = e.Replace(v)
	}
	maps.Copy(out, e.fixed)
	return out
}
