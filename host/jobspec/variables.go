package jobspec

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"go.yaml.in/yaml/v3"

	"github.com/hivelet/hivelet/sdk/driver"
)

// Inputs are the values a job file's variables get from outside the file.
// Precedence, lowest first (Nomad's): the variable's default, the
// environment (NOMAD_VAR_<name>, then HIVELET_VAR_<name>), the var files
// in order, the -var flags in order. The caller reads files and the
// environment; the package does no I/O.
type Inputs struct {
	// Env is the environment as "KEY=value" (os.Environ()). Variables of
	// it that name no declared variable are ignored.
	Env []string
	// Files are -var-file contents: HCL (name = value lines) or, when the
	// name ends in .json, a JSON object.
	Files []VarFile
	// Vars are -var flags, "name=value".
	Vars []string
	// Warn, when set, receives what the file says that hivelet accepts and
	// ignores (stagger, a task's logs block, a template's splay and wait),
	// each at its position, in file order. Warnings never fail a parse.
	Warn func(*Error)
	// Drivers are the config schemas of the drivers the caller knows (the
	// built-in ones, for `job validate`): each task's config is checked as
	// its driver will check it at start, and a driver name that is a near
	// miss of a known one is refused with a suggestion. Nil: no check.
	Drivers map[string]*driver.Schema
	// ReadFile, when set, is what the file() and fileexists() functions
	// read through, a relative path taken from the working directory as
	// Nomad's CLI does (job run, validate and plan set os.ReadFile). Nil:
	// the file is parsed where the machine's files are not the author's
	// (the HTTP API), and both functions are refused with that reason.
	ReadFile func(path string) ([]byte, error)
}

// VarFile is one -var-file.
type VarFile struct {
	Name string
	Src  []byte
}

func (in Inputs) given() bool { return len(in.Files) > 0 || len(in.Vars) > 0 }

// Environment variable prefixes that set a job file's variables.
const (
	EnvVarPrefix      = "HIVELET_VAR_"
	NomadEnvVarPrefix = "NOMAD_VAR_"
)

// varDecl is one declared variable.
type varDecl struct {
	name  string
	typ   cty.Type
	def   cty.Value // cty.NilVal: no default
	rng   hcl.Range
	rules []*hclsyntax.Block // validation blocks
}

var (
	variableSpec = spec{what: "variable", attrs: []string{"type", "default", "description", "sensitive"}, blocks: []string{"validation"}}
	ruleSpec     = spec{what: "validation", attrs: []string{"condition", "error_message"}}
)

// scopes are the roots of references the parser evaluates; every other
// reference (node., attr., meta., NOMAD_...) is the node's, at run time.
var scopes = []string{"var", "local"}

// evaluable reports whether an expression refers only to variables and
// locals (or to nothing), so the parser can compute it.
func evaluable(expr hclsyntax.Expression) bool {
	for _, tr := range expr.Variables() {
		if !slices.Contains(scopes, tr.RootName()) {
			return false
		}
	}
	return true
}

// eval computes an evaluable expression in the file's context. A reference
// to an undeclared variable or local is reported with what is declared.
func (p *parser) eval(expr hclsyntax.Expression) (cty.Value, bool) {
	ok := true
	for _, tr := range expr.Variables() {
		if len(tr) < 2 {
			p.errorf(tr.SourceRange(), "%s alone is not a value: name one, as in %s.name", tr.RootName(), tr.RootName())
			ok = false
			continue
		}
		attr, isAttr := tr[1].(hcl.TraverseAttr)
		if !isAttr {
			continue
		}
		known := p.declared[tr.RootName()]
		if !slices.Contains(known, attr.Name) {
			what := map[string]string{"var": "variable", "local": "local"}[tr.RootName()]
			p.errorf(tr.SourceRange(), "%s %q is not declared in this file%s", what, attr.Name, suggest(attr.Name, known))
			ok = false
		}
	}
	if !ok {
		return cty.NilVal, false
	}
	v, diags := expr.Value(p.ctx)
	if diags.HasErrors() {
		p.diags(diags)
		return cty.NilVal, false
	}
	if !v.IsWhollyKnown() {
		p.errorf(expr.Range(), "value is not known when the file is read")
		return cty.NilVal, false
	}
	return v, true
}

