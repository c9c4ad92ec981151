// Command hivelet-driver-echo is a complete third-party hivelet task driver
// in one file: a task writes its `message` to its stdout file `count` times,
// `interval` apart, then exits with `exit_code`. Put the binary in the
// agent's plugin directory as hivelet-driver-echo and jobs can use
// `driver = "echo"`.
//
// Its tasks are goroutines of the plugin process, so they cannot outlive
// it: RecoverTask answers ErrTaskNotFound for a task it does not hold, and
// the host restarts the task. A driver whose tasks live outside its process
// (processes, containers) recovers them from the handle instead; see
// plugins/exec.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/hivelet/hivelet/sdk/driver"
)

func main() { driver.Serve(newEcho()) }

type config struct {
	Message  string `json:"message"`
	Count    int    `json:"count"`
	Interval string `json:"interval"`
	ExitCode int    `json:"exit_code"`
}

var schema = &driver.Schema{Fields: map[string]*driver.Field{
	"message":   {Type: driver.TypeString, Required: true, Description: "line to write"},
	"count":     {Type: driver.TypeNumber, Description: "how many times (default 1)"},
	"interval":  {Type: driver.TypeString, Description: "pause between lines (default 0s)"},
	"exit_code": {Type: driver.TypeNumber, Description: "exit code once done"},
}}

type task struct {
	cancel context.CancelFunc
	exit   driver.Exit // finished once the task's goroutine returns
	start  time.Time
}

// echo keeps its tasks in a driver.Tasks table, whose Get answers
// ErrTaskNotFound for an unknown ID as the contract asks.
type echo struct {
	tasks *driver.Tasks[*task]
}

func newEcho() *echo { return &echo{tasks: driver.NewTasks[*task]("echo task")} }

func (e *echo) Info(context.Context) (driver.PluginInfo, error) {
	return driver.PluginInfo{Name: "echo", Version: "1.0.0"}, nil
}

func (e *echo) Capabilities(context.Context) (driver.Capabilities, error) {
	return driver.Capabilities{FSIsolation: "none"}, nil
}

func (e *echo) ConfigSchema(context.Context) (*driver.Schema, error) { return schema, nil }

func (e *echo) Fingerprint(ctx context.Context) (<-chan *driver.Fingerprint, error) {
	ch := make(chan *driver.Fingerprint, 1)
	ch <- &driver.Fingerprint{Healthy: true, Attributes: map[string]string{"version": "1.0.0"}}
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

func (e *echo) StartTask(_ context.Context, tc *driver.TaskConfig) (*driver.TaskHandle, error) {
	if err := driver.ValidateConfig(schema, tc.Config); err != nil {
		return nil, err
	}
	c := config{Count: 1}
	if err := driver.DecodeConfig(tc.Config, &c); err != nil {
		return nil, err
	}
	var interval time.Duration
	if c.Interval != "" {
		var err error
		if interval, err = time.ParseDuration(c.Interval); err != nil {
			return nil, fmt.Errorf("interval: %w", err)
		}
	}
	out, err := os.OpenFile(tc.StdoutPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening stdout: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &task{cancel: cancel, start: time.Now()}
	if _, added := e.tasks.Add(tc.ID, t, nil); !added {
		cancel()
		out.Close()
		return nil, fmt.Errorf("task %s already exists", tc.ID)
	}
	go func() {
		defer out.Close()
		t.exit.Finish(run(ctx, out, c, interval))
	}()
	slog.Info("echo task started", "task_id", tc.ID)
	return &driver.TaskHandle{Version: 1, TaskID: tc.ID, Driver: "echo", StartedAt: t.start}, nil
}

// run writes the task's lines and returns its exit: exit_code once done,
// or 130 (SIGINT) if stopped first.
func run(ctx context.Context, out *os.File, c config, interval time.Duration) *driver.ExitResult {
	for i := 0; i < c.Count; i++ {
		if i > 0 {
			select {
			case <-time.After(interval):
			case <-ctx.Done():
				return &driver.ExitResult{ExitCode: 130, Signal: 2}
			}
		}
		fmt.Fprintln(out, c.Message)
	}
	return &driver.ExitResult{ExitCode: c.ExitCode}
}

// RecoverTask: the task was a goroutine; it is recoverable only if this
// very process still runs it.
func (e *echo) RecoverTask(_ context.Context, h *driver.TaskHandle) error {
	_, err := e.tasks.Get(h.TaskID)
	return err
}

func (e *echo) WaitTask(ctx context.Context, id string) (<-chan *driver.ExitResult, error) {
	t, err := e.tasks.Get(id)
	if err != nil {
		return nil, err
	}
	return t.exit.WaitChan(ctx), nil
}

func (e *echo) StopTask(ctx context.Context, id string, timeout time.Duration, _ string) error {
	t, err := e.tasks.Get(id)
	if err != nil {
		return err
	}
	t.cancel()
	select {
	case <-t.exit.Done():
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("echo task %s did not stop within %v", id, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *echo) DestroyTask(ctx context.Context, id string, force bool) error {
	t, err := e.tasks.Get(id)
	if err != nil {
		return err
	}
	if !t.exit.Exited() {
		if !force {
			return fmt.Errorf("echo task %s is running", id)
		}
		if err := e.StopTask(ctx, id, time.Second, ""); err != nil {
			return err
		}
	}
	e.tasks.Delete(id)
	return nil
}

func (e *echo) InspectTask(_ context.Context, id string) (*driver.TaskStatus, error) {
	t, err := e.tasks.Get(id)
	if err != nil {
		return nil, err
	}
	s := &driver.TaskStatus{ID: id, State: driver.TaskStateRunning, StartedAt: t.start}
	if r := t.exit.Result(); r != nil {
		s.State, s.ExitResult = driver.TaskStateExited, r
	}
	return s, nil
}

func (e *echo) TaskStats(ctx context.Context, id string, _ time.Duration) (<-chan *driver.TaskResourceUsage, error) {
	if _, err := e.tasks.Get(id); err != nil {
		return nil, err
	}
	ch := make(chan *driver.TaskResourceUsage)
	go func() { <-ctx.Done(); close(ch) }() // nothing worth measuring
	return ch, nil
}

func (e *echo) TaskEvents(ctx context.Context) (<-chan *driver.TaskEvent, error) {
	ch := make(chan *driver.TaskEvent)
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

func (e *echo) SignalTask(_ context.Context, id string, _ string) error {
	if _, err := e.tasks.Get(id); err != nil {
		return err
	}
	return fmt.Errorf("echo tasks take no signals")
}
