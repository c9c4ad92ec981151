// Package exec is the exec task driver: a task is a plain process, with no
// isolation, in its own process group.
//
// What it guarantees:
//   - stdout and stderr are appended to the files the host names
//     (TaskConfig.StdoutPath/StderrPath) in the allocation directory;
//   - stopping a task signals the whole process group, waits up to the
//     timeout, then SIGKILLs the group; when the task's main process exits
//     the rest of its group is killed too, so nothing it spawned outlives it
//     (TestStopKillsTheWholeProcessGroup);
//   - a task is identified by PID plus start time (/proc/<pid>/stat field
//     22), so a PID the kernel reused for another process is never taken
//     for the task (TestRecoverRefusesAReusedPID);
//   - a start interrupted by a crash of the plugin (after the process
//     started, before its handle returned) ends adopted or destroyed, never
//     running twice or untracked: the process carries the task's ID and a
//     digest of the start in its environment (leftovers.go), a retried
//     start adopts it and DestroyTask by ID kills it
//     (TestAStartInterruptedByAPluginSIGKILLIsAdoptedOrDestroyed);
//   - a task that names no user runs as DefaultUser ("nobody") when the
//     driver is root, and a task naming root runs only when the agent
//     allows it (Options.AllowRoot): TestATaskRunsAsNobodyUnlessRootIsAllowed;
//   - a task's exit status survives a restart of the plugin: the task runs
//     under a status keeper, a /bin/sh that waits for it and writes its
//     status down (status.go), so a recovered task's exit is reported as it
//     happened (TestARecoveredTaskExitsWithItsOwnStatus).
//
// What it cannot know: the exit status of a task recovered after a plugin
// restart that ran without a keeper (no /bin/sh on the host, no allocation
// directory, a command its user cannot execute, or a keeper SIGKILLed from
// outside): it sees the exit (through a pidfd) but not the status, which is
// reported as ExitCode -1 with Err saying why (see docs/drivers.md). A
// process killed by a signal is reported as Signal n and ExitCode 128+n,
// the shell's convention.
package exec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hivelet/hivelet/plugins/internal/proc"
	"github.com/hivelet/hivelet/sdk/driver"
)

// Name is the driver's name in job files.
const Name = "exec"

// Version is reported by Info and as driver.exec.version.
const Version = "0.1.0"

const handleVersion = 1

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// Config is an exec task's config block.
type Config struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	WorkDir string            `json:"work_dir"`
}

// Schema is the exec driver's config schema.
func Schema() *driver.Schema {
	return &driver.Schema{Fields: map[string]*driver.Field{
		"command":  {Type: driver.TypeString, Required: true, Description: "program to run: an absolute path; a relative one is looked up in the task directory (local/app, an artifact's download) and then the allocation directory; a bare name in the task's local/ and then PATH"},
		"args":     {Type: driver.TypeStringList, Description: "arguments"},
		"env":      {Type: driver.TypeStringMap, Description: "environment, merged over the task's env (these win)"},
		"work_dir": {Type: driver.TypeString, Description: "working directory; default: the allocation directory"},
	}}
}

