package allocrunner

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/wait"
	"github.com/hivelet/hivelet/sdk/driver"
)

// Task event types written to a task's event list.
const (
	EventReceived         = "Received"
	EventStarted          = "Started"
	EventReattached       = "Reattached"
	EventTerminated       = "Terminated"
	EventRestarting       = "Restarting"
	EventNotRestarting    = "Not Restarting"
	EventDriverFailure    = "Driver Failure"
	EventFailedValidation = "Failed Validation"
	EventKilling          = "Killing"
	EventKilled           = "Killed"
	EventRecoverFailed    = "Recover Failed"
)

func (r *Runner) taskID(task string) string { return r.alloc.ID + "/" + task }

// taskEnvFor is a task's interpolation variables, its process
// environment (before templates) and its directory.
func (r *Runner) taskEnvFor(t *model.Task) (TaskEnv, map[string]string, string) {
	r.mu.Lock()
	alloc, job := CloneAlloc(r.alloc), r.job
	g := r.group()
	r.mu.Unlock()
	allocDir := r.AllocDir()
	taskDir := filepath.Join(allocDir, t.Name)
	env := NewTaskEnv(r.cfg.Node, alloc, job, g, t, allocDir, taskDir)
	return env, env.Env(t.Env), taskDir
}

// buildTaskConfig interpolates the task's config and env, renders its
// templates, and builds what the driver receives.
func (r *Runner) buildTaskConfig(ctx context.Context, t *model.Task) (*driver.TaskConfig, error) {
	env, taskEnv, taskDir := r.taskEnvFor(t)
	alloc := env.vars["NOMAD_ALLOC_ID"]
	allocDir := r.AllocDir()
	stdout, stderr := LogPaths(allocDir, t.Name)
	// Nomad's task directory layout: local/ and secrets/ for the task
	// (templates render there; docker mounts them at /local and /secrets).
	if err := mkdirs(taskDir, filepath.Join(taskDir, "local"), filepath.Join(taskDir, "secrets"), filepath.Dir(stdout)); err != nil {
		return nil, fmt.Errorf("creating allocation directories: %w", err)
	}
	cfg, _ := env.ReplaceAll(t.Config).(map[string]any)
	if cfg == nil {
		cfg = map[string]any{}
	}
	if err := r.fetchArtifacts(ctx, t, env, taskDir); err != nil {
		return nil, err
	}
	if len(t.Templates) > 0 {
		vars, src, err := r.renderTemplates(ctx, t, env, taskEnv, taskDir)
		if err != nil {
			return nil, err
		}
		maps.Copy(taskEnv, vars)
		maps.Copy(taskEnv, env.fixed) // the ports stay what the node allocated
		r.mu.Lock()
		r.tplSources[t.Name] = src
		r.mu.Unlock()
	}
	r.mu.Lock()
	jobID, group, nodeID := r.alloc.JobID, r.alloc.TaskGroup, r.alloc.NodeID
	var netMode string
	g := r.group()
	if g != nil && g.Network != nil && g.Network.Mode == model.NetworkBridge {
		netMode = string(model.NetworkBridge)
	}
	r.mu.Unlock()
	var mounts []driver.Mount
	if g != nil {
		var err error
		if mounts, err = taskMounts(g, t, r.cfg.Node); err != nil {
			return nil, errPermanent{err}
		}
	}
	return &driver.TaskConfig{
		ID:         r.taskID(t.Name),
		AllocID:    alloc,
		TaskName:   t.Name,
		JobID:      jobID,
		Group:      group,
		NodeID:     nodeID,
		Config:     cfg,
		Env:        taskEnv,
		User:       t.User,
		Resources:  driver.Resources{CPU: t.Resources.CPU, MemoryMB: t.Resources.MemoryMB},
		AllocDir:   allocDir,
		StdoutPath: stdout,
		StderrPath: stderr,
		KillSignal: t.KillSignal,
		// The driver gives a bridge task a network of its own with every
		// port of the allocation mapped into it.
		NetworkMode: netMode,
		Mounts:      mounts,
	}, nil
}

// errPermanent marks a start failure that no restart can fix (bad config).
type errPermanent struct{ error }

