package driver

import (
	"context"
	"fmt"
	"time"
)

// Base answers the optional methods of Driver, so that a driver embedding it
// writes only Info, StartTask, WaitTask and StopTask:
//
//	type hello struct{ driver.Base }
//
//	func (*hello) Info(context.Context) (driver.PluginInfo, error) { ... }
//	func (*hello) StartTask(ctx context.Context, cfg *driver.TaskConfig) (*driver.TaskHandle, error) { ... }
//	func (*hello) WaitTask(ctx context.Context, id string) (<-chan *driver.ExitResult, error) { ... }
//	func (*hello) StopTask(ctx context.Context, id string, timeout time.Duration, signal string) error { ... }
//
// Each answer is the one that keeps the host correct for a driver that has
// not implemented the method (TestBaseAnswersEveryOptionalMethodOverTheBoundary):
//
//   - Capabilities: none (no signals, no exec, FSIsolation "none"), so the
//     host never asks for them.
//   - ConfigSchema: an empty schema, so a task with a non-empty config
//     block is refused before StartTask with every key named. Override it to
//     accept config.
//   - Fingerprint: healthy, once, until ctx ends.
//   - RecoverTask: nil. A driver that has not implemented recovery keeps its
//     tasks in its own process: when only the host restarted, WaitTask still
//     finds the task and the host reattaches; when the plugin restarted,
//     WaitTask answers ErrTaskNotFound and the host counts the task as
//     failed and applies its restart policy. A driver whose tasks outlive
//     its process (processes, containers) must override RecoverTask, or a
//     restarted plugin would leave them running unwatched.
//   - DestroyTask: nil, nothing to remove. Override it to release whatever
//     the driver keeps per task (a Tasks table entry, files, a container).
//   - InspectTask, TaskStats, TaskEvents, SignalTask: ErrNotSupported.
//
// Base has no state; its zero value is ready to use.
type Base struct{}

// Capabilities answers that the driver supports nothing optional.
func (Base) Capabilities(context.Context) (Capabilities, error) {
	return Capabilities{FSIsolation: "none"}, nil
}

// ConfigSchema answers an empty schema: the task's config block must be
// empty.
func (Base) ConfigSchema(context.Context) (*Schema, error) {
	return &Schema{Fields: map[string]*Field{}}, nil
}

// Fingerprint sends one healthy fingerprint and closes the channel when ctx
// ends.
func (Base) Fingerprint(ctx context.Context) (<-chan *Fingerprint, error) {
	ch := make(chan *Fingerprint, 1)
	ch <- &Fingerprint{Healthy: true, Description: "healthy"}
	context.AfterFunc(ctx, func() { close(ch) })
	return ch, nil
}

// RecoverTask returns nil; see Base for why that is safe only for a driver
// whose tasks live inside its own process.
func (Base) RecoverTask(context.Context, *TaskHandle) error { return nil }

// DestroyTask returns nil: Base keeps nothing per task.
func (Base) DestroyTask(context.Context, string, bool) error { return nil }

// InspectTask returns ErrNotSupported.
func (Base) InspectTask(_ context.Context, taskID string) (*TaskStatus, error) {
	return nil, notSupported("inspecting task", taskID)
}

// TaskStats returns ErrNotSupported.
func (Base) TaskStats(_ context.Context, taskID string, _ time.Duration) (<-chan *TaskResourceUsage, error) {
	return nil, notSupported("task stats of", taskID)
}

// TaskEvents returns ErrNotSupported.
func (Base) TaskEvents(context.Context) (<-chan *TaskEvent, error) {
	return nil, fmt.Errorf("task events: %w", ErrNotSupported)
}

// SignalTask returns ErrNotSupported.
func (Base) SignalTask(_ context.Context, taskID string, _ string) error {
	return notSupported("signalling task", taskID)
}

func notSupported(what, taskID string) error {
	return fmt.Errorf("%s %s: %w", what, taskID, ErrNotSupported)
}
