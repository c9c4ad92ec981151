package agent

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/mock"
	"github.com/hivelet/hivelet/sdk/driver"
)

// exitTimesDriver records when each task started and when its stop
// returned (the driver's StopTask returns once the task has exited).
type exitTimesDriver struct {
	driver.Driver
	mu      sync.Mutex
	started map[string]time.Time // version → start
	exited  map[string]time.Time // version → StopTask returned
	version map[string]string    // task ID → version
}

func (d *exitTimesDriver) StartTask(ctx context.Context, cfg *driver.TaskConfig) (*driver.TaskHandle, error) {
	v, _ := cfg.Config["stdout_string"].(string)
	d.mu.Lock()
	d.started[v], d.version[cfg.ID] = time.Now(), v
	d.mu.Unlock()
	return d.Driver.StartTask(ctx, cfg)
}

func (d *exitTimesDriver) StopTask(ctx context.Context, id string, t time.Duration, sig string) error {
	err := d.Driver.StopTask(ctx, id, t, sig)
	d.mu.Lock()
	d.exited[d.version[id]] = time.Now()
	d.mu.Unlock()
	return err
}

func (d *exitTimesDriver) times(v string) (started, exited time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.started[v], d.exited[v]
}

// A destructive update stops the old task and starts the replacement only
// once the old one has exited, never beside it (found by the rollout fault
// suite: the exec tasks' own lines showed the new task starting while the
// old one still ran its SIGTERM handler, because an allocation whose
// desired status is stop counts as terminal to the reconciler at once).
// The old task here takes 600 ms to exit after its signal; control: the
// update does happen.
func TestAReplacementStartsOnlyAfterThePreviousTaskHasExited(t *testing.T) {
	w := newWorld(t)
	drv := &exitTimesDriver{Driver: mock.New(), started: map[string]time.Time{}, exited: map[string]time.Time{}, version: map[string]string{}}
	n := w.newNode("node-1", &countingDriver{Driver: drv}, "")
	t.Cleanup(func() { n.stop(true) })
	slow := func(v uint64) *model.Job {
		return mockJob("web", v, map[string]any{"stdout_string": fmt.Sprintf("v%d", v), "kill_after": "600ms"})
	}
	w.putJob(slow(1))
	testutil.Eventually(t, 20*time.Second, "v1 healthy", func() bool {
		live := n.live("web")
		return len(live) == 1 && live[0].JobVersion == 1 && live[0].DeploymentStatus.IsHealthy()
	})
	w.putJob(slow(2))
	testutil.Eventually(t, 20*time.Second, "v2 running", func() bool {
		live := n.live("web")
		return len(live) == 1 && live[0].JobVersion == 2 && live[0].ClientStatus == model.ClientRunning
	})
	var oldExited, newStarted time.Time
	testutil.Eventually(t, 10*time.Second, "the old task's stop returned", func() bool {
		_, oldExited = drv.times("v1")
		newStarted, _ = drv.times("v2")
		return !oldExited.IsZero() && !newStarted.IsZero()
	})
	if newStarted.Before(oldExited) {
		t.Fatalf("the replacement started %s before the old task had exited", oldExited.Sub(newStarted))
	}
}
