// Package driver is the public contract between the hivelet agent and a task
// driver: the Driver interface a driver author implements, the values that
// cross the plugin boundary, and (in this package's other files) Serve, which
// turns an implementation into a go-plugin gRPC plugin binary.
//
// It imports nothing from the daemon (TestTheSDKsImportNothingOfTheDaemon
// checks every package under sdk/). Everything that crosses the boundary is
// a plain, serialisable value; a TaskHandle in particular must be enough to
// find the task again after the agent or the plugin process restarted.
// Every value crosses the gRPC boundary intact and ErrTaskNotFound stays
// recognisable with errors.Is on the host side
// (TestEveryCallCrossesTheBoundaryIntact,
// TestUnknownTaskIsErrTaskNotFoundOnTheHostSide).
//
// It also offers, for driver authors, the bookkeeping every driver repeats
// (tasks.go): Tasks, a table of tasks by ID whose Get of an unknown ID wraps
// ErrTaskNotFound, and Exit, a task's exit latch that is finished once and
// wakes every waiter (TestFirstFinishWinsAndEveryWaiterWakes); Events, the
// fan-out behind TaskEvents (TestEventsFanOut); and Base (base.go), which
// answers the optional methods so that a minimal driver writes Info,
// StartTask, WaitTask and StopTask
// (TestBaseAnswersEveryOptionalMethodOverTheBoundary).
//
// On the host side, the client carries every wait of a plugin connection on
// one WaitTasks stream (waitmux.go): a wait is a map entry, not a stream
// and goroutines, and each wait gets exactly its task's end
// (TestManyWaitsRideOneStreamAndEachGetsItsOwnTasksResult); a plugin built
// before WaitTasks gets a WaitTask stream per wait
// (TestAPluginWithoutWaitTasksGetsAStreamPerWait). WaitFunc takes a
// driver's function wait (WaitNotifier) when it has one and its WaitTask
// channel otherwise
// (TestWaitFuncRunsTheFunctionOnceWithTheResultWhicheverWaitTheDriverHas).
//
// The wire protocol is version 1 (ProtocolVersion): within it messages and
// calls are only added, which TestTheReleasedProtocolIsUnchanged in
// sdk/driver/proto enforces; docs/drivers.md, "Protocol versions", says how
// a version 2 would be negotiated.
package driver

import (
	"context"
	"time"
)

// Driver runs tasks. Every method may be called concurrently. Methods that
// take a task ID must return ErrTaskNotFound (wrapped is fine) for a task the
// driver does not know. Methods returning a channel must stop sending and
// close it when ctx ends.
type Driver interface {
	// Info names the driver and its version.
	Info(ctx context.Context) (PluginInfo, error)
	// Capabilities says what the driver supports. The host asks once per
	// plugin process and keeps the answer until that process ends: it must
	// not change while the process runs.
	Capabilities(ctx context.Context) (Capabilities, error)
	// ConfigSchema describes the task `config` block the driver accepts; the
	// host validates a task against it before calling StartTask. Like
	// Capabilities, it is asked once per plugin process, and the host
	// treats the returned Schema as read-only.
	ConfigSchema(ctx context.Context) (*Schema, error)
	// Fingerprint streams the driver's health and attributes: one value at
	// once, then one whenever something changes, until ctx ends.
	Fingerprint(ctx context.Context) (<-chan *Fingerprint, error)
	// StartTask starts a task and returns a handle the host persists.
	StartTask(ctx context.Context, cfg *TaskConfig) (*TaskHandle, error)
	// RecoverTask reattaches to a task from a persisted handle after the host
	// or the plugin restarted. It must not start the task again. A task that
	// is gone is reported with ErrTaskNotFound. Recovering a task the driver
	// already tracks (the host restarted, the plugin did not) is a no-op that
	// returns nil.
	RecoverTask(ctx context.Context, h *TaskHandle) error
	// WaitTask returns a channel that yields the task's exit result once and
	// is then closed. A channel closed without a value means the wait ended
	// without observing the exit (ctx ended, or over the plugin boundary the
	// connection to the plugin was lost): call WaitTask again.
	WaitTask(ctx context.Context, taskID string) (<-chan *ExitResult, error)
	// StopTask sends signal (the driver's default when empty), waits up to
	// timeout, then kills the task.
	StopTask(ctx context.Context, taskID string, timeout time.Duration, signal string) error
	// DestroyTask removes the task and its resources; force kills it first if
	// it is still running. The host also calls it, with force, for a task
	// whose StartTask failed in a way that may have started it anyway (the
	// plugin died before answering): a driver that can find what that start
	// left removes it, else it answers ErrTaskNotFound.
	DestroyTask(ctx context.Context, taskID string, force bool) error
	// InspectTask reports a task's current status.
	InspectTask(ctx context.Context, taskID string) (*TaskStatus, error)
	// TaskStats streams resource usage every interval until ctx ends.
	TaskStats(ctx context.Context, taskID string, interval time.Duration) (<-chan *TaskResourceUsage, error)
	// TaskEvents streams events of all tasks (image pulls, OOM kills...).
	TaskEvents(ctx context.Context) (<-chan *TaskEvent, error)
	// SignalTask delivers a signal such as "SIGHUP" to a running task.
	SignalTask(ctx context.Context, taskID string, signal string) error
}

// WaitNotifier is the host side's wait without a channel: the client of a
// driver plugin has it, a driver author never implements it. WaitTaskFunc
// opens the wait as WaitTask does (a refusal is its error) and runs fn
// once, when the accepted wait ends: with the result, or with nil when the
// wait broke first (ctx ended, plugin gone, the driver closed it). fn must
// not block. A caller that acts on a wait's end (the plugin manager opens
// it again after a relaunch) needs no goroutine per wait with it.
type WaitNotifier interface {
	WaitTaskFunc(ctx context.Context, taskID string, fn func(*ExitResult)) error
}

