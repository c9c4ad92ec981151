package exec

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	osexec "os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/internal/proc"
	"github.com/hivelet/hivelet/sdk/driver"
)

func taskCfg(t *testing.T, id string, cfg map[string]any) *driver.TaskConfig {
	dir := t.TempDir()
	return &driver.TaskConfig{ID: id, AllocID: "a1", TaskName: id, AllocDir: dir, Config: cfg,
		StdoutPath: filepath.Join(dir, id+".stdout"), StderrPath: filepath.Join(dir, id+".stderr"),
		Env: map[string]string{"FROM_TASK": "task", "BOTH": "task"}}
}

// asTheTestsUser is a driver that runs a task naming no user as its own
// user, as raw_exec does: the tests' temporary directories are private to
// the user running them, which "nobody" could not enter.
// TestATaskRunsAsNobodyUnlessRootIsAllowed tests the default.
func asTheTestsUser() *Driver { return NewWithOptions(Options{AgentUser: true}) }

func waitExit(t *testing.T, d *Driver, id string, within time.Duration) *driver.ExitResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	ch, err := d.WaitTask(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := <-ch
	if !ok {
		t.Fatalf("task %s did not exit within %v", id, within)
	}
	return r
}

func TestExitCodesAndSignalsAreReported(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		script string
		want   driver.ExitResult
	}{
		{"success", "exit 0", driver.ExitResult{}},
		{"exit code", "exit 7", driver.ExitResult{ExitCode: 7}},
		{"killed by a signal", "kill -9 $$", driver.ExitResult{ExitCode: 137, Signal: 9}},
	}
	d := asTheTestsUser()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := strings.ReplaceAll(tc.name, " ", "-")
			if _, err := d.StartTask(ctx, taskCfg(t, id, map[string]any{"command": "/bin/sh", "args": []any{"-c", tc.script}})); err != nil {
				t.Fatal(err)
			}
			if r := waitExit(t, d, id, 10*time.Second); *r != tc.want {
				t.Fatalf("exit %+v, want %+v", *r, tc.want)
			}
		})
	}
}

