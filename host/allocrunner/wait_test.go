package allocrunner

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/sdk/driver"
)

// runnerGoroutines are the goroutines running code of this package's
// types (the runner's, its tasks' and the fake driver's), with their
// stacks.
func runnerGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "host/allocrunner.(*") {
			out = append(out, g)
		}
	}
	return out
}

// waitingFixture is n allocations of one task each that runs until
// stopped, on drivers (f.drv or channelWaits over it).
func waitingFixture(t *testing.T, n int, drivers func(*fakeDriver) Drivers) (*fixture, []*Runner) {
	t.Helper()
	pol := &model.RestartPolicy{Attempts: 5, Interval: model.Duration(time.Minute), Delay: model.Duration(10 * time.Millisecond), Mode: model.RestartModeFail}
	f := newFixture(t, map[string]any{}, pol, fastUpdate(10*time.Millisecond, 5*time.Second))
	rs := make([]*Runner, n)
	for i := range rs {
		a := *f.alloc
		a.ID = fmt.Sprintf("a%d", i)
		rs[i] = New(Config{Alloc: &a, Job: f.job, Node: &model.Node{ID: "n1"}, Drivers: drivers(f.drv),
			Validate: validate, Store: f.store, AllocRoot: f.root})
		rs[i].Run()
	}
	t.Cleanup(func() {
		for _, r := range rs {
			r.Detach()
		}
	})
	testutil.Eventually(t, 10*time.Second, "every allocation running and healthy", func() bool {
		for _, r := range rs {
			a := r.Alloc()
			if a.ClientStatus != model.ClientRunning || a.DeploymentStatus == nil || a.DeploymentStatus.Healthy == nil {
				return false
			}
		}
		return true
	})
	return f, rs
}

func countEvents(r *Runner, typ, msg string) int {
	n := 0
	for _, e := range r.Alloc().TaskStates["t"].Events {
		if e.Type == typ && strings.Contains(e.Message, msg) {
			n++
		}
	}
	return n
}

// TestWaitingTasksHoldNoGoroutine: a task waited on through the driver's
// function wait (driver.WaitNotifier, what the plugin manager's drivers
// have) holds no goroutine while it runs; each held one before, parked in
// the wait at the bottom of the start path. What a wait must still see
// reaches it: the task's exit (restarted per policy), the driver losing
// the wait (the task is recovered and waited on again), the allocation's
// stop (its kill signal, then its end) and the runner's detach (the task
// stays).
func TestWaitingTasksHoldNoGoroutine(t *testing.T) {
	const n = 40
	f, rs := waitingFixture(t, n, func(f *fakeDriver) Drivers { return f })
	idle := func(what string) {
		t.Helper()
		left := runnerGoroutines()
		for deadline := time.Now().Add(5 * time.Second); len(left) != 0 && time.Now().Before(deadline); left = runnerGoroutines() {
			time.Sleep(20 * time.Millisecond)
		}
		if len(left) != 0 {
			t.Fatalf("%s: %d goroutines of the runners for %d waiting tasks; the first:\n%s", what, len(left), n, left[0])
		}
	}
	idle("running")

	// An exit reaches the wait: the restart policy starts the task again,
	// and it waits again with no goroutine.
	tk, err := f.drv.task("a0/t")
	if err != nil {
		t.Fatal(err)
	}
	tk.finish(&driver.ExitResult{ExitCode: 3})
	testutil.Eventually(t, 5*time.Second, "a0 restarted after its exit", func() bool {
		return f.drv.startCount("a0/t") == 2 && rs[0].Alloc().ClientStatus == model.ClientRunning
	})
	if got := countEvents(rs[0], EventTerminated, "exit code 3"); got != 1 {
		t.Fatalf("a0: %d terminations with exit code 3 recorded, want 1", got)
	}
	idle("restarted")

	// The driver loses every wait (its plugin died and came back): each
	// task is recovered, not started again, and waited on again.
	loseEveryWait(t, f.drv, rs)
	for i := range rs {
		if want, got := 1+btoi(i == 0), f.drv.startCount(fmt.Sprintf("a%d/t", i)); got != want {
			t.Fatalf("a%d started %d times, want %d", i, got, want)
		}
	}
	idle("waited on again")

	// A stop reaches a waiting task: its kill signal, then its end.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rs[1].Stop(ctx, "job stopped"); err != nil {
		t.Fatal(err)
	}
	stops := f.drv.stopCalls()
	if len(stops) != 1 || stops[0].TaskID != "a1/t" || stops[0].Signal != "SIGINT" {
		t.Fatalf("stop calls %+v", stops)
	}
	if a := rs[1].Alloc(); a.ClientStatus != model.ClientComplete || a.TaskStates["t"].State != "dead" {
		t.Fatalf("after stop: client %s, task %s", a.ClientStatus, a.TaskStates["t"].State)
	}

	// A detach reaches the others: each runner is done, its task runs on.
	for _, r := range rs[2:] {
		r.Detach()
	}
	if live := f.drv.live(); live != n-1 {
		t.Fatalf("%d tasks live after the detach, want %d", live, n-1)
	}
	if len(f.drv.stopCalls()) != 1 {
		t.Fatalf("the detach stopped tasks: %+v", f.drv.stopCalls())
	}
}

