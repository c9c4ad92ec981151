package jobspec

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/typo"
)

// parser reads one HCL job file into the model. It walks the native-syntax
// tree itself (rather than decoding through a fixed schema) so that it can
// tell an unsupported Nomad stanza from a misspelled key, keep "${...}" text,
// and report every problem with its position.
type parser struct {
	file string
	src  []byte
	errs Errors
	// pos maps the JSON path of each field read (as model.Job.Validate
	// names it) to where in the file it was written, so that semantic
	// errors found on the model point back to the file.
	pos     map[string]hcl.Range
	jobType model.JobType
	// groupTasks is how many tasks the group being read declares (a
	// task-level restart block is its group's when it is the only one).
	groupTasks int
	// inputs give the file's variables their values; ctx is what var. and
	// local. references and function calls are evaluated in (set by
	// variables before anything else is read, never nil after); declared
	// names the variables and locals by scope, for errors.
	inputs   Inputs
	ctx      *hcl.EvalContext
	declared map[string][]string
	warns    Errors
	// legacyNetwork is the group network a task's resources gave (nil:
	// none yet), to tell it from the group's own in an error.
	legacyNetwork *model.Network
}

// warnf records something accepted and ignored (Inputs.Warn).
func (p *parser) warnf(rng hcl.Range, format string, args ...any) {
	p.warns = append(p.warns, &Error{File: p.file, Line: rng.Start.Line, Column: rng.Start.Column, Message: fmt.Sprintf(format, args...)})
}

func (p *parser) errorf(rng hcl.Range, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: rng.Start.Line, Column: rng.Start.Column, Message: fmt.Sprintf(format, args...)})
}

func (p *parser) diags(ds hcl.Diagnostics) {
	for _, d := range ds {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		line, col := 0, 0
		if d.Subject != nil {
			line, col = d.Subject.Start.Line, d.Subject.Start.Column
		}
		p.errs = append(p.errs, &Error{File: p.file, Line: line, Column: col, Message: msg})
	}
}

func (p *parser) at(path string, rng hcl.Range) { p.pos[path] = rng }

// ---- body content -------------------------------------------------------

// spec says what a block accepts.
type spec struct {
	what   string            // "job", "update", ... for messages
	attrs  []string          // accepted attribute names
	blocks []string          // accepted block types
	extra  map[string]string // context-specific unsupported stanzas
}

type content struct {
	attrs  map[string]*hclsyntax.Attribute
	blocks map[string][]*hclsyntax.Block
}

// content sorts a body into the attributes and blocks the spec accepts,
// reporting unsupported stanzas and unknown keys.
func (p *parser) content(body *hclsyntax.Body, s spec) content {
	c := content{attrs: map[string]*hclsyntax.Attribute{}, blocks: map[string][]*hclsyntax.Block{}}
	for _, a := range sortedAttrs(body) {
		switch {
		case slices.Contains(s.attrs, a.Name):
			c.attrs[a.Name] = a
		case p.refuse(a.Name, a.NameRange, s):
		case slices.Contains(s.blocks, a.Name):
			p.errorf(a.NameRange, "%s is a block in the %s block, not an attribute: write %s { ... }", a.Name, s.what, a.Name)
		default:
			p.errorf(a.NameRange, "unknown attribute %q in the %s block%s", a.Name, s.what, suggest(a.Name, s.attrs, s.blocks))
		}
	}
	for _, b := range body.Blocks {
		rng := b.TypeRange
		switch {
		case slices.Contains(s.blocks, b.Type):
			c.blocks[b.Type] = append(c.blocks[b.Type], b)
		case p.refuse(b.Type, rng, s):
		case slices.Contains(s.attrs, b.Type):
			p.errorf(rng, "%s is an attribute in the %s block, not a block: write %s = ...", b.Type, s.what, b.Type)
		default:
			p.errorf(rng, "unknown block %q in the %s block%s", b.Type, s.what, suggest(b.Type, s.attrs, s.blocks))
		}
	}
	return c
}