func TestOutputGoesToTheAllocationFilesAndEnvIsMerged(t *testing.T) {
	ctx := context.Background()
	d := asTheTestsUser()
	cfg := taskCfg(t, "out", map[string]any{
		"command": "/bin/sh",
		"args":    []any{"-c", `echo "$FROM_TASK $BOTH $FROM_CONFIG $(pwd)"; echo oops >&2`},
		"env":     map[string]any{"BOTH": "config", "FROM_CONFIG": "cfg"},
	})
	// Appended, not truncated.
	if err := os.WriteFile(cfg.StdoutPath, []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.StartTask(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if r := waitExit(t, d, "out", 10*time.Second); !r.Successful() {
		t.Fatalf("exit %+v", r)
	}
	out, _ := os.ReadFile(cfg.StdoutPath)
	if want := "before\ntask config cfg " + cfg.AllocDir + "\n"; string(out) != want {
		t.Fatalf("stdout %q, want %q", out, want)
	}
	errOut, _ := os.ReadFile(cfg.StderrPath)
	if string(errOut) != "oops\n" {
		t.Fatalf("stderr %q", errOut)
	}
}

func TestInvalidConfigIsRefusedPerField(t *testing.T) {
	d := asTheTestsUser()
	_, err := d.StartTask(context.Background(), taskCfg(t, "bad", map[string]any{"args": "x"}))
	var ce *driver.ConfigError
	if !errors.As(err, &ce) || len(ce.Fields) != 2 || ce.Fields[0].Path != "args" || ce.Fields[1].Path != "command" {
		t.Fatalf("got %v", err)
	}
}

// readPID waits for a file holding a PID, written by the task.
func readPID(t *testing.T, path string) int {
	t.Helper()
	pid := 0
	testutil.Eventually(t, 10*time.Second, "a pid in "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// trapTask is a shell that installs trap, then says so in a file the test
// waits on (waitReady), then loops until the trap ends it.
func trapTask(t *testing.T, id, trap string) *driver.TaskConfig {
	cfg := taskCfg(t, id, nil)
	cfg.Config = map[string]any{"command": "/bin/sh", "args": []any{"-c", trap + `; echo $$ > "$READY"; while :; do sleep 0.05; done`}}
	cfg.Env["READY"] = filepath.Join(cfg.AllocDir, "ready")
	return cfg
}

// waitReady waits until a trapTask has installed its trap.
func waitReady(t *testing.T, cfg *driver.TaskConfig) {
	t.Helper()
	readPID(t, cfg.Env["READY"])
}

func alive(pid int) bool {
	st, err := proc.ReadStat(pid)
	return err == nil && st.State != "Z"
}

func TestStopKillsTheWholeProcessGroup(t *testing.T) {
	ctx := context.Background()
	d := asTheTestsUser()
	cfg := taskCfg(t, "group", nil)
	gc := filepath.Join(cfg.AllocDir, "grandchild.pid")
	// The task ignores SIGTERM and has a grandchild that ignores it too:
	// only the SIGKILL of the group after the timeout ends both.
	cfg.Config = map[string]any{"command": "/bin/sh", "args": []any{"-c",
		`trap '' TERM; sh -c 'trap "" TERM; echo $$ > "$0"; while :; do sleep 0.05; done' "$GC" & while :; do sleep 0.05; done`},
		"env": map[string]any{"GC": gc}}
	if _, err := d.StartTask(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	grandchild := readPID(t, gc)
	st, _ := d.InspectTask(ctx, "group")
	main, _ := strconv.Atoi(st.Attributes["pid"])
	if !alive(main) || !alive(grandchild) {
		t.Fatal("task not running")
	}
	start := time.Now()
	if err := d.StopTask(ctx, "group", 300*time.Millisecond, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("a task ignoring SIGTERM stopped after %v, before the timeout", el)
	}
	r := waitExit(t, d, "group", 5*time.Second)
	if r.Signal != int(syscall.SIGKILL) {
		t.Fatalf("exit %+v, want SIGKILL", r)
	}
	// The group's SIGKILL ends each process when it next runs: on a busy
	// machine the keeper's exit can be seen before its child's.
	testutil.Eventually(t, 5*time.Second, "the grandchild to be gone", func() bool { return !alive(grandchild) })
	testutil.Eventually(t, 5*time.Second, "the task's main process to be gone", func() bool { return !alive(main) })
}

func TestStopWithAHandledSignalEndsBeforeTheTimeout(t *testing.T) {
	ctx := context.Background()
	d := asTheTestsUser()
	cfg := trapTask(t, "polite", `trap 'exit 3' INT`)
	if _, err := d.StartTask(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	waitReady(t, cfg)
	start := time.Now()
	if err := d.StopTask(ctx, "polite", 10*time.Second, "SIGINT"); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("stop took %v", el)
	}
	if r := waitExit(t, d, "polite", 5*time.Second); r.ExitCode != 3 {
		t.Fatalf("exit %+v, want the trap's 3", r)
	}
}

func TestAGrandchildDoesNotOutliveATaskThatExits(t *testing.T) {
	ctx := context.Background()
	d := asTheTestsUser()
	cfg := taskCfg(t, "leaver", nil)
	gc := filepath.Join(cfg.AllocDir, "gc.pid")
	cfg.Config = map[string]any{"command": "/bin/sh", "args": []any{"-c",
		`sh -c 'echo $$ > "$0"; exec sleep 60' "$GC" & while [ ! -s "$GC" ]; do sleep 0.01; done; exit 0`},
		"env": map[string]any{"GC": gc}}
	if _, err := d.StartTask(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	grandchild := readPID(t, gc)
	if r := waitExit(t, d, "leaver", 10*time.Second); !r.Successful() {
		t.Fatalf("exit %+v", r)
	}
	testutil.Eventually(t, 5*time.Second, "the grandchild not to outlive the task", func() bool { return !alive(grandchild) })
}

func TestRecoverRefusesAReusedPID(t *testing.T) {
	ctx := context.Background()
	d := asTheTestsUser()
	if _, err := d.StartTask(ctx, taskCfg(t, "victim", map[string]any{"command": "sleep", "args": []any{"30"}})); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.DestroyTask(ctx, "victim", true) }()
	st, _ := d.InspectTask(ctx, "victim")
	pid, _ := strconv.Atoi(st.Attributes["pid"])
	ticks, err := proc.StartTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	handle := func(ticks uint64) *driver.TaskHandle {
		raw, _ := json.Marshal(state{PID: pid, StartTicks: ticks})
		return &driver.TaskHandle{Version: handleVersion, TaskID: "recovered", Driver: Name, DriverState: raw}
	}
	// A fresh driver (a restarted plugin): the same PID with another start
	// time is another process.
	fresh := asTheTestsUser()
	if err := fresh.RecoverTask(ctx, handle(ticks-1)); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("recover with a reused pid: %v, want ErrTaskNotFound", err)
	}
	// Control: the right start time recovers the task.
	if err := fresh.RecoverTask(ctx, handle(ticks)); err != nil {
		t.Fatal(err)
	}
	rst, err := fresh.InspectTask(ctx, "recovered")
	if err != nil || rst.State != driver.TaskStateRunning || rst.Attributes["pid"] != strconv.Itoa(pid) {
		t.Fatalf("recovered task %+v %v", rst, err)
	}
	// Recovering again is a no-op, and a recovered task can be stopped;
	// its exit status is unknowable and says so.
	if err := fresh.RecoverTask(ctx, handle(ticks)); err != nil {
		t.Fatal(err)
	}
	if err := fresh.StopTask(ctx, "recovered", 5*time.Second, ""); err != nil {
		t.Fatal(err)
	}
	if r := waitExit(t, fresh, "recovered", 5*time.Second); r.Err != errUnknownExit || r.ExitCode != -1 {
		t.Fatalf("exit of a recovered task %+v", r)
	}
	// A process that is gone cannot be recovered.
	if err := asTheTestsUser().RecoverTask(ctx, handle(ticks)); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("recover of an exited process: %v", err)
	}
}

func TestStatsReportTheGroupsCPUAndMemory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := asTheTestsUser()
	if _, err := d.StartTask(ctx, taskCfg(t, "busy", map[string]any{"command": "/bin/sh", "args": []any{"-c", "while :; do :; done"}})); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.DestroyTask(context.Background(), "busy", true) }()
	ch, err := d.TaskStats(ctx, "busy", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// A loaded machine can leave the loop without a tick for a window:
	// one sample of ten at 5 % or more is asked, each with memory.
	var best *driver.TaskResourceUsage
	for i := 0; i < 10; i++ {
		s := <-ch
		if s == nil || s.MemoryBytes == 0 {
			t.Fatalf("stats sample %d of a busy loop: %+v", i, s)
		}
		if best == nil || s.CPUPercent > best.CPUPercent {
			best = s
		}
		if best.CPUPercent >= 5 {
			break
		}
	}
	if best.CPUPercent < 5 {
		t.Fatalf("stats of a busy loop: at most %.1f %% CPU in ten samples", best.CPUPercent)
	}
}

func TestSignalAndUnknownTasks(t *testing.T) {
	ctx := context.Background()
	d := asTheTestsUser()
	cfg := trapTask(t, "sig", `trap 'exit 5' USR1`)
	if _, err := d.StartTask(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	waitReady(t, cfg)
	if err := d.SignalTask(ctx, "sig", "SIGBOGUS"); err == nil {
		t.Fatal("unknown signal accepted")
	}
	if err := d.SignalTask(ctx, "sig", "SIGUSR1"); err != nil {
		t.Fatal(err)
	}
	if r := waitExit(t, d, "sig", 5*time.Second); r.ExitCode != 5 {
		t.Fatalf("exit %+v", r)
	}
	if _, err := d.InspectTask(ctx, "nope"); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("inspect unknown: %v", err)
	}
	if err := d.DestroyTask(ctx, "sig", false); err != nil {
		t.Fatal(err)
	}
	if _, err := d.InspectTask(ctx, "sig"); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("inspect destroyed: %v", err)
	}
}

func TestATaskRunsAsItsUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("running a task as another user needs root")
	}
	ctx := context.Background()
	d := New()
	// The test's temporary directories are private to root: run in /.
	cfg := taskCfg(t, "nobody", map[string]any{"command": "/bin/sh", "args": []any{"-c", "id -u"}, "work_dir": "/"})
	cfg.User = "nobody"
	if _, err := d.StartTask(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if r := waitExit(t, d, "nobody", 10*time.Second); !r.Successful() {
		t.Fatalf("exit %+v", r)
	}
	out, _ := os.ReadFile(cfg.StdoutPath)
	if strings.TrimSpace(string(out)) == "0" || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("task ran as uid %q, want nobody's", out)
	}
	// Control: an unknown user is refused before anything runs.
	bad := taskCfg(t, "ghost", map[string]any{"command": "/bin/true"})
	bad.User = "no-such-user-hivelet"
	if _, err := d.StartTask(ctx, bad); err == nil {
		t.Fatal("an unknown user was accepted")
	}
}

