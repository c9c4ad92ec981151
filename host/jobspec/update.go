package jobspec

import (
	"maps"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/hivelet/hivelet/host/model"
)

// ---- update blocks and inheritance -------------------------------------------

// updateFields is one update block as written: nil means not set, so that
// a group's block overrides the job's field by field.
type updateFields struct {
	block            hcl.Range
	at               map[string]hcl.Range
	maxParallel      *int
	canary           *int
	autoPromote      *bool
	autoRevert       *bool
	minHealthyTime   *model.Duration
	healthyDeadline  *model.Duration
	progressDeadline *model.Duration
	healthCheck      *string
	canaryPolicy     *model.PolicyRef
	completionPolicy *model.PolicyRef
}

func ptr[T any](v T, ok bool) *T {
	if !ok {
		return nil
	}
	return &v
}

func (p *parser) update(b *hclsyntax.Block) *updateFields {
	u := &updateFields{block: b.TypeRange, at: map[string]hcl.Range{}}
	if _, ok := p.labels(b, ""); !ok {
		return u
	}
	c := p.content(b.Body, updateSpec)
	// Values are recorded under a scratch path; record() files them under
	// each group that inherits them.
	const scratch = "\x00update"
	for name, a := range c.attrs {
		u.at[name] = a.Expr.Range()
	}
	if a := c.attrs["max_parallel"]; a != nil {
		u.maxParallel = ptr(p.integer(a, scratch))
	}
	if a := c.attrs["canary"]; a != nil {
		u.canary = ptr(p.integer(a, scratch))
	}
	if a := c.attrs["auto_promote"]; a != nil {
		u.autoPromote = ptr(p.boolean(a, scratch))
	}
	if a := c.attrs["auto_revert"]; a != nil {
		u.autoRevert = ptr(p.boolean(a, scratch))
	}
	if a := c.attrs["min_healthy_time"]; a != nil {
		u.minHealthyTime = ptr(p.duration(a, scratch))
	}
	if a := c.attrs["healthy_deadline"]; a != nil {
		u.healthyDeadline = ptr(p.duration(a, scratch))
	}
	if a := c.attrs["progress_deadline"]; a != nil {
		u.progressDeadline = ptr(p.duration(a, scratch))
	}
	if a := c.attrs["health_check"]; a != nil {
		u.healthCheck = ptr(p.str(a, scratch))
	}
	if a := c.attrs["stagger"]; a != nil {
		// Accepted so that Nomad files parse unchanged, checked, and
		// ignored: hivelet paces a rollout by max_parallel slots and
		// allocation health, not by a timer.
		if _, ok := p.duration(a, scratch); ok {
			p.warnf(a.NameRange, "stagger is accepted and ignored: hivelet paces a rollout by max_parallel update slots and allocation health, not by a timer")
		}
	}
	u.canaryPolicy = p.policy(c, "canary_policy", u)
	u.completionPolicy = p.policy(c, "completion_policy", u)
	delete(p.pos, scratch)
	return u
}

// policy reads hivelet's policy extension in either form:
//
//	canary_policy = "spread"
//	canary_policy "spread" { digest = "sha256:..."  attribute = "${node.datacenter}" }
//
// In the block form, digest pins the module; every other attribute is a
// parameter passed to the policy as a string.
func (p *parser) policy(c content, name string, u *updateFields) *model.PolicyRef {
	a := c.attrs[name]
	b := p.one(c, name)
	switch {
	case a != nil && b != nil:
		p.errorf(b.TypeRange, "%s is given both as an attribute (line %d) and as a block; keep one", name, a.NameRange.Start.Line)
	case a != nil:
		s, ok := p.typed(a, cty.String, "a policy name")
		if !ok {
			return nil
		}
		return &model.PolicyRef{Name: s.AsString()}
	case b != nil:
		u.at[name] = b.TypeRange
		ref := &model.PolicyRef{}
		if len(b.Labels) != 1 {
			p.errorf(b.TypeRange, "a %s block takes exactly one label, the policy name: %s \"name\" { ... }", name, name)
			return nil
		}
		ref.Name = b.Labels[0]
		u.at[name+".name"] = b.LabelRanges[0]
		for _, nested := range b.Body.Blocks {
			p.errorf(nested.TypeRange, "a %s block holds only digest and parameters (key = \"value\"), not blocks", name)
		}
		for _, pa := range sortedAttrs(b.Body) {
			v, ok := p.value(pa.Expr)
			if !ok {
				continue
			}
			if v.IsNull() || !v.Type().IsPrimitiveType() {
				p.errorf(pa.Expr.Range(), "policy parameter %s must be a string, number or bool, got %s", pa.Name, typeName(v))
				continue
			}
			if pa.Name == "digest" {
				ref.Digest = goString(v)
				u.at[name+".digest"] = pa.Expr.Range()
				continue
			}
			if ref.Params == nil {
				ref.Params = map[string]string{}
			}
			ref.Params[pa.Name] = goString(v)
		}
		return ref
	}
	return nil
}

// over returns base with every field this block sets replaced.
func (u *updateFields) over(base *model.UpdateStrategy) *model.UpdateStrategy {
	out := *base
	if u.maxParallel != nil {
		out.MaxParallel = *u.maxParallel
	}
	if u.canary != nil {
		out.Canary = *u.canary
	}
	if u.autoPromote != nil {
		out.AutoPromote = *u.autoPromote
	}
	if u.autoRevert != nil {
		out.AutoRevert = *u.autoRevert
	}
	if u.minHealthyTime != nil {
		out.MinHealthyTime = *u.minHealthyTime
	}
	if u.healthyDeadline != nil {
		out.HealthyDeadline = *u.healthyDeadline
	}
	if u.progressDeadline != nil {
		out.ProgressDeadline = *u.progressDeadline
	}
	if u.healthCheck != nil {
		out.HealthCheck = *u.healthCheck
	}
	if u.canaryPolicy != nil {
		out.CanaryPolicy = u.canaryPolicy
	}
	if u.completionPolicy != nil {
		out.CompletionPolicy = u.completionPolicy
	}
	// Each group gets its own copy: no two strategies share a policy.
	out.CanaryPolicy = clonePolicy(out.CanaryPolicy)
	out.CompletionPolicy = clonePolicy(out.CompletionPolicy)
	return &out
}

// record files the positions of this block's fields under path. Fields
// the block leaves unset point at the block itself (the value came from a
// default), unless an inherited block set them.
func (u *updateFields) record(p *parser, path string, block hcl.Range, inherited *updateFields) {
	p.at(path, block)
	for _, f := range []string{"max_parallel", "canary", "auto_promote", "auto_revert", "min_healthy_time",
		"healthy_deadline", "progress_deadline", "health_check", "canary_policy", "completion_policy",
		"canary_policy.name", "canary_policy.digest", "completion_policy.name", "completion_policy.digest"} {
		if r, ok := u.at[f]; ok {
			p.at(path+"."+f, r)
			continue
		}
		if inherited != nil {
			if _, ok := inherited.at[f]; ok {
				continue // keep the inherited position
			}
		}
		p.at(path+"."+f, block)
	}
}

func clonePolicy(r *model.PolicyRef) *model.PolicyRef {
	if r == nil {
		return nil
	}
	c := *r
	c.Params = maps.Clone(r.Params)
	return &c
}
