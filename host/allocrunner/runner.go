// Package allocrunner owns the life of one allocation on this node: it takes
// the allocation's ports from the node's table, renders its tasks'
// templates, starts the tasks through their driver plugins (after
// validating each task's config against the driver's schema), waits on
// them, applies the group's restart policy, runs the service checks,
// registers the services while they pass, re-renders templates when the
// variables or services they read change, tracks deployment health
// (min_healthy_time, healthy_deadline), enforces a sysbatch group's
// max_run_duration, and stops the tasks with their shutdown_delay,
// kill_timeout and kill_signal.
//
// Invariants:
//   - An allocation's ports are recorded with it before any task starts and
//     never change; a restored allocation claims the very ports it recorded
//     (TestARestoredAllocationKeepsTheVeryPortsItRecorded); they are given
//     back when its tasks are gone. A port it cannot have fails it before
//     any task starts (TestASecondAllocationWantingAHeldStaticPortFailsBeforeAnyTaskStarts).
//   - A service is registered only while its checks pass and its tasks run,
//     and a finished allocation leaves no registration, including one a
//     runner before an agent restart wrote
//     (TestARestoredAllocationsFailingServiceIsDeregistered); Detach leaves
//     them, as it leaves the tasks.
//   - Every change of the allocation or of a task handle is written to the
//     state store before it is reported (OnUpdate), so a restarted agent
//     reattaches to exactly what was running (TestARestoredRunnerReattachesWithoutStarting).
//     A task's handle is never on disk without a record of its allocation
//     (which is what a restore enumerates): with a store that can, both are
//     one write (TestATaskHandleIsNeverOnDiskWithoutItsAllocationRecord).
//   - A runner built with restored handles calls RecoverTask, never
//     StartTask, for those tasks; a task that cannot be recovered goes
//     through the restart policy like any other exit.
//   - Detach leaves the tasks running and their handles stored; only Stop
//     stops them (TestDetachLeavesTasksRunningAndStopStopsThem).
//   - A running task holds no goroutine while the runner waits for it: the
//     driver's function wait (driver.WaitFunc) and the stop and detach
//     registered on their contexts run its loop on when something happens,
//     and the stop, a template's restart, a lost wait's recovery and the
//     detach still reach it (TestWaitingTasksHoldNoGoroutine). A driver
//     with only WaitTask's channel costs one small goroutine per wait
//     (TestADriverWithOnlyTheChannelWaitReachesTheSameEnds).
//   - The runner writes only its own allocation's status; it never decides
//     placement (that is the reconciler's) and never touches another
//     allocation's tasks.
//
// The operator's account of a runner is docs/agent.md ("Allocation runners");
// the job blocks it carries out are specified in docs/job-files.md, and its
// place in the agent's start and stop in docs/lifecycle.md.
package allocrunner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/state"
	"github.com/hivelet/hivelet/sdk/driver"
)

// Store is the part of the state store a runner writes.
type Store interface {
	PutAlloc(*state.AllocRecord) error
	PutHandle(allocID, task string, h *driver.TaskHandle) error
	DeleteHandle(allocID, task string) error
}

// handleStore is a Store that can write an allocation record and a task's
// handle in one transaction (state.Store can). A runner with one writes each
// new handle together with the record that marks its task running, so no
// crash leaves a handle without its allocation's record (a restore reads
// the handles of the allocations it finds, and would never find that task).
// Without it, the handle is written first, then the record.
type handleStore interface {
	PutAllocAndHandle(r *state.AllocRecord, task string, h *driver.TaskHandle) error
}

// jobEncoder is a Store that encodes a job once for the records that
// carry it (state.Store can, and shares one encoding among the runners of
// a job). A runner with one keeps its job's encoding and hands it with
// each record (state.AllocRecord.JobEncoding), so the job, which does not
// change between a runner's writes, is not encoded again by each of them.
type jobEncoder interface {
	EncodeJob(*model.Job) (*state.JobEncoding, error)
}

// Drivers finds a task's driver by name (the plugin manager).
type Drivers interface {
	Driver(ctx context.Context, name string) (driver.Driver, error)
}

