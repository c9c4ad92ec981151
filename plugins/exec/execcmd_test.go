package exec

import (
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/internal/proc"
)

// TestACommandRunsInTheTasksEnvironment: ExecTask runs as the task's main
// process runs, with its environment and working directory, and returns
// the exit code and output; once the task has exited, the command is
// refused (the control: the same call succeeded while it ran).
func TestACommandRunsInTheTasksEnvironment(t *testing.T) {
	d := asTheTestsUser()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tc := taskCfg(t, "checked", map[string]any{"command": "/bin/sleep", "args": []any{"30"}})
	if _, err := d.StartTask(ctx, tc); err != nil {
		t.Fatal(err)
	}
	r, err := d.ExecTask(ctx, tc.ID, []string{"sh", "-c", "echo $FROM_TASK; pwd; exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "task\n" + tc.AllocDir + "\n"; r.ExitCode != 3 || string(r.Output) != want {
		t.Fatalf("exec = exit %d, %q; want exit 3, %q", r.ExitCode, r.Output, want)
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if _, err := d.ExecTask(short, tc.ID, []string{"/bin/sleep", "10"}); err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("a command past its deadline: %v", err)
	}
	if err := d.StopTask(ctx, tc.ID, time.Second, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	waitExit(t, d, tc.ID, 10*time.Second)
	if _, err := d.ExecTask(ctx, tc.ID, []string{"/bin/true"}); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("exec in an exited task: %v", err)
	}
}

// TestAnEmptyEnvironIsReadAgainUntilTheExecCompletes: /proc/<pid>/environ
// reads as empty while a process's exec lays out its stack; readEnviron
// waits for the contents (here a file filled 30 ms later), and gives up
// with an error when ctx ends on a file that stays empty.
func TestAnEmptyEnvironIsReadAgainUntilTheExecCompletes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "environ")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		_ = os.WriteFile(path, []byte("A=1\x00PATH=/bin\x00"), 0o600)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	raw, err := readEnviron(ctx, dir)
	if err != nil || string(raw) != "A=1\x00PATH=/bin\x00" {
		t.Fatalf("readEnviron = %q, %v; want the contents written after 30 ms", raw, err)
	}

	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, "environ"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if raw, err := readEnviron(short, empty); err == nil {
		t.Fatalf("an environ that stays empty read as %q, nil; want an error", raw)
	}
}

// TestACommandRightAfterTheStartSeesTheTasksEnvironment: a command run the
// moment StartTask returns, again and again, gets the task's environment
// (before readEnviron, 2 runs in 300 of the test above, beside two busy
// loops, got an empty one: the exec was still laying out the task).
func TestACommandRightAfterTheStartSeesTheTasksEnvironment(t *testing.T) {
	d := asTheTestsUser()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 40 {
		tc := taskCfg(t, "at-once-"+strconv.Itoa(i), map[string]any{"command": "/bin/sleep", "args": []any{"30"}})
		if _, err := d.StartTask(ctx, tc); err != nil {
			t.Fatal(err)
		}
		r, err := d.ExecTask(ctx, tc.ID, []string{"sh", "-c", "echo $FROM_TASK"})
		if err != nil {
			t.Fatal(err)
		}
		if r.ExitCode != 0 || string(r.Output) != "task\n" {
			t.Fatalf("run %d: exec = exit %d, %q; want exit 0, %q", i, r.ExitCode, r.Output, "task\n")
		}
		if err := d.DestroyTask(ctx, tc.ID, true); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAnExitedProcessIsNotWaitedFor: the environment of a process that
// exited and is not reaped yet (a zombie) cannot be read (ESRCH), so
// readEnviron fails at once instead of waiting execSettle for an exec.
func TestAnExitedProcessIsNotWaitedFor(t *testing.T) {
	cmd := osexec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	dir := "/proc/" + strconv.Itoa(cmd.Process.Pid)
	testutil.Eventually(t, 5*time.Second, "the process a zombie", func() bool {
		st, err := proc.ReadStat(cmd.Process.Pid)
		return err == nil && st.State == "Z"
	})
	t0 := time.Now()
	raw, err := readEnviron(context.Background(), dir)
	if err == nil {
		t.Fatalf("readEnviron of a zombie = %q, nil; want an error", raw)
	}
	if d := time.Since(t0); d > execSettle/2 {
		t.Fatalf("readEnviron of a zombie took %v: it waited for an exec", d)
	}
}
