package jobspec

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/hivelet/hivelet/host/model"
)

// config reads the driver's free-form configuration: attributes become
// values, nested blocks become lists of objects (so one block and several
// read the same way), at any depth.
func (p *parser) config(c content, path string) map[string]any {
	a := c.attrs["config"]
	b := p.one(c, "config")
	switch {
	case a != nil && b != nil:
		p.errorf(b.TypeRange, "config is given both as an attribute (line %d) and as a block; keep one", a.NameRange.Start.Line)
	case a != nil:
		p.at(path, a.Expr.Range())
		v, ok := p.value(a.Expr)
		if !ok {
			return nil
		}
		if v.IsNull() || !(v.Type().IsObjectType() || v.Type().IsMapType()) {
			p.errorf(a.Expr.Range(), "config must be an object, got %s", typeName(v))
			return nil
		}
		m, _ := goValue(v).(map[string]any)
		return m
	case b != nil:
		p.at(path, b.TypeRange)
		if _, ok := p.labels(b, ""); !ok {
			return nil
		}
		return p.configBody(b.Body)
	}
	return nil
}

func (p *parser) configBody(body *hclsyntax.Body) map[string]any {
	out := map[string]any{}
	for _, a := range sortedAttrs(body) {
		if v, ok := p.value(a.Expr); ok {
			out[a.Name] = goValue(v)
		}
	}
	for _, b := range body.Blocks {
		if len(b.Labels) > 0 {
			p.errorf(b.LabelRanges[0], "blocks inside config take no label: write %s { ... }", b.Type)
			continue
		}
		prev, exists := out[b.Type]
		list, isList := prev.([]any)
		if exists && (!isList || body.Attributes[b.Type] != nil) {
			p.errorf(b.TypeRange, "config has both an attribute and a block named %q; keep one", b.Type)
			continue
		}
		out[b.Type] = append(list, p.configBody(b.Body))
	}
	return out
}

// addressMode reads Nomad's address_mode of a service or check. hivelet
// registers and probes the address the node published for the port (the
// node's address and port), which is Nomad's "host", and its "auto" for a
// group on the host network; "driver" and "alloc" (the container's own
// address) are refused with that reason.
func (p *parser) addressMode(a *hclsyntax.Attribute, path string) {
	switch v, ok := p.str(a, path); {
	case !ok || v == "host" || v == "auto":
	case v == "driver" || v == "alloc":
		p.errorf(a.Expr.Range(), `address_mode %q is not supported by hivelet: it registers and checks the address the node publishes for the port ("host", the same as "auto" here)`, v)
	default:
		p.errorf(a.Expr.Range(), `address_mode %q is not one of "auto", "host", "driver", "alloc"%s`, v, suggest(v, []string{"auto", "host", "driver", "alloc"}))
	}
}

