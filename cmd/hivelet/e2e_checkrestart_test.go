package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// checkRestartJobHCL is an exec task whose service check probes addr (the
// test's server, which the test makes fail), with Nomad's check_restart at
// service level: limit 3, grace 3s.
func checkRestartJobHCL(addr string) string {
	return fmt.Sprintf(`job "cr" {
  type = "system"
  update {
    min_healthy_time = "200ms"
    healthy_deadline = "60s"
  }
  group "g" {
    restart {
      attempts = 5
      interval = "10m"
      delay    = "500ms"
      mode     = "fail"
    }
    task "s" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo $$ >> ${NOMAD_ALLOC_DIR}/pids; exec sleep 300"]
      }
      kill_timeout = "2s"
      service {
        name = "cr"
        port = %q
        check_restart {
          limit = 3
          grace = "3s"
        }
        check {
          type     = "http"
          path     = "/health"
          interval = "300ms"
          timeout  = "250ms"
        }
      }
    }
  }
}
`, addr)
}

// TestEndToEndAFailingCheckRestartsItsExecTaskAfterLimitFailuresNotBeforeAndNotWithinGrace
// runs the agent binary with an exec task whose http check answers from a
// server of the test's: failing from the start, the task is not restarted
// within grace (3s) though many failures come in; it is restarted after
// grace, through the restart policy (the task's restart count, a new
// process). Then, past the new process's grace, two failures in a row
// followed by passes restart nothing (limit 3); failing for good restarts
// it once three failures in a row are in.
func TestEndToEndAFailingCheckRestartsItsExecTaskAfterLimitFailuresNotBeforeAndNotWithinGrace(t *testing.T) {
	var failing atomic.Bool
	var failN, failed, passed atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() || failN.Add(-1) >= 0 {
			failed.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		failN.Store(0)
		passed.Add(1)
	}))
	defer srv.Close()
	failing.Store(true)

	p := newAgent(t, "")
	p.start()
	dir := t.TempDir()
	if code, out := p.cli("job", "run", "-detach", e2eFile(t, dir, "cr.hcl", checkRestartJobHCL(srv.Listener.Addr().String()))); code != 0 {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	var alloc *model.Allocation
	testutil.Eventually(t, 30*time.Second, "the task running", func() bool {
		l := liveOf(p.allocs(), "cr")
		if len(l) == 1 && l[0].TaskStates["s"] != nil && l[0].TaskStates["s"].State == "running" {
			alloc = l[0]
			return true
		}
		return false
	})
	started := alloc.TaskStates["s"].StartedAt
	pidFile := filepath.Join(p.dir, "state", "alloc", alloc.ID, "pids")
	testutil.Eventually(t, 10*time.Second, "pid written", func() bool { return len(readPIDs(t, pidFile)) == 1 })
	first := readPIDs(t, pidFile)[0]
	p.owned[first] = true

	// Within grace: failures come in (300ms apart), none counts.
	testutil.Eventually(t, 10*time.Second, "four failures", func() bool { return failed.Load() >= 4 })
	restartsNow := func() int {
		l := liveOf(p.allocs(), "cr")
		if len(l) != 1 || l[0].TaskStates["s"] == nil {
			return -1
		}
		return l[0].TaskStates["s"].Restarts
	}
	if time.Since(started) < 3*time.Second {
		if n := restartsNow(); n != 0 || !alive(first) {
			t.Fatalf("within grace, after %d failures: %d restarts, first process alive %v", failed.Load(), n, alive(first))
		}
	} else {
		t.Logf("the grace had passed before the first look (slow machine); the event times below still check it")
	}

	// After grace: restarted, as a policy restart, in a new process.
	testutil.Eventually(t, 20*time.Second, "restarted after grace", func() bool { return restartsNow() == 1 && len(readPIDs(t, pidFile)) == 2 })
	second := readPIDs(t, pidFile)[1]
	p.owned[second] = true
	testutil.Eventually(t, 10*time.Second, "the first process gone", func() bool { return !alive(first) })
	a := liveOf(p.allocs(), "cr")[0]
	var signaled time.Time
	for _, e := range a.TaskStates["s"].Events {
		if e.Type == "Restart Signaled" {
			signaled = e.Time
		}
	}
	if signaled.IsZero() || signaled.Sub(started) < 3*time.Second {
		t.Fatalf("restart signaled at %v, %v after the start: want one, no sooner than grace (3s); events %+v", signaled, signaled.Sub(started), a.TaskStates["s"].Events)
	}

	// The new process passes, past its own grace.
	failing.Store(false)
	restarted := a.TaskStates["s"].StartedAt
	testutil.Eventually(t, 15*time.Second, "passing past the new grace", func() bool {
		return time.Since(restarted) > 3500*time.Millisecond && passed.Load() >= 3
	})
	// Two failures in a row, then passes: limit 3 restarts nothing.
	before := passed.Load()
	failN.Store(2)
	testutil.Eventually(t, 10*time.Second, "two failures, then five passes", func() bool { return passed.Load() >= before+5 })
	if n := restartsNow(); n != 1 || !alive(second) {
		t.Fatalf("after two failures in a row: %d restarts (want still 1), second process alive %v", n, alive(second))
	}

	// Failing for good: restarted once three failures in a row are in.
	failedBefore := failed.Load()
	failing.Store(true)
	testutil.Eventually(t, 20*time.Second, "restarted again", func() bool { return restartsNow() == 2 })
	if n := failed.Load() - failedBefore; n < 3 {
		t.Fatalf("restarted after %d failing answers, want at least 3", n)
	}
	if pids := readPIDs(t, pidFile); len(pids) == 3 {
		p.owned[pids[2]] = true
	}
	failing.Store(false)
	if code, out := p.cli("job", "stop", "cr"); code != 0 {
		t.Fatalf("job stop: exit %d\n%s", code, out)
	}
}
