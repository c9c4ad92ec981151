package allocrunner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/render"
	"github.com/hivelet/hivelet/sdk/driver"
)

// Template events.
const (
	// EventTemplateFailure: a template could not be rendered; the task is
	// not started, and the restart policy applies.
	EventTemplateFailure = "Template Failure"
	// EventTemplateRendered: a variable a template reads changed and the
	// file was rendered again (what follows is the template's change_mode).
	EventTemplateRendered = "Template Rendered"
	// EventSignaling: a re-rendered template's change_signal was sent.
	EventSignaling = "Signaling"
)

// Vars is the variables store templates read (host/vars.Store).
type Vars interface {
	Get(ctx context.Context, path string) (map[string]string, bool, error)
	Watch(ctx context.Context, paths []string) (<-chan struct{}, error)
}

// Catalog is the services bucket templates read (host/services.Store).
type Catalog interface {
	Instances(ctx context.Context, name string) ([]*model.ServiceRegistration, error)
	WatchServices(ctx context.Context, names []string) (<-chan struct{}, error)
}

// templateSources are what a task's templates read at their last render:
// the variables' paths and the services' names.
type templateSources struct{ vars, services []string }

// templateError marks a start that failed rendering a template.
type templateError struct{ error }

// maxTemplateSource bounds a template's source file.
const maxTemplateSource = 1 << 20

// rendering is one pass over a task's templates.
type rendering struct {
	env     TaskEnv
	taskEnv map[string]string
	taskDir string
	vars    Vars
	catalog Catalog
	ctx     context.Context

	mu       sync.Mutex
	paths    map[string]bool // variables read
	services map[string]bool // services read
}

func (r *Runner) newRendering(ctx context.Context, env TaskEnv, taskEnv map[string]string, taskDir string) *rendering {
	return &rendering{env: env, taskEnv: taskEnv, taskDir: taskDir, vars: r.cfg.Vars, catalog: r.cfg.Catalog, ctx: ctx,
		paths: map[string]bool{}, services: map[string]bool{}}
}

func (rd *rendering) read() templateSources {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return templateSources{vars: slices.Sorted(maps.Keys(rd.paths)), services: slices.Sorted(maps.Keys(rd.services))}
}

func (rd *rendering) sources() render.Sources {
	src := render.Sources{Env: func(name string) (string, bool) {
		if v, ok := rd.taskEnv[name]; ok {
			return v, true
		}
		v, ok := rd.env.vars[name]
		return v, ok
	}}
	if rd.vars != nil {
		src.Var = func(path string) (map[string]string, bool, error) {
			rd.mu.Lock()
			rd.paths[path] = true
			rd.mu.Unlock()
			return rd.vars.Get(rd.ctx, path)
		}
	}
	if rd.catalog != nil {
		src.Service = func(name string) ([]*model.ServiceRegistration, error) {
			rd.mu.Lock()
			rd.services[name] = true
			rd.mu.Unlock()
			return rd.catalog.Instances(rd.ctx, name)
		}
	}
	return src
}

// text is a template's text: its data, or its source file.
func (rd *rendering) text(tpl model.Template) (string, error) {
	if tpl.Source == "" {
		return tpl.Data, nil
	}
	src := rd.env.Replace(tpl.Source)
	if !filepath.IsAbs(src) {
		src = filepath.Join(rd.taskDir, src)
	}
	f, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("reading the source: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTemplateSource+1))
	if err != nil {
		return "", fmt.Errorf("reading the source: %w", err)
	}
	if len(b) > maxTemplateSource {
		return "", fmt.Errorf("the source %s is larger than %d bytes", src, maxTemplateSource)
	}
	return string(b), nil
}

// one renders a template; dest is where it goes.
func (rd *rendering) one(tpl model.Template) (out []byte, dest string, err error) {
	text, err := rd.text(tpl)
	if err != nil {
		return nil, "", err
	}
	out, err = render.Render(text, tpl.LeftDelimiter, tpl.RightDelimiter, rd.sources())
	if err != nil {
		return nil, "", err
	}
	dest = filepath.Join(rd.taskDir, rd.env.Replace(tpl.Destination))
	if rel, err := filepath.Rel(rd.taskDir, dest); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, "", fmt.Errorf("destination %s is outside the task directory", dest)
	}
	return out, dest, nil
}