func (r *Runner) start(ctx context.Context, drv driver.Driver, t *model.Task) (*driver.TaskHandle, error) {
	tc, err := r.buildTaskConfig(ctx, t)
	if err != nil {
		return nil, err
	}
	if len(tc.Mounts) > 0 || hasScriptCheck(t) {
		caps, err := drv.Capabilities(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading driver %s capabilities: %w", t.Driver, err)
		}
		if _, execs := drv.(driver.TaskExecer); hasScriptCheck(t) && (!caps.Exec || !execs) {
			return nil, errPermanent{fmt.Errorf("task %s has a script check, and driver %s cannot run a command inside a task (its capabilities say so): use an http or tcp check, or a driver that can, such as docker or exec", t.Name, t.Driver)}
		}
		if len(tc.Mounts) > 0 && !caps.Mounts {
			return nil, errPermanent{fmt.Errorf("task %s: driver %s does not mount host volumes (its capabilities say so): drop the volume_mount and read %s where it is on the node, or use a driver that mounts, such as docker", t.Name, t.Driver, tc.Mounts[0].HostPath)}
		}
	}
	if r.cfg.Validate != nil {
		schema, err := drv.ConfigSchema(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading driver %s config schema: %w", t.Driver, err)
		}
		if err := r.cfg.Validate(schema, tc.Config); err != nil {
			return nil, errPermanent{fmt.Errorf("task %s config: %w", t.Name, err)}
		}
	}
	h, err := drv.StartTask(ctx, tc)
	if err != nil {
		if strings.Contains(err.Error(), tc.ID) {
			return nil, err // the driver's error already says which task
		}
		return nil, fmt.Errorf("starting task %s: %w", t.Name, err)
	}
	return h, nil
}

// runTask is one task's life: start or reattach, wait, restart per policy,
// until it finishes for good, the allocation is stopped, or the runner is
// detached.
func (r *Runner) runTask(t *model.Task, restored *driver.TaskHandle) {
	defer r.taskDone(t)
	ctx := r.ctx
	r.mu.Lock()
	g := r.group()
	jobType := r.job.Type
	r.mu.Unlock()
	policy := g.Restart
	if policy == nil {
		policy = model.DefaultRestartPolicy(jobType)
	}
	tracker := newRestartTracker(policy)
	recoverWait := recoverRetryMin
	h := restored
	if h == nil {
		r.event(t.Name, EventReceived, "task received by the node")
	}
	first := true
	firstOver := func() {
		if first {
			first = false
			r.firstAttemptOver()
		}
	}
	defer firstOver()
	// lostStart is set while the last start failed with an error that does
	// not prove nothing was started: a plugin killed mid-start may have left
	// the task running with no handle. Finishing the task then asks the
	// driver to destroy it by ID, handle or not.
	lostStart := false
	finish := func(h *driver.TaskHandle, failed bool, why string) {
		if h == nil && lostStart {
			r.destroyLostStart(t)
		}
		r.finishTask(t, h, failed, why)
	}
	// A poststop task runs because the allocation's other tasks are gone,
	// often because it was stopped: the allocation's stop is not its stop.
	stopping := r.stopping
	if t.IsPoststop() {
		stopping = nil
	}
	isStopping := func() bool {
		select {
		case <-stopping:
			return true
		default:
			return false
		}
	}
	for {
		if isStopping() {
			failed, why := r.stopVerdict()
			finish(h, failed, why)
			return
		}
		drv, err := r.cfg.Drivers.Driver(ctx, t.Driver)
		if ctx.Err() != nil {
			return
		}
		if h != nil && h == restored && err != nil {
			// Fail closed: a task we hold a handle for may still be running.
			// Without its driver nothing can be known, so nothing is
			// destroyed, replaced or counted against the restart policy.
			r.event(t.Name, EventDriverFailure, fmt.Sprintf("driver %s unavailable: %v; keeping the task's handle, retrying in %s", t.Driver, err, recoverWait))
			if !r.pause(ctx, stopping, &recoverWait) {
				return
			}
			continue
		}
		var exitErr string
		if err != nil {
			exitErr = fmt.Sprintf("driver %s unavailable: %v", t.Driver, err)
			r.event(t.Name, EventDriverFailure, exitErr)
		} else if h != nil && h == restored {
			if err := drv.RecoverTask(ctx, h); err != nil {
				if ctx.Err() != nil {
					return
				}
				if !errIsNotFound(err) {
					// Only the driver's word that the task is gone frees the
					// handle; any other error may hide a running task, and
					// starting another would run it twice.
					r.event(t.Name, EventRecoverFailed, fmt.Sprintf("recovering task: %v; retrying in %s", err, recoverWait))
					if !r.pause(ctx, stopping, &recoverWait) {
						return
					}
					continue
				}
				exitErr = fmt.Sprintf("recovering task: %v", err)
				r.event(t.Name, EventRecoverFailed, exitErr)
				h = nil
			} else {
				r.event(t.Name, EventReattached, "reattached to the running task")
				r.setTask(t.Name, func(ts *model.TaskState) {
					ts.State = "running"
					if ts.StartedAt.IsZero() {
						ts.StartedAt = h.StartedAt
					}
				})
			}
		} else if !t.IsPoststop() && r.desiredStop() {
			// An allocation being stopped starts nothing, whether or not its
			// stopping has reached this loop: an agent killed mid-stop, after
			// the task had exited and its handle was dropped, restores the
			// allocation with intent stop and no handle, and its stop is
			// requested only once the runner runs (Agent.Restore); a start
			// here would run the old version again.
			failed, why := r.stopVerdict()
			finish(nil, failed, why)
			return
		} else {
			nh, err := r.start(ctx, drv, t)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				if p, ok := err.(errPermanent); ok {
					r.event(t.Name, EventFailedValidation, p.Error())
					r.finishTask(t, nil, true, p.Error())
					r.stopSiblings()
					return
				}
				exitErr = err.Error()
				if _, isTemplate := err.(templateError); isTemplate {
					r.event(t.Name, EventTemplateFailure, exitErr)
				} else if _, isArtifact := err.(artifactError); isArtifact {
					r.event(t.Name, EventArtifactFailure, exitErr)
				} else {
					lostStart = true
					r.event(t.Name, EventDriverFailure, exitErr)
				}
			} else {
				h = nh
				lostStart = false
				r.taskStarted(t.Name, h)
			}
		}
		firstOver()

		var res *driver.ExitResult
		restarted := false
		if exitErr == "" && h != nil {
			var detached bool
			wctx, stopWatch := context.WithCancel(ctx)
			res, detached, restarted = r.wait(ctx, drv, t, h, stopping, r.watchTemplates(wctx, drv, t, h))
			stopWatch()
			if detached {
				return
			}
			if isStopping() {
				failed, why := r.stopVerdict()
				r.finishTask(t, h, failed, why)
				return
			}
		} else {
			res = &driver.ExitResult{Err: exitErr}
		}

		msg := fmt.Sprintf("exit code %d", res.ExitCode)
		if res.Signal != 0 {
			msg += fmt.Sprintf(", signal %d", res.Signal)
		}
		if res.OOMKilled {
			msg += ", OOM killed"
		}
		if res.Err != "" {
			msg = res.Err
		}
		if h != nil {
			r.event(t.Name, EventTerminated, msg)
			r.destroy(drv, t, h)
			h = nil
		}
		if restarted {
			// A template asked for it: not a failure, so the restart
			// policy is not consulted.
			r.event(t.Name, EventRestarting, "a template changed; restarting now")
			r.setTask(t.Name, func(ts *model.TaskState) {
				ts.State = "pending"
				ts.Restarts++
				ts.FinishedAt = r.now()
			})
			continue
		}
		if (jobType == model.JobTypeSysbatch || t.RunsToCompletion() || t.IsPoststop()) && res.Successful() {
			r.finishTask(t, nil, false, "completed")
			return
		}
		d := tracker.next(r.now())
		if !d.Restart {
			r.event(t.Name, EventNotRestarting, d.Reason)
			finish(nil, true, d.Reason)
			r.stopSiblings()
			return
		}
		r.event(t.Name, EventRestarting, fmt.Sprintf("%s; restarting in %s", d.Reason, d.Wait))
		r.setTask(t.Name, func(ts *model.TaskState) {
			ts.State = "pending"
			ts.Restarts++
			ts.FinishedAt = r.now()
		})
		select {
		case <-time.After(d.Wait):
		case <-stopping:
		case <-ctx.Done():
			return
		}
	}
}

