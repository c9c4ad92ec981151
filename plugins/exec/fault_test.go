package exec_test

// The exec driver's cells of issue 11's fault suite: the plugin process
// SIGKILLed during start, stop and wait, with the driver out of process
// as the agent runs it (the test binary serves it when the manager
// re-executes it as `<binary> plugin serve exec`).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/exec"
	"github.com/hivelet/hivelet/plugins/internal/proc"
	"github.com/hivelet/hivelet/plugins/manager"
	"github.com/hivelet/hivelet/sdk/driver"
)

// envHold names a file: while it exists, the plugin's next StartTask
// starts the task, then takes the file (renames it to <file>.held) and
// never answers: the moment after the process started and before its
// handle returned, where the test SIGKILLs the plugin.
const envHold = "HIVELET_TEST_EXEC_HOLD"

func TestMain(m *testing.M) {
	if mib := os.Getenv(envBallast); mib != "" {
		holdBallast(mib) // leftovers_test.go
	}
	if len(os.Args) == 4 && os.Args[1] == "plugin" && os.Args[2] == "serve" && os.Args[3] == exec.Name {
		d, err := exec.NewFromEnv()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		driver.Serve(holding{d})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holding is the exec driver with the hold of envHold.
type holding struct{ *exec.Driver }

func (h holding) StartTask(ctx context.Context, cfg *driver.TaskConfig) (*driver.TaskHandle, error) {
	th, err := h.Driver.StartTask(ctx, cfg)
	if hold := os.Getenv(envHold); err == nil && hold != "" && os.Rename(hold, hold+".held") == nil {
		select {} // killed here
	}
	return th, err
}

// rig is an exec plugin run by a plugin manager, as in the agent.
type rig struct {
	t    *testing.T
	dir  string
	hold string
	m    *manager.Manager
	d    driver.Driver
}

func newRig(t *testing.T, ctx context.Context) *rig {
	t.Helper()
	dir := testutil.ShortTempDir(t, "hvx")
	r := &rig{t: t, dir: dir, hold: filepath.Join(dir, "hold")}
	m, err := manager.New(manager.Config{
		SelfExe:    os.Args[0],
		Builtins:   []string{exec.Name},
		StateDir:   dir,
		MinBackoff: 10 * time.Millisecond,
		Logger:     slog.New(slog.NewTextHandler(testLog{t}, nil)),
		Env:        map[string][]string{exec.Name: {exec.EnvAllowRoot + "=true", envHold + "=" + r.hold}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Kill() })
	r.m = m
	if r.d, err = m.Driver(ctx, exec.Name); err != nil {
		t.Fatal(err)
	}
	return r
}

// kill SIGKILLs the plugin and returns once the manager has relaunched it
// (a new PID), with how long that took.
func (r *rig) kill() time.Duration {
	r.t.Helper()
	old, up := r.m.PID(exec.Name)
	if !up {
		r.t.Fatal("the exec plugin is not running")
	}
	at := time.Now()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		r.t.Fatal(err)
	}
	testutil.Eventually(r.t, 20*time.Second, "the exec plugin relaunched", func() bool {
		pid, up := r.m.PID(exec.Name)
		return up && pid != old
	})
	return time.Since(at)
}

// task is a shell that appends its PID to <dir>/<id>.pids each time it
// starts, runs script, then loops. It runs as the test's user (root is
// allowed by the rig): its files are in a directory private to that user.
func (r *rig) task(id, script string) *driver.TaskConfig { return r.taskTrapping(id, "", script) }

// taskTrapping is task with trap set before the PID is written: a test
// that signals the task once started finds its trap in place (a signal
// between the PID line and the trap would kill the shell instead).
func (r *rig) taskTrapping(id, trap, script string) *driver.TaskConfig {
	user := ""
	if os.Geteuid() == 0 {
		user = "root"
	}
	pids := filepath.Join(r.dir, id+".pids")
	tc := &driver.TaskConfig{ID: "alloc-" + id + "/app", AllocID: "alloc-" + id, TaskName: "app", User: user,
		AllocDir: r.dir, StdoutPath: filepath.Join(r.dir, id+".out"), StderrPath: filepath.Join(r.dir, id+".err"),
		Config: map[string]any{"command": "/bin/sh", "args": []any{"-c",
			lines(trap, `echo $$ >> "$PIDS"`, script, `while :; do sleep 0.05; done`)}},
		Env: map[string]string{"PIDS": pids, "MARK": filepath.Join(r.dir, id+".mark")}}
	r.t.Cleanup(func() {
		_ = r.d.DestroyTask(context.Background(), tc.ID, true)
		for _, pid := range r.pids(tc) {
			if alive(pid) {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	return tc
}

// lines joins the non-empty parts of a shell script with "; ".
func lines(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "; ")
}

// pids are the PIDs the task's starts wrote, in order.
func (r *rig) pids(tc *driver.TaskConfig) []int {
	b, _ := os.ReadFile(tc.Env["PIDS"])
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// started waits for the task's n-th start and returns its PID.
func (r *rig) started(tc *driver.TaskConfig, n int) int {
	r.t.Helper()
	testutil.Eventually(r.t, 10*time.Second, fmt.Sprintf("start %d of %s", n, tc.ID), func() bool {
		b, err := os.ReadFile(tc.Env["PIDS"])
		return err == nil && strings.HasSuffix(string(b), "\n") && len(r.pids(tc)) >= n
	})
	return r.pids(tc)[n-1]
}

// marks counts the lines of the task's mark file that equal line.
func marks(tc *driver.TaskConfig, line string) int {
	b, _ := os.ReadFile(tc.Env["MARK"])
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if l == line {
			n++
		}
	}
	return n
}

func alive(pid int) bool {
	st, err := proc.ReadStat(pid)
	return err == nil && st.State != "Z" && st.State != "X"
}

// groupGone reports whether no live process is left in process group
// pgid.
func groupGone(pgid int) bool {
	members, err := proc.Group(pgid)
	return err == nil && len(members) == 0
}

// groupOf is the process group of the live process pid. A task's PID (the
// one its shell writes) is not its group's ID: the group is led by the
// task's status keeper (status.go), and no group has the task's PID as ID,
// so groupGone of that PID would hold from the start.
func groupOf(t *testing.T, pid int) int {
	t.Helper()
	st, err := proc.ReadStat(pid)
	if err != nil {
		t.Fatalf("the process group of pid %d: %v", pid, err)
	}
	return st.PGID
}

func pidOf(t *testing.T, ctx context.Context, d driver.Driver, id string) int {
	t.Helper()
	st, err := d.InspectTask(ctx, id)
	if err != nil {
		t.Fatalf("inspecting %s: %v", id, err)
	}
	pid, err := strconv.Atoi(st.Attributes["pid"])
	if err != nil || st.State != driver.TaskStateRunning {
		t.Fatalf("task %s: %+v", id, st)
	}
	return pid
}

// interrupt starts tc with the hold armed, SIGKILLs the plugin once the
// task's process runs and the handle is held, and returns that process's
// PID once the plugin is back. The start must have failed.
func (r *rig) interrupt(ctx context.Context, tc *driver.TaskConfig) int {
	r.t.Helper()
	if err := os.WriteFile(r.hold, nil, 0o600); err != nil {
		r.t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := r.d.StartTask(ctx, tc)
		errc <- err
	}()
	testutil.Eventually(r.t, 10*time.Second, "the start held after the process started", func() bool {
		_, err := os.Stat(r.hold + ".held")
		return err == nil
	})
	_ = os.Remove(r.hold + ".held")
	pid := r.started(tc, 1)
	r.kill()
	if err := <-errc; err == nil {
		r.t.Fatal("a start whose plugin was killed returned no error")
	}
	if !alive(pid) {
		r.t.Fatalf("the interrupted start's process %d is not running (the fault needs it running)", pid)
	}
	return pid
}

// The exec driver's lost-start duplicate (issue 11): the plugin SIGKILLed
// inside StartTask after the task's process started, before its handle
// returned. The host has an error and no handle. A retried start of the
// same task adopts the running process (same PID, one start, the retry
// answers with its handle); a retry with another config replaces it (the
// old group killed first); a DestroyTask without a handle (the runner
// giving up) kills it, and refuses without force. Before the fix the
// retry started a second process and the first ran on untracked.
func TestAStartInterruptedByAPluginSIGKILLIsAdoptedOrDestroyed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newRig(t, ctx)

	// The same start is retried: adopted.
	tc := r.task("retry", ":")
	orphan := r.interrupt(ctx, tc)
	orphanGroup := groupOf(t, orphan)
	at := time.Now()
	h, err := r.d.StartTask(ctx, tc)
	if err != nil {
		t.Fatalf("retrying the interrupted start: %v", err)
	}
	t.Logf("the interrupted start's process adopted %v after the retry began", time.Since(at))
	if got := pidOf(t, ctx, r.d, tc.ID); got != orphan || h.TaskID != tc.ID {
		t.Fatalf("the retry runs pid %d (handle %+v); want the interrupted start's %d", got, h, orphan)
	}
	if p := r.pids(tc); len(p) != 1 {
		t.Fatalf("the task started %d times (pids %v), want once", len(p), p)
	}
	wait, err := r.d.WaitTask(ctx, tc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.d.StopTask(ctx, tc.ID, 5*time.Second, ""); err != nil {
		t.Fatal(err)
	}
	if res, ok := <-wait; !ok || res == nil {
		t.Fatal("no exit of the adopted task")
	}
	testutil.Eventually(t, 5*time.Second, "the adopted task's group gone", func() bool { return groupGone(orphanGroup) })

	// The host retries with another config (a new job version): the
	// leftover is killed, the new start runs.
	tc2 := r.task("replace", ":")
	old := r.interrupt(ctx, tc2)
	oldGroup := groupOf(t, old)
	tc2.Env["CHANGED"] = "yes"
	if _, err := r.d.StartTask(ctx, tc2); err != nil {
		t.Fatalf("start with another config: %v", err)
	}
	// By the time the start returns, every process of the leftover's
	// group is gone: the task's own shell, not only the keeper leading
	// the group (a SIGKILLed process dies when the scheduler next runs it;
	// TestAKilledLeftoverIsGoneWithItsWholeGroup).
	if alive(old) || !groupGone(oldGroup) {
		members, _ := proc.Group(oldGroup)
		t.Fatalf("the start with another config returned with the leftover's process %d alive %v, its group %d: %+v", old, alive(old), oldGroup, members)
	}
	now := r.started(tc2, 2)
	if alive(old) || !alive(now) || pidOf(t, ctx, r.d, tc2.ID) != now {
		t.Fatalf("after a start with another config: old %d alive %v, new %d alive %v", old, alive(old), now, alive(now))
	}

	// The host gives up instead: DestroyTask by ID, without a handle.
	tc3 := r.task("giveup", ":")
	left := r.interrupt(ctx, tc3)
	leftGroup := groupOf(t, left)
	if err := r.d.DestroyTask(ctx, tc3.ID, false); err == nil || errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("DestroyTask without force of a running leftover: %v, want a refusal", err)
	}
	if err := r.d.DestroyTask(ctx, tc3.ID, true); err != nil {
		t.Fatalf("destroying what the interrupted start left: %v", err)
	}
	// Gone by the time DestroyTask returns, as for the start above.
	if !groupGone(leftGroup) {
		members, _ := proc.Group(leftGroup)
		t.Fatalf("DestroyTask returned with the interrupted start's group %d alive: %+v", leftGroup, members)
	}
	// Control: nothing left, so the ID is unknown.
	if err := r.d.DestroyTask(ctx, tc3.ID, true); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("DestroyTask of a task with nothing left: %v, want ErrTaskNotFound", err)
	}
}

// The plugin SIGKILLed while StopTask waits for a task that traps SIGTERM
// and takes ~2 s to exit (kill timeout 20 s). The manager retries the stop
// on the relaunched plugin, which has recovered the task: the task exits
// by itself (its trap ran to the end, once), not by the kill timeout,
// nothing of its group is left, and it was never started again.
func TestAStopInterruptedByAPluginSIGKILLStillEndsTheTaskOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newRig(t, ctx)
	// The trap ignores further SIGTERMs (and so do its sleeps): the stop
	// the relaunched plugin sends again does not cut the slow exit short.
	tc := r.taskTrapping("stop", `trap 'trap "" TERM; echo term >> "$MARK"; i=0; while [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done; echo bye >> "$MARK"; exit 0' TERM`, "")
	if _, err := r.d.StartTask(ctx, tc); err != nil {
		t.Fatal(err)
	}
	pid := r.started(tc, 1)
	group := groupOf(t, pid)
	wait, err := r.d.WaitTask(ctx, tc.ID)
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	at := time.Now()
	go func() { stopped <- r.d.StopTask(ctx, tc.ID, 20*time.Second, "SIGTERM") }()
	testutil.Eventually(t, 10*time.Second, "the task's SIGTERM trap running", func() bool { return marks(tc, "term") == 1 })
	relaunch := r.kill()
	if err := <-stopped; err != nil {
		t.Fatalf("StopTask across the plugin's SIGKILL: %v", err)
	}
	took := time.Since(at)
	t.Logf("stop completed %v after it began (plugin relaunched in %v)", took.Round(time.Millisecond), relaunch.Round(time.Millisecond))
	if took > 15*time.Second {
		t.Fatalf("the stop took %v: the kill timeout, not the task's own exit", took)
	}
	if n := marks(tc, "bye"); n != 1 {
		t.Fatalf("the task's trap finished %d times, want once (it exited by itself)", n)
	}
	if res, ok := <-wait; !ok || res == nil {
		t.Fatal("the wait opened before the SIGKILL saw no exit")
	} else {
		t.Logf("exit seen by the wait opened before the SIGKILL: %+v", res)
	}
	testutil.Eventually(t, 5*time.Second, "the task's group gone", func() bool { return groupGone(group) })
	if p := r.pids(tc); len(p) != 1 {
		t.Fatalf("the task started %d times (pids %v), want once", len(p), p)
	}
	if st, err := r.d.InspectTask(ctx, tc.ID); err != nil || st.State != driver.TaskStateExited {
		t.Fatalf("the task after the stop: %+v %v, want exited", st, err)
	}
}

// The plugin SIGKILLed while the host waits on a running task: the
// relaunched plugin recovers the same process (same PID, not started
// again), the wait opened before the SIGKILL stays open, and the task's
// later exit reaches it with its own status: the relaunched plugin is not
// the task's parent, its status keeper is (status.go).
func TestAWaitAcrossAPluginSIGKILLFollowsTheSameProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newRig(t, ctx)
	tc := r.task("wait", `while [ ! -e "$MARK" ]; do sleep 0.05; done; exit 7`)
	if _, err := r.d.StartTask(ctx, tc); err != nil {
		t.Fatal(err)
	}
	pid := r.started(tc, 1)
	group := groupOf(t, pid)
	wait, err := r.d.WaitTask(ctx, tc.ID)
	if err != nil {
		t.Fatal(err)
	}
	relaunch := r.kill()
	if got := pidOf(t, ctx, r.d, tc.ID); got != pid {
		t.Fatalf("after the relaunch the task is pid %d, want %d", got, pid)
	}
	t.Logf("plugin relaunched and the task recovered %v after the SIGKILL", relaunch.Round(time.Millisecond))
	select {
	case res, ok := <-wait:
		t.Fatalf("the wait ended across the SIGKILL: %+v %v", res, ok)
	default:
	}
	at := time.Now()
	if err := os.WriteFile(tc.Env["MARK"], nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case res, ok := <-wait:
		if !ok || res == nil {
			t.Fatal("the wait closed without the exit")
		}
		t.Logf("exit seen %v after the task was told to exit: %+v", time.Since(at).Round(time.Millisecond), res)
		if res.ExitCode != 7 || res.Signal != 0 || res.Err != "" {
			t.Fatalf("exit of a task recovered by a relaunched plugin: %+v, want its own exit code 7", res)
		}
	case <-ctx.Done():
		t.Fatal("the task's exit never reached the wait opened before the SIGKILL")
	}
	if p := r.pids(tc); len(p) != 1 {
		t.Fatalf("the task started %d times (pids %v), want once", len(p), p)
	}
	testutil.Eventually(t, 5*time.Second, "the task's group gone after its exit", func() bool { return groupGone(group) })
}

// testLog sends the manager's and the plugin's log lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// After a plugin SIGKILL the recovered task's exit is reported as it
// happened, from its status keeper's file: a batch task that succeeded is
// not taken for a failure (and run again by its restart policy), a task
// killed by a signal says which, and a stop through the relaunched plugin
// reports the task's own exit code. Control: a task started without a
// keeper (no allocation directory) is recovered with its status unknown.
func TestARecoveredTaskExitsWithItsOwnStatus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	r := newRig(t, ctx)
	cases := []struct {
		name   string
		trap   string // set before the PID is written
		script string
		end    func(tc *driver.TaskConfig, pid int)
		want   driver.ExitResult
		noDir  bool
	}{
		{name: "exit0", script: `while [ ! -e "$MARK" ]; do sleep 0.05; done; exit 0`,
			end:  func(tc *driver.TaskConfig, _ int) { _ = os.WriteFile(tc.Env["MARK"], nil, 0o600) },
			want: driver.ExitResult{ExitCode: 0}},
		{name: "signalled", trap: `trap - TERM`,
			end:  func(_ *driver.TaskConfig, pid int) { _ = syscall.Kill(pid, syscall.SIGTERM) },
			want: driver.ExitResult{ExitCode: 143, Signal: 15}},
		{name: "stopped", trap: `trap 'exit 5' TERM`,
			end: func(tc *driver.TaskConfig, _ int) {
				if err := r.d.StopTask(ctx, tc.ID, 10*time.Second, "SIGTERM"); err != nil {
					t.Errorf("stop through the relaunched plugin: %v", err)
				}
			},
			want: driver.ExitResult{ExitCode: 5}},
		{name: "nokeeper", script: `while [ ! -e "$MARK" ]; do sleep 0.05; done; exit 0`, noDir: true,
			end:  func(tc *driver.TaskConfig, _ int) { _ = os.WriteFile(tc.Env["MARK"], nil, 0o600) },
			want: driver.ExitResult{ExitCode: -1, Err: "exit status unknown"}},
	}
	type running struct {
		tc   *driver.TaskConfig
		pid  int
		wait <-chan *driver.ExitResult
	}
	var all []running
	for _, c := range cases {
		tc := r.taskTrapping(c.name, c.trap, c.script)
		if c.noDir {
			tc.AllocDir = ""
		}
		if _, err := r.d.StartTask(ctx, tc); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		pid := r.started(tc, 1)
		if got := pidOf(t, ctx, r.d, tc.ID); got != pid {
			t.Fatalf("%s: the driver reports pid %d, the task is %d", c.name, got, pid)
		}
		all = append(all, running{tc: tc, pid: pid})
	}
	r.kill()
	for i := range all {
		w, err := r.d.WaitTask(ctx, all[i].tc.ID)
		if err != nil {
			t.Fatalf("%s: waiting after the relaunch: %v", cases[i].name, err)
		}
		all[i].wait = w
	}
	for i, c := range cases {
		c.end(all[i].tc, all[i].pid)
		select {
		case res := <-all[i].wait:
			if res == nil {
				t.Fatalf("%s: the wait closed without the exit", c.name)
			}
			if res.ExitCode != c.want.ExitCode || res.Signal != c.want.Signal || !strings.Contains(res.Err, c.want.Err) || (c.want.Err == "" && res.Err != "") {
				t.Errorf("%s: recovered exit %+v, want %+v", c.name, res, c.want)
			}
		case <-ctx.Done():
			t.Fatalf("%s: no exit", c.name)
		}
		if p := r.pids(all[i].tc); len(p) != 1 {
			t.Errorf("%s: started %d times", c.name, len(p))
		}
	}
	// The keepers' files are gone with their tasks.
	left, _ := filepath.Glob(filepath.Join(r.dir, ".hivelet-exit-*"))
	if len(left) != 0 {
		t.Errorf("status files left: %v", left)
	}
}