// Config is what a runner needs. Alloc is copied; the runner owns its copy.
// Job is not copied: it is shared with the caller (and the other runners of
// the job), read while the runner runs and encoded once for its writes, so
// neither it nor a job given later to UpdateInPlace may be modified.
type Config struct {
	Alloc   *model.Allocation
	Job     *model.Job
	Node    *model.Node
	Drivers Drivers
	// Validate checks a task's (interpolated) config against its driver's
	// schema before StartTask; the agent passes driver.ValidateConfig.
	Validate func(*driver.Schema, map[string]any) error
	// Starts, if set, counts this runner's first start as in flight from
	// Run until its tasks' first start attempts are over (or
	// pendingWriteDelay has passed, or the runner ended): one Starts for
	// all the runners of an agent.
	Starts *Starts
	Store  Store
	// AllocRoot is the node's allocation directory; this allocation's is
	// AllocRoot/<alloc id>.
	AllocRoot string
	// Handles are the stored handles of a restored allocation, by task name:
	// those tasks are reattached, not started.
	Handles map[string]*driver.TaskHandle
	// Services is where the allocation's services are registered while
	// their checks pass (nil: not registered anywhere).
	Services ServiceRegistry
	// Catalog is the services bucket the tasks' templates read
	// (nomadService); nil: a template reading a service fails to render.
	Catalog Catalog
	// Vars is the variables store the tasks' templates read (nomadVar);
	// nil: a template reading a variable fails to render.
	Vars Vars
	// Artifacts fetches the tasks' artifacts; nil: artifact.Fetcher{}
	// (http, https and file sources).
	Artifacts ArtifactFetcher
	// Ports is the node's port table; an allocation whose group has a
	// network takes its ports there before its tasks start and gives them
	// back when they are gone. Nil: such an allocation fails to start.
	Ports PortTable
	// OnUpdate receives a copy of the allocation after every change, in the
	// order of the changes. It is called from the runner's goroutines with
	// the runner's write lock held: it must not block for long nor call the
	// runner.
	OnUpdate func(*model.Allocation)
	// OnDone is called once, after Done is closed (the runner finished,
	// stopped or detached), from the goroutine that closed it: a caller
	// that watches many runners learns that one is done without polling
	// them all. It must not block for long nor call the runner.
	OnDone func()
	Logger *slog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Runner runs one allocation.
type Runner struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	ctx    context.Context // ends on Detach
	cancel context.CancelFunc

	mu sync.Mutex
	// alloc is the allocation as the runner sees it now. After a persist it
	// is shared with snap (what was stored and reported, which nobody
	// modifies), and shared is set: a change then goes to a copy of its own
	// (mutable), so a runner that runs on unchanged holds one copy of its
	// allocation, not two (TestAPersistedAllocationIsSharedUntilItChanges).
	alloc      *model.Allocation
	shared     bool
	id         string // the allocation's ID, read without mu (alloc is replaced on a change)
	job        *model.Job
	intent     model.DesiredStatus
	running    map[string]bool // task name → running now
	final      map[string]bool // task name → finished for good
	checks     map[string]error
	healthGn   int                        // generation of the health tracker; bumped by an in-place update
	failStop   string                     // set when the run limit stops the allocation: its tasks die failed, for this reason
	lost       string                     // set by MarkLost: a stop ends with client status lost, for this reason
	tplSources map[string]templateSources // task name → what its templates read at the last render
	// registered are the service registrations written, by key; svcPoke
	// wakes the service loop; detached says the runner was detached (its
	// registrations stay, as its tasks do).
	registered map[string]*model.ServiceRegistration
	checkRan   map[string]bool // check key → it has run at least once
	svcPoke    chan struct{}
	detached   bool
	started    bool
	bgClosed   bool // no new background goroutine may start

	// mainsUp is closed once every main task in waitMains has run (then
	// the poststart tasks start); nil when nothing waits.
	mainsUp   chan struct{}
	waitMains map[string]bool
	// othersLeft counts the tasks other than poststop ones still to
	// finish; othersDone is closed when none is (then the poststop tasks
	// run).
	othersLeft atomic.Int32
	othersDone chan struct{}

	persistMu sync.Mutex        // orders store writes: each writes the latest snapshot
	snap      *model.Allocation // the last persisted state, shared read-only
	persists  atomic.Uint64     // writes made
	// jobEnc is the encoding of the job last written (with a jobEncoder
	// store; nil without one), under persistMu: the first write of
	// another job (UpdateInPlace's) replaces it.
	jobEnc *state.JobEncoding

	firstLeft atomic.Int32  // tasks whose first start (or reattach) attempt is still running
	firstDone chan struct{} // closed when none is

	doneOnce sync.Once
	// stopping is closed when the allocation is stopped (stopNow): it is
	// stopCtx's Done, and a waiting task's stop is registered on stopCtx
	// (context.AfterFunc), which costs no goroutine.
	stopping <-chan struct{}
	stopCtx  context.Context
	stopNow  context.CancelFunc
	changed  chan struct{}
	// tasksLeft counts the task goroutines (and tasks that will never
	// start) not yet done: the one that takes it to zero finishes the
	// allocation (finish), so no goroutine per allocation waits for them.
	tasksLeft atomic.Int32
	bgWG      sync.WaitGroup
	done      chan struct{}
}

