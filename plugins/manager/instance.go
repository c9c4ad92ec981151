package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/hivelet/hivelet/internal/wait"
	"github.com/hivelet/hivelet/plugins/internal/proc"
	"github.com/hivelet/hivelet/sdk/driver"
)

// record is a plugin's reattach data, as kept in the ReattachStore.
type record struct {
	Path            string   `json:"path"`
	Args            []string `json:"args"`
	PID             int      `json:"pid"`
	StartTicks      uint64   `json:"start_ticks"`
	Network         string   `json:"network"`
	Addr            string   `json:"addr"`
	ProtocolVersion int      `json:"protocol_version"`
	SHA256          string   `json:"sha256,omitempty"`
}

// instance is one plugin: its current process (if any), the tasks to
// recover into the next one, and the Driver handed to the agent.
type instance struct {
	m     *Manager
	p     Plugin
	log   *slog.Logger
	proxy *proxy

	startMu sync.Mutex // serialises the first connection
	running bool       // monitor started

	mu      sync.Mutex
	up      bool
	gen     uint64
	changed chan struct{} // closed and replaced at every change of up/gen
	client  *plugin.Client
	rpc     *plugin.GRPCClient
	drv     driver.Driver
	pid     int
	ticks   uint64
	lastErr error
	handles map[string]*driver.TaskHandle
	// caps and schema are what the driver of one generation said of
	// itself, asked once per process (sdk/driver: Capabilities and
	// ConfigSchema do not change while a process runs): every start
	// validates its task against the schema, and one with volume mounts
	// or script checks reads the capabilities; asked each time, each was
	// an RPC on the start's path. A relaunched process is asked again: it
	// may run a new build of the plugin.
	caps   perProcess[driver.Capabilities]
	schema perProcess[*driver.Schema]
}

// perProcess is an answer of the process of generation gen (0: none yet;
// generations start at 1). Under instance.mu.
type perProcess[T any] struct {
	v   T
	gen uint64
}

func newInstance(m *Manager, p Plugin) *instance {
	i := &instance{m: m, p: p, log: m.log.With("plugin", p.Name), changed: make(chan struct{}),
		handles: map[string]*driver.TaskHandle{}}
	i.proxy = &proxy{i: i}
	return i
}

func (i *instance) logPath() string { return filepath.Join(i.m.logDir, i.p.Name+".log") }

// start connects to the plugin (reattach, else launch) the first time and
// then starts its monitor and log tail.
func (i *instance) start(ctx context.Context) error {
	i.startMu.Lock()
	defer i.startMu.Unlock()
	if i.running {
		return nil
	}
	if err := i.m.ctx.Err(); err != nil {
		return errClosed
	}
	var offset int64
	if fi, err := os.Stat(i.logPath()); err == nil {
		offset = fi.Size()
	}
	reattached := false
	if rec, ok := i.loadRecord(); ok {
		if err := i.reattach(ctx, rec); err != nil {
			i.log.Warn("not reattaching to plugin", "pid", rec.PID, "err", err)
		} else {
			reattached = true
		}
	}
	if !reattached {
		if err := i.launch(ctx); err != nil {
			return err
		}
	}
	i.m.mu.Lock()
	if i.m.shutdown {
		// Closed while connecting: leave the plugin as Close or Kill would.
		i.m.mu.Unlock()
		_ = i.stop(false)
		return errClosed
	}
	i.m.wg.Add(2)
	i.m.mu.Unlock()
	i.running = true
	go func() { defer i.m.wg.Done(); tailLog(i.m.ctx, i.logPath(), offset, i.log, i.m.cfg.LogPoll) }()
	go func() { defer i.m.wg.Done(); i.monitor() }()
	return nil
}

func (i *instance) loadRecord() (*record, bool) {
	b, ok, err := i.m.cfg.Store.PluginReattach(i.p.Name)
	if err != nil {
		i.log.Warn("reading plugin reattach data", "err", err)
		return nil, false
	}
	if !ok {
		return nil, false
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		i.log.Warn("ignoring unreadable plugin reattach data", "err", err)
		return nil, false
	}
	return &r, true
}

func (i *instance) hclogger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "go-plugin",
		Level:      hclog.Error,
		Output:     hclogWriter{logger: i.log},
		JSONFormat: true,
	})
}

// pinned returns the configured SHA-256 pin of this plugin, if any.
func (i *instance) pinned() string {
	return strings.ToLower(strings.TrimSpace(i.m.cfg.Checksums[i.p.Name]))
}

// errRefused marks a plugin the manager will not run as configured.
type errRefused struct{ msg string }