func (p *parser) service(b *hclsyntax.Block, path string) (model.Service, bool) {
	var s model.Service
	p.at(path, b.TypeRange)
	if _, ok := p.labels(b, ""); !ok {
		return s, false
	}
	c := p.content(b.Body, serviceSpec)
	if a := c.attrs["name"]; a != nil {
		s.Name, _ = p.str(a, path+".name")
	}
	if a := c.attrs["port"]; a != nil {
		s.Port, _ = p.str(a, path+".port")
	}
	if a := c.attrs["tags"]; a != nil {
		s.Tags, _ = p.strList(a, path+".tags")
	}
	if a := c.attrs["address_mode"]; a != nil {
		p.addressMode(a, path+".address_mode")
	}
	if c.attrs["meta"] != nil || p.one(c, "meta") != nil {
		// Read for its errors; what a consumer of Nomad's catalog reads
		// from it (a metrics_path) has nowhere to go in hivelet's.
		p.strMap(c, "meta", path+".meta")
		p.warnf(p.locate(path+".meta"), "the service's meta is accepted and not registered: hivelet's catalog records a service's name, address, port and tags")
	}
	if a := c.attrs["provider"]; a != nil {
		// Nomad's two providers: "nomad" is what hivelet does (its own
		// catalog, checks run by the agent); "consul", Nomad's default,
		// parses with a warning, since nothing reaches Consul.
		switch v, ok := p.str(a, path+".provider"); {
		case !ok || v == "nomad":
		case v == "consul":
			p.warnf(a.Expr.Range(), `service provider "consul": hivelet registers the service in its own catalog (hivelet service list), as provider "nomad" does; nothing is written to Consul`)
		default:
			p.errorf(a.Expr.Range(), `service provider %q is not one of "nomad", "consul"%s`, v, suggest(v, []string{"nomad", "consul"}))
		}
	}
	// A service's check_restart is each check's, unless the check has its
	// own (Nomad: the check's fields win, the others are the service's).
	var inherited *checkRestartFields
	if crb := p.one(c, "check_restart"); crb != nil {
		inherited = p.checkRestart(crb, path+".check_restart")
	}
	for _, cb := range c.blocks["check"] {
		cp := fmt.Sprintf("%s.checks[%d]", path, len(s.Checks))
		p.at(cp, cb.TypeRange)
		if _, ok := p.labels(cb, ""); !ok {
			continue
		}
		cc := p.content(cb.Body, checkSpec)
		var ch model.Check
		p.at(cp+".type", cb.TypeRange)
		p.at(cp+".interval", cb.TypeRange)
		p.at(cp+".timeout", cb.TypeRange)
		if a := cc.attrs["name"]; a != nil {
			ch.Name, _ = p.str(a, cp+".name")
		}
		if a := cc.attrs["type"]; a != nil {
			t, _ := p.str(a, cp+".type")
			ch.Type = model.CheckType(t)
		}
		if a := cc.attrs["path"]; a != nil {
			ch.Path, _ = p.str(a, cp+".path")
		}
		if a := cc.attrs["port"]; a != nil {
			ch.Port, _ = p.str(a, cp+".port")
		}
		if a := cc.attrs["command"]; a != nil {
			ch.Command, _ = p.str(a, cp+".command")
		}
		if a := cc.attrs["args"]; a != nil {
			ch.Args, _ = p.strList(a, cp+".args")
		}
		if a := cc.attrs["interval"]; a != nil {
			ch.Interval, _ = p.duration(a, cp+".interval")
		}
		if a := cc.attrs["timeout"]; a != nil {
			ch.Timeout, _ = p.duration(a, cp+".timeout")
		}
		if a := cc.attrs["address_mode"]; a != nil {
			p.addressMode(a, cp+".address_mode")
		}
		if a := cc.attrs["success_before_passing"]; a != nil {
			ch.SuccessBeforePassing, _ = p.integer(a, cp+".success_before_passing")
		}
		if a := cc.attrs["failures_before_critical"]; a != nil {
			ch.FailuresBeforeCritical, _ = p.integer(a, cp+".failures_before_critical")
		}
		own := inherited
		if crb := p.one(cc, "check_restart"); crb != nil {
			own = p.checkRestart(crb, cp+".check_restart").over(inherited)
		} else if inherited != nil {
			// Errors about the inherited block point at the service's.
			for _, f := range []string{"", ".limit", ".grace"} {
				if rng, ok := p.pos[path+".check_restart"+f]; ok {
					p.at(cp+".check_restart"+f, rng)
				}
			}
		}
		ch.CheckRestart = own.model()
		s.Checks = append(s.Checks, ch)
	}
	return s, true
}

// groupConsul reads Nomad's group consul block (which Consul cluster,
// namespace and partition the group's services and templates use): its
// fields are checked and nothing is applied, since hivelet talks to no
// Consul; its services go to hivelet's own catalog, as provider "consul"
// services do.
func (p *parser) groupConsul(b *hclsyntax.Block) {
	if _, ok := p.labels(b, ""); !ok {
		return
	}
	c := p.content(b.Body, groupConsulSpec)
	for _, n := range groupConsulSpec.attrs {
		if a := c.attrs[n]; a != nil {
			p.str(a, "consul."+n)
		}
	}
	p.warnf(b.TypeRange, "the consul block is accepted and not applied: hivelet talks to no Consul; the group's services are registered in hivelet's own catalog")
}

// checkRestartFields is a check_restart block as written: nil fields were
// not set (a check's block takes the unset ones from its service's).
type checkRestartFields struct {
	limit          *int
	grace          *model.Duration
	ignoreWarnings *bool
}

func (p *parser) checkRestart(b *hclsyntax.Block, path string) *checkRestartFields {
	f := &checkRestartFields{}
	p.at(path, b.TypeRange)
	if _, ok := p.labels(b, ""); !ok {
		return f
	}
	c := p.content(b.Body, checkRestartSpec)
	if a := c.attrs["limit"]; a != nil {
		if v, ok := p.integer(a, path+".limit"); ok {
			f.limit = &v
		}
	}
	if a := c.attrs["grace"]; a != nil {
		if v, ok := p.duration(a, path+".grace"); ok {
			f.grace = &v
		}
	}
	if a := c.attrs["ignore_warnings"]; a != nil {
		if v, ok := p.boolean(a, path+".ignore_warnings"); ok {
			f.ignoreWarnings = &v
		}
	}
	return f
}

// over fills the fields f leaves unset from base.
func (f *checkRestartFields) over(base *checkRestartFields) *checkRestartFields {
	if base == nil {
		return f
	}
	out := *f
	if out.limit == nil {
		out.limit = base.limit
	}
	if out.grace == nil {
		out.grace = base.grace
	}
	if out.ignoreWarnings == nil {
		out.ignoreWarnings = base.ignoreWarnings
	}
	return &out
}

// defaultCheckRestartGrace is Nomad's grace when check_restart omits it.
const defaultCheckRestartGrace = model.Duration(time.Second)