// New builds a runner; Run starts it.
func New(cfg Config) *Runner {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := CloneAlloc(cfg.Alloc)
	if a.TaskStates == nil {
		a.TaskStates = map[string]*model.TaskState{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopCtx, stopNow := context.WithCancel(context.Background())
	r := &Runner{
		cfg:        cfg,
		log:        cfg.Logger.With("alloc_id", a.ID, "job", a.JobID),
		now:        cfg.Now,
		ctx:        ctx,
		cancel:     cancel,
		alloc:      a,
		id:         a.ID,
		job:        cfg.Job,
		intent:     model.DesiredRun,
		running:    map[string]bool{},
		final:      map[string]bool{},
		checks:     map[string]error{},
		tplSources: map[string]templateSources{},

		registered: map[string]*model.ServiceRegistration{},
		checkRan:   map[string]bool{},
		svcPoke:    make(chan struct{}, 1),
		stopping:   stopCtx.Done(),
		stopCtx:    stopCtx,
		stopNow:    stopNow,
		changed:    make(chan struct{}, 1),
		done:       make(chan struct{}),

		firstDone: make(chan struct{}),
	}
	return r
}

// ID is the allocation ID.
func (r *Runner) ID() string { return r.id }

// Alloc returns a copy of the allocation as the runner sees it now.
func (r *Runner) Alloc() *model.Allocation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return CloneAlloc(r.alloc)
}

// Snapshot returns the allocation as last persisted (what the state store
// holds). The value is shared: callers must not modify it. It costs no copy,
// which is what a reconcile pass over thousands of allocations needs.
func (r *Runner) Snapshot() *model.Allocation {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.snap == nil {
		r.snap, r.shared = r.alloc, true
	}
	return r.snap
}

// mutable returns r.alloc for a change, copied first if it is shared with
// the last snapshot. r.mu is held; every change of the allocation goes
// through it.
func (r *Runner) mutable() *model.Allocation {
	if r.shared {
		r.alloc, r.shared = CloneAlloc(r.alloc), false
	}
	return r.alloc
}

// Job returns the job version the runner runs.
func (r *Runner) Job() *model.Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.job
}

// Done is closed when every task goroutine of the runner has returned
// (stopped, finished, or detached).
func (r *Runner) Done() <-chan struct{} { return r.done }

// AllocDir is this allocation's directory.
func (r *Runner) AllocDir() string { return filepath.Join(r.cfg.AllocRoot, r.id) }

// LogPaths returns the stdout and stderr files of a task of an allocation.
func LogPaths(allocDir, task string) (stdout, stderr string) {
	logs := filepath.Join(allocDir, "alloc", "logs")
	return filepath.Join(logs, task+".stdout"), filepath.Join(logs, task+".stderr")
}

func (r *Runner) group() *model.Group {
	if r.job == nil {
		return nil
	}
	return r.job.LookupGroup(r.alloc.TaskGroup)
}

