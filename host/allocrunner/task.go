package allocrunner

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"sync"
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

func (r *Runner) taskID(task string) string { return r.id + "/" + task }

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
	sctx, release := startContext(ctx)
	h, err := drv.StartTask(sctx, tc)
	release()
	if err != nil {
		if strings.Contains(err.Error(), tc.ID) {
			return nil, err // the driver's error already says which task
		}
		return nil, fmt.Errorf("starting task %s: %w", t.Name, err)
	}
	return h, nil
}

// detachStartGrace is how long a driver's StartTask in flight may go on
// after the runner is detached (see startContext).
var detachStartGrace = 5 * time.Second

// startContext is the context of a driver's StartTask under ctx, the
// runner's, which ends on Detach. A detach does not end a start at once:
// through a plugin, a cancelled call returns an error while the driver
// may well have started the task, and with no handle stored the next
// agent would start it again under the same ID (a start that does return
// its handle after the detach is stored: attempt). The start goes on for
// up to detachStartGrace after the detach, so the agent's stop waits for
// a start in flight that long at most, and only a start slower than that
// (a long image pull) is cut short. release ends it once the call
// returned.
func startContext(ctx context.Context) (sctx context.Context, release func()) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(detachStartGrace, cancel)
		context.AfterFunc(sctx, func() { t.Stop() })
	})
	return sctx, func() {
		stop()
		cancel()
	}
}

// taskRun is one task's life: start or reattach, wait, restart per
// policy, until it finishes for good, the allocation is stopped, or the
// runner is detached. While the task runs nothing of it runs: its wait
// (taskWait) is a function the driver calls when the task exits and two
// context.AfterFunc registrations, for the allocation's stop and the
// runner's detach; whichever comes first runs the loop on, on a goroutine
// of its own. A thousand running tasks hold no goroutine of their own
// (TestWaitingTasksHoldNoGoroutine), where each held one parked at the end
// of the start path, the deepest stack of the runner.
type taskRun struct {
	r        *Runner
	t        *model.Task
	ctx      context.Context // the runner's: ends on Detach
	restored *driver.TaskHandle
	h        *driver.TaskHandle
	jobType  model.JobType
	tracker  *restartTracker
	// recoverWait is the next pause before reaching a restored task whose
	// driver is unreachable again.
	recoverWait time.Duration
	first       bool
	// lostStart is set while the last start failed with an error that does
	// not prove nothing was started: a plugin killed mid-start may have left
	// the task running with no handle. Finishing the task then asks the
	// driver to destroy it by ID, handle or not.
	lostStart bool
	// stopping and stopCtx are the allocation's stop, for the task: a
	// poststop task runs because the allocation's other tasks are gone,
	// often because it was stopped, so the allocation's stop is not its
	// stop (both nil).
	stopping <-chan struct{}
	stopCtx  context.Context
	// then, if set, runs once the task is over.
	then func()
}

// runTask runs task t (restored: reattached from that handle) on the
// calling goroutine until it waits for the task's exit or is over; then,
// if set, runs once it is over (on whichever goroutine that happens).
func (r *Runner) runTask(t *model.Task, restored *driver.TaskHandle, then func()) {
	r.mu.Lock()
	g := r.group()
	jobType := r.job.Type
	r.mu.Unlock()
	policy := g.Restart
	if policy == nil {
		policy = model.DefaultRestartPolicy(jobType)
	}
	tr := &taskRun{r: r, t: t, ctx: r.ctx, restored: restored, h: restored, jobType: jobType,
		tracker: newRestartTracker(policy), recoverWait: recoverRetryMin, first: true, then: then}
	if !t.IsPoststop() {
		tr.stopping, tr.stopCtx = r.stopping, r.stopCtx
	}
	if restored == nil {
		r.event(t.Name, EventReceived, "task received by the node")
	}
	tr.run()
}

