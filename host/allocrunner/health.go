package allocrunner

import (
	"context"
	"fmt"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// healthVerdict is the pure part of deployment health: given whether every
// task is running with its checks passing, since when, and how long the
// allocation has been tracked, decide healthy (true), unhealthy (false) or
// not yet (nil), and when to look again.
func healthVerdict(now, trackedSince, okSince time.Time, ok, failed bool, minHealthy, deadline time.Duration) (verdict *bool, recheck time.Duration) {
	yes, no := true, false
	if failed {
		return &no, 0
	}
	if ok && !now.Before(okSince.Add(minHealthy)) {
		return &yes, 0
	}
	if deadline > 0 && !now.Before(trackedSince.Add(deadline)) {
		return &no, 0
	}
	next := time.Duration(-1)
	if ok {
		next = okSince.Add(minHealthy).Sub(now)
	}
	if deadline > 0 {
		if d := trackedSince.Add(deadline).Sub(now); next < 0 || d < next {
			next = d
		}
	}
	return nil, next
}

func (r *Runner) updateStrategy() *model.UpdateStrategy {
	if g := r.group(); g != nil && g.Update != nil {
		return g.Update
	}
	if r.job != nil && r.job.Update != nil {
		return r.job.Update
	}
	return model.DefaultUpdateStrategy()
}

// healthyNowLocked reports whether every task is running and every check
// passes, and whether the allocation failed.
func (r *Runner) healthyNowLocked() (ok, failed bool) {
	if r.alloc.ClientStatus == model.ClientFailed {
		return false, true
	}
	if len(r.alloc.TaskStates) == 0 {
		return false, false
	}
	g := r.group()
	for name, ts := range r.alloc.TaskStates {
		if ts.State == "dead" && !ts.Failed && g != nil && g.LookupTask(name).RunsToCompletion() {
			continue // a prestart or poststart task that did its work
		}
		if g != nil && g.LookupTask(name).IsPoststop() {
			continue // it runs once the allocation is over
		}
		if ts.State != "running" {
			return false, ts.Failed
		}
	}
	for _, err := range r.checks {
		if err != nil {
			return false, false
		}
	}
	return true, false
}

// startHealth starts (or restarts, after an in-place update into a new
// deployment) tracking the allocation's deployment health. A restored
// allocation whose health was already decided keeps it.
func (r *Runner) startHealth() {
	r.mu.Lock()
	if r.job != nil && r.job.Type == model.JobTypeSysbatch {
		r.mu.Unlock()
		return
	}
	if r.alloc.DeploymentStatus != nil && r.alloc.DeploymentStatus.Healthy != nil {
		r.mu.Unlock()
		return
	}
	if r.bgClosed {
		r.mu.Unlock()
		return
	}
	r.healthGn++
	gen := r.healthGn
	u := r.updateStrategy()
	r.bgWG.Add(1)
	r.mu.Unlock()
	minHealthy, deadline := u.MinHealthyTime.D(), u.HealthyDeadline.D()
	go func() {
		defer r.bgWG.Done()
		r.trackHealth(r.ctx, gen, minHealthy, deadline)
	}()
}

func (r *Runner) trackHealth(ctx context.Context, gen int, minHealthy, deadline time.Duration) {
	tracked := r.now()
	var okSince time.Time
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.mu.Lock()
		if r.healthGn != gen {
			r.mu.Unlock()
			return
		}
		ok, failed := r.healthyNowLocked()
		r.mu.Unlock()
		now := r.now()
		if !ok {
			okSince = time.Time{}
		} else if okSince.IsZero() {
			okSince = now
		}
		v, recheck := healthVerdict(now, tracked, okSince, ok, failed, minHealthy, deadline)
		if v != nil {
			r.mu.Lock()
			if r.healthGn != gen {
				r.mu.Unlock()
				return
			}
			a := r.mutable()
			if a.DeploymentStatus == nil {
				a.DeploymentStatus = &model.AllocDeploymentStatus{}
			}
			a.DeploymentStatus.Healthy = v
			a.DeploymentStatus.Timestamp = now
			r.mu.Unlock()
			what := "healthy"
			if !*v {
				what = fmt.Sprintf("unhealthy (failed=%v, deadline %s)", failed, deadline)
			}
			r.log.Info("allocation health decided", "health", what)
			r.persist()
			return
		}
		if recheck < 0 {
			recheck = time.Hour
		}
		timer.Reset(recheck)
		select {
		case <-ctx.Done():
			return
		case <-r.stopping:
			return
		case <-r.changed:
		case <-timer.C:
		}
	}
}