// Run starts the allocation's tasks (or reattaches to them) and returns at
// once; the runner works in its own goroutines until Stop or Detach.
func (r *Runner) Run() {
	r.mu.Lock()
	if r.started || r.intent == model.DesiredStop {
		r.mu.Unlock()
		return // already running, detached, or stopped before it ran
	}
	r.started = true
	g := r.group()
	if g == nil {
		a := r.mutable()
		a.ClientStatus = model.ClientFailed
		a.ClientDescription = fmt.Sprintf("group %q not in job %s version %d", a.TaskGroup, a.JobID, a.JobVersion)
		r.mu.Unlock()
		r.persist()
		r.closeDone()
		return
	}
	for _, t := range g.Tasks {
		if _, ok := r.alloc.TaskStates[t.Name]; !ok {
			r.mutable().TaskStates[t.Name] = &model.TaskState{State: "pending"}
		}
	}
	if r.alloc.ClientStatus == "" {
		r.setClientStatusLocked(model.ClientPending, "")
	}
	if err := r.holdPortsLocked(g); err != nil {
		r.failSetupLocked(g, err.Error())
		r.mu.Unlock()
		r.log.Error("allocation cannot start", "err", err)
		r.persist()
		r.closeDone()
		return
	}
	tasks := g.Tasks
	jobType := r.job.Type
	r.mu.Unlock()
	// The task goroutines are started last: the newest goroutine is the one
	// the scheduler runs next, and the starts are what a placement waits on.
	//
	// The first record (pending) is not written before the start: the
	// window in which a crash loses a started task is the one between
	// StartTask and its handle's write, which no earlier write closes, and
	// the handle is written together with the allocation's record
	// (taskStarted), so it is never on disk without one. The pending record
	// is written once the first start attempts are over, unless they
	// already wrote (a start that succeeds writes running), or after
	// pendingWriteDelay if they take longer (an image pull): one write per
	// fast start instead of two, and none competing with the start itself.
	// Poststop tasks have no first attempt to wait for: they run at the end.
	stops := 0
	for _, t := range tasks {
		if t.IsPoststop() {
			stops++
		}
	}
	r.firstLeft.Store(int32(len(tasks) - stops))
	if len(tasks) == stops {
		close(r.firstDone)
	}
	before := r.persists.Load()
	starting := len(tasks) > stops
	if starting {
		r.cfg.Starts.Begin()
	}
	r.bgWG.Add(1)
	go func() {
		defer r.bgWG.Done()
		t := time.NewTimer(pendingWriteDelay)
		defer t.Stop()
		select {
		case <-r.firstDone:
		case <-t.C:
		case <-r.ctx.Done():
		}
		if starting {
			r.cfg.Starts.End()
		}
		if r.persists.Load() == before {
			r.persist()
		}
	}()
	for _, t := range tasks {
		for i, svc := range t.Services {
			for j, c := range svc.Checks {
				r.bgWG.Add(1)
				go r.runCheckLoop(t, svc, c, fmt.Sprintf("%s/%d/%d", t.Name, i, j))
			}
		}
	}
	for i, svc := range g.Services {
		for j, c := range svc.Checks {
			r.bgWG.Add(1)
			go r.runCheckLoop(nil, svc, c, fmt.Sprintf("group/%d/%d", i, j))
		}
	}
	r.startHealth()
	r.watchRunDuration(g, jobType)
	if r.cfg.Services != nil && hasServices(g) {
		if len(r.cfg.Handles) > 0 {
			// Restored: the runner before the agent's restart registered
			// what was healthy. Taken as registered, each stays until its
			// checks say otherwise.
			r.mu.Lock()
			r.registered = r.desiredServicesLocked(true)
			r.mu.Unlock()
		}
		r.bgWG.Add(1)
		go r.serviceLoop()
	}
	// Prestart (init) tasks run first, each to completion once per
	// allocation; the main tasks start when every one has succeeded. An
	// init task a restored allocation already completed is not run again.
	// Poststart tasks start once every main task runs (a restored one that
	// runs already is reattached with the main tasks; one that completed
	// is not run again).
	// Poststop tasks run once every other task has finished; a restored
	// allocation that has them does not run a finished task again (its
	// end is what the poststop tasks follow).
	var inits, mains, posts, poststops []*model.Task
	var up chan struct{}
	r.mu.Lock()
	for _, t := range tasks {
		if t.IsPoststop() {
			poststops = append(poststops, t)
		}
	}
	others := 0
	for _, t := range tasks {
		ts := r.alloc.TaskStates[t.Name]
		completed := ts.State == "dead" && !ts.Failed && r.cfg.Handles[t.Name] == nil
		finished := ts.State == "dead" && r.cfg.Handles[t.Name] == nil
		switch {
		case t.IsPoststop():
			continue
		case (t.RunsToCompletion() && completed) || (len(poststops) > 0 && finished):
			r.firstAttemptOver() // done before the agent restarted
			continue
		}
		others++
		switch {
		case t.IsPoststart() && r.cfg.Handles[t.Name] == nil:
			posts = append(posts, t)
		case !t.IsInit():
			mains = append(mains, t)
		default:
			inits = append(inits, t)
		}
	}
	if len(posts) > 0 {
		r.waitMains = map[string]bool{}
		for _, t := range mains {
			if !t.IsPoststart() && !r.running[t.Name] {
				r.waitMains[t.Name] = true
			}
		}
		up = make(chan struct{})
		if len(r.waitMains) == 0 {
			close(up)
		} else {
			r.mainsUp = up
		}
	}
	r.othersLeft.Store(int32(others))
	r.othersDone = make(chan struct{})
	if others == 0 {
		close(r.othersDone)
	}
	r.mu.Unlock()
	total := len(inits) + len(mains) + len(posts) + len(poststops)
	r.tasksLeft.Store(int32(total))
	if total == 0 {
		go r.finish()
		return
	}
	if len(posts) > 0 {
		go r.startPoststartAfter(posts, up)
	}
	if len(poststops) > 0 {
		go r.startPoststopAfter(poststops)
	}
	if len(inits) == 0 {
		for _, t := range mains {
			go r.runTask(t, r.cfg.Handles[t.Name], nil)
		}
		return
	}
	initDone := make(chan struct{}, len(inits))
	for _, t := range inits {
		go r.runTask(t, r.cfg.Handles[t.Name], func() { initDone <- struct{}{} })
	}
	go r.startMainsAfter(inits, mains, initDone)
}

