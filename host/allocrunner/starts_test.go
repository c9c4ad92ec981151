package allocrunner

import (
	"context"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// A runner's first start counts as in flight (Config.Starts) from Run until
// its first attempt is over: the task runs when the count falls back. A
// start slower than pendingWriteDelay stops counting at pendingWriteDelay,
// while it still runs, so that nothing waits on an image pull.
func TestAFirstStartIsInFlightUntilItsAttemptIsOverOrPendingWriteDelay(t *testing.T) {
	for _, tc := range []struct {
		delay       time.Duration
		runningIdle bool // running when the count falls
	}{
		{pendingWriteDelay / 2, true},
		{6 * pendingWriteDelay, false},
	} {
		var starts Starts
		f := newFixture(t, map[string]any{"start_delay": tc.delay.String()}, nil, nil)
		r := New(Config{Alloc: f.alloc, Job: f.job, Node: &model.Node{ID: "n1", Name: "node-1", Datacenter: "dc1"},
			Drivers: f.drv, Validate: validate, Store: f.store, AllocRoot: f.root, Starts: &starts})
		began := time.Now()
		r.Run()
		if n := starts.inFlight(); n != 1 {
			t.Fatalf("start_delay %v: %d starts in flight once Run returned, want 1", tc.delay, n)
		}
		select {
		case <-starts.Idle():
		case <-time.After(5 * time.Second):
			t.Fatalf("start_delay %v: still in flight after 5 s", tc.delay)
		}
		el := time.Since(began)
		if running := r.Alloc().ClientStatus == model.ClientRunning; running != tc.runningIdle {
			t.Fatalf("start_delay %v: running when the count fell (after %v): %v, want %v", tc.delay, el, running, tc.runningIdle)
		}
		if !tc.runningIdle && el < pendingWriteDelay {
			t.Fatalf("start_delay %v: the count fell after %v, before pendingWriteDelay", tc.delay, el)
		}
		testutil.Eventually(t, 5*time.Second, "running", func() bool { return r.Alloc().ClientStatus == model.ClientRunning })
		if err := r.Stop(context.Background(), "test over"); err != nil {
			t.Fatal(err)
		}
		if n := starts.inFlight(); n != 0 {
			t.Fatalf("%d starts in flight at the end", n)
		}
	}
	// A nil Starts counts nothing and is idle.
	var none *Starts
	none.Begin()
	select {
	case <-none.Idle():
	default:
		t.Fatal("a nil Starts is not idle")
	}
}
