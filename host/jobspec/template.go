package jobspec

import (
	"errors"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/render"
)

var (
	templateSpec = spec{what: "template",
		attrs: []string{"data", "source", "destination", "env", "perms", "change_mode", "change_signal",
			"left_delimiter", "right_delimiter", "splay", "error_on_missing_key"},
		blocks: []string{"wait"},
		extra: map[string]string{
			"change_script": "templates run no scripts; use change_mode = \"signal\" or \"restart\"",
			"uid":           "rendered files belong to the agent's user; set perms",
			"gid":           "rendered files belong to the agent's user; set perms",
		}}
	waitSpec = spec{what: "wait", attrs: []string{"min", "max"}}
)

// template reads one template block. The text is checked here: a function
// hivelet does not have, or a syntax error, is reported at its line in the
// file. splay, wait and error_on_missing_key are accepted and checked, and
// change nothing: nothing a template reads changes during an allocation's
// life, so there is no re-render to pace.
func (p *parser) template(b *hclsyntax.Block, path string) (model.Template, bool) {
	var t model.Template
	p.at(path, b.TypeRange)
	if _, ok := p.labels(b, ""); !ok {
		return t, false
	}
	c := p.content(b.Body, templateSpec)
	str := func(name string, dst *string) {
		if a := c.attrs[name]; a != nil {
			var ok bool
			if *dst, ok = p.str(a, path+"."+name); !ok && (name == "data" || name == "source") {
				// The template is then at the failed value: "needs
				// exactly one of data and source" would only echo it.
				p.at(path, a.Expr.Range())
			}
		}
	}
	str("data", &t.Data)
	str("source", &t.Source)
	str("destination", &t.Destination)
	str("perms", &t.Perms)
	str("change_signal", &t.ChangeSignal)
	str("left_delimiter", &t.LeftDelimiter)
	str("right_delimiter", &t.RightDelimiter)
	var mode string
	str("change_mode", &mode)
	t.ChangeMode = model.ChangeMode(mode)
	p.at(path+".destination", b.TypeRange)
	if a := c.attrs["destination"]; a != nil {
		p.at(path+".destination", a.Expr.Range())
	}
	if a := c.attrs["env"]; a != nil {
		t.Env, _ = p.boolean(a, path+".env")
	}
	if a := c.attrs["error_on_missing_key"]; a != nil {
		p.boolean(a, path+".error_on_missing_key")
	}
	if a := c.attrs["splay"]; a != nil {
		if _, ok := p.duration(a, path+".splay"); ok {
			p.warnf(a.NameRange, "splay is accepted and ignored: a template is rendered again, and its change_mode applied, as soon as a variable or service it reads changes")
		}
	}
	if wb := p.one(c, "wait"); wb != nil {
		p.warnf(wb.TypeRange, "wait is accepted and ignored: a template is rendered again, and its change_mode applied, as soon as a variable or service it reads changes")
		if _, ok := p.labels(wb, ""); ok {
			wc := p.content(wb.Body, waitSpec)
			for _, n := range []string{"min", "max"} {
				if a := wc.attrs[n]; a != nil {
					p.duration(a, path+".wait."+n)
				}
			}
		}
	}
	if a := c.attrs["data"]; a != nil && t.Data != "" {
		p.checkTemplate(a, t)
	}
	return t, true
}

// checkTemplate parses a template's data and reports a problem at its line
// in the file.
func (p *parser) checkTemplate(a *hclsyntax.Attribute, t model.Template) {
	err := render.Check(t.Data, t.LeftDelimiter, t.RightDelimiter)
	var re *render.Error
	if !errors.As(err, &re) {
		return
	}
	rng := a.Expr.Range()
	pos := rng.Start
	if re.Line > 0 {
		// A heredoc's text starts on the line after its opener.
		first := pos.Line
		if strings.HasPrefix(string(rng.SliceBytes(p.src)), "<<") {
			first++
		}
		pos = hcl.Pos{Line: first + re.Line - 1, Column: 1}
		if re.Line == 1 && first == rng.Start.Line {
			pos.Column = rng.Start.Column
		}
	}
	msg := re.Message
	if !strings.HasPrefix(msg, "template function") {
		msg = "template syntax: " + msg
	}
	p.errorf(hcl.Range{Filename: p.file, Start: pos, End: pos}, "%s", msg)
}

// logs reads a task's logs block: accepted, checked and not applied (a
// warning says so). The driver rotates a task's output by its own settings
// (docker: HIVELET_DOCKER_LOG_MAX_BYTES and _FILES).
func (p *parser) logs(b *hclsyntax.Block) {
	if _, ok := p.labels(b, ""); !ok {
		return
	}
	c := p.content(b.Body, logsSpec)
	for _, n := range []string{"max_files", "max_file_size"} {
		if a := c.attrs[n]; a != nil {
			if v, ok := p.integer(a, "logs."+n); ok && v < 0 {
				p.errorf(a.Expr.Range(), "%s must not be negative, got %d", n, v)
			}
		}
	}
	for _, n := range []string{"disabled", "enabled"} {
		if a := c.attrs[n]; a != nil {
			p.boolean(a, "logs."+n)
		}
	}
	p.warnf(b.TypeRange, "the logs block is accepted and not applied: the driver rotates a task's output by its own settings (docker: HIVELET_DOCKER_LOG_MAX_BYTES, HIVELET_DOCKER_LOG_MAX_FILES)")
}

var ephemeralDiskSpec = spec{what: "ephemeral_disk", attrs: []string{"size", "sticky", "migrate"}}

// ephemeralDisk reads a group's ephemeral_disk block: accepted, checked
// and not applied (a warning says so). Nomad reserves the size when it
// schedules; hivelet has no scheduler, and an allocation's directory is
// the node's disk; sticky and migrate move data between nodes a system
// job never moves between.
func (p *parser) ephemeralDisk(b *hclsyntax.Block) {
	if _, ok := p.labels(b, ""); !ok {
		return
	}
	c := p.content(b.Body, ephemeralDiskSpec)
	if a := c.attrs["size"]; a != nil {
		if v, ok := p.integer(a, "ephemeral_disk.size"); ok && v < 0 {
			p.errorf(a.Expr.Range(), "size must not be negative, got %d", v)
		}
	}
	for _, n := range []string{"sticky", "migrate"} {
		if a := c.attrs[n]; a != nil {
			p.boolean(a, "ephemeral_disk."+n)
		}
	}
	p.warnf(b.TypeRange, "the ephemeral_disk block is accepted and not applied: hivelet reserves no disk (an allocation's directory is on the node's disk) and moves no allocation data")
}

var lifecycleSpec = spec{what: "lifecycle", attrs: []string{"hook", "sidecar"}}

// lifecycle reads a task's lifecycle block: prestart, poststart and
// poststop hooks (the model's validation checks the combinations).
func (p *parser) lifecycle(b *hclsyntax.Block, path string) *model.Lifecycle {
	p.at(path, b.TypeRange)
	if _, ok := p.labels(b, ""); !ok {
		return nil
	}
	c := p.content(b.Body, lifecycleSpec)
	l := &model.Lifecycle{}
	p.at(path+".hook", b.TypeRange)
	if a := c.attrs["hook"]; a != nil {
		h, ok := p.str(a, path+".hook")
		if !ok {
			return nil
		}
		l.Hook = model.LifecycleHook(h)
	}
	p.at(path+".sidecar", b.TypeRange)
	if a := c.attrs["sidecar"]; a != nil {
		p.at(path+".sidecar", a.Expr.Range())
		l.Sidecar, _ = p.boolean(a, path+".sidecar")
	}
	return l
}
