package allocrunner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// TestAScriptCheckRunsInItsTaskAndItsExitCodeDecidesHealth: the check's
// command, interpolated, runs inside the task through the driver; exit 0
// makes the allocation healthy, exit 1 (a warning) and exit 2 do not.
func TestAScriptCheckRunsInItsTaskAndItsExitCodeDecidesHealth(t *testing.T) {
	for _, c := range []struct {
		code    string
		healthy bool
	}{{"0", true}, {"1", false}, {"2", false}} {
		t.Run("exit "+c.code, func(t *testing.T) {
			f := newFixture(t, map[string]any{}, nil, fastUpdate(60*time.Millisecond, 1500*time.Millisecond))
			f.job.Groups[0].Meta = map[string]string{"code": c.code}
			f.job.Groups[0].Tasks[0].Services = []model.Service{{Name: "web", Checks: []model.Check{{
				Name: "alive", Type: model.CheckScript, Command: "exit", Args: []string{"${meta.code}"},
				Interval: model.Duration(20 * time.Millisecond), Timeout: model.Duration(time.Second)}}}}
			r := f.runner(nil)
			r.Run()
			testutil.Eventually(t, 3*time.Second, "health decided", func() bool {
				a := r.Alloc()
				return a.DeploymentStatus != nil && a.DeploymentStatus.Healthy != nil
			})
			if got := r.Alloc().DeploymentStatus.IsHealthy(); got != c.healthy {
				t.Fatalf("healthy = %v, want %v", got, c.healthy)
			}
			f.drv.mu.Lock()
			first := f.drv.execs[0]
			f.drv.mu.Unlock()
			if first != "a1/t: exit "+c.code {
				t.Fatalf("ran %q", first)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = r.Stop(ctx, "x")
		})
	}
}

// TestAScriptCheckOnADriverThatCannotExecFailsTheTaskAtStart: a driver
// whose capabilities have no exec never starts a task with a script check
// (its check could never pass); the reason names the check's kind and the
// driver.
func TestAScriptCheckOnADriverThatCannotExecFailsTheTaskAtStart(t *testing.T) {
	f := newFixture(t, map[string]any{}, nil, nil)
	f.drv.noExec = true
	f.job.Groups[0].Tasks[0].Services = []model.Service{{Name: "web", Checks: []model.Check{{
		Type: model.CheckScript, Command: "/bin/true", Interval: model.Duration(time.Second), Timeout: model.Duration(time.Second)}}}}
	r := f.runner(nil)
	r.Run()
	<-r.Done()
	if n := f.drv.startCount("a1/t"); n != 0 {
		t.Fatalf("started %d times", n)
	}
	ev := r.Alloc().TaskStates["t"].Events
	if last := ev[len(ev)-1]; last.Type != EventFailedValidation || !strings.Contains(last.Message, "task t has a script check, and driver fake cannot run a command inside a task") {
		t.Fatalf("events %+v", ev)
	}
}
