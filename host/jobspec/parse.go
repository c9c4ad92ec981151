package jobspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/hivelet/hivelet/host/model"
)

// MaxFileSize bounds a job file: its canonical JSON must fit a NATS KV value.
const MaxFileSize = 1 << 20

// Error is one problem in a job file. HCL errors carry a line and column;
// JSON errors carry the path of the offending field instead.
type Error struct {
	File    string
	Line    int // 1-based; 0 when unknown
	Column  int // 1-based; 0 when unknown
	Path    string
	Message string
}

func (e *Error) Error() string {
	switch {
	case e.Line > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Message)
	case e.Path != "":
		return fmt.Sprintf("%s: %s: %s", e.File, e.Path, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Message)
}

// Errors is every problem found in one file, in file order.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Parse reads a job file, choosing the syntax by extension: .hcl and .nomad
// are HCL, .json is the JSON wire form. On failure the error is Errors.
func Parse(filename string, data []byte) (*model.Job, error) {
	return ParseWith(filename, data, Inputs{})
}

// ParseWith is Parse with values for the file's variables. A JSON job has
// no variables: var files or -var flags for one are an error.
func ParseWith(filename string, data []byte, in Inputs) (*model.Job, error) {
	switch strings.ToLower(filepath.Ext(filename)) {
	case ".hcl", ".nomad":
		return ParseHCLWith(filename, data, in)
	case ".json":
		if in.given() {
			return nil, Errors{{File: filename, Message: "a JSON job has no variables: -var and -var-file apply to HCL job files"}}
		}
		job, err := ParseJSON(filename, data)
		if err != nil {
			return nil, err
		}
		var errs Errors
		for _, dp := range checkDrivers(job, in.Drivers) {
			e := &Error{File: filename, Path: dp.path, Message: dp.message}
			if !dp.warning {
				errs = append(errs, e)
			} else if in.Warn != nil {
				in.Warn(e)
			}
		}
		if len(errs) > 0 {
			return nil, errs
		}
		return job, nil
	}
	return nil, Errors{{File: filename, Message: "unknown job file extension: name it .hcl or .nomad (HCL) or .json (the JSON form)"}}
}

// ParseHCL reads a job written in HCL. The result is the effective job:
// each group's Update is the job-level block overridden field by field by the
// group's own (system jobs with neither get model.DefaultUpdateStrategy),
// restart policies are defaulted field by field, counts default to 1, and
// Job.Update is the job-level block over the defaults.
func ParseHCL(filename string, src []byte) (*model.Job, error) {
	return ParseHCLWith(filename, src, Inputs{})
}

// ParseHCLWith is ParseHCL with values for the file's variable blocks.
// References to var.* and local.*, and function calls over them, are
// computed; every other "${...}" stays text for the node.
func ParseHCLWith(filename string, src []byte, in Inputs) (*model.Job, error) {
	if len(src) > MaxFileSize {
		return nil, Errors{{File: filename, Message: fmt.Sprintf("job file is %d bytes, larger than the %d-byte limit", len(src), MaxFileSize)}}
	}
	p := &parser{file: filename, src: src, pos: map[string]hcl.Range{}, inputs: in}
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		p.diags(diags)
		return nil, p.sorted()
	}
	body, ok := f.Body.(*hclsyntax.Body)
	if !ok {
		return nil, Errors{{File: filename, Message: "not an HCL native-syntax file"}}
	}
	job := p.parseFile(body)
	if job == nil {
		return nil, p.sorted()
	}
	if err := job.Validate(); err != nil {
		var ves model.ValidationErrors
		if !errors.As(err, &ves) {
			return nil, fmt.Errorf("validating job: %w", err)
		}
		// A field that already failed to parse is left zero; whatever
		// Validate says about it would only repeat the parse error.
		failed := map[hcl.Pos]bool{}
		for _, e := range p.errs {
			failed[hcl.Pos{Line: e.Line, Column: e.Column}] = true
		}
		for _, ve := range ves {
			rng := p.locate(ve.Path)
			if failed[hcl.Pos{Line: rng.Start.Line, Column: rng.Start.Column}] {
				continue
			}
			p.errorf(rng, "%s", ve.Message)
		}
	}
	for _, dp := range checkDrivers(job, in.Drivers) {
		if dp.warning {
			p.warnf(p.locate(dp.path), "%s", dp.message)
		} else {
			p.errorf(p.locate(dp.path), "%s", dp.message)
		}
	}
	if in.Warn != nil {
		sort.SliceStable(p.warns, func(i, j int) bool { return p.warns[i].Line < p.warns[j].Line })
		for _, w := range p.warns {
			in.Warn(w)
		}
	}
	if len(p.errs) > 0 {
		return nil, p.sorted()
	}
	return job, nil
}

