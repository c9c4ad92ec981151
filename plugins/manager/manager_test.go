package manager_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/builtin"
	"github.com/hivelet/hivelet/plugins/exec"
	"github.com/hivelet/hivelet/plugins/internal/proc"
	"github.com/hivelet/hivelet/plugins/manager"
	"github.com/hivelet/hivelet/plugins/mock"
	"github.com/hivelet/hivelet/sdk/driver"
)

// The test binary doubles as the "hivelet binary" the manager re-executes:
// `<test binary> plugin serve NAME` serves a built-in driver, like
// `hivelet plugin serve NAME`, plus two test-only plugins:
//   - mock-v99 speaks driver protocol version 99;
//   - host: not a plugin but a host process that launches the exec plugin,
//     starts one task, prints its handle and exits without closing anything.
func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == "plugin" && os.Args[2] == "serve" {
		serve(os.Args[3])
		os.Exit(0)
	}
	if len(os.Args) == 5 && os.Args[1] == "host" {
		os.Exit(runHost(os.Args[2], os.Args[3], os.Args[4]))
	}
	os.Exit(m.Run())
}

func serve(name string) {
	if name == "mock-v99" {
		hs := driver.Handshake()
		hs.ProtocolVersion = 99
		plugin.Serve(&plugin.ServeConfig{HandshakeConfig: hs, Plugins: driver.PluginSet(mock.New()), GRPCServer: plugin.DefaultGRPCServer})
		return
	}
	if name == "mock-env" {
		// Serves only when the manager's Config.Env reached it (hooks_test.go).
		if os.Getenv(envProbe) != "granted" {
			fmt.Fprintln(os.Stderr, envProbe, "not set")
			os.Exit(3)
		}
		driver.Serve(mock.New())
		return
	}
	if name == "mock-static" {
		// Counts its Capabilities and ConfigSchema calls in a file
		// (static_test.go); its schema's one field is named by another.
		driver.Serve(&staticCounting{Driver: mock.New(), calls: os.Getenv(staticCallsEnv), field: os.Getenv(staticFieldEnv)})
		return
	}
	f, ok := builtin.Registry()[name]
	if !ok {
		fmt.Fprintln(os.Stderr, "no such driver", name)
		os.Exit(2)
	}
	d, err := f()
	if err != nil {
		os.Exit(1)
	}
	driver.Serve(d)
}

