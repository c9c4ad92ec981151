package allocrunner

import (
	"fmt"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// PortTable is the node's port table (host/ports.Table): who holds which
// port on the node.
type PortTable interface {
	// Assign gives an allocation the ports of its group's network, or
	// fails holding nothing.
	Assign(allocID string, n *model.Network) ([]model.AllocatedPort, error)
	// Claim records the ports a restored allocation already holds.
	Claim(allocID string, ports []model.AllocatedPort) error
	// Release frees an allocation's ports.
	Release(allocID string)
}

// EventSetupFailure is the task event of an allocation whose ports could
// not be given: its tasks never start.
const EventSetupFailure = "Setup Failure"

// holdPortsLocked gives the allocation its ports before any task starts:
// a restored allocation claims the ports it recorded (a conflict is logged
// and the tasks keep running: bad bookkeeping never stops what runs), a new
// one is assigned its group's. It returns why the allocation cannot run.
func (r *Runner) holdPortsLocked(g *model.Group) error {
	if len(r.alloc.Ports) > 0 {
		if r.cfg.Ports == nil {
			return nil
		}
		if err := r.cfg.Ports.Claim(r.id, r.alloc.Ports); err != nil {
			r.log.Error("claiming the allocation's recorded ports", "err", err)
		}
		return nil
	}
	if g.Network == nil || len(g.Network.Ports) == 0 {
		return nil
	}
	if r.cfg.Ports == nil {
		return fmt.Errorf("group %q has a network block but this node allocates no ports", g.Name)
	}
	ps, err := r.cfg.Ports.Assign(r.id, g.Network)
	if err != nil {
		return fmt.Errorf("allocating the group's ports: %w", err)
	}
	r.mutable().Ports = ps
	return nil
}

// releasePorts frees the allocation's ports once its tasks are gone.
func (r *Runner) releasePorts() {
	if r.cfg.Ports != nil {
		r.cfg.Ports.Release(r.id)
	}
}

// failSetupLocked marks every task of an allocation that cannot start dead
// and failed, with the reason as their event and the allocation's
// description.
func (r *Runner) failSetupLocked(g *model.Group, why string) {
	now := r.now()
	a := r.mutable()
	for _, t := range g.Tasks {
		ts := a.TaskStates[t.Name]
		ts.State, ts.Failed, ts.FinishedAt = "dead", true, now
		ts.Events = append(ts.Events, model.TaskEvent{Type: EventSetupFailure, Message: why, Time: now})
	}
	r.setClientStatusLocked(model.ClientFailed, why)
}

// watchRunDuration stops a sysbatch allocation that outlives its group's
// max_run_duration, counted from the allocation's creation (so an agent
// restart does not extend it); its tasks are finished as failed.
func (r *Runner) watchRunDuration(g *model.Group, jt model.JobType) {
	limit := g.MaxRunDuration.D()
	if limit <= 0 || jt != model.JobTypeSysbatch {
		return
	}
	r.mu.Lock()
	start := r.alloc.CreateTime
	r.mu.Unlock()
	if start.IsZero() {
		start = r.now()
	}
	wait := start.Add(limit).Sub(r.now())
	r.bgWG.Add(1)
	go func() {
		defer r.bgWG.Done()
		t := time.NewTimer(max(wait, 0))
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.ctx.Done():
			return
		case <-r.stopping:
			return
		}
		why := fmt.Sprintf("max_run_duration (%s) exceeded", limit)
		r.mu.Lock()
		r.failStop = why
		r.mu.Unlock()
		for _, task := range g.Tasks {
			r.event(task.Name, EventKilling, why)
		}
		r.stopSiblings()
	}()
}

// stopVerdict is how a task stopped by the allocation's stop is recorded:
// failed, with the reason, when the run limit stopped it.
func (r *Runner) stopVerdict() (failed bool, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failStop != "" {
		return true, r.failStop
	}
	return false, "allocation stopped"
}