func (e *errRefused) Error() string { return e.msg }

func (i *instance) checksumMismatch(what, got, want string) error {
	return &errRefused{fmt.Sprintf("refusing driver plugin %q: %s has SHA-256 %s but the configuration pins %s", i.p.Name, what, got, want)}
}

var pluginVersionRE = regexp.MustCompile(`Plugin version: (\d+)`)

// launch starts a new plugin process, recovers the tracked tasks into it,
// and marks the instance up.
func (i *instance) launch(ctx context.Context) error {
	path := i.p.Path
	var exe *os.File
	if want := i.pinned(); want != "" {
		// Hash the opened file and execute that same file through
		// /proc/self/fd, so it cannot be swapped between check and exec.
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("launching driver plugin %q: %w", i.p.Name, err)
		}
		defer f.Close()
		got, err := readerSHA256(path, f)
		if err != nil {
			return fmt.Errorf("launching driver plugin %q: %w", i.p.Name, err)
		}
		if got != want {
			return i.checksumMismatch(path, got, want)
		}
		exe = f
	}
	if err := rotateLog(i.logPath()); err != nil {
		i.log.Warn("rotating plugin log", "err", err)
	}
	cmd := exec.Command(path, i.p.Args...)
	if exe != nil {
		cmd.Path = fmt.Sprintf("/proc/self/fd/%d", exe.Fd())
	}
	// go-plugin only honours UnixSocketConfig.TempDir with a custom
	// RunnerFunc; tell the plugin where to put its socket ourselves: a
	// fresh 0700 directory inside the manager's 0700 socket directory.
	sockDir, err := os.MkdirTemp(i.m.sockDir, "p")
	if err != nil {
		return fmt.Errorf("launching driver plugin %q: %w", i.p.Name, err)
	}
	launched := false
	defer func() {
		if !launched {
			_ = os.RemoveAll(sockDir)
		}
	}()
	cmd.Env = append(os.Environ(), i.m.cfg.Env[i.p.Name]...)
	cmd.Env = append(cmd.Env, driver.EnvLogFile+"="+i.logPath(), plugin.EnvUnixSocketDir+"="+sockDir)
	// Its own session: the host's terminal signals and exit do not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  driver.Handshake(),
		Plugins:          driver.PluginSet(nil),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Managed:          false,
		StartTimeout:     i.m.cfg.StartTimeout,
		Logger:           i.hclogger(),
		SyncStdout:       io.Discard,
		SyncStderr:       io.Discard,
		Stderr:           hclogWriter{logger: i.log},
	})
	cp, err := client.Client()
	if err != nil {
		client.Kill()
		if m := pluginVersionRE.FindStringSubmatch(err.Error()); m != nil {
			return &errRefused{fmt.Sprintf("refusing driver plugin %q (%s): it speaks driver protocol version %s, this host speaks version %d",
				i.p.Name, path, m[1], driver.ProtocolVersion)}
		}
		return fmt.Errorf("launching driver plugin %q (%s): %w", i.p.Name, path, err)
	}
	drv, err := dispense(cp)
	if err != nil {
		client.Kill()
		return fmt.Errorf("launching driver plugin %q: %w", i.p.Name, err)
	}
	rc := client.ReattachConfig()
	ticks, err := proc.StartTicks(rc.Pid)
	if err != nil {
		client.Kill()
		return fmt.Errorf("launching driver plugin %q: %w", i.p.Name, err)
	}
	rec := record{Path: i.p.Path, Args: i.p.Args, PID: rc.Pid, StartTicks: ticks, Network: rc.Addr.Network(),
		Addr: rc.Addr.String(), ProtocolVersion: client.NegotiatedVersion(), SHA256: i.pinned()}
	if err := i.saveRecord(&rec); err != nil {
		client.Kill()
		return err
	}
	launched = true
	i.log.Info("launched driver plugin", "pid", rc.Pid, "path", path)
	return i.connected(ctx, client, cp.(*plugin.GRPCClient), drv, rc.Pid, ticks)
}

func dispense(cp plugin.ClientProtocol) (driver.Driver, error) {
	raw, err := cp.Dispense(driver.PluginName)
	if err != nil {
		return nil, fmt.Errorf("dispensing the driver: %w", err)
	}
	drv, ok := raw.(driver.Driver)
	if !ok {
		return nil, fmt.Errorf("dispensing the driver: got %T", raw)
	}
	return drv, nil
}

