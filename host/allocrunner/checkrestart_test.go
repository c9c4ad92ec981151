package allocrunner

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// TestRestartWatchCountsFailuresInARowOutsideGrace is check_restart's
// decision as a transcript: each step is one result of the check, with what
// must follow and why.
func TestRestartWatchCountsFailuresInARowOutsideGrace(t *testing.T) {
	t0 := time.Unix(1000, 0)
	fail := errors.New("status 500")
	warn := checkWarning{errors.New("status 429")}
	type step struct {
		why       string
		at        time.Duration // since t0
		startedAt time.Duration // the task instance's start, since t0
		result    error
		restart   bool
	}
	cases := []struct {
		name  string
		cr    model.CheckRestart
		steps []step
	}{
		{"limit 3, grace 10s", model.CheckRestart{Limit: 3, Grace: model.Duration(10 * time.Second)}, []step{
			{"within grace: not counted", 1 * time.Second, 0, fail, false},
			{"within grace: not counted", 5 * time.Second, 0, fail, false},
			{"within grace: not counted (9s < 10s)", 9 * time.Second, 0, fail, false},
			{"first failure counted", 10 * time.Second, 0, fail, false},
			{"second", 11 * time.Second, 0, fail, false},
			{"a pass starts the count again", 12 * time.Second, 0, nil, false},
			{"first again", 13 * time.Second, 0, fail, false},
			{"second again", 14 * time.Second, 0, fail, false},
			{"third in a row: restart", 15 * time.Second, 0, fail, true},
			{"the same instance is asked once", 16 * time.Second, 0, fail, false},
			{"the restarted instance has its own grace", 21 * time.Second, 20 * time.Second, fail, false},
			{"and its own count: first", 30 * time.Second, 20 * time.Second, fail, false},
			{"second", 31 * time.Second, 20 * time.Second, fail, false},
			{"third: restart again", 32 * time.Second, 20 * time.Second, fail, true},
		}},
		{"warnings count as failures by default", model.CheckRestart{Limit: 2}, []step{
			{"a warning fails", 1 * time.Second, 0, warn, false},
			{"two in a row: restart", 2 * time.Second, 0, warn, true},
		}},
		{"ignore_warnings: a warning passes", model.CheckRestart{Limit: 2, IgnoreWarnings: true}, []step{
			{"a failure", 1 * time.Second, 0, fail, false},
			{"a warning passes and starts the count again", 2 * time.Second, 0, warn, false},
			{"a failure: first", 3 * time.Second, 0, fail, false},
			{"second in a row: restart", 4 * time.Second, 0, fail, true},
		}},
		{"limit 0 restarts nothing", model.CheckRestart{Limit: 0}, []step{
			{"never", 1 * time.Second, 0, fail, false},
			{"never", 2 * time.Second, 0, fail, false},
			{"never", 3 * time.Second, 0, fail, false},
		}},
		{"limit 1: the first counted failure", model.CheckRestart{Limit: 1, Grace: model.Duration(time.Second)}, []step{
			{"within grace", 500 * time.Millisecond, 0, fail, false},
			{"first counted: restart", time.Second, 0, fail, true},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := restartWatch{cr: c.cr}
			for i, s := range c.steps {
				if got := w.observe(s.result, t0.Add(s.at), t0.Add(s.startedAt)); got != s.restart {
					t.Fatalf("step %d (%s): restart = %v, want %v", i, s.why, got, s.restart)
				}
			}
		})
	}
}

// flakyServer answers its checks 200 or, while failing, status; it counts
// the answers of each kind.
type flakyServer struct {
	srv            *httptest.Server
	status         atomic.Int32 // 0: 200
	failN          atomic.Int32 // > 0: the next failN answers fail with 500, then 200
	passed, failed atomic.Int32
	port           string
}

func newFlakyServer(t *testing.T) *flakyServer {
	f := &flakyServer{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := int(f.status.Load())
		if f.failN.Load() > 0 {
			f.failN.Add(-1)
			code = 500
		}
		if code == 0 {
			f.passed.Add(1)
			return
		}
		f.failed.Add(1)
		w.WriteHeader(code)
	}))
	t.Cleanup(f.srv.Close)
	_, f.port, _ = net.SplitHostPort(f.srv.Listener.Addr().String())
	return f
}

func checkRestartFixture(t *testing.T, port string, cr model.CheckRestart, attempts int) *fixture {
	t.Helper()
	pol := &model.RestartPolicy{Attempts: attempts, Interval: model.Duration(time.Hour), Delay: model.Duration(10 * time.Millisecond), Mode: model.RestartModeFail}
	f := newFixture(t, map[string]any{}, pol, nil)
	f.job.Groups[0].Tasks[0].Services = []model.Service{{Name: "web", Port: port, Checks: []model.Check{{
		Type: model.CheckHTTP, Path: "/health", Interval: model.Duration(20 * time.Millisecond), Timeout: model.Duration(time.Second),
		CheckRestart: &cr}}}}
	return f
}

func events(a *model.Allocation, task, typ string) []model.TaskEvent {
	var out []model.TaskEvent
	if ts := a.TaskStates[task]; ts != nil {
		for _, e := range ts.Events {
			if e.Type == typ {
				out = append(out, e)
			}
		}
	}
	return out
}

