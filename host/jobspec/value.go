package jobspec

import (
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// value turns an attribute's expression into a cty value without evaluating
// any reference: every "${...}" interpolation in a string is kept as its
// source text, for the node to resolve at run time. Literals, strings, lists,
// objects and arithmetic on literals are allowed; a bare reference outside a
// string, a function call and a template directive (%{...}) are errors.
func (p *parser) value(expr hclsyntax.Expression) (cty.Value, bool) {
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
	case *hclsyntax.ScopeTraversalExpr, *hclsyntax.RelativeTraversalExpr:
		src := strings.TrimSpace(string(expr.Range().SliceBytes(p.src)))
		p.errorf(expr.Range(), "reference %s outside a string: hivelet resolves references on the node at run time, write it as \"${%s}\"", src, src)
		return cty.NilVal, false
	case *hclsyntax.FunctionCallExpr:
		p.errorf(expr.Range(), "function call %s(...) is not supported: hivelet job files are plain declarations; compute the value before submitting", e.Name)
		return cty.NilVal, false
	}
	// Anything else (a literal, -1, 2 * 60, parentheses) must evaluate with
	// no variables and no functions.
	if len(expr.Variables()) > 0 {
		src := strings.TrimSpace(string(expr.Range().SliceBytes(p.src)))
		p.errorf(expr.Range(), "expression %q uses a reference outside a string: hivelet resolves references on the node at run time, inside \"${...}\" only", src)
		return cty.NilVal, false
	}
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		p.diags(diags)
		return cty.NilVal, false
	}
	if !v.IsWhollyKnown() {
		p.errorf(expr.Range(), "value is not known until run time")
		return cty.NilVal, false
	}
	return v, true
}

// interpolation writes one "${...}" part of a template back as its source
// text. Template directives are refused: they would need evaluation.
func (p *parser) interpolation(part hclsyntax.Expression, b *strings.Builder) bool {
	src := strings.TrimSpace(string(part.Range().SliceBytes(p.src)))
	if strings.HasPrefix(src, "%{") {
		p.errorf(part.Range(), "template directives (%%{ ... }) are not supported: hivelet keeps only \"${...}\" interpolations, as text for the node to resolve at run time")
		return false
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
