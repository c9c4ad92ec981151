package allocrunner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hivelet/hivelet/sdk/driver"
)

// fakeDriver is a small in-memory driver for the runner's tests. A task's
// config says how it behaves:
//
//	run_for     duration text; the task exits after it ("" runs until stopped)
//	exit_code   number; the exit code when run_for elapses
//	ignore_stop bool; the stop signal is ignored, only the kill after the
//	            timeout ends the task
//	lose_handle bool; the task starts but StartTask fails, as when the
//	            plugin dies before answering
//
// Its wait is a function it runs when the task ends (driver.WaitNotifier,
// as the plugin client's and the plugin manager's): a waiting task holds
// no goroutine of the fake's. channelWaits hides it, for the runner's
// other way, a WaitTask channel. loseWaits ends every open wait without a
// result, as a plugin's death does, while the tasks run on.
type fakeDriver struct {
	mu        sync.Mutex
	lost      chan struct{} // closed by loseWaits (and replaced)
	chanWaits int           // WaitTask channels open
	tasks     map[string]*fakeTask
	starts    map[string]int // task ID → StartTask calls
	recovers  map[string]int
	stops     []fakeStop
	schema    *driver.Schema
	// driverErrs and recoverErrs make the next Driver lookups and
	// RecoverTask calls fail with a transient (not "not found") error.
	driverErrs, recoverErrs int
	destroys                int
	signals                 []string // "task ID signal" of each SignalTask
	order                   []string // task IDs in the order StartTask was called
	// noMounts makes Capabilities say the driver cannot mount; noExec
	// that it cannot run a command in a task.
	noMounts, noExec bool
	// execs are the commands ExecTask ran, "task ID: command"; ExecTask
	// answers a command "exit N" with exit code N.
	execs []string
}

type fakeStop struct {
	TaskID  string
	Timeout time.Duration
	Signal  string
	Killed  bool // the task had to be killed after the timeout
}

type fakeTask struct {
	cfg    *driver.TaskConfig
	done   chan struct{}
	once   sync.Once
	result *driver.ExitResult
	ignore bool
	sigc   chan struct{}

	mu    sync.Mutex
	waits map[*fakeWait]bool // the function waits open on the task
}

// fakeWait is one function wait: fn runs once.
type fakeWait struct {
	once sync.Once
	fn   func(*driver.ExitResult)
	mu   sync.Mutex
	stop func() bool // its ctx watch, once set
}

func (w *fakeWait) end(r *driver.ExitResult) {
	w.once.Do(func() {
		w.mu.Lock()
		stop := w.stop
		w.mu.Unlock()
		if stop != nil {
			stop()
		}
		w.fn(r)
	})
}

func newFakeDriver() *fakeDriver {
	return &fakeDriver{lost: make(chan struct{}), tasks: map[string]*fakeTask{}, starts: map[string]int{}, recovers: map[string]int{},
		schema: &driver.Schema{Fields: map[string]*driver.Field{
			"run_for":     {Type: driver.TypeString},
			"exit_code":   {Type: driver.TypeNumber},
			"ignore_stop": {Type: driver.TypeBool},
			"echo":        {Type: driver.TypeString},
			"start_delay": {Type: driver.TypeString},
			"lose_handle": {Type: driver.TypeBool},
		}}}
}

func (f *fakeDriver) Driver(context.Context, string) (driver.Driver, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.driverErrs > 0 {
		f.driverErrs--
		return nil, errors.New("plugin unreachable")
	}
	return f, nil
}

func (t *fakeTask) finish(r *driver.ExitResult) {
	t.once.Do(func() {
		t.mu.Lock()
		t.result = r
		close(t.done)
		waits := t.waits
		t.waits = nil
		t.mu.Unlock()
		for w := range waits {
			w.end(r)
		}
	})
}

// drop ends w without a result if it is still open on t.
func (t *fakeTask) drop(w *fakeWait) {
	t.mu.Lock()
	open := t.waits[w]
	delete(t.waits, w)
	t.mu.Unlock()
	if open {
		w.end(nil)
	}
}