func (p *parser) refuse(name string, rng hcl.Range, s spec) bool {
	why, ok := s.extra[name]
	if !ok {
		why, ok = unsupported[name]
	}
	if ok {
		p.errorf(rng, "stanza %q is not supported by hivelet (%s)", name, why)
	}
	return ok
}

func sortedAttrs(body *hclsyntax.Body) []*hclsyntax.Attribute {
	as := make([]*hclsyntax.Attribute, 0, len(body.Attributes))
	for _, a := range body.Attributes {
		as = append(as, a)
	}
	sort.Slice(as, func(i, j int) bool { return as[i].NameRange.Start.Byte < as[j].NameRange.Start.Byte })
	return as
}

// one returns the single block of a type, reporting extra copies.
func (p *parser) one(c content, typ string) *hclsyntax.Block {
	bs := c.blocks[typ]
	if len(bs) == 0 {
		return nil
	}
	for _, extra := range bs[1:] {
		p.errorf(extra.TypeRange, "only one %s block is allowed here (the first is at line %d)", typ, bs[0].TypeRange.Start.Line)
	}
	return bs[0]
}

// labels checks a block's label count; want is the label's meaning.
func (p *parser) labels(b *hclsyntax.Block, want string) (string, bool) {
	if want == "" {
		if len(b.Labels) != 0 {
			p.errorf(b.LabelRanges[0], "a %s block takes no label", b.Type)
			return "", false
		}
		return "", true
	}
	if len(b.Labels) != 1 {
		rng := b.TypeRange
		if len(b.LabelRanges) > 1 {
			rng = b.LabelRanges[1]
		}
		p.errorf(rng, "a %s block takes exactly one label, its %s: %s \"name\" { ... }", b.Type, want, b.Type)
		if len(b.Labels) == 0 {
			return "", false
		}
	}
	return b.Labels[0], true
}

// ---- typed attribute values ------------------------------------------------

func (p *parser) typed(a *hclsyntax.Attribute, want cty.Type, what string) (cty.Value, bool) {
	v, ok := p.value(a.Expr)
	if !ok {
		return cty.NilVal, false
	}
	if v.IsNull() {
		p.errorf(a.Expr.Range(), "%s must not be null", a.Name)
		return cty.NilVal, false
	}
	cv, err := convert.Convert(v, want)
	if err != nil {
		p.errorf(a.Expr.Range(), "%s must be %s, got %s", a.Name, what, typeName(v))
		return cty.NilVal, false
	}
	return cv, true
}

func (p *parser) str(a *hclsyntax.Attribute, path string) (string, bool) {
	p.at(path, a.Expr.Range())
	v, ok := p.typed(a, cty.String, "a string")
	if !ok {
		return "", false
	}
	return v.AsString(), true
}

func (p *parser) integer(a *hclsyntax.Attribute, path string) (int, bool) {
	p.at(path, a.Expr.Range())
	v, ok := p.typed(a, cty.Number, "a whole number")
	if !ok {
		return 0, false
	}
	i, ok := wholeInt(v)
	if !ok {
		if v.AsBigFloat().IsInt() {
			p.errorf(a.Expr.Range(), "%s is out of range, got %s", a.Name, goString(v))
		} else {
			p.errorf(a.Expr.Range(), "%s must be a whole number, got %s", a.Name, goString(v))
		}
		return 0, false
	}
	return i, true
}

func (p *parser) boolean(a *hclsyntax.Attribute, path string) (bool, bool) {
	p.at(path, a.Expr.Range())
	v, ok := p.typed(a, cty.Bool, "true or false")
	if !ok {
		return false, false
	}
	return v.True(), true
}

