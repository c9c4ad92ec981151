package allocrunner

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/render"
)

// EventTemplateFailure is the task event of a template that could not be
// rendered: the task is not started, and the restart policy applies.
const EventTemplateFailure = "Template Failure"

// templateError marks a start that failed rendering a template.
type templateError struct{ error }

// maxTemplateSource bounds a template's source file.
const maxTemplateSource = 1 << 20

// renderTemplates writes each of the task's templates into its directory
// and returns the variables of those with env = true. A template reads the
// task's environment (taskEnv: NOMAD_* variables, the ports, the task's
// env) and the node's values (node.*, attr.*, meta.*).
func renderTemplates(t *model.Task, env TaskEnv, taskEnv map[string]string, taskDir string) (map[string]string, error) {
	lookup := func(name string) (string, bool) {
		if v, ok := taskEnv[name]; ok {
			return v, true
		}
		v, ok := env.vars[name]
		return v, ok
	}
	out := map[string]string{}
	for i, tpl := range t.Templates {
		vars, err := renderOne(tpl, env, lookup, taskDir)
		if err != nil {
			return nil, templateError{fmt.Errorf("template %d (%s): %w", i, tpl.Destination, err)}
		}
		maps.Copy(out, vars)
	}
	return out, nil
}

func renderOne(tpl model.Template, env TaskEnv, lookup render.Lookup, taskDir string) (map[string]string, error) {
	text := tpl.Data
	if tpl.Source != "" {
		src := env.Replace(tpl.Source)
		if !filepath.IsAbs(src) {
			src = filepath.Join(taskDir, src)
		}
		f, err := os.Open(src)
		if err != nil {
			return nil, fmt.Errorf("reading the source: %w", err)
		}
		b, err := io.ReadAll(io.LimitReader(f, maxTemplateSource+1))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading the source: %w", err)
		}
		if len(b) > maxTemplateSource {
			return nil, fmt.Errorf("the source %s is larger than %d bytes", src, maxTemplateSource)
		}
		text = string(b)
	}
	out, err := render.Render(text, tpl.LeftDelimiter, tpl.RightDelimiter, lookup)
	if err != nil {
		return nil, err
	}
	dest := filepath.Join(taskDir, env.Replace(tpl.Destination))
	if rel, err := filepath.Rel(taskDir, dest); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("destination %s is outside the task directory", dest)
	}
	if err := writeFileAtomic(dest, out, os.FileMode(tpl.FileMode())); err != nil {
		return nil, err
	}
	if !tpl.Env {
		return nil, nil
	}
	vars, err := render.ParseEnvFile(out)
	if err != nil {
		return nil, fmt.Errorf("env = true: %w", err)
	}
	return vars, nil
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory, so a task never reads a half-written file.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the destination's directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmpl-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