// loseEveryWait ends every wait of rs's tasks once all are waited on, as a
// plugin that died does, and waits until each task is recovered (once) and
// its runner has recorded the reattachment.
func loseEveryWait(t *testing.T, drv *fakeDriver, rs []*Runner) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, "every task waited on", func() bool { return drv.waiting() == len(rs) })
	drv.loseWaits()
	testutil.Eventually(t, 5*time.Second, "every task reattached", func() bool {
		for i, r := range rs {
			if drv.recoverCount(fmt.Sprintf("a%d/t", i)) != 1 || countEvents(r, EventReattached, "lost the task") != 1 {
				return false
			}
		}
		return true
	})
}

// TestADriverWithOnlyTheChannelWaitReachesTheSameEnds: a driver whose
// wait is only WaitTask's channel (a wrapper that embeds a driver.Driver
// hides the function wait) sees the same: an exit restarts the task, a
// lost wait is recovered, a stop kills the task, a detach leaves it.
func TestADriverWithOnlyTheChannelWaitReachesTheSameEnds(t *testing.T) {
	const n = 4
	f, rs := waitingFixture(t, n, func(f *fakeDriver) Drivers { return channelWaits{f} })
	d, _ := channelWaits{f.drv}.Driver(context.Background(), "fake")
	if _, ok := d.(driver.WaitNotifier); ok {
		t.Fatal("channelWaits has the function wait: the test would not test the channel")
	}
	tk, err := f.drv.task("a0/t")
	if err != nil {
		t.Fatal(err)
	}
	tk.finish(&driver.ExitResult{ExitCode: 3})
	testutil.Eventually(t, 5*time.Second, "a0 restarted after its exit", func() bool {
		return f.drv.startCount("a0/t") == 2 && rs[0].Alloc().ClientStatus == model.ClientRunning
	})
	loseEveryWait(t, f.drv, rs)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rs[1].Stop(ctx, "job stopped"); err != nil {
		t.Fatal(err)
	}
	if stops := f.drv.stopCalls(); len(stops) != 1 || stops[0].TaskID != "a1/t" {
		t.Fatalf("stop calls %+v", stops)
	}
	for _, r := range rs[2:] {
		r.Detach()
	}
	if live := f.drv.live(); live != n-1 {
		t.Fatalf("%d tasks live after the detach, want %d", live, n-1)
	}
}

// TestAStopDuringALostWaitsRecoveryStillKillsTheTask: the allocation's
// stop that comes while the runner recovers a task whose wait the driver
// lost (between the wait's end and the next one) still stops the task.
func TestAStopDuringALostWaitsRecoveryStillKillsTheTask(t *testing.T) {
	f, rs := waitingFixture(t, 1, func(f *fakeDriver) Drivers { return f })
	testutil.Eventually(t, 5*time.Second, "the task waited on", func() bool { return f.drv.waiting() == 1 })
	f.drv.loseWaits() // the runner pauses 200ms before recovering
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rs[0].Stop(ctx, "job stopped"); err != nil {
		t.Fatal(err)
	}
	if stops := f.drv.stopCalls(); len(stops) != 1 || stops[0].TaskID != "a0/t" {
		t.Fatalf("stop calls %+v", stops)
	}
	if f.drv.live() != 0 {
		t.Fatalf("%d tasks live after the stop", f.drv.live())
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