// over ends the task's life: its first attempt, if still counted, and the
// task are done.
func (tr *taskRun) over() {
	tr.firstOver()
	tr.r.taskDone(tr.t)
	if tr.then != nil {
		tr.then()
	}
}

func (tr *taskRun) firstOver() {
	if tr.first {
		tr.first = false
		tr.r.firstAttemptOver()
	}
}

func (tr *taskRun) isStopping() bool {
	select {
	case <-tr.stopping:
		return true
	default:
		return false
	}
}

func (tr *taskRun) finish(h *driver.TaskHandle, failed bool, why string) {
	if h == nil && tr.lostStart {
		tr.r.destroyLostStart(tr.t)
	}
	tr.r.finishTask(tr.t, h, failed, why)
}

// run runs the task's loop from its top: it returns when the task is over
// (over ran) or waits for its exit (the wait's end runs the loop on).
func (tr *taskRun) run() {
	for {
		drv, exitErr, next := tr.attempt()
		switch next {
		case stepOver:
			tr.over()
			return
		case stepAgain:
			continue
		}
		tr.firstOver()
		if exitErr == "" && tr.h != nil {
			o, mine := newTaskWait(tr, drv).start()
			if !mine {
				return // waiting: the wait's end runs the loop on
			}
			if !tr.waited(drv, o) {
				tr.over()
				return
			}
			continue
		}
		if !tr.exited(drv, &driver.ExitResult{Err: exitErr}, false) {
			tr.over()
			return
		}
	}
}

// resume runs the loop on after a wait that ended off the task's
// goroutine.
func (tr *taskRun) resume(drv driver.Driver, o waitOutcome) {
	if !tr.waited(drv, o) {
		tr.over()
		return
	}
	tr.run()
}

// retryReattach pauses before the next attempt to reach a restored task
// (recoverWait, growing) and says what comes next. The allocation's stop
// cuts the pause short only while it has not happened yet: a task already
// to be stopped can only be stopped through its driver, so the pause is
// kept (a stop that has happened would otherwise end every pause at once).
func (tr *taskRun) retryReattach() int {
	stopping := tr.stopping
	if tr.isStopping() {
		stopping = nil
	}
	if !tr.r.pause(tr.ctx, stopping, &tr.recoverWait) {
		return stepOver
	}
	return stepAgain
}

// What attempt says comes next.
const (
	stepWait  = iota // wait for the task (or count exitErr as its exit)
	stepAgain        // back to the top of the loop
	stepOver         // the task is over
)