func (p *parser) duration(a *hclsyntax.Attribute, path string) (model.Duration, bool) {
	p.at(path, a.Expr.Range())
	v, ok := p.value(a.Expr)
	if !ok {
		return 0, false
	}
	if v.IsNull() || v.Type() != cty.String {
		p.errorf(a.Expr.Range(), "%s must be a duration string such as \"30s\" or \"1m30s\", got %s", a.Name, typeName(v))
		return 0, false
	}
	d, err := time.ParseDuration(v.AsString())
	if err != nil {
		p.errorf(a.Expr.Range(), "%s: bad duration %q: write it like \"30s\", \"5m\" or \"1h30m\"", a.Name, v.AsString())
		return 0, false
	}
	if d < 0 {
		p.errorf(a.Expr.Range(), "%s must not be negative, got %s", a.Name, v.AsString())
		return 0, false
	}
	return model.Duration(d), true
}

func (p *parser) strList(a *hclsyntax.Attribute, path string) ([]string, bool) {
	p.at(path, a.Expr.Range())
	v, ok := p.typed(a, cty.List(cty.String), "a list of strings")
	if !ok {
		return nil, false
	}
	out := []string{}
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() {
			p.errorf(a.Expr.Range(), "%s must not contain null", a.Name)
			return nil, false
		}
		out = append(out, e.AsString())
	}
	return out, true
}

// strMap reads a string map written either as an attribute (name = { ... })
// or as a block (name { key = "value" }).
func (p *parser) strMap(c content, name, path string) map[string]string {
	a := c.attrs[name]
	b := p.one(c, name)
	switch {
	case a != nil && b != nil:
		p.errorf(b.TypeRange, "%s is given both as an attribute (line %d) and as a block; keep one", name, a.NameRange.Start.Line)
		return nil
	case a != nil:
		p.at(path, a.Expr.Range())
		v, ok := p.typed(a, cty.Map(cty.String), "a map of strings")
		if !ok {
			return nil
		}
		out := map[string]string{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			if e.IsNull() {
				p.errorf(a.Expr.Range(), "%s value %q must not be null", name, k.AsString())
				continue
			}
			out[k.AsString()] = e.AsString()
		}
		return out
	case b != nil:
		p.at(path, b.TypeRange)
		if _, ok := p.labels(b, ""); !ok {
			return nil
		}
		for _, nested := range b.Body.Blocks {
			p.errorf(nested.TypeRange, "the %s block holds only key = \"value\" pairs, not blocks", name)
		}
		out := map[string]string{}
		for _, kv := range sortedAttrs(b.Body) {
			v, ok := p.typed(kv, cty.String, "a string")
			if ok {
				out[kv.Name] = v.AsString()
			}
		}
		return out
	}
	return nil
}

// ---- the job ----------------------------------------------------------------

func (p *parser) parseFile(body *hclsyntax.Body) *model.Job {
	c := p.content(body, spec{what: "top-level", blocks: []string{"job", "variable", "variables", "locals"}})
	if !p.variables(c) {
		return nil
	}
	jobs := c.blocks["job"]
	if len(jobs) == 0 {
		if len(p.errs) == 0 {
			p.errorf(body.SrcRange, "no job block: a job file declares one job \"name\" { ... }")
		}
		return nil
	}
	for _, extra := range jobs[1:] {
		p.errorf(extra.TypeRange, "a job file declares exactly one job (the first is at line %d)", jobs[0].TypeRange.Start.Line)
	}
	return p.job(jobs[0])
}

