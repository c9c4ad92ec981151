package manager_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/plugins/manager"
	"github.com/hivelet/hivelet/sdk/driver"
)

// The manager's driver has the function wait (driver.WaitNotifier), so a
// runner's wait holds no goroutine on the host; like WaitTask's channel,
// a function wait opened before the plugin died is carried to the next
// process and gets the task's exit there, once.
func TestAFunctionWaitGetsItsExitAcrossAPluginRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := newManager(t, manager.Config{MinBackoff: 10 * time.Millisecond})
	d := mockDriver(ctx, t, m)
	wn, ok := d.(driver.WaitNotifier)
	if !ok {
		t.Fatalf("the manager's driver %T has no function wait", d)
	}
	h, err := d.StartTask(ctx, &driver.TaskConfig{ID: "planned", Config: map[string]any{"run_for": "1s", "exit_code": 7}})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *driver.ExitResult, 2)
	if err := wn.WaitTaskFunc(ctx, h.TaskID, func(r *driver.ExitResult) { got <- r }); err != nil {
		t.Fatal(err)
	}
	old, _ := m.PID("mock")
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r == nil || r.ExitCode != 7 {
			t.Fatalf("exit %+v, want exit code 7", r)
		}
	case <-ctx.Done():
		t.Fatal("no exit")
	}
	if pid, _ := m.PID("mock"); pid == old {
		t.Fatal("an exit without a new plugin process: the wait was not carried across")
	}
	select {
	case r := <-got:
		t.Fatalf("the function ran again with %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
}
