// Package mock is the mock task driver: tasks that are only timers. It
// exists for the host's own tests and for simulating large fleets cheaply
// (thousands of tasks in one plugin process cost a timer each).
//
// A task's behaviour comes from its config block (see Schema): how long it
// runs, how it exits, and how its start and stop fail or lag. Its handle
// encodes the planned end, so a task recovered by a restarted plugin ends at
// the same moment it would have ended without the restart; what the handle
// cannot carry (a stop or signal received before the restart) is lost, which
// is fine for a driver that runs nothing.
//
// Invariant: a task ID is started at most once per plugin process; a second
// StartTask for a live ID is refused (TestStartingTheSameTaskTwiceIsRefused).
//
// Its config keys are listed in docs/drivers.md ("The built-in drivers").
package mock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hivelet/hivelet/internal/wait"
	"github.com/hivelet/hivelet/sdk/driver"
)

// Name is the driver's name in job files.
const Name = "mock"

// Version is reported by Info and as the fingerprint attribute
// driver.mock.version.
const Version = "0.1.0"

const handleVersion = 1

// Config is a mock task's config block.
type Config struct {
	// RunFor is how long the task runs before exiting on its own; empty
	// means until stopped.
	RunFor string `json:"run_for"`
	// ExitCode and ExitSignal are the task's exit when it ends on its own.
	ExitCode   int  `json:"exit_code"`
	ExitSignal int  `json:"exit_signal"`
	OOMKilled  bool `json:"oom_killed"`
	// StartError makes StartTask fail with this message.
	StartError string `json:"start_error"`
	// StartBlockFor delays StartTask.
	StartBlockFor string `json:"start_block_for"`
	// KillAfter is how long the task takes to exit once sent its stop
	// signal; a StopTask timeout shorter than that kills it (SIGKILL).
	KillAfter string `json:"kill_after"`
	// StopError makes StopTask fail with this message (the task keeps
	// running). StopBlockFor delays StopTask before it signals.
	StopError    string `json:"stop_error"`
	StopBlockFor string `json:"stop_block_for"`
	// StdoutString is written to the task's stdout file at start.
	StdoutString string `json:"stdout_string"`
}

// Schema is the mock driver's config schema.
func Schema() *driver.Schema {
	dur := func(d string) *driver.Field { return &driver.Field{Type: driver.TypeString, Description: d} }
	return &driver.Schema{Fields: map[string]*driver.Field{
		"run_for":         dur("duration the task runs before exiting; empty: until stopped"),
		"exit_code":       {Type: driver.TypeNumber, Description: "exit code when the task ends on its own"},
		"exit_signal":     {Type: driver.TypeNumber, Description: "signal number reported when the task ends on its own"},
		"oom_killed":      {Type: driver.TypeBool, Description: "report the exit as an OOM kill"},
		"start_error":     {Type: driver.TypeString, Description: "StartTask fails with this message"},
		"start_block_for": dur("duration StartTask blocks before returning"),
		"kill_after":      dur("duration the task takes to exit after its stop signal"),
		"stop_error":      {Type: driver.TypeString, Description: "StopTask fails with this message"},
		"stop_block_for":  dur("duration StopTask blocks before signalling"),
		"stdout_string":   {Type: driver.TypeString, Description: "written to the task's stdout file at start"},
	}}
}

// state is what the handle carries across a plugin restart.
type state struct {
	StartedAt  int64  `json:"started_at"` // unix nanoseconds
	EndAt      int64  `json:"end_at"`     // unix nanoseconds; 0: runs until stopped
	ExitCode   int    `json:"exit_code"`
	ExitSignal int    `json:"exit_signal"`
	OOMKilled  bool   `json:"oom_killed"`
	KillAfter  int64  `json:"kill_after"` // nanoseconds
	StopError  string `json:"stop_error,omitempty"`
	StopBlock  int64  `json:"stop_block,omitempty"`
}

