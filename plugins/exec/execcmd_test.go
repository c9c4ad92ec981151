package exec

import (
	"context"
	"strings"
	"testing"
	"time"
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
