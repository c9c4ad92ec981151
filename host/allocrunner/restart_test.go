package allocrunner

import (
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

func TestRestartTrackerFollowsThePolicy(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := func(mode model.RestartMode) *model.RestartPolicy {
		return &model.RestartPolicy{Attempts: 2, Interval: model.Duration(time.Minute), Delay: model.Duration(time.Second), Mode: mode}
	}
	type step struct {
		at      time.Duration
		restart bool
		wait    time.Duration
	}
	cases := []struct {
		name  string
		mode  model.RestartMode
		steps []step
	}{
		{"fail: two restarts then give up", model.RestartModeFail, []step{{0, true, time.Second}, {2 * time.Second, true, time.Second}, {4 * time.Second, false, 0}}},
		{"fail: the window resets after the interval", model.RestartModeFail, []step{{0, true, time.Second}, {2 * time.Second, true, time.Second}, {61 * time.Second, true, time.Second}}},
		{"delay: waits out the interval then restarts", model.RestartModeDelay, []step{{0, true, time.Second}, {2 * time.Second, true, time.Second}, {4 * time.Second, true, 56 * time.Second}, {61 * time.Second, true, time.Second}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := newRestartTracker(pol(c.mode))
			for i, s := range c.steps {
				d := tr.next(t0.Add(s.at))
				if d.Restart != s.restart || (s.restart && d.Wait != s.wait) {
					t.Fatalf("step %d: got %+v, want restart=%v wait=%s", i, d, s.restart, s.wait)
				}
			}
		})
	}
}

func TestHealthVerdict(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sec := time.Second
	cases := []struct {
		name           string
		now, okSince   time.Duration
		ok, failed     bool
		want           string // "healthy", "unhealthy", "wait"
		wantRecheckMax time.Duration
	}{
		{"ok long enough", 12 * sec, 1 * sec, true, false, "healthy", 0},
		{"ok not long enough", 5 * sec, 1 * sec, true, false, "wait", 6 * sec},
		{"not ok before deadline", 5 * sec, 0, false, false, "wait", 55 * sec},
		{"not ok at deadline", 60 * sec, 0, false, false, "unhealthy", 0},
		{"failed", 1 * sec, 0, false, true, "unhealthy", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, re := healthVerdict(t0.Add(c.now), t0, t0.Add(c.okSince), c.ok, c.failed, 10*sec, 60*sec)
			got := "wait"
			if v != nil && *v {
				got = "healthy"
			} else if v != nil {
				got = "unhealthy"
			}
			if got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
			if got == "wait" && (re <= 0 || re > c.wantRecheckMax) {
				t.Fatalf("recheck %s, want in (0, %s]", re, c.wantRecheckMax)
			}
		})
	}
}