type task struct {
	id      string
	cfg     *driver.TaskConfig // nil for a recovered task
	st      state
	exited  driver.Exit
	done    <-chan struct{} // exited.Done(), kept for selects
	mu      sync.Mutex      // guards timer and signals
	timer   *time.Timer
	signals []string
}

func newTask(id string, cfg *driver.TaskConfig, st state) *task {
	t := &task{id: id, cfg: cfg, st: st}
	t.done = t.exited.Done()
	return t
}

// exit records the task's exit once and stops its timer; later calls do
// nothing. It reports whether this call recorded the exit.
func (t *task) exit(r *driver.ExitResult) bool {
	if !t.exited.Finish(r) {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer != nil {
		t.timer.Stop()
	}
	return true
}

// Driver is the mock driver. The zero value is not usable; call New.
type Driver struct {
	now func() time.Time

	table  *driver.Tasks[*task]
	events driver.Events
}

var _ driver.Driver = (*Driver)(nil)

// New returns a mock driver with no tasks.
func New() *Driver {
	return &Driver{now: time.Now, table: driver.NewTasks[*task]("mock task")}
}

// Info names the mock driver.
func (d *Driver) Info(context.Context) (driver.PluginInfo, error) {
	return driver.PluginInfo{Name: Name, Version: Version}, nil
}

// Capabilities: signals yes, no filesystem isolation.
func (d *Driver) Capabilities(context.Context) (driver.Capabilities, error) {
	return driver.Capabilities{SendSignals: true, FSIsolation: "none"}, nil
}

// ConfigSchema returns Schema().
func (d *Driver) ConfigSchema(context.Context) (*driver.Schema, error) { return Schema(), nil }

// Fingerprint reports the driver healthy once, then nothing until ctx ends.
func (d *Driver) Fingerprint(ctx context.Context) (<-chan *driver.Fingerprint, error) {
	ch := make(chan *driver.Fingerprint, 1)
	ch <- &driver.Fingerprint{Healthy: true, Description: "healthy", Attributes: map[string]string{"version": Version}}
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

func parseDur(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("config %s: %q is not a non-negative duration", field, s)
	}
	return d, nil
}

// StartTask starts a timer task as its config says (see Config).
func (d *Driver) StartTask(ctx context.Context, cfg *driver.TaskConfig) (*driver.TaskHandle, error) {
	if err := driver.ValidateConfig(Schema(), cfg.Config); err != nil {
		return nil, err
	}
	var c Config
	if err := driver.DecodeConfig(cfg.Config, &c); err != nil {
		return nil, err
	}
	runFor, err := parseDur("run_for", c.RunFor)
	if err != nil {
		return nil, err
	}
	block, err := parseDur("start_block_for", c.StartBlockFor)
	if err != nil {
		return nil, err
	}
	killAfter, err := parseDur("kill_after", c.KillAfter)
	if err != nil {
		return nil, err
	}
	stopBlock, err := parseDur("stop_block_for", c.StopBlockFor)
	if err != nil {
		return nil, err
	}
	if block > 0 {
		if !wait.For(ctx, block) {
			return nil, fmt.Errorf("starting mock task %s: %w", cfg.ID, ctx.Err())
		}
	}
	if c.StartError != "" {
		return nil, fmt.Errorf("starting mock task %s: %s", cfg.ID, c.StartError)
	}
	if c.StdoutString != "" && cfg.StdoutPath != "" {
		if err := appendFile(cfg.StdoutPath, c.StdoutString); err != nil {
			return nil, fmt.Errorf("starting mock task %s: %w", cfg.ID, err)
		}
	}
	now := d.now()
	st := state{StartedAt: now.UnixNano(), ExitCode: c.ExitCode, ExitSignal: c.ExitSignal, OOMKilled: c.OOMKilled,
		KillAfter: int64(killAfter), StopError: c.StopError, StopBlock: int64(stopBlock)}
	if c.RunFor != "" {
		st.EndAt = now.Add(runFor).UnixNano()
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encoding handle of mock task %s: %w", cfg.ID, err)
	}
	t := newTask(cfg.ID, cfg, st)
	if _, added := d.table.Add(cfg.ID, t, func(old *task) bool { return !old.exited.Exited() }); !added {
		return nil, fmt.Errorf("starting mock task %s: a task with this ID is already running", cfg.ID)
	}
	d.arm(t)
	d.emit(cfg.ID, "started")
	slog.Info("mock task started", "task_id", cfg.ID, "alloc_id", cfg.AllocID)
	return &driver.TaskHandle{Version: handleVersion, TaskID: cfg.ID, Driver: Name, DriverState: raw, StartedAt: now}, nil
}

// tasks yields the tasks the driver holds (a snapshot; see Tasks.All).
func (d *Driver) tasks(yield func(string, *task) bool) { d.table.All()(yield) }

// arm schedules a task's own end.
func (d *Driver) arm(t *task) {
	if t.st.EndAt == 0 {
		return
	}
	r := &driver.ExitResult{ExitCode: t.st.ExitCode, Signal: t.st.ExitSignal, OOMKilled: t.st.OOMKilled}
	wait := time.Until(time.Unix(0, t.st.EndAt))
	t.mu.Lock()
	t.timer = time.AfterFunc(max(wait, 0), func() {
		if t.exit(r) {
			d.emit(t.id, "exited")
		}
	})
	t.mu.Unlock()
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// RecoverTask rebuilds a task from its handle; it ends at its planned time.
func (d *Driver) RecoverTask(_ context.Context, h *driver.TaskHandle) error {
	if h == nil || h.Driver != Name || h.Version != handleVersion {
		return fmt.Errorf("recovering mock task: not a mock handle of version %d", handleVersion)
	}
	var st state
	if err := json.Unmarshal(h.DriverState, &st); err != nil {
		return fmt.Errorf("recovering mock task %s: decoding handle: %w", h.TaskID, err)
	}
	t := newTask(h.TaskID, nil, st)
	if _, added := d.table.Add(h.TaskID, t, nil); added {
		d.arm(t)
	}
	return nil
}

// WaitTask yields the task's exit once it has exited.
func (d *Driver) WaitTask(ctx context.Context, id string) (<-chan *driver.ExitResult, error) {
	t, err := d.table.Get(id)
	if err != nil {
		return nil, err
	}
	return t.exited.WaitChan(ctx), nil
}

// signalNumber maps the signal names the mock understands.
func signalNumber(name string) (int, error) {
	switch name {
	case "", "SIGTERM":
		return int(syscall.SIGTERM), nil
	case "SIGINT":
		return int(syscall.SIGINT), nil
	case "SIGKILL":
		return int(syscall.SIGKILL), nil
	case "SIGHUP":
		return int(syscall.SIGHUP), nil
	case "SIGUSR1":
		return int(syscall.SIGUSR1), nil
	case "SIGUSR2":
		return int(syscall.SIGUSR2), nil
	case "SIGQUIT":
		return int(syscall.SIGQUIT), nil
	}
	return 0, fmt.Errorf("unknown signal %q", name)
}

// StopTask blocks until the task has exited: after kill_after if that is
// shorter than timeout (exit by the stop signal), else at timeout (SIGKILL).
func (d *Driver) StopTask(ctx context.Context, id string, timeout time.Duration, signal string) error {
	t, err := d.table.Get(id)
	if err != nil {
		return err
	}
	sig, err := signalNumber(signal)
	if err != nil {
		return fmt.Errorf("stopping mock task %s: %w", id, err)
	}
	if t.st.StopBlock > 0 {
		if !wait.For(ctx, time.Duration(t.st.StopBlock)) {
			return fmt.Errorf("stopping mock task %s: %w", id, ctx.Err())
		}
	}
	if t.st.StopError != "" {
		return fmt.Errorf("stopping mock task %s: %s", id, t.st.StopError)
	}
	killAfter := time.Duration(t.st.KillAfter)
	r := &driver.ExitResult{Signal: sig}
	wait := killAfter
	if sig == int(syscall.SIGKILL) {
		wait = 0
	} else if killAfter >= timeout {
		wait, r = timeout, &driver.ExitResult{Signal: int(syscall.SIGKILL)}
	}
	select {
	case <-t.done:
		return nil
	case <-time.After(wait):
	case <-ctx.Done():
		return fmt.Errorf("stopping mock task %s: %w", id, ctx.Err())
	}
	if t.exit(r) {
		d.emit(id, "stopped")
	}
	return nil
}

// DestroyTask forgets an exited task; force ends a running one first.
func (d *Driver) DestroyTask(ctx context.Context, id string, force bool) error {
	t, err := d.table.Get(id)
	if err != nil {
		return err
	}
	if !t.exited.Exited() {
		if !force {
			return fmt.Errorf("destroying mock task %s: still running", id)
		}
		t.exit(&driver.ExitResult{Signal: int(syscall.SIGKILL)})
	}
	d.table.Delete(id)
	return nil
}

// InspectTask reports the task's state and how many signals it received.
func (d *Driver) InspectTask(_ context.Context, id string) (*driver.TaskStatus, error) {
	t, err := d.table.Get(id)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	signals := len(t.signals)
	t.mu.Unlock()
	s := &driver.TaskStatus{ID: id, State: driver.TaskStateRunning, StartedAt: time.Unix(0, t.st.StartedAt),
		Attributes: map[string]string{"signals": fmt.Sprint(signals)}}
	if t.cfg != nil {
		s.Name = t.cfg.TaskName
	}
	if r := t.exited.Result(); r != nil {
		s.State, s.CompletedAt, s.ExitResult = driver.TaskStateExited, t.exited.ExitedAt(), r
	}
	return s, nil
}

// TaskStats streams a constant usage sample every interval.
func (d *Driver) TaskStats(ctx context.Context, id string, interval time.Duration) (<-chan *driver.TaskResourceUsage, error) {
	t, err := d.table.Get(id)
	if err != nil {
		return nil, err
	}
	if interval <= 0 {
		return nil, errors.New("stats interval must be positive")
	}
	ch := make(chan *driver.TaskResourceUsage)
	go func() {
		defer close(ch)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case ch <- &driver.TaskResourceUsage{Timestamp: d.now(), CPUPercent: 1, MemoryBytes: 1 << 20}:
			case <-ctx.Done():
				return
			case <-t.done:
				return
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// TaskEvents streams "started", "exited", "stopped" and "killed" events.
func (d *Driver) TaskEvents(ctx context.Context) (<-chan *driver.TaskEvent, error) {
	return d.events.Subscribe(ctx), nil
}

// emit sends an event to every subscriber without blocking (a slow
// subscriber loses events rather than stalling tasks).
func (d *Driver) emit(id, msg string) {
	e := &driver.TaskEvent{TaskID: id, Timestamp: d.now(), Message: msg}
	if t, err := d.table.Get(id); err == nil && t.cfg != nil {
		e.AllocID, e.TaskName = t.cfg.AllocID, t.cfg.TaskName
	}
	d.events.Publish(e)
}

// SignalTask records a signal; SIGKILL ends the task.
func (d *Driver) SignalTask(_ context.Context, id string, signal string) error {
	t, err := d.table.Get(id)
	if err != nil {
		return err
	}
	sig, err := signalNumber(signal)
	if err != nil {
		return fmt.Errorf("signalling mock task %s: %w", id, err)
	}
	t.mu.Lock()
	t.signals = append(t.signals, signal)
	t.mu.Unlock()
	if sig == int(syscall.SIGKILL) && t.exit(&driver.ExitResult{Signal: sig}) {
		d.emit(id, "killed")
	}
	return nil
}