// variables reads the file's variable, variables and locals blocks, gives
// each variable its value (default, environment, var files, -var flags),
// checks the validation rules, computes the locals, and sets the context
// the rest of the file is evaluated in. It reports false when any of that
// failed: the job is then not read (its errors would only echo these).
func (p *parser) variables(c content) bool {
	before := len(p.errs)
	p.declared = map[string][]string{}
	p.ctx = &hcl.EvalContext{Functions: functions(p.inputs.ReadFile), Variables: map[string]cty.Value{"var": cty.EmptyObjectVal, "local": cty.EmptyObjectVal}}
	decls := map[string]*varDecl{}
	declare := func(d *varDecl) {
		if prev, dup := decls[d.name]; dup {
			p.errorf(d.rng, "variable %q is declared twice (first at line %d)", d.name, prev.rng.Start.Line)
			return
		}
		decls[d.name] = d
	}
	for _, b := range c.blocks["variable"] {
		if d := p.variable(b); d != nil {
			declare(d)
		}
	}
	for _, b := range c.blocks["variables"] {
		if _, ok := p.labels(b, ""); !ok {
			continue
		}
		for _, nested := range b.Body.Blocks {
			p.errorf(nested.TypeRange, "a variables block holds only name = default pairs; declare a typed variable with variable %q { ... }", nested.Type)
		}
		for _, a := range sortedAttrs(b.Body) {
			if v, ok := p.constant(a.Expr); ok {
				declare(&varDecl{name: a.Name, typ: cty.DynamicPseudoType, def: v, rng: a.NameRange})
			}
		}
	}
	vals := map[string]cty.Value{}
	for name, d := range decls {
		if d.def != cty.NilVal {
			vals[name] = d.def
		}
	}
	p.fromEnv(decls, vals)
	for _, f := range p.inputs.Files {
		p.fromFile(f, decls, vals)
	}
	for _, kv := range p.inputs.Vars {
		name, raw, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			p.errs = append(p.errs, &Error{File: p.file, Message: fmt.Sprintf("-var %s: write it as -var name=value", kv)})
			continue
		}
		d := decls[name]
		if d == nil {
			p.errs = append(p.errs, &Error{File: p.file, Message: fmt.Sprintf("-var %s: no variable %q is declared in this file%s", kv, name, suggest(name, keys(decls)))})
			continue
		}
		if v, err := fromString(d.typ, raw); err != nil {
			p.errorf(d.rng, "-var %s: %v", kv, err)
		} else {
			vals[name] = v
		}
	}
	names := keys(decls)
	for _, name := range names {
		if _, ok := vals[name]; !ok {
			p.errorf(decls[name].rng, "variable %q has no value: give it a default, -var %s=..., a -var-file, or %s%s in the environment", name, name, EnvVarPrefix, name)
		}
	}
	if len(p.errs) > before {
		return false
	}
	p.declared["var"] = names
	p.ctx.Variables["var"] = cty.ObjectVal(vals)
	for _, name := range names {
		p.checkRules(decls[name])
	}
	p.locals(c.blocks["locals"])
	return len(p.errs) == before
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// variable reads one variable block.
func (p *parser) variable(b *hclsyntax.Block) *varDecl {
	name, ok := p.labels(b, "variable name")
	if !ok {
		return nil
	}
	if !hclsyntax.ValidIdentifier(name) {
		p.errorf(b.LabelRanges[0], "variable name %q must be an identifier (letters, digits, _ and -, not starting with a digit)", name)
		return nil
	}
	d := &varDecl{name: name, typ: cty.DynamicPseudoType, rng: b.DefRange()}
	c := p.content(b.Body, variableSpec)
	if a := c.attrs["type"]; a != nil {
		t, diags := typeexpr.TypeConstraint(a.Expr)
		if diags.HasErrors() {
			p.diags(diags)
			return nil
		}
		d.typ = t
	}
	for _, n := range []string{"description", "sensitive"} {
		if a := c.attrs[n]; a != nil {
			p.constant(a.Expr) // accepted and checked; nothing reads them
		}
	}
	if a := c.attrs["default"]; a != nil {
		v, ok := p.constant(a.Expr)
		if !ok {
			return nil
		}
		cv, err := convert.Convert(v, d.typ)
		if err != nil {
			p.errorf(a.Expr.Range(), "the default of variable %q must be %s: %v", name, typeexpr.TypeString(d.typ), err)
			return nil
		}
		d.def = cv
	}
	d.rules = c.blocks["validation"]
	return d
}

