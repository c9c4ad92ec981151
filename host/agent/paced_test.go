package agent

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"
)

// notePaced lays the jobs a pass changed over the base it built last
// (pacedJobs) instead of building every job's entry again. Over random
// passes (a few jobs set or dropped, now and then many forgotten, the
// agent's clock now and then moved against the wall clock, as a test's
// is), what it publishes answers every job as the whole build would have
// at that moment: paced or not, and when (within two milliseconds: the two
// clocks may drift by one against the base before a whole build, so an
// entry laid over it and the base itself may be one each way); and
// nothing it published before is written.
func TestNotePacedPublishesWhatAWholeBuildWould(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	// The agent's clock is the wall clock, now and then set back or
	// forward (as a test's may be); clock is what it last read.
	var skew time.Duration
	var clock time.Time
	a := &Agent{deputyLast: map[string]deputyDecision{}, pacedDirty: map[string]bool{}}
	a.cfg.Now = func() time.Time {
		clock = time.Now().Add(skew)
		return clock
	}
	keys := make([]string, 80)
	for i := range keys {
		keys[i] = fmt.Sprintf("default.job-%02d", i)
	}
	type seen struct {
		p          *pacedJobs
		base, over pacedEvery
	}
	var published []seen
	// aheadOfClock: jobs decided ahead of the agent's clock at some
	// notePaced since their decision (the clock set back after it).
	aheadOfClock := map[string]bool{}
	overlaid, whole, same, checked, paced := 0, 0, 0, 0, 0
	for step := range 6000 {
		if rng.IntN(40) == 0 {
			skew += time.Duration(rng.IntN(900)-300) * time.Millisecond
		}
		a.cfg.Now()
		switch r := rng.IntN(100); {
		case r < 2: // a prune of gone jobs
			for k := range a.deputyLast {
				if rng.IntN(2) == 0 {
					a.dropDeputy(k)
				}
			}
		default:
			for range rng.IntN(5) {
				k := keys[rng.IntN(len(keys))]
				if rng.IntN(3) == 0 {
					a.dropDeputy(k)
					continue
				}
				every := []time.Duration{deputyEvery, stewardEvery}[rng.IntN(2)]
				a.setDeputy(k, deputyDecision{at: clock.Add(-time.Duration(rng.IntN(700)) * time.Millisecond), every: every})
				delete(aheadOfClock, k)
			}
		}
		before := a.paced.Load()
		a.notePaced()
		for k, d := range a.deputyLast {
			if d.at.After(clock) {
				aheadOfClock[k] = true
			}
		}
		got := a.paced.Load()
		wallNow := time.Now()
		offset := -skew
		switch {
		case got == before:
			same++
		case got != nil && before != nil && len(got.over) > 0 && fmt.Sprintf("%p", got.base) == fmt.Sprintf("%p", before.base):
			overlaid++
		default:
			whole++
		}
		if got != nil && len(a.pacedDirty) != 0 {
			t.Fatalf("step %d: %d jobs left noted after publishing", step, len(a.pacedDirty))
		}
		for _, k := range keys {
			d, ok := a.deputyLast[k]
			left := time.Duration(0)
			if ok {
				left = min(d.at.Add(d.every).Sub(clock), d.every)
			}
			// The whole build's time for the job, read as Run's wait reads
			// it: paced while that time is after the wall clock's now.
			refAt := clock.Add(offset).Add(left)
			want := ok && left > 0 && refAt.After(wallNow)
			var at time.Time
			var has bool
			if got != nil {
				at, has = got.at(k)
			}
			is := has && at.After(wallNow)
			// What a build itself reads between the agent's clock and the
			// wall clock (a preempted goroutine, under -race or load)
			// shifts every time it makes; so does the drift an overlay
			// allows (one millisecond each way).
			slack := 3*time.Millisecond + (a.pacedOffset - offset).Abs()
			if ok && (left.Abs() < slack+2*time.Millisecond || refAt.Sub(wallNow).Abs() < slack+2*time.Millisecond) {
				continue // at the edge, where the clocks' drift decides
			}
			checked++
			// An entry decided ahead of the agent's clock (the clock set
			// back since) is capped at its period from the build that made
			// it; a whole build caps it again from now, or, the clock past
			// the decision again, no longer: the entry kept is due no later
			// than the whole build's, so it may have ended sooner.
			if is != want && !(aheadOfClock[k] && want && !is) {
				t.Fatalf("step %d, job %s: paced %v, the whole build says %v (left %v, entry %v %v, wall %v)", step, k, is, want, left, at, has, wallNow)
			}
			if is {
				paced++
				e := at.Sub(refAt)
				if aheadOfClock[k] && e > slack || !aheadOfClock[k] && e.Abs() > slack {
					t.Fatalf("step %d, job %s: due %v, the whole build says %v", step, k, at, refAt)
				}
			}
		}
		for _, s := range published {
			if !maps.Equal(s.p.base, s.base) || !maps.Equal(s.p.over, s.over) {
				t.Fatalf("step %d: a map published before was written", step)
			}
		}
		if got != nil && got != before {
			published = append(published, seen{p: got, base: maps.Clone(got.base), over: maps.Clone(got.over)})
			if len(published) > 20 {
				published = published[1:]
			}
		}
	}
	t.Logf("6000 passes: %d overlaid, %d built whole, %d unchanged; %d answers checked, %d paced", overlaid, whole, same, checked, paced)
	if overlaid < 1000 || whole < 100 || same < 100 || paced < 10000 {
		t.Fatalf("controls: %d overlaid, %d built whole, %d unchanged, %d paced answers: a path went untested", overlaid, whole, same, paced)
	}
}