// runHost is a host process: it starts an exec task through a manager
// whose reattach data is in a FileStore, prints the handle, and exits.
func runHost(stateDir, storeDir, marker string) int {
	store, err := manager.NewFileStore(storeDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	m, err := manager.New(manager.Config{SelfExe: os.Args[0], Builtins: []string{"exec"}, StateDir: stateDir, Store: store,
		Env: map[string][]string{"exec": {exec.EnvAllowRoot + "=true"}}}) // execTask runs as root
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	d, err := m.Driver(ctx, "exec")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	h, err := d.StartTask(ctx, execTask("outlive", marker))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = json.NewEncoder(os.Stdout).Encode(h)
	return 0 // no Close: the host just goes away
}

// mockDriver is m's mock driver (its plugin launched), or the test's end.
func mockDriver(ctx context.Context, t *testing.T, m *manager.Manager) driver.Driver {
	t.Helper()
	d, err := m.Driver(ctx, "mock")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func newManager(t *testing.T, cfg manager.Config) *manager.Manager {
	t.Helper()
	if cfg.SelfExe == "" {
		cfg.SelfExe = os.Args[0]
	}
	if cfg.Builtins == nil {
		cfg.Builtins = []string{"mock", "exec", "mock-v99"}
	}
	if cfg.StateDir == "" {
		cfg.StateDir = testutil.ShortTempDir(t, "hvm")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Env == nil {
		cfg.Env = map[string][]string{"exec": {exec.EnvAllowRoot + "=true"}} // execTask
	}
	m, err := manager.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Kill() })
	return m
}

// execTask runs a shell that appends a line to marker each time it starts
// (so a second start is visible) and then sleeps. It runs as the test's
// user (root, which newManager allows, else the driver's own user): the
// marker is in a directory private to that user, where exec's default
// user, nobody, could not write.
func execTask(id, marker string) *driver.TaskConfig {
	user := ""
	if os.Geteuid() == 0 {
		user = "root"
	}
	return &driver.TaskConfig{ID: id, AllocID: "a-" + id, TaskName: id, User: user, Config: map[string]any{
		"command": "/bin/sh",
		"args":    []any{"-c", `echo started >> "$MARKER"; exec sleep 60`},
		"env":     map[string]any{"MARKER": marker},
	}}
}

// startCount is the number of starts an execTask's marker holds, once it
// holds one (the task's shell writes it after StartTask returns).
func startCount(t *testing.T, marker string) int {
	t.Helper()
	n := 0
	testutil.Eventually(t, 10*time.Second, "a start written to "+marker, func() bool {
		b, err := os.ReadFile(marker)
		n = strings.Count(string(b), "started")
		return err == nil && n > 0
	})
	return n
}

func taskPID(t *testing.T, ctx context.Context, d driver.Driver, id string) int {
	t.Helper()
	st, err := d.InspectTask(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != driver.TaskStateRunning {
		t.Fatalf("task %s is %s", id, st.State)
	}
	pid, err := strconv.Atoi(st.Attributes["pid"])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestABuiltinDriverRunsOutOfProcessInItsOwnSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	logs := &testutil.SyncBuffer{}
	m := newManager(t, manager.Config{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	d := mockDriver(ctx, t, m)
	pid, ok := m.PID("mock")
	if !ok || pid == os.Getpid() {
		t.Fatalf("plugin pid %d up=%v", pid, ok)
	}
	st, err := proc.ReadStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	if st.Session != pid {
		t.Fatalf("plugin %d is in session %d, want its own", pid, st.Session)
	}
	info, err := d.Info(ctx)
	if err != nil || info.Name != "mock" {
		t.Fatalf("info %+v %v", info, err)
	}
	h, err := d.StartTask(ctx, &driver.TaskConfig{ID: "t1", AllocID: "alloc-1",
		Config: map[string]any{"run_for": "10ms", "exit_code": 3}})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := d.WaitTask(ctx, h.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r == nil || r.ExitCode != 3 {
		t.Fatalf("exit %+v", r)
	}
	// The plugin's own log line reaches the host's log with its name.
	testutil.Eventually(t, 5*time.Second, "the plugin's log line in the host log", func() bool {
		return strings.Contains(logs.String(), `"msg":"mock task started","plugin":"mock"`) ||
			strings.Contains(logs.String(), `"msg":"mock task started"`) && strings.Contains(logs.String(), `"plugin":"mock"`)
	})
	if !strings.Contains(logs.String(), `"alloc_id":"alloc-1"`) {
		t.Fatalf("plugin log attributes lost: %s", logs.String())
	}
}

func TestAPluginOfAnotherProtocolVersionIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m := newManager(t, manager.Config{})
	_, err := m.Driver(ctx, "mock-v99")
	if err == nil {
		t.Fatal("a protocol 99 plugin was accepted")
	}
	msg := err.Error()
	if !strings.Contains(msg, "version 99") || !strings.Contains(msg, fmt.Sprintf("version %d", driver.ProtocolVersion)) {
		t.Fatalf("refusal does not name both versions: %v", err)
	}
	// Control: the same binary serving protocol 1 is accepted.
	if _, err := m.Driver(ctx, "mock"); err != nil {
		t.Fatal(err)
	}
}

func TestAPinnedChecksumMismatchIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	real, err := manager.FileSHA256(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	wrong := strings.Repeat("0", 64)
	m := newManager(t, manager.Config{Checksums: map[string]string{"mock": wrong, "exec": real}})
	_, err = m.Driver(ctx, "mock")
	if err == nil {
		t.Fatal("a plugin with the wrong checksum was launched")
	}
	if !strings.Contains(err.Error(), real) || !strings.Contains(err.Error(), wrong) {
		t.Fatalf("refusal does not name both sums: %v", err)
	}
	// Control: the correctly pinned plugin launches.
	if _, err := m.Driver(ctx, "exec"); err != nil {
		t.Fatal(err)
	}
}

func TestAPinIsCheckedAgainWhenReattaching(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	real, err := manager.FileSHA256(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	state, store := testutil.ShortTempDir(t, "hvm"), manager.NewMemoryStore()
	m1 := newManager(t, manager.Config{StateDir: state, Store: store, Checksums: map[string]string{"mock": real}})
	if _, err := m1.Driver(ctx, "mock"); err != nil {
		t.Fatal(err)
	}
	pid, _ := m1.PID("mock")
	start, _ := proc.StartTicks(pid)
	if err := m1.Close(); err != nil {
		t.Fatal(err)
	}
	// The pin changed while the host was down: the running plugin no longer
	// matches; it is not reattached, and a relaunch is refused too.
	m2 := newManager(t, manager.Config{StateDir: state, Store: store, Checksums: map[string]string{"mock": strings.Repeat("a", 64)}})
	_, err = m2.Driver(ctx, "mock")
	if err == nil || !strings.Contains(err.Error(), real) {
		t.Fatalf("reattach with a mismatching pin: %v", err)
	}
	testutil.Eventually(t, 5*time.Second, "the unpinned plugin to be killed", func() bool { return !proc.Same(pid, start) })
}

func TestASecondManagerReattachesToTheRunningPlugin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	state, store := testutil.ShortTempDir(t, "hvm"), manager.NewMemoryStore()
	marker := filepath.Join(state, "marker")
	m1 := newManager(t, manager.Config{StateDir: state, Store: store})
	d1, err := m1.Driver(ctx, "exec")
	if err != nil {
		t.Fatal(err)
	}
	h, err := d1.StartTask(ctx, execTask("t1", marker))
	if err != nil {
		t.Fatal(err)
	}
	taskPid := taskPID(t, ctx, d1, "t1")
	pluginPid, _ := m1.PID("exec")
	if err := m1.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing the host does not stop the plugin.
	if _, err := proc.StartTicks(pluginPid); err != nil {
		t.Fatalf("plugin died with the host: %v", err)
	}

	m2 := newManager(t, manager.Config{StateDir: state, Store: store})
	d2, err := m2.Driver(ctx, "exec")
	if err != nil {
		t.Fatal(err)
	}
	if pid, _ := m2.PID("exec"); pid != pluginPid {
		t.Fatalf("second manager uses plugin pid %d, want the running %d", pid, pluginPid)
	}
	if err := d2.RecoverTask(ctx, h); err != nil {
		t.Fatal(err)
	}
	if got := taskPID(t, ctx, d2, "t1"); got != taskPid {
		t.Fatalf("task pid %d after reattach, want %d", got, taskPid)
	}
	if n := startCount(t, marker); n != 1 {
		t.Fatalf("task started %d times", n)
	}
	// Control: the reattached plugin really serves calls, and its task
	// still exits (with the exit status the driver saw as its parent).
	ch, err := d2.WaitTask(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.StopTask(ctx, "t1", 5*time.Second, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r == nil || r.Signal != int(syscall.SIGTERM) {
		t.Fatalf("exit after stop: %+v", r)
	}
}

func TestAPluginOutlivesTheHostProcessThatStartedIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	state := testutil.ShortTempDir(t, "hvm")
	storeDir := filepath.Join(state, "store")
	marker := filepath.Join(state, "marker")
	host := osexecCommand(os.Args[0], "host", state, storeDir, marker)
	out, err := host.Output()
	if err != nil {
		t.Fatalf("host process: %v", err)
	}
	var h driver.TaskHandle
	if err := json.Unmarshal(out, &h); err != nil {
		t.Fatalf("host output %q: %v", out, err)
	}
	store, err := manager.NewFileStore(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	raw, ok, err := store.PluginReattach("exec")
	if err != nil || !ok {
		t.Fatalf("no reattach data left by the host: %v", err)
	}
	var rec struct{ PID int }
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, manager.Config{StateDir: state, Store: store})
	d, err := m.Driver(ctx, "exec")
	if err != nil {
		t.Fatal(err)
	}
	if pid, _ := m.PID("exec"); pid != rec.PID {
		t.Fatalf("new host uses plugin %d, the dead host's plugin was %d", pid, rec.PID)
	}
	if err := d.RecoverTask(ctx, &h); err != nil {
		t.Fatal(err)
	}
	// The plugin writes to its log now that the host that started it is
	// gone: with stderr pointed at the host, this is where SIGPIPE killed it.
	if _, err := d.StartTask(ctx, &driver.TaskConfig{ID: "bad", Config: map[string]any{"command": "/nonexistent"}}); err == nil {
		t.Fatal("starting a missing command succeeded")
	}
	time.Sleep(100 * time.Millisecond)
	if pid, up := m.PID("exec"); !up || pid != rec.PID {
		t.Fatalf("plugin %d up=%v after logging, want %d still up", pid, up, rec.PID)
	}
	if n := startCount(t, marker); n != 1 {
		t.Fatalf("task started %d times", n)
	}
	if err := d.StopTask(ctx, h.TaskID, 5*time.Second, ""); err != nil {
		t.Fatal(err)
	}
}

func TestExecTasksSurviveAPluginSIGKILL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	state := testutil.ShortTempDir(t, "hvm")
	m := newManager(t, manager.Config{StateDir: state, MinBackoff: 10 * time.Millisecond})
	d, err := m.Driver(ctx, "exec")
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	pids := map[string]int{}
	markers := map[string]string{}
	for k := 0; k < n; k++ {
		id := fmt.Sprintf("t%d", k)
		markers[id] = filepath.Join(state, id+".marker")
		if _, err := d.StartTask(ctx, execTask(id, markers[id])); err != nil {
			t.Fatal(err)
		}
		// The shell creates the marker before it writes to it: wait for the
		// line, not the file, so the count below never reads it half-written.
		testutil.Eventually(t, 5*time.Second, "task start", func() bool {
			b, err := os.ReadFile(markers[id])
			return err == nil && strings.Contains(string(b), "started\n")
		})
		pids[id] = taskPID(t, ctx, d, id)
	}
	t.Cleanup(func() {
		for id := range pids {
			_ = d.DestroyTask(context.Background(), id, true)
		}
	})
	wait, err := d.WaitTask(ctx, "t0")
	if err != nil {
		t.Fatal(err)
	}

	old, _ := m.PID("exec")
	killedAt := time.Now()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "a relaunched plugin", func() bool {
		pid, up := m.PID("exec")
		return up && pid != old
	})
	t.Logf("plugin relaunched and %d tasks recovered %v after SIGKILL", n, time.Since(killedAt))

	for id, pid := range pids {
		if got := taskPID(t, ctx, d, id); got != pid {
			t.Errorf("task %s has pid %d after the plugin restart, want %d", id, got, pid)
		}
		if c := startCount(t, markers[id]); c != 1 {
			t.Errorf("task %s started %d times", id, c)
		}
	}
	select {
	case r, ok := <-wait:
		t.Fatalf("wait ended across the restart: %+v %v", r, ok)
	default:
	}
	// The wait opened before the crash still delivers the exit.
	if err := d.StopTask(ctx, "t0", 5*time.Second, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-wait:
		if r == nil || r.Err == "" {
			t.Fatalf("exit of a recovered exec task = %+v, want an unknown-status report", r)
		}
	case <-ctx.Done():
		t.Fatal("no exit delivered to the wait opened before the crash")
	}
	if _, err := proc.StartTicks(pids["t0"]); err == nil {
		t.Fatal("stopped task still running")
	}
}

func TestAPluginThatCannotRelaunchIsRetriedWithBackoff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := testutil.ShortTempDir(t, "hvm")
	exe := filepath.Join(dir, "hivelet-copy")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, manager.Config{SelfExe: exe, Builtins: []string{"mock"}, MinBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	d := mockDriver(ctx, t, m)
	old, _ := m.PID("mock")
	// The binary disappears, then the plugin dies: relaunches fail...
	if err := os.Rename(exe, exe+".away"); err != nil {
		t.Fatal(err)
	}
	_ = syscall.Kill(old, syscall.SIGKILL)
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = d.Info(short)
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call while the plugin cannot launch: %v", err)
	}
	// ...until it is back.
	if err := os.Rename(exe+".away", exe); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Info(ctx); err != nil {
		t.Fatalf("after the binary came back: %v", err)
	}
	if pid, _ := m.PID("mock"); pid == old {
		t.Fatal("still the killed plugin")
	}
}

func TestSocketDirectoryIsPrivate(t *testing.T) {
	state := testutil.ShortTempDir(t, "hvm")
	if err := os.MkdirAll(filepath.Join(state, "sockets"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(state, "sockets"), 0o777); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, manager.Config{StateDir: state})
	_ = m
	fi, err := os.Stat(filepath.Join(state, "sockets"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir mode %v", fi.Mode().Perm())
	}
}

func TestStreamsContinueAcrossAPluginRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := newManager(t, manager.Config{MinBackoff: 10 * time.Millisecond})
	d := mockDriver(ctx, t, m)
	fps, err := d.Fingerprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fp := <-fps; !fp.Healthy {
		t.Fatalf("first fingerprint %+v", fp)
	}
	h, err := d.StartTask(ctx, &driver.TaskConfig{ID: "planned", Config: map[string]any{"run_for": "1s", "exit_code": 6}})
	if err != nil {
		t.Fatal(err)
	}
	wait, err := d.WaitTask(ctx, h.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := m.PID("mock")
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if fp := <-fps; fp == nil || fp.Healthy || !strings.Contains(fp.Description, "restarting") {
		t.Fatalf("fingerprint during the restart %+v", fp)
	}
	if fp := <-fps; fp == nil || !fp.Healthy {
		t.Fatalf("fingerprint after the restart %+v", fp)
	}
	if pid, _ := m.PID("mock"); pid == old {
		t.Fatal("healthy again without a new plugin process")
	}
	// The mock task was recovered from its handle by the new process and
	// ends as planned; the wait opened before the crash sees it.
	select {
	case r := <-wait:
		if r == nil || r.ExitCode != 6 {
			t.Fatalf("exit %+v", r)
		}
	case <-ctx.Done():
		t.Fatal("no exit")
	}
}

func TestNoTaskStartedDuringACrashIsLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := newManager(t, manager.Config{MinBackoff: 5 * time.Millisecond})
	d := mockDriver(ctx, t, m)
	old, _ := m.PID("mock")
	var mu sync.Mutex
	var started []string
	failed := 0
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for k := 0; k < 60; k++ {
				id := fmt.Sprintf("w%d-%d", w, k)
				cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := d.StartTask(cctx, &driver.TaskConfig{ID: id, Config: map[string]any{"run_for": "1h"}})
				ccancel()
				mu.Lock()
				if err == nil {
					started = append(started, id)
				} else {
					failed++
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		}(w)
	}
	time.Sleep(40 * time.Millisecond)
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if pid, up := m.PID("mock"); !up || pid == old {
		t.Fatalf("plugin pid %d up=%v after the crash", pid, up)
	}
	lost := 0
	for _, id := range started {
		if _, err := d.InspectTask(ctx, id); err != nil {
			lost++
			t.Logf("task %s: %v", id, err)
		}
	}
	t.Logf("%d tasks started, %d starts failed across the crash, %d lost", len(started), failed, lost)
	if lost > 0 {
		t.Fatalf("%d of %d started tasks lost", lost, len(started))
	}
	if len(started) < 100 {
		t.Fatalf("only %d tasks started: the test did not exercise anything", len(started))
	}
}

// The host never reattaches to a plugin process that runs another binary
// than the one it would launch now, whatever it then reports: a plugin
// whose file was replaced while the host was down (an upgraded agent, a new
// plugin file at the same path), or whose path changed, is killed and
// launched again from the current file. Control: the same file reattaches.
func TestAPluginWhoseFileChangedIsLaunchedAgainNotReattached(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := testutil.ShortTempDir(t, "hvb")
	bin := filepath.Join(dir, "hv")
	copyFile := func(to string) {
		t.Helper()
		b, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		tmp := to + ".tmp"
		if err := os.WriteFile(tmp, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, to); err != nil { // a new inode at the path
			t.Fatal(err)
		}
	}
	copyFile(bin)
	state, store := testutil.ShortTempDir(t, "hvm"), manager.NewMemoryStore()
	run := func(self string) (int, uint64) {
		t.Helper()
		m := newManager(t, manager.Config{SelfExe: self, StateDir: state, Store: store})
		if _, err := m.Driver(ctx, "mock"); err != nil {
			t.Fatal(err)
		}
		pid, _ := m.PID("mock")
		start, _ := proc.StartTicks(pid)
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		return pid, start
	}
	first, firstStart := run(bin)
	// Control: the same file, the same process.
	if again, _ := run(bin); again != first {
		t.Fatalf("the same file: pid %d, want the running %d reattached", again, first)
	}
	// The file replaced at the same path.
	copyFile(bin)
	replaced, replacedStart := run(bin)
	if replaced == first {
		t.Fatalf("reattached to pid %d, which runs the file replaced since", first)
	}
	testutil.Eventually(t, 5*time.Second, "the earlier process killed", func() bool { return !proc.Same(first, firstStart) })
	// Another path.
	other := filepath.Join(dir, "hv2")
	copyFile(other)
	moved, movedStart := run(other)
	t.Cleanup(func() {
		// run detaches (Close): the last process would outlive the test.
		if proc.Same(moved, movedStart) {
			_ = syscall.Kill(moved, syscall.SIGKILL)
		}
	})
	if moved == replaced {
		t.Fatalf("reattached to pid %d, which runs %s, for the plugin at %s", replaced, bin, other)
	}
	testutil.Eventually(t, 5*time.Second, "the process of the old path killed", func() bool { return !proc.Same(replaced, replacedStart) })
}