// startMainsAfter starts the main tasks once every init task finished
// successfully. If one failed for good, or the allocation was stopped or
// the runner detached meanwhile, the main tasks are never started (the
// allocation's status says why).
func (r *Runner) startMainsAfter(inits, mains []*model.Task, initDone <-chan struct{}) {
	for range inits {
		<-initDone
	}
	r.mu.Lock()
	ok := r.ctx.Err() == nil
	for _, t := range inits {
		ts := r.alloc.TaskStates[t.Name]
		ok = ok && ts.State == "dead" && !ts.Failed
	}
	r.mu.Unlock()
	if ok && !r.isStopping() {
		for _, t := range mains {
			go r.runTask(t, r.cfg.Handles[t.Name], nil)
		}
		return
	}
	for _, t := range mains {
		r.firstAttemptOver()
		r.taskDone(t)
	}
}

// startPoststartAfter starts the poststart tasks once every main task has
// run (up closed). If the allocation is stopped, fails (a sibling failed
// for good) or the runner is detached first, they are never started.
func (r *Runner) startPoststartAfter(posts []*model.Task, up <-chan struct{}) {
	select {
	case <-up:
		if !r.isStopping() && r.ctx.Err() == nil {
			for _, t := range posts {
				go r.runTask(t, nil, nil)
			}
			return
		}
	case <-r.stopping:
	case <-r.ctx.Done():
	}
	for _, t := range posts {
		r.firstAttemptOver()
		r.taskDone(t)
	}
}

// startPoststopAfter runs the poststop tasks once every other task of the
// allocation has finished, however it ended; not if the runner was
// detached first (the next agent runs them).
func (r *Runner) startPoststopAfter(stops []*model.Task) {
	select {
	case <-r.othersDone:
		if r.ctx.Err() == nil {
			for _, t := range stops {
				go r.runTask(t, r.cfg.Handles[t.Name], nil)
			}
			return
		}
	case <-r.ctx.Done():
	}
	for _, t := range stops {
		r.taskDone(t)
	}
}

// taskDone records that one task's goroutine ended (or that it will never
// start): the allocation is done when every task is, and the poststop
// tasks run when every other one is.
func (r *Runner) taskDone(t *model.Task) {
	if !t.IsPoststop() && r.othersLeft.Add(-1) == 0 {
		close(r.othersDone)
	}
	if r.tasksLeft.Add(-1) == 0 {
		r.finish()
	}
}

// finish runs once every task is done, on the goroutine of the last: it
// ends the check and health goroutines, deregisters the services (unless
// detached), releases the ports and closes Done. Its callers hold no lock.
func (r *Runner) finish() {
	r.cancel() // end the check and health goroutines
	r.mu.Lock()
	r.bgClosed = true
	r.mu.Unlock()
	r.bgWG.Wait()
	r.mu.Lock()
	detached := r.detached
	r.mu.Unlock()
	if r.cfg.Services != nil && !detached {
		r.deregisterAll()
	}
	r.releasePorts()
	r.closeDone()
}