// runCheckLoop runs one check of a task's service, or of a group service
// when t is nil (then it probes while every task of the group runs).
func (r *Runner) runCheckLoop(t *model.Task, svc model.Service, c model.Check, key string) {
	defer r.bgWG.Done()
	interval := c.Interval.D()
	if interval <= 0 {
		interval = 10 * time.Second
	}
	r.mu.Lock()
	r.checks[key] = fmt.Errorf("check %s not run yet", key)
	r.mu.Unlock()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var state checkState
	var watch restartWatch
	if c.CheckRestart != nil && t != nil {
		watch.cr = *c.CheckRestart
	}
	for {
		r.mu.Lock()
		alloc, job, g := CloneAlloc(r.alloc), r.job, r.group()
		var startedAt time.Time
		if t != nil && alloc.TaskStates[t.Name] != nil {
			startedAt = alloc.TaskStates[t.Name].StartedAt
		}
		notRunning := ""
		if t != nil && !r.running[t.Name] {
			notRunning = t.Name
		} else if t == nil && g != nil {
			for _, gt := range g.Tasks {
				if !gt.RunsToCompletion() && !r.running[gt.Name] {
					notRunning = gt.Name
					break
				}
			}
		}
		r.mu.Unlock()
		var err error
		if notRunning != "" {
			err = fmt.Errorf("task %s not running", notRunning)
			state = checkState{}
		} else {
			env := NewTaskEnv(r.cfg.Node, alloc, job, g, t, r.AllocDir(), "")
			var probe error
			if c.Type == model.CheckScript {
				probe = r.runScriptCheck(t, env, c)
			} else {
				probe = runCheck(r.ctx, env, svc, c)
			}
			state, err = state.next(probe, c, key)
		}
		r.mu.Lock()
		prev := r.checks[key]
		r.checks[key] = err
		first := !r.checkRan[key] && notRunning == ""
		if notRunning == "" {
			r.checkRan[key] = true
		}
		r.mu.Unlock()
		if first {
			r.pokeServices()
		}
		if notRunning == "" && watch.observe(err, r.now(), startedAt) {
			r.restartForCheck(t, key, startedAt, watch.cr.Limit, err)
		}
		if (prev == nil) != (err == nil) {
			if err != nil {
				r.log.Info("check failing", "check", key, "err", err)
			} else {
				r.log.Info("check passing", "check", key)
			}
			select {
			case r.changed <- struct{}{}:
			default:
			}
			r.pokeServices()
		}
		select {
		case <-r.ctx.Done():
			return
		case <-r.stopping:
			return
		case <-tick.C:
		}
	}
}

// checkState is what one check reports over its probes, Nomad's
// success_before_passing and failures_before_critical: a failing check
// passes after that many passing probes in a row, a passing one fails after
// that many failing probes in a row (0 or 1: the first). It starts failing.
type checkState struct {
	passing bool
	// streak counts the probes in a row that disagree with passing.
	streak int
}

// next is the state after a probe that returned probe (nil: it passed),
// with the error the check reports: nil while passing (a failing probe
// below the threshold included), else the probe's, or why a passing probe
// does not count yet.
func (s checkState) next(probe error, c model.Check, key string) (checkState, error) {
	ok := probe == nil
	if ok == s.passing {
		s.streak = 0
	} else {
		s.streak++
		need := max(1, c.FailuresBeforeCritical)
		if !s.passing {
			need = max(1, c.SuccessBeforePassing)
		}
		if s.streak >= need {
			s.passing, s.streak = ok, 0
		}
	}
	switch {
	case s.passing:
		return s, nil
	case ok:
		return s, fmt.Errorf("check %s passed %d of the %d probes in a row it needs (success_before_passing)", key, s.streak, c.SuccessBeforePassing)
	default:
		return s, probe
	}
}
