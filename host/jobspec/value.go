package jobspec

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// value turns an attribute's expression into a cty value. What refers only
// to the file's variables and locals (var.*, local.*), and function calls
// over them, is computed; every other "${...}" interpolation in a string is
// kept as its source text, for the node to resolve at run time. A bare
// run-time reference outside a string, a function call over one and a
// template directive (%{...}) over one are errors.
func (p *parser) value(expr hclsyntax.Expression) (cty.Value, bool) {
	p.freeze(expr)
	v, ok := p.valueOf(expr)
	if ok && !finite(v) {
		p.errorf(expr.Range(), "number out of range: job files hold numbers that fit a 64-bit float (about ±1e308, and not closer to zero than 1e-308)")
		return cty.NilVal, false
	}
	return v, ok
}

// finite reports whether every number in v converts to a finite float64.
func finite(v cty.Value) bool {
	if v.IsNull() || !v.IsKnown() {
		return true
	}
	t := v.Type()
	switch {
	case t == cty.Number:
		bf := v.AsBigFloat()
		f, _ := bf.Float64()
		// Refuse overflow and underflow alike: a number that is not
		// zero but rounds to zero would print as a million digits.
		return !math.IsInf(f, 0) && (f != 0 || bf.Sign() == 0)
	case t.IsListType() || t.IsTupleType() || t.IsSetType() || t.IsMapType() || t.IsObjectType():
		for it := v.ElementIterator(); it.Next(); {
			if _, e := it.Element(); !finite(e) {
				return false
			}
		}
	}
	return true
}

func (p *parser) valueOf(expr hclsyntax.Expression) (cty.Value, bool) {
	switch e := expr.(type) {
	case *hclsyntax.TemplateExpr:
		if evaluable(e) {
			return p.eval(e)
		}
		var b strings.Builder
		for _, part := range e.Parts {
			if lit, ok := part.(*hclsyntax.LiteralValueExpr); ok && lit.Val.Type() == cty.String && lit.Val.IsKnown() && !lit.Val.IsNull() {
				b.WriteString(lit.Val.AsString())
				continue
			}
			if !p.interpolation(part, &b) {
				return cty.NilVal, false
			}
		}
		return cty.StringVal(b.String()), true
	case *hclsyntax.TemplateWrapExpr:
		if evaluable(e) {
			return p.eval(e)
		}
		var b strings.Builder
		if !p.interpolation(e.Wrapped, &b) {
			return cty.NilVal, false
		}
		return cty.StringVal(b.String()), true
	case *hclsyntax.TupleConsExpr:
		if len(e.Exprs) == 0 {
			return cty.EmptyTupleVal, true
		}
		vals := make([]cty.Value, 0, len(e.Exprs))
		ok := true
		for _, x := range e.Exprs {
			v, good := p.value(x)
			ok = ok && good
			vals = append(vals, v)
		}
		if !ok {
			return cty.NilVal, false
		}
		return cty.TupleVal(vals), true
	case *hclsyntax.ObjectConsExpr:
		attrs := make(map[string]cty.Value, len(e.Items))
		ok := true
		for _, item := range e.Items {
			key, good := p.objectKey(item.KeyExpr)
			if !good {
				ok = false
				continue
			}
			v, good := p.value(item.ValueExpr)
			if !good {
				ok = false
				continue
			}
			if _, dup := attrs[key]; dup {
				p.errorf(item.KeyExpr.Range(), "duplicate key %q", key)
				ok = false
				continue
			}
			attrs[key] = v
		}
		if !ok {
			return cty.NilVal, false
		}
		return cty.ObjectVal(attrs), true
	}
	if evaluable(expr) {
		return p.eval(expr)
	}
	switch e := expr.(type) {
	case *hclsyntax.ScopeTraversalExpr, *hclsyntax.RelativeTraversalExpr:
		src := strings.TrimSpace(string(expr.Range().SliceBytes(p.src)))
		p.errorf(expr.Range(), "reference %s outside a string: hivelet resolves references on the node at run time, write it as \"${%s}\"", src, src)
		return cty.NilVal, false
	case *hclsyntax.FunctionCallExpr:
		p.errorf(expr.Range(), "function call %s(...) over %s: the file computes functions of its variables and locals only, and the node resolves run-time values only as plain \"${...}\" interpolations",
			e.Name, p.runtimeRoot(expr))
		return cty.NilVal, false
	}
	// Anything else that is left refers to a run-time value (what refers
	// only to variables and locals was computed above).
	src := strings.TrimSpace(string(expr.Range().SliceBytes(p.src)))
	p.errorf(expr.Range(), "expression %q uses a reference outside a string: hivelet resolves references on the node at run time, inside \"${...}\" only", src)
	return cty.NilVal, false
}

