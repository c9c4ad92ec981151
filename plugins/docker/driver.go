// Package docker is hivelet's built-in `docker` task driver: it runs each
// task as one container through runtime/docker (the only package that talks
// to the engine), and is served out of process like any third-party driver.
//
// What it owns and its invariants:
//   - Ownership: every container it creates carries the labels
//     hivelet.alloc_id, hivelet.task, hivelet.job and hivelet.node_id and is
//     named hivelet-<task>-<alloc_id>. It never stops, removes, signals or
//     adopts a container whose labels do not name the task, even one with
//     the same name (TestAForeignContainerWithOurNameIsNeverTouched).
//   - Recovery reattaches to the container named in the handle (or, if that
//     ID is gone, the one labelled for the task) and never starts it again:
//     same container ID, same StartedAt (TestRecoveryAfterTheHostRestarts...).
//   - A start interrupted by a crash ends recovered or destroyed, never
//     running untracked (orphans.go): a retried StartTask with the same
//     config adopts the running container, one with another config replaces
//     it, and DestroyTask without a tracked task removes the containers
//     labelled with its ID
//     (TestAStartInterruptedByAPluginSIGKILLIsAdoptedOrDestroyed).
//   - A start the engine cannot serve because it is away (restarting) is
//     retried until it is back, up to Config.EngineWait, instead of failing
//     and using up the task's restart attempts; what a failed attempt left
//     is removed by the next
//     (TestAStartWhileTheEngineIsAwayWaitsForItWithinEngineWait).
//   - The stop signal is the task's kill signal, set when the container is
//     created: the engine here speaks API 1.41, whose stop call takes no
//     signal.
//   - Images: a local image is used as is unless force_pull; a pull is
//     bounded by image_pull_timeout and reports progress as task events; a
//     pull that cannot reach a registry fails the start with an event naming
//     the image (TestAMissingImageFailsTheStartQuicklyWithAClearEvent).
//   - Logs: the container's stdout and stderr are copied to the task's
//     StdoutPath and StderrPath, rotated by size; a streamer restarted after
//     recovery resumes after the last entry it recorded (runtime/docker's
//     LogPosition), so nothing is copied twice.
//
// Its task config, ownership rules and limits are specified in
// docs/docker-driver.md.
package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hivelet/hivelet/internal/wait"
	engine "github.com/hivelet/hivelet/runtime/docker"
	"github.com/hivelet/hivelet/sdk/driver"
)

// Name is the driver's name in job files.
const Name = "docker"

// Version is the driver's version, reported by Info.
const Version = "0.1.0"

// handleVersion is the version of DriverState's format.
const handleVersion = 1