// Stop stops every task (kill_signal, then kill after kill_timeout), destroys
// them, forgets their handles and records the allocation as complete with
// intent stop. It returns when the tasks are gone or ctx ends.
func (r *Runner) Stop(ctx context.Context, reason string) error {
	r.mu.Lock()
	r.intent = model.DesiredStop
	a := r.mutable()
	a.DesiredStatus = model.DesiredStop
	if reason != "" {
		a.DesiredDescription = reason
	}
	started := r.started
	var delay time.Duration
	if g := r.group(); g != nil && r.cfg.Services != nil && hasServices(g) {
		delay = g.ShutdownDelay.D()
	}
	r.mu.Unlock()
	r.persist() // with intent stop: the service loop deregisters
	if started && delay > 0 {
		// shutdown_delay: the services go first, the tasks keep serving
		// what is already on its way, then they get their kill signal.
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
		case <-r.done:
		}
		t.Stop()
	}
	r.stopNow()
	if !started {
		r.markStoppedBeforeStart()
		return nil
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return fmt.Errorf("stopping allocation %s: %w", r.id, ctx.Err())
	}
	r.mu.Lock()
	if !r.alloc.ClientStatus.Terminal() {
		if r.lost != "" {
			r.setClientStatusLocked(model.ClientLost, r.lost)
		} else {
			r.setClientStatusLocked(model.ClientComplete, "stopped: "+reason)
		}
	}
	r.mu.Unlock()
	r.persist()
	return nil
}

// MarkLost records that the fleet declared this allocation lost (its node
// was down longer than its group allows): its intent becomes stop, at once
// and persisted, so an agent that restarts before the tasks are gone still
// stops it; the Stop that follows ends it with client status lost.
func (r *Runner) MarkLost(why string) {
	r.mu.Lock()
	r.lost = why
	r.intent = model.DesiredStop
	a := r.mutable()
	a.DesiredStatus = model.DesiredStop
	a.DesiredDescription = why
	r.mu.Unlock()
	r.persist()
}

// RecordReconnect records that the fleet saw this allocation's node down
// from since (the loss verdict's server time) and that it is back at now:
// a client-status transition to unknown at since, then back to the status
// it has, with why as the description. The tasks are untouched. It
// reports false when the allocation is terminal or the reconnect from
// since is already recorded.
func (r *Runner) RecordReconnect(since, now time.Time, why string) bool {
	r.mu.Lock()
	a := r.alloc
	if a.ClientStatus.Terminal() || a.DesiredStatus != model.DesiredRun {
		r.mu.Unlock()
		return false
	}
	for _, s := range a.States {
		if s.Field == model.AllocStateClientStatus && s.Value == string(model.ClientUnknown) && s.Time.Equal(since) {
			r.mu.Unlock()
			return false
		}
	}
	a = r.mutable()
	a.States = append(a.States,
		model.AllocState{Field: model.AllocStateClientStatus, Value: string(model.ClientUnknown), Time: since},
		model.AllocState{Field: model.AllocStateClientStatus, Value: string(a.ClientStatus), Time: now})
	if n := len(a.States); n > 10 {
		a.States = append([]model.AllocState(nil), a.States[n-10:]...)
	}
	a.ClientDescription = why
	r.mu.Unlock()
	r.persist()
	return true
}

func (r *Runner) markStoppedBeforeStart() {
	r.mu.Lock()
	r.setClientStatusLocked(model.ClientComplete, "stopped before start")
	r.mu.Unlock()
	r.persist()
	r.closeDone()
}

// Detach ends the runner's goroutines and leaves its tasks running, with
// their handles in the store, for the next agent to reattach.
func (r *Runner) Detach() {
	r.mu.Lock()
	r.detached = true
	r.mu.Unlock()
	r.cancel()
	r.mu.Lock()
	started := r.started
	r.started = true
	r.mu.Unlock()
	if !started {
		r.closeDone()
		return
	}
	<-r.done
}

// UpdateInPlace moves the allocation to a new job version whose tasks are
// unchanged (only non-task fields differ): no task restarts. A new
// deployment restarts deployment-health tracking.
func (r *Runner) UpdateInPlace(alloc *model.Allocation, job *model.Job) {
	r.mu.Lock()
	newDeployment := alloc.DeploymentID != r.alloc.DeploymentID
	r.job = job
	a := r.mutable()
	a.JobVersion = alloc.JobVersion
	a.DeploymentID = alloc.DeploymentID
	if newDeployment {
		a.DeploymentStatus = nil
		if alloc.DeploymentStatus != nil {
			ds := *alloc.DeploymentStatus
			ds.Healthy = nil
			a.DeploymentStatus = &ds
		}
	}
	r.mu.Unlock()
	r.persist()
	if newDeployment {
		r.startHealth()
	}
}

// persist writes the allocation to the store and reports it (OnUpdate,
// which must not call back into the runner). Writes and reports are
// ordered: each takes its snapshot under persistMu, so a slower earlier
// write never lands, nor is reported, after a newer one.
func (r *Runner) persist() { r.persistWith(nil, "", nil) }

