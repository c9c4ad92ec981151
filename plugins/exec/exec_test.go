package exec

import (
	"context"
	"encoding/json"
	"errors"
	"os"
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
	d := New()
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
	d := New()
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
	d := New()
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
	d := New()
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
	testutil.Eventually(t, 5*time.Second, "the grandchild to be gone", func() bool { return !alive(grandchild) })
	if alive(main) {
		t.Fatal("the task's main process is alive after stop")
	}
}

func TestStopWithAHandledSignalEndsBeforeTheTimeout(t *testing.T) {
	ctx := context.Background()
	d := New()
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
	d := New()
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
	d := New()
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
	fresh := New()
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
	if err := New().RecoverTask(ctx, handle(ticks)); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("recover of an exited process: %v", err)
	}
}

func TestStatsReportTheGroupsCPUAndMemory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := New()
	if _, err := d.StartTask(ctx, taskCfg(t, "busy", map[string]any{"command": "/bin/sh", "args": []any{"-c", "while :; do :; done"}})); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.DestroyTask(context.Background(), "busy", true) }()
	ch, err := d.TaskStats(ctx, "busy", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var last *driver.TaskResourceUsage
	for i := 0; i < 3; i++ {
		last = <-ch
	}
	if last == nil || last.CPUPercent < 5 || last.MemoryBytes == 0 {
		t.Fatalf("stats of a busy loop: %+v", last)
	}
}

func TestSignalAndUnknownTasks(t *testing.T) {
	ctx := context.Background()
	d := New()
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
	d := New()
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
	d := New()
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
