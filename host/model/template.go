package model

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// ChangeMode is what happens to a task when one of its templates renders
// differently.
type ChangeMode string

const (
	ChangeNoop    ChangeMode = "noop"
	ChangeRestart ChangeMode = "restart"
	ChangeSignal  ChangeMode = "signal"
)

// ChangeModes lists every ChangeMode value.
var ChangeModes = []ChangeMode{ChangeNoop, ChangeRestart, ChangeSignal}

func (m *ChangeMode) UnmarshalJSON(b []byte) error { return decodeEnum(b, m, ChangeModes) }

// Template is a file the node renders into the task's directory before the
// task starts, from the task's environment (Nomad's template block, the
// common subset).
type Template struct {
	// Data is the template text; Source a file on the node holding it
	// (absolute, or relative to the task directory). Exactly one is set.
	Data   string `json:"data,omitempty"`
	Source string `json:"source,omitempty"`
	// Destination is relative to the task directory and stays inside it.
	Destination string `json:"destination"`
	// Env makes the rendered KEY=VALUE lines part of the task's environment.
	Env bool `json:"env,omitempty"`
	// Perms is the file mode in octal; "" = "644".
	Perms        string     `json:"perms,omitempty"`
	ChangeMode   ChangeMode `json:"change_mode,omitempty"`
	ChangeSignal string     `json:"change_signal,omitempty"`
	// LeftDelimiter and RightDelimiter replace {{ and }}.
	LeftDelimiter  string `json:"left_delimiter,omitempty"`
	RightDelimiter string `json:"right_delimiter,omitempty"`
}

// FileMode is the rendered file's mode.
func (t Template) FileMode() uint32 {
	if t.Perms == "" {
		return 0o644
	}
	m, _ := strconv.ParseUint(t.Perms, 8, 32)
	return uint32(m)
}

func (v *validator) template(path string, t Template) {
	if (t.Data == "") == (t.Source == "") {
		v.add(path, "a template needs exactly one of data (the text) and source (a file on the node)")
	}
	d := t.Destination
	switch {
	case strings.TrimSpace(d) == "":
		v.add(join(path, "destination"), "a template needs a destination, such as \"local/app.conf\"")
	case filepath.IsAbs(d) || strings.HasPrefix(filepath.Clean(d), ".."):
		v.add(join(path, "destination"), "destination %q must be relative to the task directory and stay inside it (local/, secrets/, alloc/ ...)", d)
	}
	if t.Perms != "" {
		if m, err := strconv.ParseUint(t.Perms, 8, 32); err != nil || m > 0o777 {
			v.add(join(path, "perms"), "perms %q must be an octal mode such as \"644\"", t.Perms)
		}
	}
	if t.ChangeMode != "" && !validEnum(t.ChangeMode, ChangeModes) {
		v.add(join(path, "change_mode"), "unknown change_mode %q (allowed: %s)", t.ChangeMode, joinEnum(ChangeModes))
	}
	if t.ChangeMode == ChangeSignal && t.ChangeSignal == "" {
		v.add(join(path, "change_signal"), "change_mode = \"signal\" needs change_signal, such as \"SIGHUP\"")
	}
	if (t.LeftDelimiter == "") != (t.RightDelimiter == "") {
		v.add(join(path, "left_delimiter"), "give both left_delimiter and right_delimiter, or neither")
	}
}

func (v *validator) templates(path string, ts []Template) {
	seen := map[string]int{}
	for i, t := range ts {
		tp := fmt.Sprintf("%s.templates[%d]", path, i)
		v.template(tp, t)
		clean := filepath.Clean(t.Destination)
		if j, dup := seen[clean]; dup && t.Destination != "" {
			v.add(join(tp, "destination"), "templates %d and %d both render %q", j, i, t.Destination)
		}
		seen[clean] = i
	}
}
