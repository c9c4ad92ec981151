package driver_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/sdk/driver"
)

// execFake is a driver that runs commands in its tasks: it answers each
// with the command echoed, and exit 3 for "fail".
type execFake struct {
	*fake
	got []string
}

func (f *execFake) ExecTask(_ context.Context, taskID string, command []string) (*driver.ExecResult, error) {
	f.got = append([]string{taskID}, command...)
	if command[0] == "fail" {
		return &driver.ExecResult{ExitCode: 3, Output: []byte(strings.Repeat("x", driver.MaxExecOutput+10))}, nil
	}
	return &driver.ExecResult{Output: []byte(strings.Join(command, " "))}, nil
}

// TestACommandRunsInATaskAcrossTheBoundary: ExecTask reaches a driver that
// implements TaskExecer with the task and command, and its exit code and
// output come back (cut at MaxExecOutput); a driver without it (as one
// written before ExecTask) answers ErrNotSupported, not a
// transport error.
func TestACommandRunsInATaskAcrossTheBoundary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f := &execFake{fake: newFake()}
	d := connect(t, f).(driver.TaskExecer)
	r, err := d.ExecTask(ctx, "a1/web", []string{"/bin/check", "-v"})
	if err != nil || r.ExitCode != 0 || string(r.Output) != "/bin/check -v" {
		t.Fatalf("exec = %+v, %v", r, err)
	}
	if want := []string{"a1/web", "/bin/check", "-v"}; !reflect.DeepEqual(f.got, want) {
		t.Fatalf("driver got %v, want %v", f.got, want)
	}
	r, err = d.ExecTask(ctx, "a1/web", []string{"fail"})
	if err != nil || r.ExitCode != 3 || len(r.Output) != driver.MaxExecOutput {
		t.Fatalf("exec fail = exit %d, %d bytes, %v", r.ExitCode, len(r.Output), err)
	}

	plain := connect(t, newFake()).(driver.TaskExecer)
	if _, err := plain.ExecTask(ctx, "a1/web", []string{"/bin/true"}); !errors.Is(err, driver.ErrNotSupported) {
		t.Fatalf("a driver without ExecTask: %v, want ErrNotSupported", err)
	}
}