// attempt is the top of the loop: it starts the task, or reattaches to the
// restored one. exitErr is set when that failed in a way the restart
// policy counts.
func (tr *taskRun) attempt() (drv driver.Driver, exitErr string, next int) {
	r, t, ctx := tr.r, tr.t, tr.ctx
	reattaching := tr.h != nil && tr.h == tr.restored
	if tr.isStopping() && !reattaching {
		failed, why := r.stopVerdict()
		tr.finish(tr.h, failed, why)
		return nil, "", stepOver
	}
	// A restored task is reattached even when its allocation is already
	// stopping (an agent killed mid-stop, or a stop that reached the runner
	// before this loop did): the wait then stops it with its kill_signal
	// and kill_timeout, as any running task. Destroying it here would kill
	// it at once and cut its graceful stop short.
	drv, err := r.cfg.Drivers.Driver(ctx, t.Driver)
	if ctx.Err() != nil {
		return nil, "", stepOver
	}
	if reattaching && err != nil {
		// Fail closed: a task we hold a handle for may still be running.
		// Without its driver nothing can be known, so nothing is
		// destroyed, replaced or counted against the restart policy; a
		// stop does not end the wait for the driver either (the task can
		// only be stopped through it).
		r.event(t.Name, EventDriverFailure, fmt.Sprintf("driver %s unavailable: %v; keeping the task's handle, retrying in %s", t.Driver, err, tr.recoverWait))
		return nil, "", tr.retryReattach()
	}
	if err != nil {
		exitErr = fmt.Sprintf("driver %s unavailable: %v", t.Driver, err)
		r.event(t.Name, EventDriverFailure, exitErr)
		return drv, exitErr, stepWait
	}
	if tr.h != nil && tr.h == tr.restored {
		h := tr.h
		if err := drv.RecoverTask(ctx, h); err != nil {
			if ctx.Err() != nil {
				return nil, "", stepOver
			}
			if !errIsNotFound(err) {
				// Only the driver's word that the task is gone frees the
				// handle; any other error may hide a running task, and
				// starting another would run it twice.
				r.event(t.Name, EventRecoverFailed, fmt.Sprintf("recovering task: %v; retrying in %s", err, tr.recoverWait))
				return nil, "", tr.retryReattach()
			}
			exitErr = fmt.Sprintf("recovering task: %v", err)
			r.event(t.Name, EventRecoverFailed, exitErr)
			tr.h = nil
			if tr.isStopping() {
				// Gone already, and to stop anyway: nothing to restart.
				failed, why := r.stopVerdict()
				tr.finish(nil, failed, why)
				return nil, "", stepOver
			}
			return drv, exitErr, stepWait
		}
		r.event(t.Name, EventReattached, "reattached to the running task")
		r.setTask(t.Name, func(ts *model.TaskState) {
			ts.State = "running"
			if ts.StartedAt.IsZero() {
				ts.StartedAt = h.StartedAt
			}
		})
		return drv, "", stepWait
	}
	if !t.IsPoststop() && r.desiredStop() {
		// An allocation being stopped starts nothing, whether or not its
		// stopping has reached this loop: an agent killed mid-stop, after
		// the task had exited and its handle was dropped, restores the
		// allocation with intent stop and no handle, and its stop is
		// requested only once the runner runs (Agent.Restore); a start
		// here would run the old version again.
		failed, why := r.stopVerdict()
		tr.finish(nil, failed, why)
		return nil, "", stepOver
	}
	nh, err := r.start(ctx, drv, t)
	if ctx.Err() != nil {
		if err == nil && nh != nil {
			// Detached while the driver was starting the task, which it
			// did: the handle is stored for the next agent to reattach
			// (dropped, that agent would start the task again under the
			// same ID while it runs).
			tr.h = nh
			r.taskStarted(t.Name, nh)
		}
		return nil, "", stepOver
	}
	if err != nil {
		if p, ok := err.(errPermanent); ok {
			r.event(t.Name, EventFailedValidation, p.Error())
			r.finishTask(t, nil, true, p.Error())
			r.stopSiblings()
			return nil, "", stepOver
		}
		exitErr = err.Error()
		if _, isTemplate := err.(templateError); isTemplate {
			r.event(t.Name, EventTemplateFailure, exitErr)
		} else if _, isArtifact := err.(artifactError); isArtifact {
			r.event(t.Name, EventArtifactFailure, exitErr)
		} else {
			tr.lostStart = true
			r.event(t.Name, EventDriverFailure, exitErr)
		}
		return drv, exitErr, stepWait
	}
	tr.h = nh
	tr.lostStart = false
	r.taskStarted(t.Name, nh)
	return drv, "", stepWait
}

// waited takes a wait's outcome: it reports whether the loop goes on.
func (tr *taskRun) waited(drv driver.Driver, o waitOutcome) bool {
	if o.detached {
		return false
	}
	if tr.isStopping() {
		failed, why := tr.r.stopVerdict()
		tr.r.finishTask(tr.t, tr.h, failed, why)
		return false
	}
	return tr.exited(drv, o.res, o.restarted)
}

