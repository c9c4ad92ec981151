package reconcile

import (
	"fmt"
	"slices"

	"github.com/hivelet/hivelet/host/model"
)

// resolveDeployment settles which deployment is in force before the
// per-node pass: an active deployment of an older version, or of a stopped
// job, is cancelled; a deployment of the current version is kept (a copy,
// so the input is never modified), and holds updates while it is paused,
// pending, initializing or failed.
//
// A local round (shared) reads the record in place: it never changes it,
// and copying and sorting a record's canary set would cost in proportion
// to the fleet.
func (f *fleet) resolveDeployment(shared bool) error {
	d := f.in.Deployment
	if d == nil {
		return nil
	}
	if d.JobID != f.job.ID {
		return fmt.Errorf("reconciling job %q: deployment %s belongs to job %q", f.job.ID, d.ID, d.JobID)
	}
	switch {
	case f.job.Stop:
		if d.Status.Active() {
			f.updates = append(f.updates, model.DeploymentStatusUpdate{DeploymentID: d.ID,
				Status: model.DeploymentCancelled, StatusDescription: model.DescStoppedJob})
		}
		return nil
	case d.JobVersion != f.version:
		if d.Status.Active() {
			f.updates = append(f.updates, model.DeploymentStatusUpdate{DeploymentID: d.ID,
				Status: model.DeploymentCancelled, StatusDescription: model.DescNewerJob})
		}
		return nil
	}
	if shared {
		f.dep = d
	} else {
		f.dep = cloneDeployment(d)
		for _, st := range f.dep.TaskGroups {
			slices.Sort(st.CanaryNodes) // canonical order: the plan must not depend on input order
		}
	}
	switch d.Status {
	case model.DeploymentPaused, model.DeploymentPending, model.DeploymentInitializing, model.DeploymentFailed:
		f.held = d.Status
		f.heldReason = "update held: deployment is " + string(d.Status)
	}
	return nil
}

func cloneDeployment(d *model.Deployment) *model.Deployment { return d.Clone() }

// qualifies reports whether a group takes part in a deployment: it has a
// rolling update strategy (max_parallel > 0), something is desired, and
// some node has a rollout to do (an update, an allocation awaiting
// promotion, or the first placement of the version on that node).
func (f *fleet) qualifies(gr *group) bool {
	return gr.update.Rolling() && (gr.sum.DesiredTotal > 0 || gr.canarying) && gr.wantDeployment
}

// decideDeployment creates the deployment or updates the one in force,
// counts completion across every node, and emits the status updates.
func (f *fleet) decideDeployment(p *Plan) {
	ready := len(f.readyList)
	for _, gr := range f.groups {
		gr.sum.DesiredTotal = ready * gr.count
		gr.sum.Canary = gr.decision
	}
	switch {
	case f.job.Stop:
	case f.dep == nil:
		f.create(p)
	default:
		p.Deployment = f.dep
		if f.dep.Status.Active() && f.held == "" {
			p.DeploymentChanged = f.refresh()
		}
	}
	for _, gr := range f.groups {
		gr.sum.Complete = gr.sum.LeftToPlace == 0 && gr.sum.LeftToUpdate == 0 && gr.sum.LeftToMigrate == 0 &&
			!gr.canarying && gr.sum.Healthy >= gr.sum.DesiredTotal
	}
	if f.dep != nil && f.dep.Status.Active() {
		f.statusUpdates()
	}
}

// create makes the deployment of the current version when some group
// qualifies. Its ID is derived from (job, version): creating it again is
// idempotent.
func (f *fleet) create(p *Plan) {
	d := &model.Deployment{
		ID:                DeploymentID(f.job.Namespace, f.job.ID, f.version),
		Namespace:         f.job.Namespace,
		JobID:             f.job.ID,
		JobVersion:        f.version,
		Status:            model.DeploymentRunning,
		StatusDescription: model.DescRunning,
		IsMultiregion:     f.job.Multiregion,
		TaskGroups:        map[string]*model.DeploymentState{},
		CreateTime:        f.in.Now,
		ModifyTime:        f.in.Now,
	}
	for _, gr := range f.groups {
		if f.qualifies(gr) {
			d.TaskGroups[gr.name] = f.newState(gr)
		}
	}
	if len(d.TaskGroups) == 0 {
		return
	}
	// A deployment created needing promotion says so in the round that
	// creates it (the new record carries the description).
	needs, auto := false, true
	for _, st := range d.TaskGroups {
		if st.DesiredCanaries > 0 && !st.Promoted {
			needs = true
			auto = auto && st.AutoPromote
		}
	}
	if needs {
		d.StatusDescription = model.DescNeedsPromotion
		if auto {
			d.StatusDescription = model.DescAutoPromotionPending
		}
	}
	p.Deployment, p.DeploymentCreated = d, true
}