// constant evaluates an expression that may call functions but refer to
// nothing (a default, a var file's value).
func (p *parser) constant(expr hclsyntax.Expression) (cty.Value, bool) {
	if vars := expr.Variables(); len(vars) > 0 {
		p.errorf(vars[0].SourceRange(), "a default or a var file holds a value, not a reference (%s)", strings.TrimSpace(string(vars[0].SourceRange().SliceBytes(p.src))))
		return cty.NilVal, false
	}
	v, diags := expr.Value(&hcl.EvalContext{Functions: p.ctx.Functions})
	if diags.HasErrors() {
		p.diags(diags)
		return cty.NilVal, false
	}
	return v, true
}

// fromString converts a value given as text (-var, the environment) to
// the variable's type: a string variable takes the text as it is, any
// other type reads it as an HCL expression ("3", "[\"a\", \"b\"]").
func fromString(t cty.Type, raw string) (cty.Value, error) {
	if t == cty.String || t == cty.DynamicPseudoType {
		if !utf8.ValidString(raw) {
			return cty.NilVal, fmt.Errorf("the value is not valid UTF-8")
		}
		return cty.StringVal(raw), nil
	}
	expr, diags := hclsyntax.ParseExpression([]byte(raw), "value", hcl.InitialPos)
	if diags.HasErrors() {
		return cty.NilVal, fmt.Errorf("want %s, got %q", typeexpr.TypeString(t), raw)
	}
	v, diags := expr.Value(&hcl.EvalContext{Functions: functions(nil)})
	if diags.HasErrors() {
		return cty.NilVal, fmt.Errorf("want %s, got %q", typeexpr.TypeString(t), raw)
	}
	cv, err := convert.Convert(v, t)
	if err != nil {
		return cty.NilVal, fmt.Errorf("want %s, got %q", typeexpr.TypeString(t), raw)
	}
	return cv, nil
}

// fromEnv applies NOMAD_VAR_<name>, then HIVELET_VAR_<name> (which wins).
func (p *parser) fromEnv(decls map[string]*varDecl, vals map[string]cty.Value) {
	for _, prefix := range []string{NomadEnvVarPrefix, EnvVarPrefix} {
		for _, kv := range p.inputs.Env {
			k, raw, _ := strings.Cut(kv, "=")
			name, ok := strings.CutPrefix(k, prefix)
			if !ok || decls[name] == nil {
				continue
			}
			if v, err := fromString(decls[name].typ, raw); err != nil {
				p.errorf(decls[name].rng, "%s from the environment: %v", k, err)
			} else {
				vals[name] = v
			}
		}
	}
}

// fromFile applies one var file.
func (p *parser) fromFile(f VarFile, decls map[string]*varDecl, vals map[string]cty.Value) {
	var file *hcl.File
	var diags hcl.Diagnostics
	if strings.EqualFold(filepath.Ext(f.Name), ".json") {
		file, diags = hcljson.Parse(f.Src, f.Name)
	} else {
		file, diags = hclsyntax.ParseConfig(f.Src, f.Name, hcl.InitialPos)
	}
	errAt := func(rng hcl.Range, format string, args ...any) {
		p.errs = append(p.errs, &Error{File: f.Name, Line: rng.Start.Line, Column: rng.Start.Column, Message: fmt.Sprintf(format, args...)})
	}
	fileDiags := func(ds hcl.Diagnostics) {
		for _, d := range ds {
			if d.Severity != hcl.DiagError {
				continue
			}
			e := &Error{File: f.Name, Message: d.Summary}
			if d.Detail != "" {
				e.Message += ": " + d.Detail
			}
			if d.Subject != nil {
				e.Line, e.Column = d.Subject.Start.Line, d.Subject.Start.Column
			}
			p.errs = append(p.errs, e)
		}
	}
	if diags.HasErrors() {
		fileDiags(diags)
		return
	}
	attrs, diags := file.Body.JustAttributes()
	if diags.HasErrors() {
		fileDiags(diags)
		return
	}
	for _, name := range keys(attrs) {
		a := attrs[name]
		d := decls[name]
		if d == nil {
			errAt(a.NameRange, "no variable %q is declared in %s%s", name, p.file, suggest(name, keys(decls)))
			continue
		}
		if len(a.Expr.Variables()) > 0 {
			errAt(a.Expr.Range(), "a var file holds values, not references")
			continue
		}
		v, vd := a.Expr.Value(&hcl.EvalContext{Functions: p.ctx.Functions})
		if vd.HasErrors() {
			fileDiags(vd)
			continue
		}
		cv, err := convert.Convert(v, d.typ)
		if err != nil {
			errAt(a.Expr.Range(), "variable %q must be %s: %v", name, typeexpr.TypeString(d.typ), err)
			continue
		}
		vals[name] = cv
	}
}