var (
	jobSpec = spec{what: "job",
		attrs:  []string{"type", "datacenters", "node_pool", "priority", "namespace", "name", "meta", "region"},
		blocks: []string{"group", "update", "constraint", "meta"}}
	groupSpec = spec{what: "group",
		attrs:  []string{"count", "meta", "max_run_duration", "shutdown_delay"},
		blocks: []string{"task", "update", "restart", "disconnect", "constraint", "meta", "network", "service", "ephemeral_disk", "consul", "volume"},
		extra:  unsupportedInGroup}
	taskSpec = spec{what: "task",
		attrs:  []string{"driver", "user", "kill_timeout", "kill_signal", "config", "env", "meta", "shutdown_delay"},
		blocks: []string{"config", "env", "meta", "resources", "service", "constraint", "template", "logs", "lifecycle", "artifact", "restart", "volume_mount"},
		extra:  unsupportedInTask}
	updateSpec = spec{what: "update",
		attrs: []string{"max_parallel", "canary", "auto_promote", "auto_revert", "min_healthy_time", "healthy_deadline",
			"progress_deadline", "health_check", "stagger", "canary_policy", "completion_policy"},
		blocks: []string{"canary_policy", "completion_policy"}}
	restartSpec    = spec{what: "restart", attrs: []string{"attempts", "interval", "delay", "mode"}}
	disconnectSpec = spec{what: "disconnect", attrs: []string{"lost_after", "replace", "reconcile"},
		extra: map[string]string{"stop_on_client_after": "a node cut off from the fleet keeps running its tasks in hivelet"}}
	constraintSpec = spec{what: "constraint", attrs: []string{"attribute", "operator", "value",
		"version", "semver", "regexp", "set_contains", "set_contains_any", "distinct_hosts", "distinct_property"}}
	resourcesSpec = spec{what: "resources", attrs: []string{"cpu", "memory"}, blocks: []string{"network"}}
	logsSpec      = spec{what: "logs", attrs: []string{"max_files", "max_file_size", "disabled", "enabled"}}
	serviceSpec   = spec{what: "service", attrs: []string{"name", "port", "provider", "tags", "address_mode", "meta"}, blocks: []string{"check", "check_restart", "meta"},
		extra: unsupportedInService}
	checkSpec = spec{what: "check", attrs: []string{"name", "type", "path", "port", "interval", "timeout", "success_before_passing", "failures_before_critical", "address_mode", "command", "args"},
		blocks: []string{"check_restart"},
		extra:  unsupportedInCheck}
	checkRestartSpec = spec{what: "check_restart", attrs: []string{"limit", "grace", "ignore_warnings"}}
	groupConsulSpec  = spec{what: "consul", attrs: []string{"cluster", "namespace", "partition"}}
)

func (p *parser) job(b *hclsyntax.Block) *model.Job {
	j := &model.Job{}
	p.at("", b.DefRange())
	id, _ := p.labels(b, "job ID")
	j.ID = id
	if len(b.LabelRanges) > 0 {
		p.at("id", b.LabelRanges[0])
	}
	c := p.content(b.Body, jobSpec)
	p.at("type", b.DefRange())
	if a := c.attrs["type"]; a != nil {
		s, _ := p.str(a, "type")
		j.Type = model.JobType(s)
	}
	p.jobType = j.Type
	if a := c.attrs["name"]; a != nil {
		j.Name, _ = p.str(a, "name")
	}
	if a := c.attrs["namespace"]; a != nil {
		j.Namespace, _ = p.str(a, "namespace")
	}
	if a := c.attrs["region"]; a != nil {
		// A fleet is one region: the value is recorded, nothing reads it.
		j.Region, _ = p.str(a, "region")
	}
	if a := c.attrs["datacenters"]; a != nil {
		j.Datacenters, _ = p.strList(a, "datacenters")
		for i := range j.Datacenters {
			p.at(fmt.Sprintf("datacenters[%d]", i), a.Expr.Range())
		}
	}
	if a := c.attrs["node_pool"]; a != nil {
		j.NodePool, _ = p.str(a, "node_pool")
	}
	if a := c.attrs["priority"]; a != nil {
		j.Priority, _ = p.integer(a, "priority")
	}
	j.Meta = p.strMap(c, "meta", "meta")
	for _, cb := range c.blocks["constraint"] {
		if con, ok := p.constraint(cb, fmt.Sprintf("constraints[%d]", len(j.Constraints))); ok {
			j.Constraints = append(j.Constraints, con)
		}
	}
	var jobUpdate *updateFields
	if ub := p.one(c, "update"); ub != nil {
		jobUpdate = p.update(ub)
		j.Update = jobUpdate.over(model.DefaultUpdateStrategy())
		jobUpdate.record(p, "update", ub.TypeRange, nil)
	}
	p.at("groups", b.DefRange())
	for _, gb := range c.blocks["group"] {
		j.Groups = append(j.Groups, p.group(gb, fmt.Sprintf("groups[%d]", len(j.Groups)), j.Type, jobUpdate))
	}
	return j
}