// TestARelativeCommandIsFoundInTheTaskDirectory: "local/tool" runs the
// file in the task's directory (where an artifact is unpacked), a bare
// name the file in its local/ before PATH; the control, a relative path
// absent from the task directory, stays relative to the working directory.
func TestARelativeCommandIsFoundInTheTaskDirectory(t *testing.T) {
	cfg := taskCfg(t, "rel", nil)
	local := filepath.Join(cfg.AllocDir, "rel", "local")
	if err := os.MkdirAll(local, 0o755); err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(local, "tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ command, want string }{
		{"local/tool", tool},
		{"tool", tool},
		{"/bin/sh", "/bin/sh"},
		{"sh", "sh"},
		{"bin/missing", "bin/missing"},
	} {
		if got := resolveCommand(tc.command, cfg); got != tc.want {
			t.Errorf("%q resolves to %q, want %q", tc.command, got, tc.want)
		}
	}
	// And it runs.
	if err := os.WriteFile(tool, []byte("#!/bin/sh\necho from the task dir\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.Config = map[string]any{"command": "local/tool"}
	d := asTheTestsUser()
	if _, err := d.StartTask(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if r := waitExit(t, d, "rel", 10*time.Second); !r.Successful() {
		t.Fatalf("exit %+v", r)
	}
	if out, _ := os.ReadFile(cfg.StdoutPath); string(out) != "from the task dir\n" {
		t.Fatalf("stdout %q", out)
	}
}

// TestABridgeTaskIsRefusedByExec: exec runs tasks on the node's network,
// so a bridge task is refused at start saying so; the control, the same
// task in host mode, runs.
func TestABridgeTaskIsRefusedByExec(t *testing.T) {
	d := asTheTestsUser()
	cfg := taskCfg(t, "br", map[string]any{"command": "/bin/true"})
	cfg.NetworkMode = "bridge"
	if _, err := d.StartTask(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `network mode "bridge" needs the docker driver`) {
		t.Fatalf("bridge: %v", err)
	}
	cfg.NetworkMode = ""
	if _, err := d.StartTask(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if r := waitExit(t, d, "br", 10*time.Second); !r.Successful() {
		t.Fatalf("exit %+v", r)
	}
}

// idOf runs id in a task of d as user and returns its uid and groups.
func idOf(t *testing.T, d *Driver, allocDir, id, user string) (uid string, groups string, err error) {
	t.Helper()
	cfg := &driver.TaskConfig{ID: id, AllocID: "a1", TaskName: "web", AllocDir: allocDir, User: user,
		Config: map[string]any{"command": "/bin/sh", "args": []any{"-c",
			// What a task does with its directories: write the shared
			// allocation directory and its own local/.
			`id -u; id -G; echo shared > "$ALLOC/shared-` + id + `" && echo own > local/own-` + id + ` && cat local/given`}},
		Env:        map[string]string{"ALLOC": allocDir},
		StdoutPath: filepath.Join(allocDir, "logs", id+".stdout"), StderrPath: filepath.Join(allocDir, "logs", id+".stderr")}
	cfg.Config["work_dir"] = filepath.Join(allocDir, "web")
	if _, err := d.StartTask(context.Background(), cfg); err != nil {
		return "", "", err
	}
	if r := waitExit(t, d, id, 10*time.Second); !r.Successful() {
		errOut, _ := os.ReadFile(cfg.StderrPath)
		t.Fatalf("task as %q: exit %+v: %s", user, r, errOut)
	}
	out, _ := os.ReadFile(cfg.StdoutPath)
	f := strings.SplitN(strings.TrimSpace(string(out)), "\n", 3)
	if len(f) != 3 || f[2] != "given" {
		t.Fatalf("task as %q printed %q", user, out)
	}
	return f[0], f[1], nil
}

// TestATaskRunsAsNobodyUnlessRootIsAllowed: on a root agent an exec task
// that names no user runs as nobody (uid and no supplementary group of
// root's), and can still write its own directory and the shared
// allocation directory; one that says user = "root" is refused unless the
// agent allows root, and with it (control) runs as uid 0; raw_exec's
// option runs a task naming no user as the driver's own user.
func TestATaskRunsAsNobodyUnlessRootIsAllowed(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("switching users needs root")
	}
	nobody, err := user.Lookup(DefaultUser)
	if err != nil {
		t.Skipf("no user %s here: %v", DefaultUser, err)
	}
	// An allocation directory nobody can reach, as the agent makes it.
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	allocDir := filepath.Join(base, "alloc1")
	for _, d := range []string{filepath.Join(allocDir, "web", "local"), filepath.Join(allocDir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A template rendered by the (root) host, readable by its owner only.
	if err := os.WriteFile(filepath.Join(allocDir, "web", "local", "given"), []byte("given\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	uid, groups, err := idOf(t, New(), allocDir, "default", "")
	if err != nil {
		t.Fatalf("a task naming no user: %v", err)
	}
	if uid != nobody.Uid || groups != nobody.Gid {
		t.Fatalf("a task naming no user ran as uid %s groups %q, want %s's uid %s and only its group %s", uid, groups, DefaultUser, nobody.Uid, nobody.Gid)
	}
	if fi, err := os.Stat(allocDir); err != nil || fi.Mode()&os.ModeSticky == 0 {
		t.Fatalf("the shared allocation directory has no sticky bit: %v %v", fi.Mode(), err)
	}

	_, _, err = idOf(t, New(), allocDir, "root-refused", "root")
	if err == nil || !strings.Contains(err.Error(), "allow_root") {
		t.Fatalf("a task naming root on an agent that does not allow it: %v, want a refusal naming allow_root", err)
	}
	if _, err := os.Stat(filepath.Join(allocDir, "shared-root-refused")); !os.IsNotExist(err) {
		t.Fatalf("the refused task ran: %v", err)
	}

	// A working directory nobody cannot reach is refused with the reason.
	locked, err := os.MkdirTemp(t.TempDir(), "root-only") // 0700, root's
	if err != nil {
		t.Fatal(err)
	}
	private := filepath.Join(locked, "alloc2")
	for _, d := range []string{filepath.Join(private, "web", "local"), filepath.Join(private, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := idOf(t, New(), private, "unreachable", ""); err == nil || !strings.Contains(err.Error(), "cannot reach its working directory") {
		t.Fatalf("a task in a directory its user cannot reach: %v, want the reason", err)
	}

	// Controls: allowed, root is root; raw_exec's option is the driver's user.
	if uid, _, err := idOf(t, NewWithOptions(Options{AllowRoot: true}), allocDir, "root-allowed", "root"); err != nil || uid != "0" {
		t.Fatalf("a task naming root on an agent that allows it: uid %q, %v", uid, err)
	}
	if uid, _, err := idOf(t, NewWithOptions(Options{AgentUser: true}), allocDir, "raw-exec", ""); err != nil || uid != "0" {
		t.Fatalf("raw_exec's task naming no user: uid %q, %v, want the driver's (0)", uid, err)
	}
}

func TestTheAllowRootOptionComesFromTheAgentsEnvironment(t *testing.T) {
	for _, c := range []struct {
		env  string
		want bool
		bad  bool
	}{{"", false, false}, {"false", false, false}, {"true", true, false}, {"1", true, false}, {"yes please", false, true}} {
		o, err := OptionsFromEnv(func(k string) string {
			if k == EnvAllowRoot {
				return c.env
			}
			return ""
		})
		if (err != nil) != c.bad || o.AllowRoot != c.want {
			t.Errorf("%s=%q: %+v, %v", EnvAllowRoot, c.env, o, err)
		}
	}
}

// A task that ended while no plugin watched it (its keeper wrote its
// status, then the plugin relaunched) is recovered as exited with that
// status: a stop retried on the relaunched plugin, a wait and an inspect
// see its exit, not an unknown task. Control: with no status written, the
// gone process cannot be recovered.
func TestATaskThatEndedWhileThePluginWasDownIsRecoveredExited(t *testing.T) {
	ctx := context.Background()
	// A process that lives until its start time is read, then is gone.
	gone := osexec.Command("sleep", "60")
	if err := gone.Start(); err != nil {
		t.Fatal(err)
	}
	pid := gone.Process.Pid
	ticks, err := proc.StartTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	_ = gone.Process.Kill()
	_ = gone.Wait()
	status := filepath.Join(t.TempDir(), "status")
	handle := func() *driver.TaskHandle {
		raw, _ := json.Marshal(state{PID: pid, StartTicks: ticks, Status: status})
		return &driver.TaskHandle{Version: handleVersion, TaskID: "ended", Driver: Name, DriverState: raw}
	}
	// Control: the keeper wrote nothing (killed from outside).
	if err := os.WriteFile(status, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := asTheTestsUser().RecoverTask(ctx, handle()); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("recover of a gone process with no status: %v, want ErrTaskNotFound", err)
	}
	for _, c := range []struct {
		written      string
		code, signal int
	}{{"3\n", 3, 0}, {"143\n", 143, 15}} {
		if err := os.WriteFile(status, []byte(c.written), 0o600); err != nil {
			t.Fatal(err)
		}
		fresh := asTheTestsUser()
		if err := fresh.RecoverTask(ctx, handle()); err != nil {
			t.Fatalf("recover of a task whose keeper wrote %q: %v", c.written, err)
		}
		st, err := fresh.InspectTask(ctx, "ended")
		if err != nil || st.State != driver.TaskStateExited || st.ExitResult == nil ||
			st.ExitResult.ExitCode != c.code || st.ExitResult.Signal != c.signal || st.Attributes["pid"] != strconv.Itoa(pid) {
			t.Fatalf("recovered %q: %+v %v", c.written, st, err)
		}
		if r := waitExit(t, fresh, "ended", 5*time.Second); r.ExitCode != c.code || r.Signal != c.signal || r.Err != "" {
			t.Fatalf("wait on the recovered %q: %+v", c.written, r)
		}
		if err := fresh.StopTask(ctx, "ended", time.Second, ""); err != nil {
			t.Fatalf("stop of the recovered %q: %v", c.written, err)
		}
		if err := fresh.RecoverTask(ctx, handle()); err != nil {
			t.Fatalf("recovering again: %v", err)
		}
		if err := fresh.DestroyTask(ctx, "ended", false); err != nil {
			t.Fatalf("destroy of the recovered %q: %v", c.written, err)
		}
		// The file stays for a later relaunch.
		if b, err := os.ReadFile(status); err != nil || string(b) != c.written {
			t.Fatalf("status file after the recovery: %q %v", b, err)
		}
	}
}
