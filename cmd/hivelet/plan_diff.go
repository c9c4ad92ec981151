package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/hivelet/hivelet/host/model"
)

// Change is one difference between the running version of a job and the
// one a file declares, at a JSON path of the job (groups and tasks are
// named by their names: groups[web].tasks[server].config.image).
type Change struct {
	// Kind is "+" (added), "-" (removed) or "~" (changed).
	Kind string `json:"kind"`
	Path string `json:"path"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new,omitempty"`
}

func (c Change) String() string {
	switch c.Kind {
	case "+":
		return fmt.Sprintf("+ %s = %s", c.Path, c.New)
	case "-":
		return fmt.Sprintf("- %s = %s", c.Path, c.Old)
	}
	return fmt.Sprintf("~ %s: %s => %s", c.Path, c.Old, c.New)
}

// jobDiff lists what differs between old (nil: a new job) and new, leaving
// out what the CLI stamps (version, submit time) and the stable flag. It is
// pure; the paths are sorted.
func jobDiff(old, new *model.Job) ([]Change, error) {
	flat := func(j *model.Job) (map[string]string, error) {
		out := map[string]string{}
		if j == nil {
			return out, nil
		}
		c := *j
		c.Version, c.Stable, c.RevertOf = 0, false, nil
		c.SubmitTime = c.SubmitTime.UTC().Truncate(0)
		b, err := json.Marshal(&c)
		if err != nil {
			return nil, err
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		if m, ok := v.(map[string]any); ok {
			delete(m, "version")
			delete(m, "submit_time")
			delete(m, "stable")
			delete(m, "revert_of")
		}
		flatten("", v, out)
		return out, nil
	}
	a, err := flat(old)
	if err != nil {
		return nil, fmt.Errorf("encoding the running job: %w", err)
	}
	b, err := flat(new)
	if err != nil {
		return nil, fmt.Errorf("encoding the job file's job: %w", err)
	}
	var out []Change
	for p, ov := range a {
		nv, ok := b[p]
		switch {
		case !ok:
			out = append(out, Change{Kind: "-", Path: p, Old: ov})
		case nv != ov:
			out = append(out, Change{Kind: "~", Path: p, Old: ov, New: nv})
		}
	}
	for p, nv := range b {
		if _, ok := a[p]; !ok {
			out = append(out, Change{Kind: "+", Path: p, New: nv})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// flatten writes the leaves of a decoded JSON value as path → JSON text.
// A list of objects that all carry a "name" (groups, tasks, services) is
// keyed by name, so that a reordering or an insertion is not a change of
// every element after it; other lists by index.
func flatten(path string, v any, out map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 {
			out[path] = "{}"
			return
		}
		for k, e := range t {
			flatten(joinPath(path, k), e, out)
		}
	case []any:
		if len(t) == 0 {
			out[path] = "[]"
			return
		}
		named := true
		for _, e := range t {
			m, ok := e.(map[string]any)
			if !ok {
				named = false
				break
			}
			if n, ok := m["name"].(string); !ok || n == "" {
				named = false
				break
			}
		}
		for i, e := range t {
			key := fmt.Sprint(i)
			if named {
				key = e.(map[string]any)["name"].(string)
			}
			flatten(path+"["+key+"]", e, out)
		}
	default:
		b, _ := json.Marshal(t)
		out[path] = string(b)
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	if strings.ContainsAny(key, ".[] ") {
		return path + "[" + fmt.Sprintf("%q", key) + "]"
	}
	return path + "." + key
}