// Config is the driver's configuration from the agent.
type Config struct {
	// Engine says how to reach the Docker engine.
	Engine engine.Options
	// AllowPrivileged lets tasks ask for privileged containers.
	AllowPrivileged bool
	// AllowCaps are the capabilities a task's cap_add may name (lower
	// case, no CAP_ prefix; "all" allows any). Nil: DefaultAllowCaps.
	AllowCaps []string
	// LogMaxBytes and LogMaxFiles rotate each task's stdout and stderr
	// files: at most LogMaxFiles old files of LogMaxBytes each are kept.
	// Defaults: 10 MiB, 5.
	LogMaxBytes int64
	LogMaxFiles int
	// PullTimeout bounds an image pull unless the task sets
	// image_pull_timeout. Default 5 minutes.
	PullTimeout time.Duration
	// FingerprintInterval is how often the engine's health is checked.
	// Default 15 seconds.
	FingerprintInterval time.Duration
	// EngineWait is how long a start the engine cannot serve (it is
	// restarting) is retried before it fails. Default 60 seconds.
	EngineWait time.Duration
	// Logger receives the driver's own logs; default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.LogMaxBytes <= 0 {
		c.LogMaxBytes = 10 << 20
	}
	if c.LogMaxFiles <= 0 {
		c.LogMaxFiles = 5
	}
	if c.PullTimeout <= 0 {
		c.PullTimeout = 5 * time.Minute
	}
	if c.FingerprintInterval <= 0 {
		c.FingerprintInterval = 15 * time.Second
	}
	if c.EngineWait <= 0 {
		c.EngineWait = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Driver is the docker driver. Create it with New; Close releases it
// (leaving its containers running: they are recovered from their handles).
type Driver struct {
	cfg    Config
	engine *engine.Client
	log    *slog.Logger

	// life bounds the goroutines that outlive a call (waiters, log
	// streamers); Close ends it.
	life   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	tasks  *driver.Tasks[*task]
	events driver.Events // closed by Close
}

// task is one container the driver tracks.
type task struct {
	id          string
	allocID     string
	name        string
	containerID string
	stopSignal  string
	state       handleState
	startedAt   time.Time

	// stopping is set once StopTask was asked for the task: a SIGKILL exit
	// (137) is then ours, not the OOM killer's.
	stopping atomic.Bool

	// exit is finished once the container's exit was read.
	exit driver.Exit
	// stopLogs ends the log streamer; logsDone is closed when it returned.
	stopLogs context.CancelFunc
	logsDone chan struct{}
}

// lateOOMWait is how long an exit by SIGKILL that the driver did not ask for
// waits for the engine to record an OOM kill.
const lateOOMWait = time.Second

// lateOOM reports whether the engine records an OOM kill of a container that
// exited by SIGKILL, looking again for up to lateOOMWait. On cgroup v2 the
// engine can process the container's exit before its OOM event and set
// State.OOMKilled only afterwards (reported upstream, moby/moby#38352,
// hashicorp/nomad#13119). No wait helps a kill in the moments after start:
// the containerd shim registers the cgroup for OOM events only once its start
// call returned, and such a kill is never recorded (docs/docker-driver.md).
func (d *Driver) lateOOM(containerID string) bool {
	deadline := time.Now().Add(lateOOMWait)
	for time.Now().Before(deadline) {
		if !wait.For(d.life, 100*time.Millisecond) {
			return false
		}
		ctx, cancel := context.WithTimeout(d.life, 5*time.Second)
		st, err := d.engine.InspectContainer(ctx, containerID)
		cancel()
		if err != nil {
			return false
		}
		if st.OOMKilled {
			return true
		}
	}
	return false
}

// handleState is the driver's part of a task handle.
type handleState struct {
	ContainerID   string `json:"container_id"`
	ContainerName string `json:"container_name"`
	Image         string `json:"image"`
	AllocID       string `json:"alloc_id"`
	Task          string `json:"task"`
	StopSignal    string `json:"stop_signal,omitempty"`
	StdoutPath    string `json:"stdout_path,omitempty"`
	StderrPath    string `json:"stderr_path,omitempty"`
}

// New returns a driver. It does not contact the engine: Fingerprint reports
// whether it is reachable.
func New(cfg Config) (*Driver, error) {
	cfg = cfg.withDefaults()
	c, err := engine.New(cfg.Engine)
	if err != nil {
		return nil, err
	}
	life, cancel := context.WithCancel(context.Background())
	return &Driver{
		cfg:    cfg,
		engine: c,
		log:    cfg.Logger.With("driver", Name),
		life:   life,
		cancel: cancel,
		tasks:  driver.NewTasks[*task]("task"),
	}, nil
}

// Close stops the driver's background work and closes the engine client.
// Containers keep running.
func (d *Driver) Close() error {
	d.cancel()
	d.wg.Wait()
	d.events.Close()
	return d.engine.Close()
}

var _ driver.Driver = (*Driver)(nil)

// Info names the driver.
func (d *Driver) Info(context.Context) (driver.PluginInfo, error) {
	return driver.PluginInfo{Name: Name, Version: Version}, nil
}

// Capabilities: signals yes, exec no, the image is the filesystem.
func (d *Driver) Capabilities(context.Context) (driver.Capabilities, error) {
	return driver.Capabilities{SendSignals: true, Exec: true, FSIsolation: "image", Mounts: true}, nil
}

// ConfigSchema returns Schema().
func (d *Driver) ConfigSchema(context.Context) (*driver.Schema, error) { return Schema(), nil }

// Fingerprint reports the engine's health and attributes now and whenever
// they change (checked every FingerprintInterval).
func (d *Driver) Fingerprint(ctx context.Context) (<-chan *driver.Fingerprint, error) {
	out := make(chan *driver.Fingerprint, 1)
	go func() {
		defer close(out)
		var last *driver.Fingerprint
		t := time.NewTicker(d.cfg.FingerprintInterval)
		defer t.Stop()
		for {
			fp := d.fingerprint(ctx)
			if last == nil || fp.Healthy != last.Healthy || fp.Description != last.Description || !maps.Equal(fp.Attributes, last.Attributes) {
				select {
				case out <- fp:
				case <-ctx.Done():
					return
				}
				last = fp
			}
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (d *Driver) fingerprint(ctx context.Context) *driver.Fingerprint {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := d.engine.Info(ctx)
	if err != nil {
		return &driver.Fingerprint{Healthy: false, Description: "docker engine unreachable: " + err.Error(), Attributes: map[string]string{}}
	}
	return &driver.Fingerprint{
		Healthy:     true,
		Description: "docker engine " + info.Version + " reachable",
		Attributes: map[string]string{
			"version":        info.Version,
			"api_version":    info.APIVersion,
			"runtime":        info.DefaultRuntime,
			"runtimes":       strings.Join(info.Runtimes, ","),
			"os":             info.OS,
			"arch":           info.Arch,
			"cgroup_version": info.CgroupVersion,
			"storage_driver": info.StorageDriver,
			"privileged":     fmt.Sprint(d.cfg.AllowPrivileged),
		},
	}
}

// StartTask pulls the image if needed, creates and starts the container,
// and starts copying its logs.
//
// A start the engine cannot serve because it is away (engine.Unreachable,
// or a server error followed by the engine no longer answering: what a
// shutting-down engine does) is tried again, with backoff, for up to
// Config.EngineWait: an engine restart without live-restore stops the
// task's container, and the host's restart of it would otherwise fail
// while the engine is away and use up the task's restart attempts
// (TestAStartWhileTheEngineIsAwayWaitsForItWithinEngineWait). Each retry
// first removes what the failed attempt left (adoptOrClear). A failed pull
// and a server error from an engine that keeps answering (a host port
// taken) are not retried.
func (d *Driver) StartTask(ctx context.Context, tc *driver.TaskConfig) (*driver.TaskHandle, error) {
	h, err := d.startTask(ctx, tc)
	if err == nil || !d.engineAway(ctx, err) {
		return h, err
	}
	d.log.Warn("the docker engine is away: retrying the start until it is back", "alloc_id", tc.AllocID, "task", tc.TaskName, "retry_for", d.cfg.EngineWait, "err", err)
	d.emit(tc.ID, tc.AllocID, tc.TaskName, fmt.Sprintf("Docker engine unavailable; retrying the start for up to %s: %v", d.cfg.EngineWait, err), map[string]string{"engine_unavailable": "true"})
	deadline := time.Now().Add(d.cfg.EngineWait)
	backoff := 250 * time.Millisecond
	for time.Now().Add(backoff).Before(deadline) {
		if !wait.For(ctx, backoff) {
			return nil, fmt.Errorf("%w (while the docker engine was away: %v)", ctx.Err(), err)
		}
		backoff = min(2*backoff, 2*time.Second)
		if h, err = d.startTask(ctx, tc); err == nil {
			d.log.Info("the docker engine is back: the start went through", "alloc_id", tc.AllocID, "task", tc.TaskName)
			return h, nil
		}
		if !d.engineAway(ctx, err) {
			break
		}
	}
	return nil, err
}

// engineGoneWithin is how long a server error is given to turn out to be
// the engine shutting down (it stops answering) rather than the start's
// own failure.
const engineGoneWithin = 2 * time.Second

// engineAway reports whether a start failed because the engine is away,
// not because of the task, a pull or the caller's context.
func (d *Driver) engineAway(ctx context.Context, err error) bool {
	var pe *pullError
	if errors.As(err, &pe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if engine.Unreachable(err) {
		return true
	}
	if !engine.ServerError(err) {
		return false
	}
	deadline := time.Now().Add(engineGoneWithin)
	for time.Now().Before(deadline) {
		ictx, cancel := context.WithTimeout(ctx, time.Second)
		_, ierr := d.engine.Info(ictx)
		cancel()
		if engine.Unreachable(ierr) {
			return true
		}
		if !wait.For(ctx, 100*time.Millisecond) {
			return false
		}
	}
	return false
}

// pullError is a failed pull: a registry's answer, not the engine's
// availability.
type pullError struct{ err error }

func (e *pullError) Error() string { return e.err.Error() }
func (e *pullError) Unwrap() error { return e.err }

func (d *Driver) startTask(ctx context.Context, tc *driver.TaskConfig) (*driver.TaskHandle, error) {
	p, err := makePlan(tc, planOptions{
		allowPrivileged: d.cfg.AllowPrivileged,
		allowCaps:       d.cfg.AllowCaps,
		pullTimeout:     d.cfg.PullTimeout,
		engineLogSize:   "10m",
		engineLogFiles:  3,
	})
	if err != nil {
		return nil, fmt.Errorf("starting task %s: %w", tc.ID, err)
	}
	log := d.log.With("alloc_id", tc.AllocID, "task", tc.TaskName, "job", tc.JobID)
	stampSpec(&p.spec, tc.ID)
	if t, err := d.tasks.Get(tc.ID); err == nil && !t.exit.Exited() {
		// The host asks again for a task this process runs: it lost the
		// answer (a timeout, its own crash before it stored the handle).
		// The same config gets the running task's handle; another is refused.
		if h, ok := d.sameStart(ctx, t, p.spec); ok {
			log.Warn("start of a task already running with this config: answering with its handle", "container_id", short(t.containerID))
			return h, nil
		}
		return nil, fmt.Errorf("starting task %s: it is already running in container %s with another config; stop it first", tc.ID, short(t.containerID))
	}

	hs := handleState{
		ContainerName: p.spec.Name,
		Image:         p.spec.Image,
		AllocID:       tc.AllocID,
		Task:          tc.TaskName,
		StopSignal:    p.spec.StopSignal,
		StdoutPath:    tc.StdoutPath,
		StderrPath:    tc.StderrPath,
	}
	left, err := d.adoptOrClear(ctx, tc, p.spec)
	if err != nil {
		return nil, fmt.Errorf("starting task %s: %w", tc.ID, err)
	}
	if left != nil {
		// The container of a start whose handle was lost, with this config:
		// adopt it rather than run the task twice. Its log position file,
		// if the lost start wrote one, is its own: the copy resumes there.
		hs.ContainerID = left.ID
		h, err := d.handle(tc.ID, hs, left.StartedAt)
		if err != nil {
			return nil, fmt.Errorf("starting task %s: %w", tc.ID, err)
		}
		log.Warn("adopted the running container of an interrupted start", "container_id", short(left.ID))
		d.emit(tc.ID, tc.AllocID, tc.TaskName, "Adopted container "+short(left.ID)+" left running by an interrupted start", map[string]string{"container_id": left.ID})
		return h, nil
	}
	if err := d.ensureImage(ctx, tc, p); err != nil {
		return nil, fmt.Errorf("starting task %s: %w", tc.ID, err)
	}
	id, err := d.engine.CreateContainer(ctx, p.spec)
	if err != nil {
		d.emit(tc.ID, tc.AllocID, tc.TaskName, "Failed to create container: "+err.Error(), nil)
		return nil, fmt.Errorf("starting task %s: %w", tc.ID, err)
	}
	// A start that fails leaves nothing behind: the caller gets no handle,
	// so nothing could ever stop or recover a container left running.
	abandon := func(err error) (*driver.TaskHandle, error) {
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_ = d.engine.RemoveContainer(rmCtx, id, true)
		cancel()
		d.emit(tc.ID, tc.AllocID, tc.TaskName, "Failed to start container: "+err.Error(), nil)
		return nil, fmt.Errorf("starting task %s: %w", tc.ID, err)
	}
	if err := d.engine.StartContainer(ctx, id); err != nil {
		return abandon(err)
	}
	st, err := d.engine.InspectContainer(ctx, id)
	if err != nil {
		return abandon(err)
	}
	hs.ContainerID = id
	// A new container: forget where a previous container's log stopped.
	if pp := positionPath(hs); pp != "" {
		_ = os.Remove(pp)
	}
	h, err := d.handle(tc.ID, hs, st.StartedAt)
	if err != nil {
		return abandon(err)
	}
	log.Info("started container", "container_id", short(id), "image", p.spec.Image)
	d.emit(tc.ID, tc.AllocID, tc.TaskName, "Started container "+short(id), map[string]string{"container_id": id})
	return h, nil
}

// handle encodes the task's handle and starts tracking it.
func (d *Driver) handle(taskID string, hs handleState, startedAt time.Time) (*driver.TaskHandle, error) {
	h, err := encodeHandle(taskID, hs, startedAt)
	if err != nil {
		return nil, err
	}
	d.track(taskID, hs, startedAt)
	return h, nil
}

func encodeHandle(taskID string, hs handleState, startedAt time.Time) (*driver.TaskHandle, error) {
	state, err := json.Marshal(hs)
	if err != nil {
		return nil, fmt.Errorf("encoding handle: %w", err)
	}
	return &driver.TaskHandle{
		Version:     handleVersion,
		TaskID:      taskID,
		Driver:      Name,
		DriverState: state,
		StartedAt:   startedAt,
	}, nil
}

// ensureImage uses the local image or pulls it, reporting progress.
func (d *Driver) ensureImage(ctx context.Context, tc *driver.TaskConfig, p *plan) error {
	ref := p.spec.Image
	if !p.forcePull {
		ok, err := d.engine.ImageExists(ctx, ref)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
	}
	d.emit(tc.ID, tc.AllocID, tc.TaskName, "Pulling image "+ref, map[string]string{"image": ref})
	pctx, cancel := context.WithTimeout(ctx, p.pullTimeout)
	defer cancel()
	var lastReport time.Time
	progress := func(pr engine.PullProgress) {
		// Layer completions always; byte progress at most every 2 seconds.
		done := pr.Status == "Pull complete" || pr.Status == "Already exists"
		if !done && time.Since(lastReport) < 2*time.Second {
			return
		}
		lastReport = time.Now()
		msg := "Pulling image " + ref + ": " + pr.Status
		if pr.Layer != "" {
			msg += " " + pr.Layer
		}
		if pr.Total > 0 {
			msg += fmt.Sprintf(" (%d/%d bytes)", pr.Current, pr.Total)
		}
		d.emit(tc.ID, tc.AllocID, tc.TaskName, msg, map[string]string{"image": ref})
	}
	start := time.Now()
	if err := d.engine.PullImage(pctx, ref, p.auth, progress); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("image pull timed out after %s: %w", p.pullTimeout, err)
		}
		d.emit(tc.ID, tc.AllocID, tc.TaskName, "Failed to pull image "+ref+": "+err.Error(), map[string]string{"image": ref, "failed": "true"})
		return &pullError{fmt.Errorf("image %s is not present and could not be pulled: %w", ref, err)}
	}
	d.emit(tc.ID, tc.AllocID, tc.TaskName, fmt.Sprintf("Pulled image %s in %s", ref, time.Since(start).Round(time.Millisecond)), map[string]string{"image": ref})
	return nil
}

// track registers a task and starts its log streamer and waiter.
func (d *Driver) track(id string, hs handleState, startedAt time.Time) *task {
	logCtx, stopLogs := context.WithCancel(d.life)
	t := &task{
		id:          id,
		allocID:     hs.AllocID,
		name:        hs.Task,
		containerID: hs.ContainerID,
		stopSignal:  hs.StopSignal,
		state:       hs,
		startedAt:   startedAt,
		stopLogs:    stopLogs,
		logsDone:    make(chan struct{}),
	}
	d.tasks.Put(id, t)
	d.wg.Add(2)
	go func() {
		defer d.wg.Done()
		defer close(t.logsDone)
		d.streamLogs(logCtx, t)
	}()
	go func() {
		defer d.wg.Done()
		d.wait(t)
	}()
	return t
}

// positionPath is where a task's log position is kept: beside its stdout.
func positionPath(hs handleState) string {
	base := hs.StdoutPath
	if base == "" {
		base = hs.StderrPath
	}
	if base == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(base), "."+filepath.Base(base)+".docker-position")
}

// streamLogs copies the container's logs into the task's files until the
// container stops or ctx ends, reconnecting if the stream breaks while the
// container still runs.
func (d *Driver) streamLogs(ctx context.Context, t *task) {
	hs := t.state
	pp := positionPath(hs)
	if pp == "" {
		return
	}
	log := d.log.With("alloc_id", t.allocID, "task", t.name)
	open := func(path string) (io.WriteCloser, error) {
		if path == "" {
			return nopCloser{io.Discard}, nil
		}
		return engine.OpenRotating(path, d.cfg.LogMaxBytes, d.cfg.LogMaxFiles)
	}
	stdout, err := open(hs.StdoutPath)
	if err != nil {
		log.Error("opening stdout file", "err", err)
		return
	}
	defer stdout.Close()
	stderr, err := open(hs.StderrPath)
	if err != nil {
		log.Error("opening stderr file", "err", err)
		return
	}
	defer stderr.Close()
	pos, err := engine.OpenLogPosition(pp)
	if err != nil {
		log.Error("opening log position", "err", err)
		return
	}
	defer pos.Close()
	for ctx.Err() == nil {
		rc, err := d.engine.ContainerLogs(ctx, t.containerID, pos.Last(), true)
		if err == nil {
			stop := context.AfterFunc(ctx, func() { rc.Close() })
			err = engine.CopyLogs(rc, stdout, stderr, pos)
			stop()
			rc.Close()
		}
		if errors.Is(err, engine.ErrNotFound) || ctx.Err() != nil {
			return
		}
		// The stream ends when the container stops: done unless it still runs.
		ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, ierr := d.engine.InspectContainer(ictx, t.containerID)
		cancel()
		if ierr == nil && !st.Running {
			return
		}
		if err != nil {
			log.Warn("container log stream broke; reconnecting", "err", err)
		}
		wait.For(ctx, time.Second)
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// wait waits for the container to exit and records the result.
func (d *Driver) wait(t *task) {
	log := d.log.With("alloc_id", t.allocID, "task", t.name)
	backoff := 500 * time.Millisecond
	var res *driver.ExitResult
	for res == nil {
		_, err := d.engine.WaitContainer(d.life, t.containerID)
		if d.life.Err() != nil {
			return
		}
		if err != nil && !errors.Is(err, engine.ErrNotFound) {
			log.Warn("waiting for container failed; retrying", "container_id", short(t.containerID), "err", err)
			if !wait.For(d.life, backoff) {
				return
			}
			backoff = min(backoff*2, 10*time.Second)
			continue
		}
		ictx, cancel := context.WithTimeout(d.life, 30*time.Second)
		st, ierr := d.engine.InspectContainer(ictx, t.containerID)
		cancel()
		switch {
		case errors.Is(ierr, engine.ErrNotFound):
			res = &driver.ExitResult{ExitCode: -1, Err: "container " + short(t.containerID) + " was removed before its exit could be read"}
		case ierr != nil:
			if d.life.Err() != nil {
				return
			}
			log.Warn("inspecting exited container failed; retrying", "err", ierr)
			if !wait.For(d.life, backoff) {
				return
			}
			continue
		case st.Running:
			continue // a restart by someone else: keep waiting
		default:
			if st.ExitCode == 137 && !st.OOMKilled && !t.stopping.Load() {
				st.OOMKilled = d.lateOOM(t.containerID)
			}
			res = &driver.ExitResult{ExitCode: st.ExitCode, OOMKilled: st.OOMKilled}
			if st.Error != "" {
				res.Err = st.Error
			}
		}
	}
	// Let the log copy reach the end of the stream before reporting the exit.
	select {
	case <-t.logsDone:
	case <-time.After(5 * time.Second):
	case <-d.life.Done():
	}
	if res.OOMKilled {
		d.emit(t.id, t.allocID, t.name, "OOM killed: the container exceeded its memory limit", map[string]string{"oom_killed": "true"})
	}
	log.Info("container exited", "container_id", short(t.containerID), "exit_code", res.ExitCode, "oom_killed", res.OOMKilled)
	t.exit.Finish(res)
}

// RecoverTask reattaches to the task's container from its handle. The
// container is not started again; a container that does not carry the
// task's ownership labels is refused.
func (d *Driver) RecoverTask(ctx context.Context, h *driver.TaskHandle) error {
	if h == nil {
		return fmt.Errorf("recovering task: no handle: %w", driver.ErrTaskNotFound)
	}
	if h.Version != handleVersion {
		return fmt.Errorf("recovering task %s: handle version %d, this driver reads %d", h.TaskID, h.Version, handleVersion)
	}
	var hs handleState
	if err := json.Unmarshal(h.DriverState, &hs); err != nil {
		return fmt.Errorf("recovering task %s: decoding handle: %w", h.TaskID, err)
	}
	if t, err := d.tasks.Get(h.TaskID); err == nil && t.containerID == hs.ContainerID {
		return nil
	}

	st, err := d.engine.InspectContainer(ctx, hs.ContainerID)
	if errors.Is(err, engine.ErrNotFound) {
		// The ID is gone; a container labelled for the task may remain.
		list, lerr := d.engine.ListContainers(ctx, map[string]string{LabelAllocID: hs.AllocID, LabelTask: hs.Task})
		if lerr != nil {
			return fmt.Errorf("recovering task %s: %w", h.TaskID, lerr)
		}
		if len(list) != 1 {
			return fmt.Errorf("recovering task %s: container %s is gone (%d labelled for the task): %w", h.TaskID, short(hs.ContainerID), len(list), driver.ErrTaskNotFound)
		}
		st, err = d.engine.InspectContainer(ctx, list[0].ID)
	}
	if errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("recovering task %s: %w: %w", h.TaskID, err, driver.ErrTaskNotFound)
	}
	if err != nil {
		return fmt.Errorf("recovering task %s: %w", h.TaskID, err)
	}
	if !owns(st.Labels, hs.AllocID, hs.Task) {
		return fmt.Errorf("recovering task %s: container %s does not carry the task's hivelet labels; not touching it: %w", h.TaskID, short(st.ID), driver.ErrTaskNotFound)
	}
	hs.ContainerID = st.ID
	d.track(h.TaskID, hs, st.StartedAt)
	d.log.Info("recovered container", "alloc_id", hs.AllocID, "task", hs.Task, "container_id", short(st.ID), "running", st.Running)
	return nil
}

// WaitTask yields the task's exit result once it exited.
func (d *Driver) WaitTask(ctx context.Context, taskID string) (<-chan *driver.ExitResult, error) {
	t, err := d.tasks.Get(taskID)
	if err != nil {
		return nil, err
	}
	out := make(chan *driver.ExitResult, 1)
	go func() {
		defer close(out)
		select {
		case <-t.exit.Done():
			out <- t.exit.Result()
		case <-ctx.Done():
		case <-d.life.Done():
		}
	}()
	return out, nil
}

// StopTask stops the container. With no signal (or the one set at
// creation) the engine sends the container's stop signal and kills after
// timeout; another signal is sent with a kill call, and SIGKILL follows
// after timeout.
func (d *Driver) StopTask(ctx context.Context, taskID string, timeout time.Duration, signal string) error {
	t, err := d.tasks.Get(taskID)
	if err != nil {
		return err
	}
	if t.exit.Exited() {
		return nil
	}
	t.stopping.Store(true)
	if signal == "" || strings.EqualFold(signal, t.stopSignal) || (t.stopSignal == "" && strings.EqualFold(signal, "SIGTERM")) {
		if err := d.engine.StopContainer(ctx, t.containerID, timeout); err != nil && !errors.Is(err, engine.ErrNotFound) {
			return fmt.Errorf("stopping task %s: %w", taskID, err)
		}
		return nil
	}
	if err := d.engine.KillContainer(ctx, t.containerID, signal); err != nil && !errors.Is(err, engine.ErrNotFound) {
		if t.exit.Exited() {
			return nil
		}
		return fmt.Errorf("stopping task %s: %w", taskID, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-t.exit.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopping task %s: %w", taskID, ctx.Err())
	case <-timer.C:
	}
	if err := d.engine.KillContainer(ctx, t.containerID, "SIGKILL"); err != nil && !errors.Is(err, engine.ErrNotFound) && !t.exit.Exited() {
		return fmt.Errorf("stopping task %s: %w", taskID, err)
	}
	return nil
}

// DestroyTask removes the container (killing it first with force) and
// forgets the task. A running task without force is refused. A task the
// driver does not track has its labelled containers removed (those of a
// start whose handle was lost), or is ErrTaskNotFound if it has none.
func (d *Driver) DestroyTask(ctx context.Context, taskID string, force bool) error {
	t, err := d.tasks.Get(taskID)
	if err != nil {
		return d.destroyUntracked(ctx, taskID, force, err)
	}
	if !force && !t.exit.Exited() {
		st, err := d.engine.InspectContainer(ctx, t.containerID)
		if err == nil && st.Running {
			return fmt.Errorf("destroying task %s: container %s is running; stop it first or force", taskID, short(t.containerID))
		}
	}
	if err := d.engine.RemoveContainer(ctx, t.containerID, true); err != nil && !errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("destroying task %s: %w", taskID, err)
	}
	t.stopLogs()
	d.tasks.DeleteIf(taskID, t)
	return nil
}

// InspectTask reports the container's state.
func (d *Driver) InspectTask(ctx context.Context, taskID string) (*driver.TaskStatus, error) {
	t, err := d.tasks.Get(taskID)
	if err != nil {
		return nil, err
	}
	st, err := d.engine.InspectContainer(ctx, t.containerID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, fmt.Errorf("inspecting task %s: %w: %w", taskID, err, driver.ErrTaskNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("inspecting task %s: %w", taskID, err)
	}
	ts := &driver.TaskStatus{
		ID:          taskID,
		Name:        st.Name,
		State:       driver.TaskStateUnknown,
		StartedAt:   st.StartedAt,
		CompletedAt: st.FinishedAt,
		Attributes: map[string]string{
			"container_id": st.ID,
			"image":        st.Image,
			"status":       st.Status,
		},
	}
	ports := make([]string, 0, len(st.HostPorts))
	for p, hosts := range st.HostPorts {
		for _, h := range hosts {
			ports = append(ports, h+":"+p)
		}
	}
	sort.Strings(ports)
	if len(ports) > 0 {
		ts.Attributes["ports"] = strings.Join(ports, ",")
	}
	switch {
	case st.Running:
		ts.State = driver.TaskStateRunning
		ts.CompletedAt = time.Time{}
	case st.Status == "exited" || st.Status == "dead":
		ts.State = driver.TaskStateExited
		ts.ExitResult = &driver.ExitResult{ExitCode: st.ExitCode, OOMKilled: st.OOMKilled, Err: st.Error}
	}
	return ts, nil
}

// TaskStats samples the container's usage every interval until ctx ends
// or the container is gone.
func (d *Driver) TaskStats(ctx context.Context, taskID string, interval time.Duration) (<-chan *driver.TaskResourceUsage, error) {
	t, err := d.tasks.Get(taskID)
	if err != nil {
		return nil, err
	}
	if interval <= 0 {
		interval = time.Second
	}
	out := make(chan *driver.TaskResourceUsage, 1)
	go func() {
		defer close(out)
		var prev *engine.Stats
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			s, err := d.engine.ContainerStats(ctx, t.containerID)
			if err != nil {
				if ctx.Err() == nil {
					d.log.Debug("stats sample failed", "alloc_id", t.allocID, "task", t.name, "err", err)
				}
				if errors.Is(err, engine.ErrNotFound) || ctx.Err() != nil {
					return
				}
			} else {
				u := &driver.TaskResourceUsage{Timestamp: s.Read, CPUPercent: s.CPUPercent(prev), MemoryBytes: s.MemoryBytes}
				prev = &s
				select {
				case out <- u:
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// TaskEvents streams the events of every task until ctx ends.
func (d *Driver) TaskEvents(ctx context.Context) (<-chan *driver.TaskEvent, error) {
	return d.events.Subscribe(ctx), nil
}

// SignalTask sends signal to the container's main process.
func (d *Driver) SignalTask(ctx context.Context, taskID string, signal string) error {
	t, err := d.tasks.Get(taskID)
	if err != nil {
		return err
	}
	if err := d.engine.KillContainer(ctx, t.containerID, signal); err != nil {
		return fmt.Errorf("signalling task %s: %w", taskID, err)
	}
	return nil
}

func (d *Driver) emit(taskID, allocID, task, msg string, ann map[string]string) {
	d.events.Publish(&driver.TaskEvent{TaskID: taskID, AllocID: allocID, TaskName: task, Timestamp: time.Now(), Message: msg, Annotations: ann})
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