// exited is the bottom of the loop: the task ended with res (restarted: a
// template asked for it). It destroys the task, applies the restart
// policy and reports whether the loop goes on.
func (tr *taskRun) exited(drv driver.Driver, res *driver.ExitResult, restarted bool) bool {
	r, t := tr.r, tr.t
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
	if tr.h != nil {
		r.event(t.Name, EventTerminated, msg)
		r.destroy(drv, t, tr.h)
		tr.h = nil
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
		return true
	}
	if (tr.jobType == model.JobTypeSysbatch || t.RunsToCompletion() || t.IsPoststop()) && res.Successful() {
		r.finishTask(t, nil, false, "completed")
		return false
	}
	d := tr.tracker.next(r.now())
	if !d.Restart {
		r.event(t.Name, EventNotRestarting, d.Reason)
		tr.finish(nil, true, d.Reason)
		r.stopSiblings()
		return false
	}
	r.event(t.Name, EventRestarting, fmt.Sprintf("%s; restarting in %s", d.Reason, d.Wait))
	r.setTask(t.Name, func(ts *model.TaskState) {
		ts.State = "pending"
		ts.Restarts++
		ts.FinishedAt = r.now()
	})
	timer := time.NewTimer(d.Wait)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-tr.stopping:
	case <-tr.ctx.Done():
		return false
	}
	return true
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

// waitOutcome is how a task's wait ended: with the task's exit (res;
// restarted when a template's change stopped it), or detached.
type waitOutcome struct {
	res                 *driver.ExitResult
	detached, restarted bool
}

// taskWait is one wait for a task's exit, which holds no goroutine: the
// driver runs exitFn when the task exits (driver.WaitFunc), the
// allocation's stop and the runner's detach run stop and detach
// (registered on their contexts with context.AfterFunc), and a template's
// change runs restart. On stop (a template's change likewise, and then it
// reports restarted) it stops the task with its kill_timeout and
// kill_signal and keeps waiting for the exit. When the driver loses sight
// of the task (plugin restarted) it tries to recover it before counting an
// exit. Exactly one of its ends (the first to call end) runs the task's
// loop on.
type taskWait struct {
	tr  *taskRun
	drv driver.Driver
	h   *driver.TaskHandle

	mu        sync.Mutex
	ended     bool // claimed: the loop runs on from one end, the others do nothing
	stopSent  bool
	restarted bool
	attempt   int
	unStop    func() bool // the AfterFunc registrations
	unDetach  func() bool
	stopWatch context.CancelFunc // the template watch, if any
}

func newTaskWait(tr *taskRun, drv driver.Driver) *taskWait {
	return &taskWait{tr: tr, drv: drv, h: tr.h}
}

// start opens the wait. mine is true when it ended at once, on the
// caller's goroutine, which runs the loop on with o; else the wait's end
// does.
func (w *taskWait) start() (o waitOutcome, mine bool) {
	tr := w.tr
	w.mu.Lock()
	w.unDetach = context.AfterFunc(tr.ctx, w.detach)
	if tr.stopCtx != nil {
		w.unStop = context.AfterFunc(tr.stopCtx, w.stop)
	}
	w.mu.Unlock()
	if stopWatch := tr.r.watchTemplates(tr.ctx, w.drv, tr.t, w.h, w.restart); stopWatch != nil {
		w.mu.Lock()
		ended := w.ended
		w.stopWatch = stopWatch
		w.mu.Unlock()
		if ended {
			stopWatch() // detached meanwhile
		}
	}
	return w.open()
}

// open opens the wait on the driver; an open that fails is taken as a lost
// wait (see settle).
func (w *taskWait) open() (o waitOutcome, mine bool) {
	ctx := w.tr.ctx
	for {
		err := driver.WaitFunc(ctx, w.drv, w.h.TaskID, w.exitFn)
		if err == nil {
			return waitOutcome{}, false
		}
		if ctx.Err() != nil {
			return w.end(waitOutcome{detached: true})
		}
		res := &driver.ExitResult{Err: fmt.Sprintf("waiting on task: %v", err)}
		if o, done := w.settle(res); done {
			return w.end(o)
		}
	}
}