// checkRules evaluates a variable's validation blocks on its value.
func (p *parser) checkRules(d *varDecl) {
	for _, b := range d.rules {
		if _, ok := p.labels(b, ""); !ok {
			continue
		}
		c := p.content(b.Body, ruleSpec)
		cond, msgAttr := c.attrs["condition"], c.attrs["error_message"]
		if cond == nil || msgAttr == nil {
			p.errorf(b.TypeRange, "a validation block needs a condition and an error_message")
			continue
		}
		msg := "the value is not valid"
		if m, ok := p.eval(msgAttr.Expr); ok && m.Type() == cty.String && !m.IsNull() {
			msg = m.AsString()
		}
		v, ok := p.eval(cond.Expr)
		if !ok {
			continue
		}
		v, err := convert.Convert(v, cty.Bool)
		if err != nil || v.IsNull() {
			p.errorf(cond.Expr.Range(), "a validation condition must be true or false")
			continue
		}
		if v.False() {
			p.errorf(cond.Expr.Range(), "variable %q: %s", d.name, msg)
		}
	}
}

// locals computes the locals blocks in dependency order.
func (p *parser) locals(blocks []*hclsyntax.Block) {
	pending := map[string]*hclsyntax.Attribute{}
	for _, b := range blocks {
		if _, ok := p.labels(b, ""); !ok {
			continue
		}
		for _, nested := range b.Body.Blocks {
			p.errorf(nested.TypeRange, "a locals block holds only name = expression pairs")
		}
		for _, a := range sortedAttrs(b.Body) {
			p.freeze(a.Expr)
			if prev, dup := pending[a.Name]; dup {
				p.errorf(a.NameRange, "local %q is defined twice (first at line %d)", a.Name, prev.NameRange.Start.Line)
				continue
			}
			pending[a.Name] = a
		}
	}
	p.declared["local"] = keys(pending)
	vals := map[string]cty.Value{}
	for len(pending) > 0 {
		progress := false
		for _, name := range keys(pending) {
			a := pending[name]
			ready := true
			for _, tr := range a.Expr.Variables() {
				if tr.RootName() == "local" && len(tr) > 1 {
					if at, ok := tr[1].(hcl.TraverseAttr); ok && pending[at.Name] != nil {
						ready = false
					}
				}
				if !slices.Contains(scopes, tr.RootName()) {
					p.errorf(tr.SourceRange(), "a local can use variables and other locals, not %s: the node resolves that at run time", tr.RootName())
					delete(pending, name)
					ready = false
					progress = true
					break
				}
			}
			if !ready {
				continue
			}
			delete(pending, name)
			progress = true
			if v, ok := p.eval(a.Expr); ok {
				vals[name] = v
				p.ctx.Variables["local"] = cty.ObjectVal(vals)
			}
		}
		if !progress {
			for _, name := range keys(pending) {
				p.errorf(pending[name].NameRange, "local %q depends on itself through other locals", name)
			}
			return
		}
	}
}