// TestAFailingHTTPCheckRestartsItsTaskAfterLimitFailuresInARowAndNotBefore:
// against a real HTTP server, two failures in a row followed by a pass
// restart nothing (limit 3: the control that a failure alone is not
// enough); failing for good restarts the task once the third failure in a
// row is in, through the restart policy (the task's restart count goes up).
func TestAFailingHTTPCheckRestartsItsTaskAfterLimitFailuresInARowAndNotBefore(t *testing.T) {
	srv := newFlakyServer(t)
	// The grace keeps the restarted task from being restarted again while
	// the test looks at it; the flapping below comes after it.
	const grace = time.Second
	f := checkRestartFixture(t, srv.port, model.CheckRestart{Limit: 3, Grace: model.Duration(grace)}, 5)
	r := f.runner(nil)
	start := time.Now()
	r.Run()
	defer stopRunner(t, r)
	testutil.Eventually(t, 5*time.Second, "the check passing past grace", func() bool {
		return srv.passed.Load() >= 3 && time.Since(start) > grace+50*time.Millisecond
	})

	// Flapping: two failures, then passes again.
	passedBefore := srv.passed.Load()
	srv.failN.Store(2)
	testutil.Eventually(t, 5*time.Second, "two failures then five passes", func() bool {
		return srv.failN.Load() == 0 && srv.passed.Load() >= passedBefore+5
	})
	if n := f.drv.startCount("a1/t"); n != 1 {
		t.Fatalf("%d starts after two failures in a row; limit 3 must restart nothing", n)
	}
	if ev := events(r.Alloc(), "t", EventRestartSignaled); len(ev) != 0 {
		t.Fatalf("restart signaled after two failures: %+v", ev)
	}

	// Failing for good.
	failedBefore := srv.failed.Load()
	srv.status.Store(500)
	testutil.Eventually(t, 5*time.Second, "the task restarted", func() bool { return f.drv.startCount("a1/t") == 2 })
	if n := srv.failed.Load() - failedBefore; n < 3 {
		t.Fatalf("restarted after %d failing answers, want at least 3", n)
	}
	a := r.Alloc()
	ev := events(a, "t", EventRestartSignaled)
	if len(ev) != 1 || !strings.Contains(ev[0].Message, "failed 3 times in a row") {
		t.Fatalf("restart signaled events %+v", ev)
	}
	if ts := a.TaskStates["t"]; ts.Restarts != 1 {
		t.Fatalf("task state %+v, want 1 restart counted", ts)
	}
	if stops := f.drv.stopCalls(); len(stops) != 1 || stops[0].Signal != "SIGINT" {
		t.Fatalf("stop calls %+v, want one with the task's kill_signal", stops)
	}
	srv.status.Store(0)
}

// TestACheckFailingWithinGraceRestartsNothingAndThePolicyGivingUpFailsTheAllocation:
// a check that fails from the start is not counted within grace, so the
// first restart comes no sooner than grace after the start; with one
// restart attempt, the second restart the check asks for is refused by the
// policy and the allocation fails.
func TestACheckFailingWithinGraceRestartsNothingAndThePolicyGivingUpFailsTheAllocation(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, deadPort, _ := net.SplitHostPort(closed.Addr().String())
	closed.Close()
	const grace = 300 * time.Millisecond
	f := checkRestartFixture(t, deadPort, model.CheckRestart{Limit: 2, Grace: model.Duration(grace)}, 1)
	f.job.Groups[0].Tasks[0].Services[0].Checks[0].Type = model.CheckTCP
	r := f.runner(nil)
	r.Run()
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the allocation never finished")
	}
	a := r.Alloc()
	if a.ClientStatus != model.ClientFailed {
		t.Fatalf("client status %s, want failed once the policy gives up", a.ClientStatus)
	}
	if n := f.drv.startCount("a1/t"); n != 2 {
		t.Fatalf("%d starts, want 2 (one restart allowed)", n)
	}
	signaled := events(a, "t", EventRestartSignaled)
	started := events(a, "t", EventStarted)
	if len(signaled) != 2 || len(started) != 2 {
		t.Fatalf("events: %d restart signaled, %d started; want 2 and 2", len(signaled), len(started))
	}
	for i := range signaled {
		if d := signaled[i].Time.Sub(started[i].Time); d < grace {
			t.Errorf("restart %d signaled %s after its start, within grace %s", i, d, grace)
		}
	}
	if ev := events(a, "t", EventNotRestarting); len(ev) != 1 {
		t.Fatalf("not-restarting events %+v", ev)
	}
}

// TestIgnoreWarningsKeepsATaskWhoseCheckAnswers429: 429 is a warning; with
// ignore_warnings it restarts nothing, while the same check without it
// (the control) restarts the task.
func TestIgnoreWarningsKeepsATaskWhoseCheckAnswers429(t *testing.T) {
	for _, ignore := range []bool{true, false} {
		srv := newFlakyServer(t)
		srv.status.Store(http.StatusTooManyRequests)
		f := checkRestartFixture(t, srv.port, model.CheckRestart{Limit: 2, IgnoreWarnings: ignore}, 5)
		r := f.runner(nil)
		r.Run()
		if ignore {
			testutil.Eventually(t, 5*time.Second, "ten warnings", func() bool { return srv.failed.Load() >= 10 })
			if n := f.drv.startCount("a1/t"); n != 1 {
				t.Fatalf("ignore_warnings: %d starts after ten warnings, want 1", n)
			}
		} else {
			testutil.Eventually(t, 5*time.Second, "restarted on warnings", func() bool { return f.drv.startCount("a1/t") >= 2 })
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = r.Stop(ctx, "test over")
		cancel()
	}
}