// persistWith is persist, writing task's handle h in the same transaction
// when hs is set (see handleStore).
func (r *Runner) persistWith(hs handleStore, task string, h *driver.TaskHandle) {
	r.persistMu.Lock()
	r.persists.Add(1)
	r.mu.Lock()
	a := r.mutable()
	a.ModifyTime = r.now()
	rec := &state.AllocRecord{Alloc: a, Intent: r.intent, Job: r.job}
	r.snap, r.shared = a, true // the next change takes a copy
	r.mu.Unlock()
	rec.JobEncoding = r.jobEncoding(rec.Job)
	if hs != nil {
		if err := hs.PutAllocAndHandle(rec, task, h); err != nil {
			r.log.Error("storing allocation with a task handle", "task", task, "err", err)
		}
	} else if r.cfg.Store != nil {
		if err := r.cfg.Store.PutAlloc(rec); err != nil {
			r.log.Error("storing allocation", "err", err)
		}
	}
	// Reported under persistMu, so reports arrive in the order the
	// snapshots were taken: reported after the lock, a slower older write
	// could report last and leave the fleet with a stale status (a pending
	// record reported after running) until the next change.
	if r.cfg.OnUpdate != nil {
		r.cfg.OnUpdate(rec.Alloc)
	}
	r.persistMu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
	r.pokeServices()
}

// jobEncoding returns the encoding of job for its record, made by the
// store when job is not the one last encoded (nil if the store makes none,
// or cannot encode job: the write then encodes the job itself, and reports
// why it cannot). r.persistMu is held.
func (r *Runner) jobEncoding(job *model.Job) *state.JobEncoding {
	je, ok := r.cfg.Store.(jobEncoder)
	if !ok || job == nil {
		return nil
	}
	if r.jobEnc == nil || r.jobEnc.Job() != job {
		r.jobEnc, _ = je.EncodeJob(job)
	}
	return r.jobEnc
}

func (r *Runner) setClientStatusLocked(s model.ClientStatus, desc string) {
	if r.alloc.ClientStatus == s && r.alloc.ClientDescription == desc {
		return // no change, and no copy for it
	}
	a := r.mutable()
	a.ClientDescription = desc
	if a.ClientStatus == s {
		return
	}
	a.ClientStatus = s
	a.States = append(a.States, model.AllocState{Field: model.AllocStateClientStatus, Value: string(s), Time: r.now()})
	if n := len(a.States); n > 10 {
		a.States = append([]model.AllocState(nil), a.States[n-10:]...)
	}
}

// recomputeLocked derives the client status from the tasks' states.
func (r *Runner) recomputeLocked() {
	if r.alloc.ClientStatus.Terminal() {
		return
	}
	all, running, failed, dead := 0, 0, false, 0
	// A poststop task that has not finished is not counted: it does not
	// run while the others do, and it keeps the allocation from being
	// complete until it has run.
	postPending := false
	g := r.group()
	for name, ts := range r.alloc.TaskStates {
		if ts.State != "dead" && g != nil && g.LookupTask(name).IsPoststop() {
			postPending = true
			continue
		}
		all++
		switch ts.State {
		case "running":
			running++
		case "dead":
			dead++
			failed = failed || ts.Failed
		}
	}
	failedWhy := "a task failed"
	if r.failStop != "" {
		failedWhy = r.failStop
	}
	switch {
	case all > 0 && dead == all && r.lost != "":
		r.setClientStatusLocked(model.ClientLost, r.lost) // killed because the fleet declared it lost
	case all > 0 && dead == all && failed:
		r.setClientStatusLocked(model.ClientFailed, failedWhy)
	case all > 0 && dead == all && !postPending:
		r.setClientStatusLocked(model.ClientComplete, "all tasks finished")
	case failed:
		r.setClientStatusLocked(model.ClientFailed, failedWhy)
	case all > 0 && running+dead == all && running > 0:
		r.setClientStatusLocked(model.ClientRunning, "")
	}
}

func (r *Runner) event(task, typ, msg string) {
	r.mu.Lock()
	a := r.mutable()
	ts := a.TaskStates[task]
	if ts == nil {
		ts = &model.TaskState{State: "pending"}
		a.TaskStates[task] = ts
	}
	ts.Events = append(ts.Events, model.TaskEvent{Type: typ, Message: msg, Time: r.now()})
	if n := len(ts.Events); n > 10 {
		ts.Events = append([]model.TaskEvent(nil), ts.Events[n-10:]...)
	}
	r.mu.Unlock()
	r.log.Info("task event", "task", task, "type", typ, "message", msg)
}