// model is the check's CheckRestart, with Nomad's defaults (limit 0, grace
// 1s, ignore_warnings false); nil when no block applies.
func (f *checkRestartFields) model() *model.CheckRestart {
	if f == nil {
		return nil
	}
	cr := &model.CheckRestart{Grace: defaultCheckRestartGrace}
	if f.limit != nil {
		cr.Limit = *f.limit
	}
	if f.grace != nil {
		cr.Grace = *f.grace
	}
	if f.ignoreWarnings != nil {
		cr.IgnoreWarnings = *f.ignoreWarnings
	}
	return cr
}

func (p *parser) restart(b *hclsyntax.Block, path string, r *model.RestartPolicy) {
	p.at(path, b.TypeRange)
	if _, ok := p.labels(b, ""); !ok {
		return
	}
	c := p.content(b.Body, restartSpec)
	if a := c.attrs["attempts"]; a != nil {
		r.Attempts, _ = p.integer(a, path+".attempts")
	}
	if a := c.attrs["interval"]; a != nil {
		r.Interval, _ = p.duration(a, path+".interval")
	}
	if a := c.attrs["delay"]; a != nil {
		r.Delay, _ = p.duration(a, path+".delay")
	}
	if a := c.attrs["mode"]; a != nil {
		m, _ := p.str(a, path+".mode")
		r.Mode = model.RestartMode(m)
	}
}

func (p *parser) disconnect(b *hclsyntax.Block, path string) *model.DisconnectStrategy {
	d := &model.DisconnectStrategy{}
	p.at(path, b.TypeRange)
	if _, ok := p.labels(b, ""); !ok {
		return d
	}
	c := p.content(b.Body, disconnectSpec)
	if a := c.attrs["lost_after"]; a != nil {
		d.LostAfter, _ = p.duration(a, path+".lost_after")
	}
	if a := c.attrs["replace"]; a != nil {
		if v, ok := p.boolean(a, path+".replace"); ok {
			d.Replace = &v
		}
	}
	if a := c.attrs["reconcile"]; a != nil {
		m, _ := p.str(a, path+".reconcile")
		d.Reconcile = model.ReconcileMode(m)
	}
	return d
}

// operatorAliases are the other spellings Nomad accepts.
var operatorAliases = map[string]model.ConstraintOperator{"==": model.OpEqual, "is": model.OpEqual, "not": model.OpNotEqual}

// shorthand constraint attributes: `version = ">= 1.2"` means operator
// "version" with that value.
var constraintShorthands = []string{"version", "semver", "regexp", "set_contains", "set_contains_any"}

func (p *parser) constraint(b *hclsyntax.Block, path string) (model.Constraint, bool) {
	var con model.Constraint
	p.at(path, b.TypeRange)
	if _, ok := p.labels(b, ""); !ok {
		return con, false
	}
	c := p.content(b.Body, constraintSpec)
	ok := true
	for _, name := range []string{"distinct_hosts", "distinct_property"} {
		if a := c.attrs[name]; a != nil {
			p.errorf(a.NameRange, "constraint %q has no meaning for hivelet: a system job already runs at most once per node; remove the constraint", name)
			ok = false
		}
	}
	if a := c.attrs["attribute"]; a != nil {
		con.Attribute, _ = p.str(a, path+".attribute")
	}
	if a := c.attrs["operator"]; a != nil {
		op, good := p.str(a, path+".operator")
		if alias, isAlias := operatorAliases[op]; isAlias {
			op = string(alias)
		}
		if good && (op == "distinct_hosts" || op == "distinct_property") {
			p.errorf(a.Expr.Range(), "constraint operator %q has no meaning for hivelet: a system job already runs at most once per node; remove the constraint", op)
			ok = false
		}
		con.Operator = model.ConstraintOperator(op)
	}
	if a := c.attrs["value"]; a != nil {
		con.Value, _ = p.str(a, path+".value")
	}
	for _, name := range constraintShorthands {
		a := c.attrs[name]
		if a == nil {
			continue
		}
		if c.attrs["operator"] != nil || c.attrs["value"] != nil {
			p.errorf(a.NameRange, "%s = ... is the shorthand for operator = %q with a value; do not combine it with operator or value", name, name)
			ok = false
			continue
		}
		con.Operator = model.ConstraintOperator(name)
		p.at(path+".operator", a.NameRange)
		con.Value, _ = p.str(a, path+".value")
	}
	if con.Operator == "" {
		con.Operator = model.OpEqual
	}
	if !ok {
		return con, false
	}
	p.at(path+".attribute", b.TypeRange)
	if a := c.attrs["attribute"]; a != nil {
		p.at(path+".attribute", a.Expr.Range())
	}
	if _, set := p.pos[path+".value"]; !set {
		p.at(path+".value", b.TypeRange)
	}
	return con, true
}