func (f *fleet) newState(gr *group) *model.DeploymentState {
	st := &model.DeploymentState{
		AutoRevert:       gr.update.AutoRevert,
		AutoPromote:      gr.update.AutoPromote,
		ProgressDeadline: gr.update.ProgressDeadline,
		DesiredTotal:     gr.sum.DesiredTotal,
	}
	if gr.update.ProgressDeadline > 0 {
		st.RequireProgressBy = f.in.Now.Add(gr.update.ProgressDeadline.D())
	}
	f.recordCanaries(gr, st)
	return st
}

// recordCanaries records a canarying group's canary set and desired
// canaries (one per required name on each ready canary node).
func (f *fleet) recordCanaries(gr *group, st *model.DeploymentState) {
	if !gr.canarying {
		return
	}
	st.CanaryNodes = slices.Clone(gr.decision.Nodes)
	n := 0
	for i, c := range gr.canaryAt {
		if c && f.nodes[i].ready {
			n++
		}
	}
	st.DesiredCanaries = n * gr.g.Count
}

// refresh brings the deployment in force up to date (desired totals, canary
// sets, groups that now qualify) and reports whether anything changed.
func (f *fleet) refresh() bool {
	changed := false
	for _, gr := range f.groups {
		st := f.dep.TaskGroups[gr.name]
		if st == nil {
			if f.qualifies(gr) {
				f.dep.TaskGroups[gr.name] = f.newState(gr)
				changed = true
			}
			continue
		}
		if st.DesiredTotal != gr.sum.DesiredTotal {
			st.DesiredTotal, changed = gr.sum.DesiredTotal, true
		}
		if st.DesiredCanaries == 0 && len(st.CanaryNodes) == 0 {
			f.recordCanaries(gr, st) // a recorded canary set is never changed (I4)
			changed = changed || st.DesiredCanaries != 0 || len(st.CanaryNodes) != 0
		}
	}
	if changed {
		f.dep.ModifyTime = f.in.Now
	}
	return changed
}

// statusUpdates emits the status updates of the deployment in force.
func (f *fleet) statusUpdates() {
	d := f.dep
	needs, auto := false, true
	for _, st := range d.TaskGroups {
		if st.DesiredCanaries > 0 && !st.Promoted {
			needs = true
			auto = auto && st.AutoPromote
		}
	}
	if needs {
		// Still needs promotion: say so (once), and nothing else this round.
		desc := model.DescNeedsPromotion
		if auto {
			desc = model.DescAutoPromotionPending
		}
		if d.Status == model.DeploymentRunning && d.StatusDescription != desc {
			f.updates = append(f.updates, model.DeploymentStatusUpdate{DeploymentID: d.ID,
				Status: model.DeploymentRunning, StatusDescription: desc})
		}
		return
	}
	if d.Status == model.DeploymentInitializing {
		f.updates = append(f.updates, model.DeploymentStatusUpdate{DeploymentID: d.ID,
			Status: model.DeploymentPending, StatusDescription: model.DescPending})
		return
	}
	if d.Status != model.DeploymentRunning || len(d.TaskGroups) == 0 {
		return
	}
	for _, gr := range f.groups {
		if _, in := d.TaskGroups[gr.name]; in && !gr.sum.Complete {
			return
		}
	}
	for name := range d.TaskGroups {
		if f.group(name) == nil {
			return // a group the job no longer has cannot be counted complete
		}
	}
	if d.IsMultiregion {
		f.updates = append(f.updates, model.DeploymentStatusUpdate{DeploymentID: d.ID,
			Status: model.DeploymentBlocked, StatusDescription: model.DescBlocked})
		return
	}
	f.updates = append(f.updates, model.DeploymentStatusUpdate{DeploymentID: d.ID,
		Status: model.DeploymentSuccessful, StatusDescription: model.DescSuccessful})
}