func (p *parser) group(b *hclsyntax.Block, path string, jt model.JobType, jobUpdate *updateFields) *model.Group {
	g := &model.Group{Count: 1}
	p.at(path, b.DefRange())
	g.Name, _ = p.labels(b, "group name")
	if len(b.LabelRanges) > 0 {
		p.at(path+".name", b.LabelRanges[0])
	}
	c := p.content(b.Body, groupSpec)
	if a := c.attrs["count"]; a != nil {
		g.Count, _ = p.integer(a, path+".count")
	}
	g.Meta = p.strMap(c, "meta", path+".meta")
	if nb := p.one(c, "network"); nb != nil {
		g.Network = p.network(nb, path+".network")
	}
	p.volumes(c, path, g)
	if a := c.attrs["max_run_duration"]; a != nil {
		g.MaxRunDuration, _ = p.duration(a, path+".max_run_duration")
	}
	if a := c.attrs["shutdown_delay"]; a != nil {
		g.ShutdownDelay, _ = p.duration(a, path+".shutdown_delay")
	}
	if cb := p.one(c, "consul"); cb != nil {
		p.groupConsul(cb)
	}
	if eb := p.one(c, "ephemeral_disk"); eb != nil {
		p.ephemeralDisk(eb)
	}

	// Update: defaults, then the job's block, then the group's, field by
	// field. A sysbatch job keeps only what was written, so that Validate
	// can refuse it.
	var groupUpdate *updateFields
	ub := p.one(c, "update")
	if ub != nil {
		groupUpdate = p.update(ub)
	}
	if jt != model.JobTypeSysbatch || groupUpdate != nil {
		g.Update = model.DefaultUpdateStrategy()
		p.at(path+".update", b.DefRange())
		if jobUpdate != nil {
			g.Update = jobUpdate.over(g.Update)
			jobUpdate.record(p, path+".update", jobUpdate.block, nil)
		}
		if groupUpdate != nil {
			g.Update = groupUpdate.over(g.Update)
			groupUpdate.record(p, path+".update", ub.TypeRange, jobUpdate)
		}
	}

	g.Restart = model.DefaultRestartPolicy(jt)
	if rb := p.one(c, "restart"); rb != nil {
		p.restart(rb, path+".restart", g.Restart)
	}
	if db := p.one(c, "disconnect"); db != nil {
		g.Disconnect = p.disconnect(db, path+".disconnect")
	}
	for _, cb := range c.blocks["constraint"] {
		if con, ok := p.constraint(cb, fmt.Sprintf("%s.constraints[%d]", path, len(g.Constraints))); ok {
			g.Constraints = append(g.Constraints, con)
		}
	}
	for _, sb := range c.blocks["service"] {
		if s, ok := p.service(sb, fmt.Sprintf("%s.services[%d]", path, len(g.Services))); ok {
			g.Services = append(g.Services, s)
		}
	}
	p.at(path+".tasks", b.DefRange())
	p.groupTasks = len(c.blocks["task"])
	for _, tb := range c.blocks["task"] {
		g.Tasks = append(g.Tasks, p.task(tb, fmt.Sprintf("%s.tasks[%d]", path, len(g.Tasks)), path, g))
	}
	return g
}