// resolveCommand finds a relative command where Nomad's executor does: in
// the task's directory (where artifacts and templates land: "local/app"),
// a bare name in the task's local/ before PATH. A relative path not found
// there stays relative to the working directory.
func resolveCommand(command string, cfg *driver.TaskConfig) string {
	if filepath.IsAbs(command) || cfg.AllocDir == "" || cfg.TaskName == "" {
		return command
	}
	taskDir := filepath.Join(cfg.AllocDir, cfg.TaskName)
	candidates := []string{filepath.Join(taskDir, command)}
	if !strings.Contains(command, "/") {
		candidates = []string{filepath.Join(taskDir, "local", command)}
	}
	for _, p := range candidates {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return command
}

// state is the handle's DriverState.
type state struct {
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
	// Status is the status keeper's file (status.go); empty: no keeper.
	Status string `json:"status,omitempty"`
}

type task struct {
	id         string
	cfg        *driver.TaskConfig // nil for a recovered task
	pid        int
	startTicks uint64
	startedAt  time.Time
	killSignal string
	// key is the start's digest (startKey); empty for a recovered task.
	key string
	// status is the file its status keeper writes (status.go); empty when
	// it runs without one.
	status string
	exit   driver.Exit // finished when the main process exited
}

// Driver is the exec driver. Use New or NewWithOptions.
type Driver struct {
	tasks  *driver.Tasks[*task]
	events driver.Events
	opts   Options
}

var _ driver.Driver = (*Driver)(nil)

// New returns an exec driver with no tasks and the default Options: a
// task that names no user runs as DefaultUser, root is refused.
func New() *Driver { return NewWithOptions(Options{}) }

// NewWithOptions returns an exec driver with no tasks.
func NewWithOptions(o Options) *Driver {
	return &Driver{tasks: driver.NewTasks[*task]("exec task"), opts: o}
}

// Info names the exec driver.
func (d *Driver) Info(context.Context) (driver.PluginInfo, error) {
	return driver.PluginInfo{Name: Name, Version: Version}, nil
}

// Capabilities: signals yes, no filesystem isolation.
func (d *Driver) Capabilities(context.Context) (driver.Capabilities, error) {
	return driver.Capabilities{SendSignals: true, Exec: true, FSIsolation: "none"}, nil
}

// ConfigSchema returns Schema().
func (d *Driver) ConfigSchema(context.Context) (*driver.Schema, error) { return Schema(), nil }

// Fingerprint reports the driver healthy once, then nothing until ctx ends.
func (d *Driver) Fingerprint(ctx context.Context) (<-chan *driver.Fingerprint, error) {
	ch := make(chan *driver.Fingerprint, 1)
	keeper := "none"
	if haveShell() {
		keeper = keeperShell
	}
	ch <- &driver.Fingerprint{Healthy: true, Description: "healthy", Attributes: map[string]string{"version": Version, "status_keeper": keeper}}
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

func openOutput(path string) (*os.File, error) {
	if path == "" {
		return os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
}

// StartTask starts the command in its own process group with its output
// appended to the task's stdout and stderr files.
func (d *Driver) StartTask(ctx context.Context, cfg *driver.TaskConfig) (*driver.TaskHandle, error) {
	if err := driver.ValidateConfig(Schema(), cfg.Config); err != nil {
		return nil, err
	}
	var c Config
	if err := driver.DecodeConfig(cfg.Config, &c); err != nil {
		return nil, err
	}
	if cfg.NetworkMode == "bridge" {
		return nil, fmt.Errorf("starting exec task %s: the exec driver runs tasks on the node's network; network mode \"bridge\" needs the docker driver", cfg.ID)
	}
	if err := refuseMounts(cfg.Mounts); err != nil {
		return nil, err
	}
	cmd := osexec.Command(resolveCommand(c.Command, cfg), c.Args...)
	cmd.Dir = c.WorkDir
	if cmd.Dir == "" {
		cmd.Dir = cfg.AllocDir
	}
	env := map[string]string{"PATH": os.Getenv("PATH")}
	for k, v := range cfg.Env {
		env[k] = v
	}
	for k, v := range c.Env {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cred, err := d.taskCredential(cfg.User)
	if err != nil {
		return nil, fmt.Errorf("starting exec task %s: %w", cfg.ID, err)
	}
	key := startKey(cmd, cred)
	if old, err := d.tasks.Get(cfg.ID); err == nil && !old.exit.Exited() {
		// The host asks again for a task this process runs: it lost the
		// answer. The same start gets the running task's handle.
		if old.key == key {
			return old.handle()
		}
		return nil, fmt.Errorf("starting exec task %s: a task with this ID is already running", cfg.ID)
	}
	if h, err := d.adoptOrClear(ctx, cfg, key, cred); err != nil || h != nil {
		return h, err
	}
	cmd.Env = append(cmd.Env, EnvTaskID+"="+cfg.ID, EnvStartKey+"="+key)
	if cred != nil && int(cred.Uid) != os.Geteuid() {
		if err := prepareDirs(cfg.AllocDir, cfg.TaskName, cred); err != nil {
			return nil, fmt.Errorf("starting exec task %s as uid %d: %w", cfg.ID, cred.Uid, err)
		}
	}
	cmd.SysProcAttr.Credential = cred
	status := ""
	if cmd.Err == nil && cfg.AllocDir != "" && haveShell() && runnableBy(cmd.Path, cmd.Dir, cred) {
		if p := statusPath(cfg.AllocDir, cfg.ID); prepareStatus(p, cred) {
			// The status keeper runs the command as its child ($0 is the
			// status file, "$@" the command and its arguments).
			status = p
			cmd.Args = append([]string{keeperShell, "-c", statusScript, p, cmd.Path}, cmd.Args[1:]...)
			cmd.Path = keeperShell
		}
	}
	stdout, err := openOutput(cfg.StdoutPath)
	if err != nil {
		return nil, fmt.Errorf("starting exec task %s: opening stdout: %w", cfg.ID, err)
	}
	defer stdout.Close()
	stderr, err := openOutput(cfg.StderrPath)
	if err != nil {
		return nil, fmt.Errorf("starting exec task %s: opening stderr: %w", cfg.ID, err)
	}
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		if status != "" {
			os.Remove(status) // no keeper ran
		}
		if cred != nil && errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("starting exec task %s as uid %d: it cannot reach its working directory %s or its command (every directory above them needs the search bit for it; docs/drivers.md, exec): %w", cfg.ID, cred.Uid, cmd.Dir, err)
		}
		return nil, fmt.Errorf("starting exec task %s: %w", cfg.ID, err)
	}
	pid := cmd.Process.Pid
	// Our child cannot be reaped before we Wait, so its stat is there even
	// if it already exited (as a zombie).
	st, err := proc.ReadStat(pid)
	if err != nil {
		_ = unix.Kill(-pid, unix.SIGKILL)
		_ = cmd.Wait()
		return nil, fmt.Errorf("starting exec task %s: %w", cfg.ID, err)
	}
	now := time.Now()
	t := &task{id: cfg.ID, cfg: cfg, pid: pid, startTicks: st.StartTicks, startedAt: now,
		killSignal: cfg.KillSignal, key: key, status: status}
	h, err := t.handle()
	if err != nil {
		_ = unix.Kill(-pid, unix.SIGKILL)
		_ = cmd.Wait()
		return nil, err
	}
	d.tasks.Put(cfg.ID, t)
	go func() {
		err := cmd.Wait()
		// Nothing the task spawned outlives it.
		_ = unix.Kill(-pid, unix.SIGKILL)
		if status != "" {
			os.Remove(status) // the keeper ended as the task did: its wait status says it
		}
		t.exit.Finish(exitResult(cmd.ProcessState, err))
		d.emit(t, "exited")
	}()
	d.emit(t, "started")
	return h, nil
}

// mainPID is the task's own process: its keeper's child when it has one
// (status.go), else the group leader.
func (t *task) mainPID() int {
	if t.status != "" && !t.exit.Exited() {
		if m := mainPID(t.pid); m > 0 {
			return m
		}
	}
	return t.pid
}

// handle is the task's handle, as StartTask returns it.
func (t *task) handle() (*driver.TaskHandle, error) {
	raw, err := json.Marshal(state{PID: t.pid, StartTicks: t.startTicks, Status: t.status})
	if err != nil {
		return nil, fmt.Errorf("encoding handle of exec task %s: %w", t.id, err)
	}
	return &driver.TaskHandle{Version: handleVersion, TaskID: t.id, Driver: Name, DriverState: raw, StartedAt: t.startedAt}, nil
}

// adoptOrClear deals with what an interrupted start of the task left
// running (see leftovers.go): the process of the same start, running as
// the task's user, is adopted and its handle returned; any other is killed
// with its group, and the caller starts the task (nil handle, nil error).
func (d *Driver) adoptOrClear(ctx context.Context, cfg *driver.TaskConfig, key string, cred *syscall.Credential) (*driver.TaskHandle, error) {
	left, err := leftovers(cfg.ID)
	if err != nil {
		return nil, fmt.Errorf("starting exec task %s: looking for what an interrupted start left: %w", cfg.ID, err)
	}
	uid := os.Geteuid()
	if cred != nil {
		uid = int(cred.Uid)
	}
	var adopt *leftover
	for k := range left {
		l := left[k]
		if adopt == nil && l.key == key && l.uid == uid {
			adopt = &left[k]
			continue
		}
		kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := killLeftover(kctx, l)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("starting exec task %s: replacing process %d left by an interrupted start with another config: %w", cfg.ID, l.pid, err)
		}
	}
	if adopt == nil {
		return nil, nil
	}
	t := &task{id: cfg.ID, cfg: cfg, pid: adopt.pid, startTicks: adopt.ticks, startedAt: startedAt(adopt.ticks),
		killSignal: cfg.KillSignal, key: key}
	if p := statusPath(cfg.AllocDir, cfg.ID); cfg.AllocDir != "" {
		if _, err := os.Stat(p); err == nil {
			t.status = p // started under its keeper, which created the file
		}
	}
	h, err := t.handle()
	if err != nil {
		return nil, err
	}
	if _, added := d.tasks.Add(cfg.ID, t, func(old *task) bool { return !old.exit.Exited() }); !added {
		return nil, fmt.Errorf("starting exec task %s: a task with this ID is already running", cfg.ID)
	}
	d.watchNonChild(t)
	d.emit(t, "adopted")
	return h, nil
}

// watchNonChild finishes a task that is not the driver's child (recovered
// or adopted) when its process exits, with the status its keeper wrote
// (status.go), or unknown without one.
func (d *Driver) watchNonChild(t *task) {
	go func() {
		_ = proc.WaitExit(context.Background(), t.pid, t.startTicks)
		_ = unix.Kill(-t.pid, unix.SIGKILL)
		res, ok := readStatus(t.status)
		if !ok {
			res = &driver.ExitResult{ExitCode: -1, Err: errUnknownExit}
		}
		if t.status != "" {
			os.Remove(t.status)
		}
		t.exit.Finish(res)
		d.emit(t, "exited")
	}()
}

func exitResult(ps *os.ProcessState, err error) *driver.ExitResult {
	if ps == nil {
		return &driver.ExitResult{ExitCode: -1, Err: fmt.Sprintf("waiting for the process: %v", err)}
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		sig := int(ws.Signal())
		return &driver.ExitResult{ExitCode: 128 + sig, Signal: sig}
	}
	return &driver.ExitResult{ExitCode: ps.ExitCode()}
}

// errUnknownExit is the Err of a recovered task's exit, whose status only
// its real parent (init, once the plugin restarted) could read.
const errUnknownExit = "exit status unknown: the task exited while not a child of the exec driver (it was recovered after a plugin restart) and no status keeper recorded it"

// RecoverTask takes back a task from its handle if its PID still belongs to
// the process started at the recorded tick (its exit is then read from its
// status keeper's file when it comes, or is unknown without one: see the
// package comment), or as already exited if it ended while the plugin was
// down and its keeper recorded how.
func (d *Driver) RecoverTask(_ context.Context, h *driver.TaskHandle) error {
	if h == nil || h.Driver != Name || h.Version != handleVersion {
		return fmt.Errorf("recovering exec task: not an exec handle of version %d", handleVersion)
	}
	var st state
	if err := json.Unmarshal(h.DriverState, &st); err != nil || st.PID <= 0 {
		return fmt.Errorf("recovering exec task %s: bad handle state %q", h.TaskID, h.DriverState)
	}
	if _, err := d.tasks.Get(h.TaskID); err == nil {
		return nil
	}
	t := &task{id: h.TaskID, pid: st.PID, startTicks: st.StartTicks, startedAt: h.StartedAt, status: st.Status}
	if !proc.Same(st.PID, st.StartTicks) {
		// Gone while no plugin watched it (the plugin was down when the
		// task ended, e.g. a stop's trap that finished during the
		// relaunch). Its keeper wrote how it ended: the task is taken
		// back as exited with that status, so a stop retried on the
		// relaunched plugin, a wait and an inspect see the exit instead
		// of an unknown task. The file is kept (a later relaunch reads it
		// again; it goes with the allocation directory). No group is
		// signalled: its ID may belong to another process by now.
		res, ok := readStatus(st.Status)
		if !ok {
			return fmt.Errorf("recovering exec task %s: pid %d is not the process started at tick %d: %w",
				h.TaskID, st.PID, st.StartTicks, driver.ErrTaskNotFound)
		}
		t.exit.Finish(res) // before it is listed: never seen running
		if _, added := d.tasks.Add(h.TaskID, t, nil); added {
			d.emit(t, "exited")
		}
		return nil
	}
	if _, added := d.tasks.Add(h.TaskID, t, nil); !added {
		return nil // a concurrent RecoverTask took it back
	}
	d.watchNonChild(t)
	return nil
}

// WaitTask yields the task's exit once it has exited.
func (d *Driver) WaitTask(ctx context.Context, id string) (<-chan *driver.ExitResult, error) {
	t, err := d.tasks.Get(id)
	if err != nil {
		return nil, err
	}
	return t.exit.WaitChan(ctx), nil
}

func parseSignal(name, def string) (unix.Signal, error) {
	if name == "" {
		name = def
	}
	if name == "" {
		name = "SIGTERM"
	}
	s := unix.SignalNum(name)
	if s == 0 {
		return 0, fmt.Errorf("unknown signal %q", name)
	}
	return s, nil
}

// signalGroup signals the task's process group, after checking (for a
// recovered task) that its PID is still the task's.
func (t *task) signalGroup(sig unix.Signal) error {
	if t.exit.Exited() {
		return nil
	}
	if t.cfg == nil && !proc.Same(t.pid, t.startTicks) {
		return nil
	}
	if err := unix.Kill(-t.pid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

// StopTask signals the task's process group, waits up to timeout, then
// SIGKILLs the group, and returns once the main process has exited.
func (d *Driver) StopTask(ctx context.Context, id string, timeout time.Duration, signal string) error {
	t, err := d.tasks.Get(id)
	if err != nil {
		return err
	}
	sig, err := parseSignal(signal, t.killSignal)
	if err != nil {
		return fmt.Errorf("stopping exec task %s: %w", id, err)
	}
	if err := t.signalGroup(sig); err != nil {
		return fmt.Errorf("stopping exec task %s: signalling group %d: %w", id, t.pid, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-t.exit.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopping exec task %s: %w", id, ctx.Err())
	case <-timer.C:
	}
	if err := t.signalGroup(unix.SIGKILL); err != nil {
		return fmt.Errorf("stopping exec task %s: killing group %d: %w", id, t.pid, err)
	}
	select {
	case <-t.exit.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopping exec task %s after SIGKILL: %w", id, ctx.Err())
	}
}

// DestroyTask forgets an exited task; force SIGKILLs a running one first.
// A task the driver does not track has what an interrupted start left
// running killed (force), or is refused (no force), or is ErrTaskNotFound
// when nothing carries its ID.
func (d *Driver) DestroyTask(ctx context.Context, id string, force bool) error {
	t, err := d.tasks.Get(id)
	if err != nil {
		return d.destroyUntracked(ctx, id, force, err)
	}
	if !t.exit.Exited() {
		if !force {
			return fmt.Errorf("destroying exec task %s: still running", id)
		}
		if err := t.signalGroup(unix.SIGKILL); err != nil {
			return fmt.Errorf("destroying exec task %s: %w", id, err)
		}
		select {
		case <-t.exit.Done():
		case <-ctx.Done():
			return fmt.Errorf("destroying exec task %s: %w", id, ctx.Err())
		}
	}
	d.tasks.Delete(id)
	return nil
}

// InspectTask reports the task's state, with its PID as attribute "pid".
func (d *Driver) InspectTask(_ context.Context, id string) (*driver.TaskStatus, error) {
	t, err := d.tasks.Get(id)
	if err != nil {
		return nil, err
	}
	s := &driver.TaskStatus{ID: id, State: driver.TaskStateRunning, StartedAt: t.startedAt,
		Attributes: map[string]string{"pid": strconv.Itoa(t.mainPID())}}
	if t.status != "" {
		s.Attributes["keeper_pid"] = strconv.Itoa(t.pid)
	}
	if t.cfg != nil {
		s.Name = t.cfg.TaskName
	}
	if r := t.exit.Result(); r != nil {
		s.State, s.CompletedAt, s.ExitResult = driver.TaskStateExited, t.exit.ExitedAt(), r
	}
	return s, nil
}

// usage sums the CPU ticks and resident memory of the task's process group.
func (t *task) usage() (ticks uint64, rss uint64) {
	members, err := proc.Group(t.pid)
	if err != nil {
		return 0, 0
	}
	for _, m := range members {
		ticks += m.UTime + m.STime
		if m.RSSPages > 0 {
			rss += uint64(m.RSSPages) * uint64(os.Getpagesize())
		}
	}
	return ticks, rss
}

// TaskStats samples CPU and resident memory of the task's process group
// from /proc every interval.
func (d *Driver) TaskStats(ctx context.Context, id string, interval time.Duration) (<-chan *driver.TaskResourceUsage, error) {
	t, err := d.tasks.Get(id)
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
		prevTicks, _ := t.usage()
		prevAt := time.Now()
		for {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			case <-t.exit.Done():
				return
			}
			ticks, rss := t.usage()
			now := time.Now()
			var cpu float64
			if el := now.Sub(prevAt).Seconds(); el > 0 && ticks >= prevTicks {
				cpu = float64(ticks-prevTicks) / clockTicks / el * 100
			}
			prevTicks, prevAt = ticks, now
			select {
			case ch <- &driver.TaskResourceUsage{Timestamp: now, CPUPercent: cpu, MemoryBytes: rss}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// TaskEvents streams "started" and "exited" events of all tasks; a slow
// reader loses events rather than stalling tasks.
func (d *Driver) TaskEvents(ctx context.Context) (<-chan *driver.TaskEvent, error) {
	return d.events.Subscribe(ctx), nil
}

func (d *Driver) emit(t *task, msg string) {
	e := &driver.TaskEvent{TaskID: t.id, Timestamp: time.Now(), Message: msg,
		Annotations: map[string]string{"pid": strconv.Itoa(t.mainPID())}}
	if t.cfg != nil {
		e.AllocID, e.TaskName = t.cfg.AllocID, t.cfg.TaskName
	}
	d.events.Publish(e)
}

// SignalTask sends a signal (by name, e.g. "SIGHUP") to the task's process
// group.
func (d *Driver) SignalTask(_ context.Context, id string, signal string) error {
	t, err := d.tasks.Get(id)
	if err != nil {
		return err
	}
	sig, err := parseSignal(signal, "")
	if err != nil {
		return fmt.Errorf("signalling exec task %s: %w", id, err)
	}
	if t.exit.Exited() {
		return fmt.Errorf("signalling exec task %s: it has exited", id)
	}
	if err := t.signalGroup(sig); err != nil {
		return fmt.Errorf("signalling exec task %s: %w", id, err)
	}
	return nil
}

// destroyUntracked kills the process groups an interrupted start of task
// id left running; notFound is returned when there are none.
func (d *Driver) destroyUntracked(ctx context.Context, id string, force bool, notFound error) error {
	left, err := leftovers(id)
	if err != nil {
		return fmt.Errorf("destroying exec task %s: looking for what an interrupted start left: %w", id, err)
	}
	if len(left) == 0 {
		return notFound
	}
	if !force {
		return fmt.Errorf("destroying exec task %s: process %d left by an interrupted start is running; force to kill it", id, left[0].pid)
	}
	for _, l := range left {
		if err := killLeftover(ctx, l); err != nil {
			return fmt.Errorf("destroying exec task %s: %w", id, err)
		}
	}
	return nil
}

// refuseMounts refuses a task with host volume mounts: the exec driver
// runs a task as a plain process in the node's own mount namespace, with
// no isolation, so it cannot mount a directory at a path of the task's
// (nor make it read-only for the task alone). The task can read the host
// volume's own path directly; the error names it.
func refuseMounts(ms []driver.Mount) error {
	if len(ms) == 0 {
		return nil
	}
	var fields []*driver.FieldError
	for i, m := range ms {
		fields = append(fields, &driver.FieldError{Path: fmt.Sprintf("volume_mount[%d]", i),
			Message: fmt.Sprintf("the exec driver runs tasks without a mount namespace of their own, so it cannot mount %s at %s: drop the volume_mount and read %s where it is, or use the docker driver", m.HostPath, m.TaskPath, m.HostPath)})
	}
	return &driver.ConfigError{Fields: fields}
}