// WaitTaskFunc is the fake's function wait: no goroutine while the task
// runs; fn runs on the goroutine that ends the task, or (the task already
// ended) on one of its own.
func (f *fakeDriver) WaitTaskFunc(ctx context.Context, id string, fn func(*driver.ExitResult)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t, err := f.task(id)
	if err != nil {
		return err
	}
	w := &fakeWait{fn: fn}
	t.mu.Lock()
	select {
	case <-t.done:
		t.mu.Unlock()
		go w.end(t.result)
		return nil
	default:
	}
	if t.waits == nil {
		t.waits = map[*fakeWait]bool{}
	}
	t.waits[w] = true
	t.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { t.drop(w) })
	w.mu.Lock()
	w.stop = stop
	w.mu.Unlock()
	return nil
}

// loseWaits ends every open wait without a result, as a plugin that died
// does; the tasks run on, and RecoverTask finds them.
func (f *fakeDriver) loseWaits() {
	f.mu.Lock()
	close(f.lost)
	f.lost = make(chan struct{})
	tasks := f.taskListLocked()
	f.mu.Unlock()
	for _, t := range tasks {
		t.mu.Lock()
		waits := t.waits
		t.waits = nil
		t.mu.Unlock()
		for w := range waits {
			w.end(nil)
		}
	}
}

// taskListLocked is the driver's tasks, in no order; f.mu is held.
func (f *fakeDriver) taskListLocked() []*fakeTask {
	tasks := make([]*fakeTask, 0, len(f.tasks))
	for _, t := range f.tasks {
		tasks = append(tasks, t)
	}
	return tasks
}

// waiting is the number of waits open, function or channel.
func (f *fakeDriver) waiting() int {
	f.mu.Lock()
	n := f.chanWaits
	tasks := f.taskListLocked()
	f.mu.Unlock()
	for _, t := range tasks {
		t.mu.Lock()
		n += len(t.waits)
		t.mu.Unlock()
	}
	return n
}

// channelWaits is the fake behind a Driver that has only the channel wait
// (WaitTask), as a wrapper that embeds a driver.Driver has.
type channelWaits struct{ f *fakeDriver }

func (c channelWaits) Driver(ctx context.Context, name string) (driver.Driver, error) {
	d, err := c.f.Driver(ctx, name)
	if err != nil {
		return nil, err
	}
	return struct{ driver.Driver }{d}, nil
}

func (f *fakeDriver) Info(context.Context) (driver.PluginInfo, error) {
	return driver.PluginInfo{Name: "fake", Version: "0"}, nil
}
func (f *fakeDriver) Capabilities(context.Context) (driver.Capabilities, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return driver.Capabilities{SendSignals: true, Mounts: !f.noMounts, Exec: !f.noExec}, nil
}
func (f *fakeDriver) ConfigSchema(context.Context) (*driver.Schema, error) { return f.schema, nil }
func (f *fakeDriver) Fingerprint(ctx context.Context) (<-chan *driver.Fingerprint, error) {
	ch := make(chan *driver.Fingerprint, 1)
	ch <- &driver.Fingerprint{Healthy: true}
	return ch, nil
}

func (f *fakeDriver) StartTask(ctx context.Context, cfg *driver.TaskConfig) (*driver.TaskHandle, error) {
	t := &fakeTask{cfg: cfg, done: make(chan struct{}), sigc: make(chan struct{}, 1)}
	t.ignore, _ = cfg.Config["ignore_stop"].(bool)
	var runFor time.Duration
	if s, _ := cfg.Config["run_for"].(string); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("run_for: %w", err)
		}
		runFor = d
	}
	if s, _ := cfg.Config["start_delay"].(string); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("start_delay: %w", err)
		}
		time.Sleep(d)
	}
	code := 0
	switch c := cfg.Config["exit_code"].(type) {
	case int:
		code = c
	case float64:
		code = int(c)
	}
	f.mu.Lock()
	f.tasks[cfg.ID] = t
	f.starts[cfg.ID]++
	f.order = append(f.order, cfg.ID)
	f.mu.Unlock()
	if lost, _ := cfg.Config["lose_handle"].(bool); lost {
		// As a plugin killed after starting the task, before answering.
		return nil, errors.New("rpc error: code = Unavailable desc = error reading from server: EOF")
	}
	if runFor > 0 {
		go func() {
			select {
			case <-time.After(runFor):
				t.finish(&driver.ExitResult{ExitCode: code})
			case <-t.done:
			}
		}()
	}
	return &driver.TaskHandle{Version: 1, TaskID: cfg.ID, Driver: "fake", StartedAt: time.Now()}, nil
}