// pendingWriteDelay is how long a start may take before the pending record
// is written anyway (see Run).
const pendingWriteDelay = 50 * time.Millisecond

// Bounds of the wait between attempts to reach a restored task whose driver
// is unreachable or answers its recovery with an error other than "not found".
const (
	recoverRetryMin = 100 * time.Millisecond
	recoverRetryMax = 15 * time.Second
)

// pause waits *d (doubling it up to recoverRetryMax for the next time) unless
// stopping (the allocation's stop, for the task) closes first. It reports false when the runner's context
// ended.
func (r *Runner) pause(ctx context.Context, stopping <-chan struct{}, d *time.Duration) bool {
	select {
	case <-time.After(*d):
	case <-stopping:
	case <-ctx.Done():
		return false
	}
	*d = min(2**d, recoverRetryMax)
	return true
}

// wait waits for a task's exit. On stop (closed: the allocation's stop,
// for the task) it stops the task with its
// kill_timeout and kill_signal and keeps waiting for the exit; so it does
// on a word from restart (a template changed), and then reports restarted.
// When the driver loses sight of the task (plugin restarted) it tries to
// recover it before counting an exit. detached is true when the runner was
// detached.
func (r *Runner) wait(ctx context.Context, drv driver.Driver, t *model.Task, h *driver.TaskHandle, stop, restart <-chan struct{}) (res *driver.ExitResult, detached, restarted bool) {
	stopSent := false
	for attempt := 0; ; attempt++ {
		ch, err := drv.WaitTask(ctx, h.TaskID)
		if err != nil {
			if ctx.Err() != nil {
				return nil, true, false
			}
			res = &driver.ExitResult{Err: fmt.Sprintf("waiting on task: %v", err)}
		} else {
			stopping := stop
			if stopSent {
				stopping = nil
			}
		loop:
			for {
				select {
				case <-ctx.Done():
					return nil, true, false
				case <-restart:
					if !stopSent {
						restart, restarted, stopSent = nil, true, true
						go r.kill(drv, t, h)
					}
				case <-stopping:
					stopping = nil
					restarted = false // a stop wins over a restart
					if !stopSent {
						stopSent = true
						go r.kill(drv, t, h)
					}
				case got, ok := <-ch:
					if ok && got != nil {
						res = got
					} else if ctx.Err() != nil {
						return nil, true, false
					} else {
						res = &driver.ExitResult{Err: "driver closed the wait stream without a result"}
					}
					break loop
				}
			}
		}
		if res.Err == "" || attempt >= 3 || ctx.Err() != nil {
			return res, ctx.Err() != nil, restarted && ctx.Err() == nil
		}
		// The driver lost the task's wait: a restarted plugin may still have it.
		if !wait.For(ctx, time.Duration(attempt+1)*200*time.Millisecond) {
			return nil, true, false
		}
		if err := drv.RecoverTask(ctx, h); err != nil {
			if errIsNotFound(err) {
				return res, false, restarted
			}
			continue
		}
		r.event(t.Name, EventReattached, "reattached after the driver lost the task")
	}
}

