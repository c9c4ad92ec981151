// Package manager is the host side of driver plugins: it discovers them,
// launches them (the hivelet binary re-executed for built-ins, the
// hivelet-driver-* executables of the plugin directory for the others),
// reattaches to them after the host restarted, relaunches them when they
// die, and hands the agent a driver.Driver per plugin that survives all of
// that.
//
// Invariants, each enforced by a test in this package:
//   - a plugin whose SHA-256 is pinned is checked at every launch and at
//     every reattach (against /proc/<pid>/exe); a mismatch refuses it,
//     naming both sums (TestAPinnedChecksumMismatchIsRefused);
//   - a plugin speaking another protocol version is refused with both
//     versions named (TestAPluginOfAnotherProtocolVersionIsRefused);
//   - plugins run in their own session, log to a file (never the host's
//     stderr) and are not killed by Close: a second Manager given the same
//     ReattachStore reconnects to the same process
//     (TestASecondManagerReattachesToTheRunningPlugin);
//   - a plugin that dies is noticed through a pidfd, relaunched with
//     backoff, and every task started or recovered through the manager is
//     recovered from its handle before any call reaches the new process:
//     no task is lost and none is started twice
//     (TestExecTasksSurviveAPluginSIGKILL);
//   - an external plugin that is not pinned is logged at warn level when it
//     is discovered, with the sum to pin it by and where
//     (TestAnUnpinnedPluginIsWarnedAboutWithHowToPinIt);
//   - the plugin directory is read by New and again by each Rescan, and
//     only then: Rescan adds what appeared, never replaces or drops a
//     plugin that has been launched (TestRescanAddsAPluginThatAppeared).
//
// go-plugin's AutoMTLS and SecureConfig make reattach impossible (v1.8), so
// neither is used: sockets live in a 0700 directory owned by the host's
// user, and the checksum is verified by the manager itself. The trade-off
// is written up in docs/drivers.md.
package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hivelet/hivelet/sdk/driver"
)

// Config configures a Manager.
type Config struct {
	// SelfExe is the binary re-executed as `SelfExe plugin serve NAME` to
	// serve a built-in driver: os.Executable() in the agent, a test-built
	// binary in tests.
	SelfExe string
	// Builtins names the drivers SelfExe serves.
	Builtins []string
	// PluginDir holds external hivelet-driver-NAME executables; may be empty.
	PluginDir string
	// StateDir holds the plugins' socket directory (0700) and log files.
	// Keep it short: a Unix socket path is limited to 107 bytes.
	StateDir string
	// Checksums pins plugins by driver name to the hex SHA-256 of their
	// executable.
	Checksums map[string]string
	// Store keeps reattach data across host restarts; nil means in memory
	// only (no reattach after a restart).
	Store ReattachStore
	// Logger receives the manager's and the plugins' logs (with key
	// "plugin"); nil means slog.Default().
	Logger *slog.Logger
	// MinBackoff and MaxBackoff bound the delay between relaunch attempts
	// of a plugin that keeps failing (defaults 50ms and 10s).
	MinBackoff, MaxBackoff time.Duration
	// StartTimeout bounds a plugin's launch to handshake (default 10s).
	StartTimeout time.Duration
	// LogPoll is how often plugin log files are read (default 100ms).
	LogPoll time.Duration
	// Env adds environment entries ("KEY=value") to a plugin's process, by
	// driver name, at every launch. They come after the host's environment,
	// so they win over an inherited variable of the same name (the agent
	// passes its docker.allow_privileged setting this way).
	Env map[string][]string
	// OnRestart, if set, is called with the plugin's name each time a
	// plugin that died has been relaunched (not for the first launch or a
	// reattach). It must not block.
	OnRestart func(plugin string)
}

// Manager owns the driver plugins of one host. Its methods are safe for
// concurrent use.
type Manager struct {
	cfg      Config
	log      *slog.Logger
	sockDir  string
	logDir   string
	plugins  map[string]Plugin
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	insts    map[string]*instance
	shutdown bool
}

// errClosed is returned by calls made after Close or Kill.
var errClosed = errors.New("plugin manager is closed")

// New discovers the plugins and prepares the state directory. It launches
// nothing: a plugin is launched (or reattached) by the first Driver call
// naming it, or by Load.
func New(cfg Config) (*Manager, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("plugin manager: no state directory")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Store == nil {
		cfg.Store = NewMemoryStore()
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 50 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(10*time.Second, cfg.MinBackoff)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	if cfg.LogPoll <= 0 {
		cfg.LogPoll = 100 * time.Millisecond
	}
	if len(cfg.Builtins) > 0 && cfg.SelfExe == "" {
		return nil, errors.New("plugin manager: built-in drivers need the path of the hivelet binary")
	}
	found, err := Discover(cfg.SelfExe, cfg.Builtins, cfg.PluginDir)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:     cfg,
		log:     cfg.Logger,
		sockDir: filepath.Join(cfg.StateDir, "sockets"),
		logDir:  filepath.Join(cfg.StateDir, "logs"),
		plugins: map[string]Plugin{},
		insts:   map[string]*instance{},
	}
	m.register(found)
	for _, d := range []string{m.sockDir, m.logDir} {
		if err := privateDir(d); err != nil {
			return nil, err
		}
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m, nil
}

// privateDir creates dir 0700, or makes an existing one 0700, and checks
// it belongs to this user: only the host may reach a plugin's socket.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("restricting %s to its owner: %w", dir, err)
	}
	if err := checkOwner(dir); err != nil {
		return err
	}
	return nil
}