func (r *Runner) setTask(task string, f func(ts *model.TaskState)) {
	r.changeTask(task, f)
	r.persist()
}

// changeTask applies f to a task's state in memory (setTask persists).
func (r *Runner) changeTask(task string, f func(ts *model.TaskState)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.mutable()
	ts := a.TaskStates[task]
	if ts == nil {
		ts = &model.TaskState{}
		a.TaskStates[task] = ts
	}
	f(ts)
	r.running[task] = ts.State == "running"
	if ts.State == "running" && r.mainsUp != nil && r.waitMains[task] {
		delete(r.waitMains, task)
		if len(r.waitMains) == 0 {
			close(r.mainsUp)
			r.mainsUp = nil
		}
	}
	r.recomputeLocked()
}

// taskStarted records a task the driver just started: its handle, and the task
// running. With a handleStore both are one write; otherwise the handle is
// written first (a record saying running must not be on disk without it).
// Either way no crash leaves the handle without a record of its allocation
// as long as one was written before (a slow start's pending record); a fast
// start writes none before its handle, which only handleStore makes safe.
func (r *Runner) taskStarted(task string, h *driver.TaskHandle) {
	hs, _ := r.cfg.Store.(handleStore)
	if hs == nil && r.cfg.Store != nil {
		if err := r.cfg.Store.PutHandle(r.id, task, h); err != nil {
			r.log.Error("storing task handle", "task", task, "err", err)
		}
	}
	r.event(task, EventStarted, "task started by the driver")
	r.changeTask(task, func(ts *model.TaskState) {
		ts.State = "running"
		ts.StartedAt = r.now()
		ts.FinishedAt = time.Time{}
	})
	r.persistWith(hs, task, h)
}

// firstAttemptOver records that one task's first start (or reattach)
// attempt returned.
func (r *Runner) firstAttemptOver() {
	if r.firstLeft.Add(-1) == 0 {
		close(r.firstDone)
	}
}

// closeDone closes Done once, whichever path ends the runner first.
func (r *Runner) closeDone() {
	r.doneOnce.Do(func() {
		close(r.done)
		if r.cfg.OnDone != nil {
			r.cfg.OnDone()
		}
	})
}

func (r *Runner) isStopping() bool {
	select {
	case <-r.stopping:
		return true
	default:
		return false
	}
}

// CloneAlloc deep-copies an allocation (the parts a runner mutates).
func CloneAlloc(a *model.Allocation) *model.Allocation {
	if a == nil {
		return nil
	}
	c := *a
	c.States = append([]model.AllocState(nil), a.States...)
	if a.DeploymentStatus != nil {
		ds := *a.DeploymentStatus
		if ds.Healthy != nil {
			h := *ds.Healthy
			ds.Healthy = &h
		}
		c.DeploymentStatus = &ds
	}
	if a.TaskStates != nil {
		c.TaskStates = make(map[string]*model.TaskState, len(a.TaskStates))
		for k, ts := range a.TaskStates {
			t := *ts
			t.Events = append([]model.TaskEvent(nil), ts.Events...)
			c.TaskStates[k] = &t
		}
	}
	return &c
}

func errIsNotFound(err error) bool { return errors.Is(err, driver.ErrTaskNotFound) }

// mkdirs makes each directory and its missing parents, as os.MkdirAll,
// but with the mkdir first: a task's directories are new at its start, and
// MkdirAll's stat before each mkdir (and of each parent) made eleven stats
// and six mkdirs per start where six mkdirs and two failed ones do. A path
// that exists is checked to be a directory.
func mkdirs(paths ...string) error {
	for _, p := range paths {
		if err := mkdirFirst(p, 0); err != nil {
			return err
		}
	}
	return nil
}

func mkdirFirst(p string, depth int) error {
	err := os.Mkdir(p, 0o755)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist) && depth < 64:
		if parent := filepath.Dir(p); parent != p {
			if err := mkdirFirst(parent, depth+1); err != nil {
				return err
			}
			if err = os.Mkdir(p, 0o755); err == nil || !errors.Is(err, fs.ErrExist) {
				return err
			}
		}
	}
	// It exists (or the mkdir failed otherwise): MkdirAll says whether it
	// is a directory, or why not.
	return os.MkdirAll(p, 0o755)
}