// WaitFunc opens a wait for task taskID on d and runs fn once when it ends,
// as WaitNotifier's WaitTaskFunc does: through d's own WaitTaskFunc when d
// is a WaitNotifier (nothing runs while the task does), else through its
// WaitTask with a goroutine that receives the result and runs fn. A
// wrapper of a Driver that embeds another hides the inner one's
// WaitTaskFunc unless it forwards it.
func WaitFunc(ctx context.Context, d Driver, taskID string, fn func(*ExitResult)) error {
	if wn, ok := d.(WaitNotifier); ok {
		return wn.WaitTaskFunc(ctx, taskID, fn)
	}
	ch, err := d.WaitTask(ctx, taskID)
	if err != nil {
		return err
	}
	go func() { fn(<-ch) }()
	return nil
}

// PluginInfo names a driver.
type PluginInfo struct {
	Name    string
	Version string
}

// Capabilities says what a driver supports.
type Capabilities struct {
	SendSignals bool
	Exec        bool
	// FSIsolation is "none", "chroot" or "image".
	FSIsolation string
	// Mounts says the driver mounts TaskConfig.Mounts into its tasks. The
	// host starts a task with mounts (host volumes) only on a driver that
	// says so, so a driver written before mounts existed never runs one
	// without its volumes.
	Mounts bool
}

// FieldType is the type of a config field in a Schema.
type FieldType string

const (
	TypeString     FieldType = "string"
	TypeNumber     FieldType = "number"
	TypeBool       FieldType = "bool"
	TypeStringList FieldType = "list(string)"
	TypeStringMap  FieldType = "map(string)"
	// TypeObjectList is a list of objects each validated by Field.Elem.
	TypeObjectList FieldType = "list(object)"
)

// Schema describes a driver's task config block.
type Schema struct {
	Fields map[string]*Field
}

// Field describes one config key.
type Field struct {
	Type        FieldType
	Required    bool
	Description string
	// Elem is the schema of each element of a TypeObjectList field.
	Elem *Schema
}

// Fingerprint is a driver's health and attributes on this node.
type Fingerprint struct {
	Healthy     bool
	Description string
	// Attributes are published on the node as "driver.<name>.<key>".
	Attributes map[string]string
}

// TaskConfig is everything a driver needs to start one task of an
// allocation.
type TaskConfig struct {
	// ID identifies the task across the plugin boundary: "<alloc_id>/<task>".
	ID        string
	AllocID   string
	TaskName  string
	JobID     string
	Group     string
	NodeID    string
	Config    map[string]any
	Env       map[string]string
	User      string
	Resources Resources
	// AllocDir is the allocation's directory on the host; StdoutPath and
	// StderrPath are the files the task's output goes to.
	AllocDir   string
	StdoutPath string
	StderrPath string
	KillSignal string
	// NetworkMode is the group's network mode: "" or "host", the task
	// publishes the ports its config names (the allocation's ports are in
	// Env: NOMAD_HOST_PORT_<label>, NOMAD_PORT_<label>, NOMAD_HOST_IP_<label>,
	// a label's '-' written '_');
	// "bridge", the task gets a network of its own with every port of the
	// allocation mapped into it, from the node's port to the port in the
	// task. A driver that cannot give a task its own network refuses a
	// bridge task at start.
	NetworkMode string
	// Mounts are host directories to mount into the task: the group's
	// host volumes, by the task's volume_mount blocks, each already
	// checked against the node's configuration. A driver that cannot
	// mount refuses a task that has any, saying so.
	Mounts []Mount
}

// Mount is one host directory mounted into a task.
type Mount struct {
	// HostPath is the directory on the node; TaskPath is where the task
	// sees it.
	HostPath string
	TaskPath string
	ReadOnly bool
	// PropagationMode is "" or "private", "host-to-task" (rslave) or
	// "bidirectional" (rshared), as Nomad's volume_mount writes it.
	PropagationMode string
}

// Resources are the task's limits.
type Resources struct {
	CPU      int // MHz
	MemoryMB int
}

// TaskHandle is the serialisable record of a started task. The host
// persists it and hands it back to RecoverTask.
type TaskHandle struct {
	// Version of the handle format, owned by the driver.
	Version int
	TaskID  string
	Driver  string
	// DriverState is opaque driver data (container ID, PID and start time...).
	DriverState []byte
	StartedAt   time.Time
}

// ExitResult is how a task ended.
type ExitResult struct {
	ExitCode  int
	Signal    int
	OOMKilled bool
	// Err is set when the driver could not observe the exit.
	Err string
}

// Successful reports a clean exit.
func (r *ExitResult) Successful() bool {
	return r != nil && r.ExitCode == 0 && r.Signal == 0 && !r.OOMKilled && r.Err == ""
}

// TaskState is a task's coarse state.
type TaskState string

const (
	TaskStateUnknown TaskState = "unknown"
	TaskStateRunning TaskState = "running"
	TaskStateExited  TaskState = "exited"
)

// TaskStatus is what InspectTask reports.
type TaskStatus struct {
	ID          string
	Name        string
	State       TaskState
	StartedAt   time.Time
	CompletedAt time.Time
	ExitResult  *ExitResult
	Attributes  map[string]string
}

// TaskResourceUsage is one stats sample.
type TaskResourceUsage struct {
	Timestamp   time.Time
	CPUPercent  float64
	MemoryBytes uint64
}

// TaskEvent is something that happened to a task, for the task's event log.
type TaskEvent struct {
	TaskID      string
	AllocID     string
	TaskName    string
	Timestamp   time.Time
	Message     string
	Annotations map[string]string
}