// renderTemplates writes each of the task's templates into its directory
// and returns the variables of those with env = true, and what they read.
// A template reads the task's environment (taskEnv: NOMAD_* variables, the
// ports, the task's env), the node's values (node.*, attr.*, meta.*), the
// variables store and the services bucket.
func (r *Runner) renderTemplates(ctx context.Context, t *model.Task, env TaskEnv, taskEnv map[string]string, taskDir string) (map[string]string, templateSources, error) {
	rd := r.newRendering(ctx, env, taskEnv, taskDir)
	out := map[string]string{}
	for i, tpl := range t.Templates {
		data, dest, err := rd.one(tpl)
		if err == nil {
			err = writeFileAtomic(dest, data, os.FileMode(tpl.FileMode()))
		}
		if err == nil && tpl.Env {
			var kv map[string]string
			if kv, err = render.ParseEnvFile(data); err != nil {
				err = fmt.Errorf("env = true: %w", err)
			}
			maps.Copy(out, kv)
		}
		if err != nil {
			return nil, templateSources{}, templateError{fmt.Errorf("template %d (%s): %w", i, tpl.Destination, err)}
		}
	}
	return out, rd.read(), nil
}

// rerender renders the task's templates again after a variable changed and
// writes those whose content changed. It says what their change modes ask
// for: restart (a changed template with change_mode restart or env =
// true: a running task's environment cannot change), else the signals to
// send.
func (r *Runner) rerender(ctx context.Context, t *model.Task) (restart bool, signals []string, err error) {
	env, taskEnv, taskDir := r.taskEnvFor(t)
	rd := r.newRendering(ctx, env, taskEnv, taskDir)
	for i, tpl := range t.Templates {
		data, dest, err := rd.one(tpl)
		if err != nil {
			return false, nil, fmt.Errorf("template %d (%s): %w", i, tpl.Destination, err)
		}
		if old, err := os.ReadFile(dest); err == nil && bytes.Equal(old, data) {
			continue
		}
		if err := writeFileAtomic(dest, data, os.FileMode(tpl.FileMode())); err != nil {
			return false, nil, fmt.Errorf("template %d (%s): %w", i, tpl.Destination, err)
		}
		r.event(t.Name, EventTemplateRendered, fmt.Sprintf("template %s rendered again: a variable or service it reads changed", tpl.Destination))
		switch {
		case tpl.Env || tpl.ChangeMode == "" || tpl.ChangeMode == model.ChangeRestart:
			restart = true
		case tpl.ChangeMode == model.ChangeSignal && !slices.Contains(signals, tpl.ChangeSignal):
			signals = append(signals, tpl.ChangeSignal)
		}
	}
	return restart, signals, nil
}

// watchTemplates follows the variables and services the task's templates
// read while the task runs (started or reattached as h): on a change it renders them
// again and applies their change modes (signals are sent here; a restart
// is asked for by calling restart, which the task's wait turns into a stop
// and the task loop into a start), until the returned stop is called or
// parent ends. It starts nothing, and returns nil, when there is nothing
// to follow.
func (r *Runner) watchTemplates(parent context.Context, drv driver.Driver, t *model.Task, h *driver.TaskHandle, restart func()) (stop context.CancelFunc) {
	r.mu.Lock()
	src := r.tplSources[t.Name]
	varsOn := r.cfg.Vars != nil && len(src.vars) > 0
	servicesOn := r.cfg.Catalog != nil && len(src.services) > 0
	if (!varsOn && !servicesOn) || r.bgClosed {
		r.mu.Unlock()
		return nil
	}
	r.bgWG.Add(1)
	r.mu.Unlock()
	ctx, stop := context.WithCancel(parent)
	go func() {
		defer r.bgWG.Done()
		var varChanges, svcChanges <-chan struct{}
		var err error
		if varsOn {
			if varChanges, err = r.cfg.Vars.Watch(ctx, src.vars); err != nil {
				r.log.Error("watching the variables of the task's templates", "task", t.Name, "err", err)
				return
			}
		}
		if servicesOn {
			if svcChanges, err = r.cfg.Catalog.WatchServices(ctx, src.services); err != nil {
				r.log.Error("watching the services of the task's templates", "task", t.Name, "err", err)
				return
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-varChanges:
				if !ok {
					return
				}
			case _, ok := <-svcChanges:
				if !ok {
					return
				}
			}
			again, signals, err := r.rerender(ctx, t)
			if err != nil {
				r.event(t.Name, EventTemplateFailure, err.Error())
				continue
			}
			if again {
				restart()
				continue
			}
			for _, sig := range signals {
				r.event(t.Name, EventSignaling, "sending "+sig+": a template changed")
				if err := drv.SignalTask(ctx, h.TaskID, sig); err != nil && ctx.Err() == nil {
					r.log.Error("signalling the task after a template changed", "task", t.Name, "signal", sig, "err", err)
				}
			}
		}
	}()
	return stop
}

// ownLikeDir gives f the owner of dir when the host runs as root: a task
// running as another user (exec's default, nobody) owns its task directory
// (plugins/exec), so a template rendered again while it runs stays
// readable by it whatever the template's mode.
func ownLikeDir(f *os.File, dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == 0 {
		return nil
	}
	return f.Chown(int(st.Uid), int(st.Gid))
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
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = ownLikeDir(tmp, filepath.Dir(path))
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