func (i *instance) saveRecord(r *record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding reattach data of plugin %s: %w", i.p.Name, err)
	}
	if err := i.m.cfg.Store.PutPluginReattach(i.p.Name, b); err != nil {
		return fmt.Errorf("saving reattach data of plugin %s: %w", i.p.Name, err)
	}
	return nil
}

// reattach connects to a plugin launched by an earlier host process.
func (i *instance) reattach(ctx context.Context, rec *record) error {
	if !proc.Same(rec.PID, rec.StartTicks) {
		_ = i.m.cfg.Store.DeletePluginReattach(i.p.Name)
		return fmt.Errorf("plugin process %d is gone", rec.PID)
	}
	if rec.ProtocolVersion != driver.ProtocolVersion {
		i.killStale(rec)
		return fmt.Errorf("plugin speaks driver protocol version %d, this host speaks version %d", rec.ProtocolVersion, driver.ProtocolVersion)
	}
	if rel, err := filepath.Rel(i.m.sockDir, rec.Addr); rec.Network != "unix" || err != nil || strings.HasPrefix(rel, "..") {
		i.killStale(rec)
		return fmt.Errorf("plugin address %s %s is not in the socket directory %s", rec.Network, rec.Addr, i.m.sockDir)
	}
	// The running process must be the binary this host would launch now:
	// the same path, and that path's file still the one the process runs
	// (not replaced since: an upgraded agent, a new plugin file), so that
	// what the host reports of the plugin is what serves it.
	if rec.Path != i.p.Path {
		i.killStale(rec)
		return fmt.Errorf("plugin process %d runs %s, this host's plugin %q is %s", rec.PID, rec.Path, i.p.Name, i.p.Path)
	}
	if same, err := runsFile(rec.PID, i.p.Path); err != nil || !same {
		i.killStale(rec)
		if err != nil {
			return fmt.Errorf("plugin process %d: %w", rec.PID, err)
		}
		return fmt.Errorf("plugin process %d runs an earlier file at %s (replaced since it started)", rec.PID, i.p.Path)
	}
	if want := i.pinned(); want != "" {
		exe := fmt.Sprintf("/proc/%d/exe", rec.PID)
		got, err := FileSHA256(exe)
		if err != nil {
			i.killStale(rec)
			return err
		}
		if got != want {
			i.killStale(rec)
			return i.checksumMismatch(fmt.Sprintf("the running plugin (pid %d)", rec.PID), got, want)
		}
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  driver.Handshake(),
		Plugins:          driver.PluginSet(nil),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           i.hclogger(),
		Reattach: &plugin.ReattachConfig{
			Protocol:        plugin.ProtocolGRPC,
			ProtocolVersion: rec.ProtocolVersion,
			Addr:            &net.UnixAddr{Net: "unix", Name: rec.Addr},
			Pid:             rec.PID,
		},
	})
	cp, err := client.Client()
	if err != nil {
		i.killStale(rec)
		return fmt.Errorf("reattaching to plugin process %d: %w", rec.PID, err)
	}
	drv, err := dispense(cp)
	if err != nil {
		i.killStale(rec)
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := drv.Info(pctx); err != nil {
		i.killStale(rec)
		return fmt.Errorf("reattached plugin process %d does not answer: %w", rec.PID, err)
	}
	i.log.Info("reattached to driver plugin", "pid", rec.PID)
	return i.connected(ctx, client, cp.(*plugin.GRPCClient), drv, rec.PID, rec.StartTicks)
}

// killStale kills a plugin process from an earlier host that this host
// will not use (after checking it is still that process) and forgets it.
func (i *instance) killStale(rec *record) {
	if proc.Same(rec.PID, rec.StartTicks) {
		if p, err := os.FindProcess(rec.PID); err == nil {
			_ = p.Kill()
			_ = p.Release()
		}
	}
	i.removeSocketDir(rec.Addr)
	_ = i.m.cfg.Store.DeletePluginReattach(i.p.Name)
}

// removeSocketDir removes the per-process socket directory go-plugin made
// for a plugin that is gone (a crashed plugin leaves its socket behind).
func (i *instance) removeSocketDir(addr string) {
	dir := filepath.Dir(addr)
	if rel, err := filepath.Rel(i.m.sockDir, dir); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
		_ = os.RemoveAll(dir)
	}
}