// register records discovered plugins and returns the names it added or
// changed, sorted. A plugin this manager has an instance of (launched, or
// being launched) keeps the executable it was launched from: swapping a
// driver under its running tasks is a restart of the agent, not a reload.
// Called with m.mu held, or before m is shared.
func (m *Manager) register(found []Plugin) []string {
	var changed []string
	for _, p := range found {
		if p.Shadows && m.cfg.Checksums[p.Name] == "" {
			// Never silently: a file dropped in the plugin directory must
			// not take over a built-in driver (and its tasks) unless the
			// configuration pins that very file.
			m.log.Error("refusing a plugin file named like a built-in driver: the built-in is kept",
				"plugin", p.Name, "path", p.Path,
				"hint", fmt.Sprintf(`to replace the built-in, pin the file: plugin %q { sha256 = "<hivelet plugin list>" }`, p.Name))
			p = builtinPlugin(m.cfg.SelfExe, p.Name)
		}
		old, known := m.plugins[p.Name]
		if known && (old.Path == p.Path && old.Builtin == p.Builtin) {
			continue
		}
		if _, running := m.insts[p.Name]; running {
			m.log.Warn("driver plugin changed on disk; the running one is kept until the agent restarts",
				"plugin", p.Name, "path", p.Path, "running_path", old.Path)
			continue
		}
		m.plugins[p.Name] = p
		changed = append(changed, p.Name)
		if !p.Builtin {
			m.warnIfUnpinned(p)
		}
	}
	slices.Sort(changed)
	return changed
}

// warnIfUnpinned logs, for an external plugin with no pinned SHA-256, that
// whatever file sits at its path will be run, and how to pin it.
func (m *Manager) warnIfUnpinned(p Plugin) {
	if m.cfg.Checksums[p.Name] != "" {
		return
	}
	sum, err := FileSHA256(p.Path)
	if err != nil {
		sum = "<run hivelet plugin list>"
	}
	m.log.Warn("driver plugin is not pinned: any executable at its path will be run",
		"plugin", p.Name, "path", p.Path, "sha256", sum,
		"pin", fmt.Sprintf(`add plugin %q { sha256 = %q } to the agent configuration`, p.Name, sum))
}

// Rescan reads the plugin directory again and makes the plugins that
// appeared in it since New (or since the last Rescan) available to Driver
// and Load; it returns their names, sorted. A plugin whose file vanished
// stays known (its tasks keep running), and one already launched is not
// replaced (see register). The agent calls it on SIGHUP.
func (m *Manager) Rescan() ([]string, error) {
	found, err := Discover(m.cfg.SelfExe, m.cfg.Builtins, m.cfg.PluginDir)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shutdown {
		return nil, errClosed
	}
	return m.register(found), nil
}

// Plugins lists the discovered plugins, sorted by name.
func (m *Manager) Plugins() []Plugin {
	m.mu.Lock()
	found := make([]Plugin, 0, len(m.plugins))
	for _, p := range m.plugins {
		found = append(found, p)
	}
	m.mu.Unlock()
	sortPlugins(found)
	return found
}

// Driver returns the driver served by the named plugin, launching or
// reattaching to the plugin first if this manager has not yet. The
// returned Driver outlives plugin restarts: calls made while the plugin is
// being relaunched wait for it (bounded by their ctx).
func (m *Manager) Driver(ctx context.Context, name string) (driver.Driver, error) {
	inst, err := m.instance(name)
	if err != nil {
		return nil, err
	}
	if err := inst.start(ctx); err != nil {
		return nil, err
	}
	return inst.proxy, nil
}

// Load launches or reattaches to every discovered plugin, returning the
// first error (the others are still tried).
func (m *Manager) Load(ctx context.Context) error {
	var errs []error
	for _, p := range m.Plugins() {
		if _, err := m.Driver(ctx, p.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) instance(name string) (*instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shutdown {
		return nil, errClosed
	}
	if inst, ok := m.insts[name]; ok {
		return inst, nil
	}
	p, ok := m.plugins[name]
	if !ok {
		return nil, fmt.Errorf("no driver plugin named %q", name)
	}
	inst := newInstance(m, p)
	m.insts[name] = inst
	return inst, nil
}

// PID returns the process ID of the named plugin while it is connected.
func (m *Manager) PID(name string) (int, bool) {
	m.mu.Lock()
	inst, ok := m.insts[name]
	m.mu.Unlock()
	if !ok {
		return 0, false
	}
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return inst.pid, inst.up
}

// Close detaches from every plugin without stopping it: plugins and their
// tasks keep running, and their reattach data stays in the store for the
// next Manager. This is a normal host shutdown.
func (m *Manager) Close() error {
	return m.stop(false)
}

// Kill stops every plugin this manager runs and forgets their reattach
// data. Tasks a plugin runs outside its own process (exec tasks, Docker
// containers) are not stopped by this.
func (m *Manager) Kill() error {
	return m.stop(true)
}

func (m *Manager) stop(kill bool) error {
	m.mu.Lock()
	if m.shutdown {
		m.mu.Unlock()
		return nil
	}
	m.shutdown = true
	insts := make([]*instance, 0, len(m.insts))
	for _, i := range m.insts {
		insts = append(insts, i)
	}
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	var errs []error
	for _, i := range insts {
		if err := i.stop(kill); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