// freeze turns every "${...}" part of a string that refers to run-time
// values (node., attr., NOMAD_...) into the literal text the node will
// resolve, in place, so that what is left (variables, locals, functions)
// can be computed around it: local.args = concat(["--port=${NOMAD_PORT_x}"],
// var.extra) keeps the interpolation as text. A run-time reference
// anywhere else (a function's argument, an operand) is left for valueOf to
// refuse. Directives (%{...}) are left alone.
func (p *parser) freeze(expr hclsyntax.Expression) {
	opaque := func(part hclsyntax.Expression) (hclsyntax.Expression, bool) {
		if _, lit := part.(*hclsyntax.LiteralValueExpr); lit || evaluable(part) {
			return nil, false
		}
		src := strings.TrimSpace(string(part.Range().SliceBytes(p.src)))
		if strings.HasPrefix(src, "%{") {
			return nil, false
		}
		return &hclsyntax.LiteralValueExpr{Val: cty.StringVal("${" + src + "}"), SrcRange: part.Range()}, true
	}
	hclsyntax.VisitAll(expr, func(n hclsyntax.Node) hcl.Diagnostics {
		switch t := n.(type) {
		case *hclsyntax.TemplateExpr:
			for i, part := range t.Parts {
				if lit, ok := opaque(part); ok {
					t.Parts[i] = lit
				}
			}
		case *hclsyntax.TemplateWrapExpr:
			if lit, ok := opaque(t.Wrapped); ok {
				t.Wrapped = lit
			}
		}
		return nil
	})
}

// runtimeRoot is the source of the first reference of expr the node
// resolves (not a variable or a local).
func (p *parser) runtimeRoot(expr hclsyntax.Expression) string {
	for _, tr := range expr.Variables() {
		if !slices.Contains(scopes, tr.RootName()) {
			return strings.TrimSpace(string(tr.SourceRange().SliceBytes(p.src)))
		}
	}
	return "a run-time value"
}

// interpolation writes one "${...}" part of a template: computed when it
// refers only to variables and locals, else back as its source text.
// Template directives over run-time values are refused: the node does not
// evaluate them.
func (p *parser) interpolation(part hclsyntax.Expression, b *strings.Builder) bool {
	src := strings.TrimSpace(string(part.Range().SliceBytes(p.src)))
	if strings.HasPrefix(src, "%{") {
		p.errorf(part.Range(), "template directives (%%{ ... }) over run-time values are not supported: the node resolves only \"${...}\" interpolations; a directive may use variables and locals")
		return false
	}
	if evaluable(part) {
		v, ok := p.eval(part)
		if !ok {
			return false
		}
		sv, err := convert.Convert(v, cty.String)
		if err != nil || sv.IsNull() {
			p.errorf(part.Range(), "cannot put %s in a string", typeName(v))
			return false
		}
		b.WriteString(sv.AsString())
		return true
	}
	b.WriteString("${")
	b.WriteString(src)
	b.WriteString("}")
	return true
}

func (p *parser) objectKey(k hclsyntax.Expression) (string, bool) {
	if ck, ok := k.(*hclsyntax.ObjectConsKeyExpr); ok {
		if name := hcl.ExprAsKeyword(ck.Wrapped); name != "" && !ck.ForceNonLiteral {
			return name, true
		}
		k = ck.Wrapped
	}
	v, ok := p.value(k)
	if !ok {
		return "", false
	}
	if v.IsNull() || v.Type() != cty.String {
		if v.Type() == cty.Number || v.Type() == cty.Bool {
			return goString(v), true
		}
		p.errorf(k.Range(), "object keys must be strings")
		return "", false
	}
	return v.AsString(), true
}

// goValue converts a cty value to the plain Go value encoding/json produces
// when it decodes the same JSON: string, float64, bool, []any,
// map[string]any or nil. Using float64 for every number is what makes
// HCL → JSON → DecodeJob → JSON byte-identical.
func goValue(v cty.Value) any {
	if v.IsNull() || !v.IsKnown() {
		return nil
	}
	t := v.Type()
	switch {
	case t == cty.String:
		return v.AsString()
	case t == cty.Number:
		f, _ := v.AsBigFloat().Float64()
		return f
	case t == cty.Bool:
		return v.True()
	case t.IsListType() || t.IsTupleType() || t.IsSetType():
		out := make([]any, 0, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = append(out, goValue(e))
		}
		return out
	case t.IsMapType() || t.IsObjectType():
		out := make(map[string]any, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			out[k.AsString()] = goValue(e)
		}
		return out
	}
	return nil
}

// goString renders a primitive value as the text a string field holds.
func goString(v cty.Value) string {
	switch v.Type() {
	case cty.String:
		return v.AsString()
	case cty.Number:
		bf := v.AsBigFloat()
		if e := bf.MantExp(nil); e > -64 && e < 64 {
			return bf.Text('f', -1)
		}
		return bf.Text('g', -1)
	case cty.Bool:
		if v.True() {
			return "true"
		}
		return "false"
	}
	return fmt.Sprint(v.GoString())
}

// wholeInt reports the value as an int if it is a whole number in range.
func wholeInt(v cty.Value) (int, bool) {
	bf := v.AsBigFloat()
	if !bf.IsInt() {
		return 0, false
	}
	i, acc := bf.Int64()
	if acc != big.Exact || i > 1<<31-1 || i < -(1<<31) {
		return 0, false
	}
	return int(i), true
}

// typeName names a value's type the way a job file's author thinks of it.
func typeName(v cty.Value) string {
	if v.IsNull() {
		return "null"
	}
	t := v.Type()
	switch {
	case t == cty.String:
		return "a string"
	case t == cty.Number:
		return "a number"
	case t == cty.Bool:
		return "a bool"
	case t.IsListType() || t.IsTupleType() || t.IsSetType():
		return "a list"
	case t.IsMapType() || t.IsObjectType():
		return "an object"
	}
	return t.FriendlyName()
}