// functions are the HCL functions a job file may call: go-cty's standard
// library, hcl's try, can and convert, the type conversions, and file and
// fileexists through readFile (nil: refused), under the names Nomad uses.
// The functions of Nomad's list that read the clock or randomness, or
// secrets, are there only to refuse the call with the reason (refused):
// a job file means the same thing whenever it is read, so that job plan
// and job run agree.
func functions(readFile func(string) ([]byte, error)) map[string]function.Function {
	fns := map[string]function.Function{
		"abs": stdlib.AbsoluteFunc, "ceil": stdlib.CeilFunc, "chomp": stdlib.ChompFunc, "chunklist": stdlib.ChunklistFunc,
		"coalesce": stdlib.CoalesceFunc, "coalescelist": stdlib.CoalesceListFunc, "compact": stdlib.CompactFunc,
		"concat": stdlib.ConcatFunc, "contains": stdlib.ContainsFunc, "csvdecode": stdlib.CSVDecodeFunc,
		"distinct": stdlib.DistinctFunc, "element": stdlib.ElementFunc, "flatten": stdlib.FlattenFunc,
		"floor": stdlib.FloorFunc, "format": stdlib.FormatFunc, "formatdate": stdlib.FormatDateFunc,
		"formatlist": stdlib.FormatListFunc, "indent": stdlib.IndentFunc, "index": stdlib.IndexFunc,
		"join": stdlib.JoinFunc, "jsondecode": stdlib.JSONDecodeFunc, "jsonencode": stdlib.JSONEncodeFunc,
		"keys": stdlib.KeysFunc, "length": lengthFunc, "log": stdlib.LogFunc, "lookup": stdlib.LookupFunc,
		"lower": stdlib.LowerFunc, "max": stdlib.MaxFunc, "merge": stdlib.MergeFunc, "min": stdlib.MinFunc,
		"parseint": stdlib.ParseIntFunc, "pow": stdlib.PowFunc, "range": stdlib.RangeFunc, "regex": stdlib.RegexFunc,
		"regexall": stdlib.RegexAllFunc, "regex_replace": stdlib.RegexReplaceFunc, "replace": stdlib.ReplaceFunc,
		"reverse": stdlib.ReverseListFunc, "setintersection": stdlib.SetIntersectionFunc,
		"setproduct": stdlib.SetProductFunc, "setsubtract": stdlib.SetSubtractFunc, "setunion": stdlib.SetUnionFunc,
		"signum": stdlib.SignumFunc, "slice": stdlib.SliceFunc, "sort": stdlib.SortFunc, "split": stdlib.SplitFunc,
		"strlen": stdlib.StrlenFunc, "strrev": stdlib.ReverseFunc, "substr": stdlib.SubstrFunc, "timeadd": stdlib.TimeAddFunc,
		"title": stdlib.TitleFunc, "trim": stdlib.TrimFunc, "trimprefix": stdlib.TrimPrefixFunc,
		"trimspace": stdlib.TrimSpaceFunc, "trimsuffix": stdlib.TrimSuffixFunc, "upper": stdlib.UpperFunc,
		"values": stdlib.ValuesFunc, "zipmap": stdlib.ZipmapFunc,
		"try": tryfunc.TryFunc, "can": tryfunc.CanFunc, "convert": typeexpr.ConvertFunc,
		"base64encode": base64EncodeFunc, "base64decode": base64DecodeFunc, "urlencode": urlEncodeFunc,
		"yamlencode": yamlEncodeFunc, "yamldecode": yamlDecodeFunc,
		"tostring": stdlib.MakeToFunc(cty.String), "tonumber": stdlib.MakeToFunc(cty.Number),
		"tobool": stdlib.MakeToFunc(cty.Bool), "tolist": stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"toset": stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)), "tomap": stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
	}
	for name, why := range refusedFunctions {
		fns[name] = refused(why)
	}
	if readFile == nil {
		const why = "this job file was not read from the author's machine (the HTTP API): its files are not here; inline the content"
		fns["file"], fns["fileexists"] = refused(why), refused(why)
	} else {
		fns["file"], fns["fileexists"] = fileFunc(readFile), fileExistsFunc(readFile)
	}
	return fns
}