// locate finds where the field at path (or its nearest recorded parent)
// was written.
func (p *parser) locate(path string) hcl.Range {
	for {
		if r, ok := p.pos[path]; ok {
			return r
		}
		if path == "" {
			return hcl.Range{Filename: p.file, Start: hcl.InitialPos, End: hcl.InitialPos}
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			path = ""
		} else {
			path = path[:i]
		}
	}
}

// sorted returns the errors in file order, each reported once.
func (p *parser) sorted() Errors {
	sort.SliceStable(p.errs, func(i, j int) bool {
		a, b := p.errs[i], p.errs[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	out := Errors{}
	seen := map[string]bool{}
	for _, e := range p.errs {
		k := e.Error()
		if !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	return out
}

// ParseJSON reads a job in its JSON wire form: a strict decode (unknown
// fields, unknown enum values and wrong types fail the whole document), then
// the defaults an HCL file would have received, then the same validation as
// HCL. Errors carry the JSON path of the field.
func ParseJSON(filename string, data []byte) (*model.Job, error) {
	if len(data) > MaxFileSize {
		return nil, Errors{{File: filename, Message: fmt.Sprintf("job file is %d bytes, larger than the %d-byte limit", len(data), MaxFileSize)}}
	}
	var job model.Job
	if err := model.Decode(data, &job); err != nil {
		var de *model.DecodeError
		if errors.As(err, &de) {
			msg := de.Reason
			if de.Path == "type" && strings.Contains(msg, "JobType") {
				msg += ": hivelet has no central scheduler, so it runs only node-bound job types"
			}
			e := &Error{File: filename, Path: de.Path, Message: msg}
			var se *json.SyntaxError
			if errors.As(err, &se) || (de.Path == "" && strings.HasPrefix(de.Reason, "invalid JSON")) {
				// A syntax error: say where, as HCL errors do. The offset
				// counts the offending byte itself.
				e.Line, e.Column = lineCol(data, max(de.Offset-1, 0))
			}
			return nil, Errors{e}
		}
		return nil, Errors{{File: filename, Message: err.Error()}}
	}
	Canonicalize(&job)
	if err := job.Validate(); err != nil {
		var ves model.ValidationErrors
		if !errors.As(err, &ves) {
			return nil, fmt.Errorf("validating job: %w", err)
		}
		out := make(Errors, len(ves))
		for i, ve := range ves {
			out[i] = &Error{File: filename, Path: ve.Path, Message: ve.Message}
		}
		return nil, out
	}
	return &job, nil
}

// Canonicalize fills in what a JSON job leaves out, the way the HCL parser
// would: a system group with no update strategy inherits the job's (or the
// defaults), a group with no restart policy gets the default for the job
// type. It changes nothing on a job that is already effective, so canonical
// JSON passes through unchanged.
func Canonicalize(j *model.Job) {
	for _, g := range j.Groups {
		if g == nil {
			continue
		}
		if g.Update == nil && j.Type == model.JobTypeSystem {
			if j.Update != nil {
				u := *j.Update
				u.CanaryPolicy = clonePolicy(u.CanaryPolicy)
				u.CompletionPolicy = clonePolicy(u.CompletionPolicy)
				g.Update = &u
			} else {
				g.Update = model.DefaultUpdateStrategy()
			}
		}
		if g.Restart == nil {
			g.Restart = model.DefaultRestartPolicy(j.Type)
		}
		if g.Network != nil && g.Network.Mode == "" {
			g.Network.Mode = model.NetworkHost // as in HCL, Nomad's default
		}
	}
}

// Canonical renders a job as canonical JSON: two-space indentation, fields
// in declaration order, map keys sorted, no HTML escaping, one trailing
// newline. The same job always gives the same bytes.
func Canonical(j *model.Job) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(j); err != nil {
		return nil, fmt.Errorf("encoding job %s: %w", j.ID, err)
	}
	return buf.Bytes(), nil
}

// lineCol turns a byte offset into a 1-based line and column (in bytes).
func lineCol(data []byte, offset int64) (int, int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(offset) - bytes.LastIndexByte(before, '\n')
	return line, col
}