// exitFn is what the driver runs when the wait ends (on its own goroutine,
// which it must not block): the loop runs on from a goroutine of its own.
func (w *taskWait) exitFn(res *driver.ExitResult) {
	w.mu.Lock()
	ended := w.ended
	w.mu.Unlock()
	if ended {
		return // detached meanwhile
	}
	go func() {
		ctx := w.tr.ctx
		if res == nil {
			if ctx.Err() != nil {
				w.endAndResume(waitOutcome{detached: true})
				return
			}
			res = &driver.ExitResult{Err: "driver closed the wait stream without a result"}
		}
		o, done := w.settle(res)
		if !done {
			if o, mine := w.open(); mine {
				w.tr.resume(w.drv, o)
			}
			return
		}
		w.endAndResume(o)
	}()
}

// settle takes the end of one wait on the driver: done with the outcome,
// or not done when the task was recovered (or may yet be) and is to be
// waited on again. A wait the driver lost (res.Err) is retried up to three
// times: a restarted plugin may still have the task.
func (w *taskWait) settle(res *driver.ExitResult) (o waitOutcome, done bool) {
	ctx := w.tr.ctx
	w.mu.Lock()
	attempt, restarted := w.attempt, w.restarted
	w.attempt++
	w.mu.Unlock()
	if res.Err == "" || attempt >= 3 || ctx.Err() != nil {
		return waitOutcome{res: res, detached: ctx.Err() != nil, restarted: restarted && ctx.Err() == nil}, true
	}
	if !wait.For(ctx, time.Duration(attempt+1)*200*time.Millisecond) {
		return waitOutcome{detached: true}, true
	}
	if err := w.drv.RecoverTask(ctx, w.h); err != nil {
		if errIsNotFound(err) {
			w.mu.Lock()
			restarted = w.restarted
			w.mu.Unlock()
			return waitOutcome{res: res, restarted: restarted}, true
		}
		return waitOutcome{}, false
	}
	w.tr.r.event(w.tr.t.Name, EventReattached, "reattached after the driver lost the task")
	return waitOutcome{}, false
}

// end claims the wait's end for the caller: mine is false when another
// end claimed it first (it runs the loop on). The registrations go.
func (w *taskWait) end(o waitOutcome) (waitOutcome, bool) {
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return o, false
	}
	w.ended = true
	unStop, unDetach, stopWatch := w.unStop, w.unDetach, w.stopWatch
	w.mu.Unlock()
	if unStop != nil {
		unStop()
	}
	unDetach()
	if stopWatch != nil {
		stopWatch()
	}
	return o, true
}

func (w *taskWait) endAndResume(o waitOutcome) {
	if o, mine := w.end(o); mine {
		w.tr.resume(w.drv, o)
	}
}

// detach runs when the runner's context ends: the runner was detached,
// the task stays.
func (w *taskWait) detach() { w.endAndResume(waitOutcome{detached: true}) }

// stop runs when the allocation is stopped: the task gets its kill (a
// stop wins over a template's restart), and the wait goes on to its exit.
func (w *taskWait) stop() {
	w.mu.Lock()
	send := !w.ended && !w.stopSent
	w.restarted = false
	w.stopSent = true
	w.mu.Unlock()
	if send {
		w.tr.r.kill(w.drv, w.tr.t, w.h)
	}
}

// restart runs when a template changed in a way that restarts the task.
func (w *taskWait) restart() {
	w.mu.Lock()
	send := !w.ended && !w.stopSent
	if send {
		w.restarted, w.stopSent = true, true
	}
	w.mu.Unlock()
	if send {
		go w.tr.r.kill(w.drv, w.tr.t, w.h)
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
		if err := r.cfg.Store.DeleteHandle(r.id, t.Name); err != nil {
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
func (r *Runner) stopSiblings() { r.stopNow() }

// desiredStop reports whether the allocation is to stop (Stop was called,
// or it was restored mid-stop).
func (r *Runner) desiredStop() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.intent == model.DesiredStop || r.alloc.DesiredStatus == model.DesiredStop
}
