package allocrunner

import (
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// restartTracker applies a group's restart policy to one task: at most
// Attempts restarts within Interval, each after Delay; once they are used up,
// mode "fail" gives up and mode "delay" waits until the interval has passed
// and starts counting again. It is pure: the caller passes the time.
type restartTracker struct {
	policy      model.RestartPolicy
	windowStart time.Time
	count       int
}

func newRestartTracker(p *model.RestartPolicy) *restartTracker {
	if p == nil {
		p = model.DefaultRestartPolicy(model.JobTypeSystem)
	}
	return &restartTracker{policy: *p}
}

// decision is what to do after a task exited.
type decision struct {
	Restart bool
	Wait    time.Duration
	Reason  string
}

// next decides what follows an exit at now.
func (t *restartTracker) next(now time.Time) decision {
	interval := t.policy.Interval.D()
	if t.windowStart.IsZero() || (interval > 0 && now.Sub(t.windowStart) >= interval) {
		t.windowStart = now
		t.count = 0
	}
	t.count++
	if t.count <= t.policy.Attempts {
		return decision{Restart: true, Wait: t.policy.Delay.D(), Reason: "restart within policy"}
	}
	if t.policy.Mode == model.RestartModeDelay {
		wait := t.windowStart.Add(interval).Sub(now)
		if wait < t.policy.Delay.D() {
			wait = t.policy.Delay.D()
		}
		t.windowStart = now.Add(wait)
		t.count = 0
		return decision{Restart: true, Wait: wait, Reason: "restart attempts exhausted, delaying until the interval ends"}
	}
	return decision{Restart: false, Reason: "restart attempts exhausted"}
}