func (p *parser) task(b *hclsyntax.Block, path, groupPath string, g *model.Group) *model.Task {
	t := &model.Task{}
	p.at(path, b.DefRange())
	t.Name, _ = p.labels(b, "task name")
	if len(b.LabelRanges) > 0 {
		p.at(path+".name", b.LabelRanges[0])
	}
	c := p.content(b.Body, taskSpec)
	if rb := p.one(c, "restart"); rb != nil {
		// Nomad's task-level restart overrides its group's for that task.
		// hivelet's policy is per group: the block is taken as the group's
		// (over it, field by field) when the task is the group's only one.
		if p.groupTasks == 1 {
			p.restart(rb, groupPath+".restart", g.Restart)
		} else {
			p.errorf(rb.TypeRange, "a task-level restart block in a group of %d tasks: hivelet's restart policy is per group (a single task's block is taken as its group's); move it to the group", p.groupTasks)
		}
	}
	p.at(path+".driver", b.DefRange())
	if a := c.attrs["driver"]; a != nil {
		t.Driver, _ = p.str(a, path+".driver")
	}
	if a := c.attrs["user"]; a != nil {
		t.User, _ = p.str(a, path+".user")
	}
	if a := c.attrs["kill_timeout"]; a != nil {
		t.KillTimeout, _ = p.duration(a, path+".kill_timeout")
	}
	if a := c.attrs["kill_signal"]; a != nil {
		t.KillSignal, _ = p.str(a, path+".kill_signal")
	}
	if a := c.attrs["shutdown_delay"]; a != nil {
		// The group's allocation waits once, before any task is killed:
		// the longest delay, the group's or a task's, is kept there.
		if d, ok := p.duration(a, groupPath+".shutdown_delay"); ok && d > g.ShutdownDelay {
			g.ShutdownDelay = d
		}
	}
	t.Env = p.strMap(c, "env", path+".env")
	t.Meta = p.strMap(c, "meta", path+".meta")
	t.Config = p.config(c, path+".config")
	if rb := p.one(c, "resources"); rb != nil {
		p.at(path+".resources", rb.TypeRange)
		if _, ok := p.labels(rb, ""); ok {
			rc := p.content(rb.Body, resourcesSpec)
			if a := rc.attrs["cpu"]; a != nil {
				t.Resources.CPU, _ = p.integer(a, path+".resources.cpu")
			}
			if a := rc.attrs["memory"]; a != nil {
				t.Resources.MemoryMB, _ = p.integer(a, path+".resources.memory_mb")
			}
			if nb := p.one(rc, "network"); nb != nil {
				p.taskNetwork(nb, groupPath, g)
			}
		}
	}
	for _, sb := range c.blocks["service"] {
		if s, ok := p.service(sb, fmt.Sprintf("%s.services[%d]", path, len(t.Services))); ok {
			t.Services = append(t.Services, s)
		}
	}
	if lb := p.one(c, "logs"); lb != nil {
		p.logs(lb)
	}
	if lb := p.one(c, "lifecycle"); lb != nil {
		t.Lifecycle = p.lifecycle(lb, path+".lifecycle")
	}
	for _, vb := range c.blocks["volume_mount"] {
		if m, ok := p.volumeMount(vb, fmt.Sprintf("%s.volume_mounts[%d]", path, len(t.VolumeMounts))); ok {
			t.VolumeMounts = append(t.VolumeMounts, m)
		}
	}
	for _, ab := range c.blocks["artifact"] {
		if ar, ok := p.artifact(ab, fmt.Sprintf("%s.artifacts[%d]", path, len(t.Artifacts))); ok {
			t.Artifacts = append(t.Artifacts, ar)
		}
	}
	for _, tb := range c.blocks["template"] {
		if tm, ok := p.template(tb, fmt.Sprintf("%s.templates[%d]", path, len(t.Templates))); ok {
			t.Templates = append(t.Templates, tm)
		}
	}
	// A task's constraints restrict the node its group lands on: hivelet
	// keeps them with the group's.
	for _, cb := range c.blocks["constraint"] {
		if con, ok := p.constraint(cb, fmt.Sprintf("%s.constraints[%d]", groupPath, len(g.Constraints))); ok {
			g.Constraints = append(g.Constraints, con)
		}
	}
	return t
}

// suggest returns ` (did you mean "x"?)` for a near miss among the known names.
func suggest(name string, lists ...[]string) string {
	best, bestD := "", 3
	for _, l := range lists {
		for _, cand := range l {
			if d := typo.Distance(name, cand); d < bestD {
				best, bestD = cand, d
			}
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}
