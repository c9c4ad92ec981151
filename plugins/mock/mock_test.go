package mock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/sdk/driver"
)

func start(t *testing.T, d *Driver, id string, cfg map[string]any) (*driver.TaskHandle, error) {
	t.Helper()
	return d.StartTask(context.Background(), &driver.TaskConfig{ID: id, Config: cfg})
}

func exitOf(t *testing.T, d *Driver, id string, within time.Duration) (*driver.ExitResult, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	begin := time.Now()
	ch, err := d.WaitTask(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := <-ch
	if !ok {
		return nil, time.Since(begin)
	}
	return r, time.Since(begin)
}

func TestRunForAndExitAreAsConfigured(t *testing.T) {
	d := New()
	cases := []struct {
		id   string
		cfg  map[string]any
		want driver.ExitResult
	}{
		{"ok", map[string]any{"run_for": "20ms"}, driver.ExitResult{}},
		{"code", map[string]any{"run_for": "20ms", "exit_code": 4}, driver.ExitResult{ExitCode: 4}},
		{"signal", map[string]any{"run_for": "0s", "exit_signal": 9}, driver.ExitResult{Signal: 9}},
		{"oom", map[string]any{"run_for": "1ms", "exit_code": 137, "oom_killed": true}, driver.ExitResult{ExitCode: 137, OOMKilled: true}},
	}
	for _, tc := range cases {
		if _, err := start(t, d, tc.id, tc.cfg); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range cases {
		r, _ := exitOf(t, d, tc.id, 5*time.Second)
		if r == nil || *r != tc.want {
			t.Errorf("%s: exit %+v, want %+v", tc.id, r, tc.want)
		}
	}
	// Control: without run_for a task runs until stopped.
	if _, err := start(t, d, "forever", nil); err != nil {
		t.Fatal(err)
	}
	if r, _ := exitOf(t, d, "forever", 100*time.Millisecond); r != nil {
		t.Fatalf("a task without run_for exited: %+v", r)
	}
}

func TestStartFailuresAndDelays(t *testing.T) {
	d := New()
	if _, err := start(t, d, "fails", map[string]any{"start_error": "no capacity"}); err == nil || !strings.Contains(err.Error(), "no capacity") {
		t.Fatalf("start_error: %v", err)
	}
	if _, err := d.InspectTask(context.Background(), "fails"); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatal("a failed start left a task behind")
	}
	begin := time.Now()
	if _, err := start(t, d, "slow", map[string]any{"start_block_for": "150ms"}); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(begin); el < 150*time.Millisecond {
		t.Fatalf("start_block_for 150ms returned after %v", el)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := d.StartTask(ctx, &driver.TaskConfig{ID: "cancelled", Config: map[string]any{"start_block_for": "10s"}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked start with an expiring ctx: %v", err)
	}
	_, err := start(t, d, "typo", map[string]any{"run_four": "1s"})
	var ce *driver.ConfigError
	if !errors.As(err, &ce) || ce.Fields[0].Path != "run_four" {
		t.Fatalf("bad key: %v", err)
	}
	if _, err := start(t, d, "baddur", map[string]any{"run_for": "soon"}); err == nil || !strings.Contains(err.Error(), "run_for") {
		t.Fatalf("bad duration: %v", err)
	}
}

func TestStartingTheSameTaskTwiceIsRefused(t *testing.T) {
	d := New()
	if _, err := start(t, d, "once", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := start(t, d, "once", nil); err == nil {
		t.Fatal("a running task was started again")
	}
	// Control: once it exited, the ID may be reused (a restart).
	if err := d.StopTask(context.Background(), "once", time.Second, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := start(t, d, "once", nil); err != nil {
		t.Fatalf("restart after exit: %v", err)
	}
}

func TestStopHonoursKillAfterAndTimeout(t *testing.T) {
	d := New()
	ctx := context.Background()
	if _, err := start(t, d, "polite", map[string]any{"kill_after": "50ms"}); err != nil {
		t.Fatal(err)
	}
	if _, err := start(t, d, "stubborn", map[string]any{"kill_after": "10s"}); err != nil {
		t.Fatal(err)
	}
	if err := d.StopTask(ctx, "polite", time.Second, "SIGINT"); err != nil {
		t.Fatal(err)
	}
	if r, _ := exitOf(t, d, "polite", time.Second); r == nil || r.Signal != int(syscall.SIGINT) {
		t.Fatalf("polite exit %+v", r)
	}
	begin := time.Now()
	if err := d.StopTask(ctx, "stubborn", 100*time.Millisecond, ""); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(begin); el < 100*time.Millisecond || el > 5*time.Second {
		t.Fatalf("stop took %v, want the 100ms timeout", el)
	}
	if r, _ := exitOf(t, d, "stubborn", time.Second); r == nil || r.Signal != int(syscall.SIGKILL) {
		t.Fatalf("stubborn exit %+v, want SIGKILL", r)
	}
}

func TestStopErrorLeavesTheTaskRunning(t *testing.T) {
	d := New()
	if _, err := start(t, d, "stuck", map[string]any{"stop_error": "device busy", "stop_block_for": "30ms"}); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	err := d.StopTask(context.Background(), "stuck", time.Second, "")
	if err == nil || !strings.Contains(err.Error(), "device busy") || time.Since(begin) < 30*time.Millisecond {
		t.Fatalf("stop: %v after %v", err, time.Since(begin))
	}
	st, _ := d.InspectTask(context.Background(), "stuck")
	if st.State != driver.TaskStateRunning {
		t.Fatalf("state %s after a failed stop", st.State)
	}
	// Control: a forced destroy still ends it.
	if err := d.DestroyTask(context.Background(), "stuck", true); err != nil {
		t.Fatal(err)
	}
}

func TestARecoveredTaskEndsWhenItWouldHaveEnded(t *testing.T) {
	d := New()
	h, err := start(t, d, "planned", map[string]any{"run_for": "300ms", "exit_code": 2})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	// A new plugin process knows nothing but the handle.
	fresh := New()
	if err := fresh.RecoverTask(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	r, waited := exitOf(t, fresh, "planned", 5*time.Second)
	if r == nil || r.ExitCode != 2 {
		t.Fatalf("exit %+v", r)
	}
	if waited < 100*time.Millisecond || waited > 2*time.Second {
		t.Fatalf("recovered task ended after %v more, want about 200ms", waited)
	}
	// A handle of another driver is refused.
	if err := fresh.RecoverTask(context.Background(), &driver.TaskHandle{TaskID: "x", Driver: "exec", Version: 1}); err == nil {
		t.Fatal("an exec handle was recovered by the mock driver")
	}
}

func TestStdoutEventsAndManyTasks(t *testing.T) {
	d := New()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events, err := d.TaskEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "stdout")
	if _, err := d.StartTask(ctx, &driver.TaskConfig{ID: "talker", StdoutPath: out, Config: map[string]any{"stdout_string": "hello\n"}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); string(b) != "hello\n" {
		t.Fatalf("stdout %q", b)
	}
	if e := <-events; e.TaskID != "talker" || e.Message != "started" {
		t.Fatalf("event %+v", e)
	}
	const n = 5000
	for i := 0; i < n; i++ {
		if _, err := d.StartTask(ctx, &driver.TaskConfig{ID: "fleet-" + strconv.Itoa(i), Config: map[string]any{"run_for": "50ms"}}); err != nil {
			t.Fatal(err)
		}
	}
	// Every task but the talker (which runs until stopped) ends on its own:
	// wait on each one's exit, with ctx as the bound.
	for id, tk := range d.tasks {
		if id == "talker" {
			continue
		}
		select {
		case <-tk.done:
		case <-ctx.Done():
			t.Fatalf("mock task %s still running: %v", id, ctx.Err())
		}
	}
	if tk, err := d.table.Get("talker"); err != nil || tk.exited.Exited() {
		t.Fatalf("control: the talker has exited or is gone (%v)", err)
	}
}