// connected recovers every tracked task into a freshly connected plugin,
// then publishes it. Tasks tracked while it recovers are recovered too,
// before it is published; a task tracked after that is recovered by the
// proxy (see track).
func (i *instance) connected(ctx context.Context, client *plugin.Client, rpc *plugin.GRPCClient, drv driver.Driver, pid int, ticks uint64) error {
	done := map[string]bool{}
	for {
		i.mu.Lock()
		var todo []*driver.TaskHandle
		for id, h := range i.handles {
			if !done[id] {
				todo = append(todo, h)
			}
		}
		if len(todo) == 0 {
			i.client, i.rpc, i.drv, i.pid, i.ticks = client, rpc, drv, pid, ticks
			i.up, i.lastErr = true, nil
			i.gen++
			close(i.changed)
			i.changed = make(chan struct{})
			i.mu.Unlock()
			break
		}
		i.mu.Unlock()
		for _, h := range todo {
			done[h.TaskID] = true
			rctx, cancel := context.WithTimeout(ctx, i.m.cfg.StartTimeout)
			err := drv.RecoverTask(rctx, h)
			cancel()
			switch {
			case err == nil:
			case errors.Is(err, driver.ErrTaskNotFound):
				i.log.Warn("task lost while its plugin was down", "task_id", h.TaskID, "err", err)
				i.forget(h.TaskID)
			default:
				i.log.Error("recovering task into relaunched plugin", "task_id", h.TaskID, "err", err)
			}
		}
	}
	if len(done) > 0 {
		i.log.Info("recovered tasks into driver plugin", "pid", pid, "tasks", len(done))
	}
	return nil
}

// track records a task to recover into future plugin processes. It
// reports whether a newer process than gen (the one the task was started
// or recovered on) is already serving: the caller must then recover the
// task into it, since that process's recovery pass has run.
func (i *instance) track(h *driver.TaskHandle, gen uint64) (stale bool) {
	if h == nil {
		return false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.handles[h.TaskID] = h
	return i.up && i.gen != gen
}

func (i *instance) forget(taskID string) {
	i.mu.Lock()
	delete(i.handles, taskID)
	i.mu.Unlock()
}

// monitor waits for the plugin process to exit and relaunches it, with
// exponential backoff between failed attempts, until the manager stops.
func (i *instance) monitor() {
	ctx := i.m.ctx
	for {
		i.mu.Lock()
		pid, ticks := i.pid, i.ticks
		i.mu.Unlock()
		if err := proc.WaitExit(ctx, pid, ticks); err != nil {
			return // manager stopping
		}
		i.down()
		i.log.Warn("driver plugin exited; relaunching", "pid", pid)
		backoff := i.m.cfg.MinBackoff
		for {
			err := i.launch(ctx)
			if err == nil {
				if hook := i.m.cfg.OnRestart; hook != nil {
					hook(i.p.Name)
				}
				break
			}
			if ctx.Err() != nil {
				return
			}
			i.mu.Lock()
			i.lastErr = err
			i.mu.Unlock()
			i.log.Error("relaunching driver plugin", "err", err, "retry_in", backoff)
			if !wait.For(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, i.m.cfg.MaxBackoff)
		}
	}
}

// down marks the plugin gone and releases what is left of its client.
func (i *instance) down() {
	i.mu.Lock()
	old, rpc, addr := i.client, i.rpc, ""
	if old != nil {
		if rc := old.ReattachConfig(); rc != nil && rc.Addr != nil {
			addr = rc.Addr.String()
		}
	}
	i.up, i.client, i.rpc, i.drv = false, nil, nil, nil
	close(i.changed)
	i.changed = make(chan struct{})
	i.mu.Unlock()
	if rpc != nil {
		_ = rpc.Conn.Close()
	}
	if old != nil {
		go old.Kill() // the process is gone; this reaps go-plugin's goroutines
	}
	if addr != "" {
		i.removeSocketDir(addr)
	}
}

// stop detaches (kill false) or kills the plugin.
func (i *instance) stop(kill bool) error {
	i.mu.Lock()
	client, rpc := i.client, i.rpc
	i.up, i.client, i.rpc, i.drv = false, nil, nil, nil
	close(i.changed)
	i.changed = make(chan struct{})
	i.mu.Unlock()
	if !kill {
		if rpc != nil {
			return rpc.Conn.Close()
		}
		return nil
	}
	if client != nil {
		client.Kill()
	}
	if err := i.m.cfg.Store.DeletePluginReattach(i.p.Name); err != nil {
		return err
	}
	return nil
}

// runsFile reports whether process pid runs the file now at path (the same
// inode: a file replaced at that path since the process started is another).
func runsFile(pid int, path string) (bool, error) {
	exe, err := os.Stat(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false, fmt.Errorf("reading its executable: %w", err)
	}
	cur, err := os.Stat(path)
	if err != nil {
		return false, fmt.Errorf("the plugin file: %w", err)
	}
	return os.SameFile(exe, cur), nil
}
