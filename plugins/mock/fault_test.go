package mock_test

// The mock driver's cells of issue 11's fault suite: it runs out of process
// like every built-in (the test binary serves it when the manager
// re-executes it as `<binary> plugin serve mock`). Its tasks are timers in
// the plugin process, so a SIGKILL takes them all; what survives is their
// handles. The wait cell is plugins/manager's
// TestStreamsContinueAcrossAPluginRestart (the planned exit code 6 reaches
// the wait opened before the SIGKILL).

import (
	"context"
	"io"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/manager"
	"github.com/hivelet/hivelet/plugins/mock"
	"github.com/hivelet/hivelet/sdk/driver"
)

func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == "plugin" && os.Args[2] == "serve" && os.Args[3] == mock.Name {
		driver.Serve(mock.New())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func pluginMock(t *testing.T, ctx context.Context) (*manager.Manager, driver.Driver) {
	t.Helper()
	m, err := manager.New(manager.Config{SelfExe: os.Args[0], Builtins: []string{mock.Name},
		StateDir: testutil.ShortTempDir(t, "hvk"), MinBackoff: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Kill() })
	d, err := m.Driver(ctx, mock.Name)
	if err != nil {
		t.Fatal(err)
	}
	return m, d
}

func killMock(t *testing.T, m *manager.Manager) time.Duration {
	t.Helper()
	old, up := m.PID(mock.Name)
	if !up {
		t.Fatal("the mock plugin is not running")
	}
	at := time.Now()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the mock plugin relaunched", func() bool {
		pid, up := m.PID(mock.Name)
		return up && pid != old
	})
	return time.Since(at)
}

// The plugin SIGKILLed inside StartTask (start_block_for holds the start):
// the start fails, the task ran nowhere (a mock task is a timer in the
// dead process), and the retried start runs it once: the task is known,
// running, and a second start of the same ID is refused (not run twice).
func TestAStartInterruptedByAPluginSIGKILLRunsTheTaskOnceOnRetry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, d := pluginMock(t, ctx)
	cfg := &driver.TaskConfig{ID: "held", Config: map[string]any{"start_block_for": "30s"}}
	errc := make(chan error, 1)
	go func() { _, err := d.StartTask(ctx, cfg); errc <- err }()
	// Give the call 300ms to reach the plugin, where it blocks; it must
	// not have returned.
	at := time.Now()
	testutil.Eventually(t, 5*time.Second, "the start in progress", func() bool { return time.Since(at) > 300*time.Millisecond })
	select {
	case err := <-errc:
		t.Fatalf("the held start returned: %v", err)
	default:
	}
	killMock(t, m)
	if err := <-errc; err == nil {
		t.Fatal("a start whose plugin was killed returned no error")
	}
	if _, err := d.InspectTask(ctx, "held"); err == nil {
		t.Fatal("the interrupted start left a task in the relaunched plugin")
	}
	retry := &driver.TaskConfig{ID: "held", Config: map[string]any{}}
	if _, err := d.StartTask(ctx, retry); err != nil {
		t.Fatalf("retrying the start: %v", err)
	}
	if st, err := d.InspectTask(ctx, "held"); err != nil || st.State != driver.TaskStateRunning {
		t.Fatalf("the retried task: %+v %v", st, err)
	}
	if _, err := d.StartTask(ctx, retry); err == nil {
		t.Fatal("a second start of the running task was accepted")
	}
}

// The plugin SIGKILLed while StopTask waits for a task that takes 2 s to
// exit after its signal (kill_after, kill timeout 20 s): the manager
// retries the stop on the relaunched plugin, which recovered the task from
// its handle; the stop returns once the task exited by the signal (not the
// kill timeout), and the wait opened before the SIGKILL sees that exit.
func TestAStopInterruptedByAPluginSIGKILLStillEndsTheTaskOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, d := pluginMock(t, ctx)
	if _, err := d.StartTask(ctx, &driver.TaskConfig{ID: "slow", Config: map[string]any{"kill_after": "2s"}}); err != nil {
		t.Fatal(err)
	}
	waitCh, err := d.WaitTask(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	at := time.Now()
	go func() { stopped <- d.StopTask(ctx, "slow", 20*time.Second, "SIGTERM") }()
	testutil.Eventually(t, 5*time.Second, "the stop in progress", func() bool { return time.Since(at) > 200*time.Millisecond })
	relaunch := killMock(t, m)
	if err := <-stopped; err != nil {
		t.Fatalf("StopTask across the plugin's SIGKILL: %v", err)
	}
	took := time.Since(at)
	t.Logf("stop completed %v after it began (plugin relaunched in %v)", took.Round(time.Millisecond), relaunch.Round(time.Millisecond))
	if took > 15*time.Second {
		t.Fatalf("the stop took %v: the kill timeout", took)
	}
	select {
	case r, ok := <-waitCh:
		if !ok || r == nil || r.Signal != int(syscall.SIGTERM) {
			t.Fatalf("exit seen by the wait opened before the SIGKILL: %+v %v, want by SIGTERM", r, ok)
		}
	case <-ctx.Done():
		t.Fatal("no exit reached the wait opened before the SIGKILL")
	}
	if st, err := d.InspectTask(ctx, "slow"); err != nil || st.State != driver.TaskStateExited {
		t.Fatalf("the task after the stop: %+v %v", st, err)
	}
}