func (r *Runner) kill(drv driver.Driver, t *model.Task, h *driver.TaskHandle) {
	timeout := t.KillTimeout.D()
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	r.event(t.Name, EventKilling, fmt.Sprintf("sending %s, kill after %s", signalName(t.KillSignal), timeout))
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	if err := drv.StopTask(ctx, h.TaskID, timeout, t.KillSignal); err != nil && !errIsNotFound(err) {
		r.log.Error("stopping task", "task", t.Name, "err", err)
	}
}

func signalName(s string) string {
	if s == "" {
		return "the driver's default signal"
	}
	return s
}

func (r *Runner) destroy(drv driver.Driver, t *model.Task, h *driver.TaskHandle) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := drv.DestroyTask(ctx, h.TaskID, true); err != nil && !errIsNotFound(err) {
		r.log.Error("destroying task", "task", t.Name, "err", err)
	}
	if r.cfg.Store != nil {
		if err := r.cfg.Store.DeleteHandle(r.alloc.ID, t.Name); err != nil {
			r.log.Error("deleting task handle", "task", t.Name, "err", err)
		}
	}
}

// destroyLostStart asks the driver to destroy the task by its ID though
// the runner holds no handle: what a start whose answer was lost may have
// left running (plugins/docker finds it by its task ID label). "Not found"
// is the common answer: nothing was left.
func (r *Runner) destroyLostStart(t *model.Task) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	drv, err := r.cfg.Drivers.Driver(ctx, t.Driver)
	if err != nil {
		r.log.Error("destroying what an interrupted start left: driver unavailable", "task", t.Name, "err", err)
		return
	}
	if err := drv.DestroyTask(ctx, r.taskID(t.Name), true); err != nil {
		if !errIsNotFound(err) {
			r.log.Error("destroying what an interrupted start left", "task", t.Name, "err", err)
		}
		return
	}
	r.event(t.Name, EventKilled, "destroyed what an interrupted start left running")
}

// finishTask records a task as dead for good; h, if set, is destroyed first.
func (r *Runner) finishTask(t *model.Task, h *driver.TaskHandle, failed bool, why string) {
	if h != nil {
		if drv, err := r.cfg.Drivers.Driver(context.Background(), t.Driver); err == nil {
			r.event(t.Name, EventKilled, why)
			r.destroy(drv, t, h)
		}
	}
	r.setTask(t.Name, func(ts *model.TaskState) {
		ts.State = "dead"
		ts.Failed = failed
		ts.FinishedAt = r.now()
	})
}

// stopSiblings stops the other tasks of an allocation one of whose tasks
// failed for good: the allocation is failed as a whole.
func (r *Runner) stopSiblings() {
	r.stopOnce.Do(func() { close(r.stopping) })
}

// desiredStop reports whether the allocation is to stop (Stop was called,
// or it was restored mid-stop).
func (r *Runner) desiredStop() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.intent == model.DesiredStop || r.alloc.DesiredStatus == model.DesiredStop
}