// refusedFunctions are the functions of Nomad's job files that hivelet
// refuses, with the reason the error gives.
var refusedFunctions = map[string]string{
	"timestamp":  "a job file's value would change each time it is read, and job plan would never agree with job run; pass the time with -var",
	"uuidv4":     "a job file's value would change each time it is read, and job plan would never agree with job run; pass an ID with -var",
	"uuidv5":     "hivelet has no UUID functions; pass the ID with -var",
	"bcrypt":     "a job file's value would change each time it is read (a random salt); pass the hash with -var",
	"rsadecrypt": "hivelet keeps no secrets in job files; read them in a template from hivelet var",
	"fileset":    "hivelet reads one named file (file()), not globs",
	"abspath":    "a job file's paths are relative to the working directory already (file())",
}

// refused is a function that fails every call with why.
func refused(why string) function.Function {
	return function.New(&function.Spec{
		VarParam: &function.Parameter{Name: "args", Type: cty.DynamicPseudoType, AllowNull: true, AllowUnknown: true, AllowDynamicType: true},
		Type: func([]cty.Value) (cty.Type, error) {
			return cty.NilType, fmt.Errorf("not available in hivelet: %s", why)
		},
	})
}

// fileFunc is Nomad's file(path): the file's content, UTF-8 text.
func fileFunc(readFile func(string) ([]byte, error)) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "path", Type: cty.String}},
		Type:   function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			b, err := readFile(args[0].AsString())
			if err != nil {
				return cty.NilVal, err
			}
			if !utf8.Valid(b) {
				return cty.NilVal, fmt.Errorf("%s is not UTF-8 text", args[0].AsString())
			}
			return cty.StringVal(string(b)), nil
		},
	})
}

// fileExistsFunc is Nomad's fileexists(path).
func fileExistsFunc(readFile func(string) ([]byte, error)) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "path", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			_, err := readFile(args[0].AsString())
			switch {
			case err == nil:
				return cty.True, nil
			case errors.Is(err, fs.ErrNotExist):
				return cty.False, nil
			default:
				return cty.NilVal, err
			}
		},
	})
}

// yamlEncodeFunc is Nomad's yamlencode: the value as a YAML document (by
// way of its JSON form, so that YAML and JSON agree on what a value is;
// map keys come out sorted).
var yamlEncodeFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowNull: true}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		js, err := ctyjson.Marshal(args[0], args[0].Type())
		if err != nil {
			return cty.NilVal, err
		}
		var v any
		if err := json.Unmarshal(js, &v); err != nil {
			return cty.NilVal, err
		}
		out, err := yaml.Marshal(v)
		if err != nil {
			return cty.NilVal, err
		}
		return cty.StringVal(string(out)), nil
	},
})

// yamlDecodeFunc is Nomad's yamldecode: one YAML document as a value (by
// way of JSON: its maps become objects, its sequences tuples).
var yamlDecodeFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "src", Type: cty.String}},
	Type:   function.StaticReturnType(cty.DynamicPseudoType),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		var v any
		if err := yaml.Unmarshal([]byte(args[0].AsString()), &v); err != nil {
			return cty.NilVal, fmt.Errorf("not YAML: %w", err)
		}
		js, err := json.Marshal(v)
		if err != nil {
			return cty.NilVal, fmt.Errorf("YAML that has no JSON form (a map with non-string keys?): %w", err)
		}
		t, err := ctyjson.ImpliedType(js)
		if err != nil {
			return cty.NilVal, err
		}
		return ctyjson.Unmarshal(js, t)
	},
})

// urlEncodeFunc is Nomad's urlencode: the string escaped for a URL query.
var urlEncodeFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "str", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.StringVal(url.QueryEscape(args[0].AsString())), nil
	},
})

// lengthFunc is Nomad's length: of a string (its characters) as well as of
// a collection.
var lengthFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowDynamicType: true, AllowUnknown: true}},
	Type:   function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		if args[0].Type() == cty.String {
			return stdlib.Strlen(args[0])
		}
		return stdlib.Length(args[0])
	},
})

var base64EncodeFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "str", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.StringVal(base64.StdEncoding.EncodeToString([]byte(args[0].AsString()))), nil
	},
})

var base64DecodeFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "str", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		b, err := base64.StdEncoding.DecodeString(args[0].AsString())
		if err != nil {
			return cty.NilVal, fmt.Errorf("not base64: %w", err)
		}
		if !utf8.Valid(b) {
			return cty.NilVal, fmt.Errorf("the decoded bytes are not UTF-8 text")
		}
		return cty.StringVal(string(b)), nil
	},
})