func (f *fakeDriver) task(id string) (*fakeTask, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tasks[id]
	if !ok {
		return nil, fmt.Errorf("task %s: %w", id, driver.ErrTaskNotFound)
	}
	return t, nil
}

func (f *fakeDriver) RecoverTask(ctx context.Context, h *driver.TaskHandle) error {
	f.mu.Lock()
	f.recovers[h.TaskID]++
	if f.recoverErrs > 0 {
		f.recoverErrs--
		f.mu.Unlock()
		return errors.New("rpc error: code = Unavailable")
	}
	f.mu.Unlock()
	_, err := f.task(h.TaskID)
	return err
}

func (f *fakeDriver) WaitTask(ctx context.Context, id string) (<-chan *driver.ExitResult, error) {
	t, err := f.task(id)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	lost := f.lost
	f.chanWaits++
	f.mu.Unlock()
	ch := make(chan *driver.ExitResult, 1)
	go func() {
		defer func() {
			f.mu.Lock()
			f.chanWaits--
			f.mu.Unlock()
			close(ch)
		}()
		select {
		case <-t.done:
			ch <- t.result
		case <-ctx.Done():
		case <-lost:
		}
	}()
	return ch, nil
}

func (f *fakeDriver) StopTask(ctx context.Context, id string, timeout time.Duration, signal string) error {
	t, err := f.task(id)
	if err != nil {
		return err
	}
	// The call is recorded before the task's exit is: the runner may finish
	// (and Stop return) as soon as the exit is seen, before StopTask does.
	record := func(st fakeStop) {
		f.mu.Lock()
		f.stops = append(f.stops, st)
		f.mu.Unlock()
	}
	st := fakeStop{TaskID: id, Timeout: timeout, Signal: signal}
	if t.ignore {
		select {
		case <-t.done:
			record(st)
		case <-time.After(timeout):
			st.Killed = true
			record(st)
			t.finish(&driver.ExitResult{Signal: 9})
		}
	} else {
		record(st)
		t.finish(&driver.ExitResult{Signal: 15})
	}
	return nil
}

func (f *fakeDriver) DestroyTask(ctx context.Context, id string, force bool) error {
	t, err := f.task(id)
	if err != nil {
		return err
	}
	t.finish(&driver.ExitResult{Signal: 9})
	f.mu.Lock()
	f.destroys++
	delete(f.tasks, id)
	f.mu.Unlock()
	return nil
}

func (f *fakeDriver) InspectTask(ctx context.Context, id string) (*driver.TaskStatus, error) {
	t, err := f.task(id)
	if err != nil {
		return nil, err
	}
	st := &driver.TaskStatus{ID: id, State: driver.TaskStateRunning}
	select {
	case <-t.done:
		st.State, st.ExitResult = driver.TaskStateExited, t.result
	default:
	}
	return st, nil
}

func (f *fakeDriver) TaskStats(ctx context.Context, id string, interval time.Duration) (<-chan *driver.TaskResourceUsage, error) {
	return nil, fmt.Errorf("no stats")
}
func (f *fakeDriver) TaskEvents(ctx context.Context) (<-chan *driver.TaskEvent, error) {
	return make(chan *driver.TaskEvent), nil
}
func (f *fakeDriver) SignalTask(ctx context.Context, id, sig string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.signals = append(f.signals, id+" "+sig)
	return nil
}

func (f *fakeDriver) signalsSent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.signals...)
}

func (f *fakeDriver) startCount(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.starts[id]
}

func (f *fakeDriver) recoverCount(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.recovers[id]
}

func (f *fakeDriver) stopCalls() []fakeStop {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeStop(nil), f.stops...)
}

func (f *fakeDriver) live() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tasks)
}

func (f *fakeDriver) ExecTask(_ context.Context, id string, command []string) (*driver.ExecResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execs = append(f.execs, id+": "+strings.Join(command, " "))
	code := 0
	if len(command) == 2 && command[0] == "exit" {
		code, _ = strconv.Atoi(command[1])
	}
	return &driver.ExecResult{ExitCode: code, Output: []byte("said " + strings.Join(command, " "))}, nil
}
