package reconcile

import (
	"github.com/hivelet/hivelet/host/model"
)

// node is the per-node core: it applies the per-allocation rules (first
// match wins) to every live allocation on the node and the placement rules
// to every required name without one, appending entries to p and counting
// into the fleet-wide group summaries.
func (f *fleet) node(nodeID string, p *Plan) {
	allocs := f.live[nodeID]
	has := make(map[string]bool, len(allocs))
	for i, a := range allocs {
		// allocs are sorted by name then ID: a run of equal names is a
		// duplicate set, of which one is kept and the others stopped.
		if i > 0 && allocs[i-1].Name == a.Name {
			continue
		}
		keep := a
		for _, b := range allocs[i+1:] {
			if b.Name != a.Name {
				break
			}
			if b.JobVersion > keep.JobVersion {
				keep = b
			}
		}
		for _, b := range allocs[i:] {
			if b.Name != a.Name {
				break
			}
			if b != keep {
				p.Stop = append(p.Stop, f.entry(b, "duplicate", "another live allocation of this name on this node is kept"))
			}
		}
		has[a.Name] = true
		f.alloc(keep, p)
	}
	for i, gr := range f.groups {
		for _, name := range f.names[i] {
			if !has[name] {
				f.place(nodeID, gr, name, p)
			}
		}
	}
}

// entry describes an existing allocation. Canary reports that it is a
// canary of the deployment in force (a canary of an older rollout is not).
func (f *fleet) entry(a *model.Allocation, rule, reason string) Entry {
	canary := f.dep != nil && a.DeploymentID == f.dep.ID && a.DeploymentStatus.IsCanary()
	return Entry{Name: a.Name, Group: a.TaskGroup, NodeID: a.NodeID, AllocID: a.ID, Rule: rule,
		JobVersion: a.JobVersion, Canary: canary, Reason: reason}
}

// alloc applies the per-allocation rules 1–14 of spec/reconcile.md.
func (f *fleet) alloc(a *model.Allocation, p *Plan) {
	gr := f.required[a.Name]
	// 1. Not required (job stopped, group removed, count lowered).
	if gr == nil {
		p.Stop = append(p.Stop, f.entry(a, "alloc.1", ""))
		return
	}
	e := f.entry(a, "", "")
	e.Group = gr.name
	// 2. Marked for migration.
	if a.DesiredTransition.ShouldMigrate() {
		e.Rule = "alloc.2"
		p.Migrate = append(p.Migrate, e)
		gr.sum.LeftToMigrate++
		return
	}
	now := f.in.Now
	disc := f.in.DisconnectHandling && gr.lostAfter > 0
	last, hasLast := a.LastClientTransition()
	cs := a.ClientStatus
	due := disc && (cs == model.ClientUnknown || cs == model.ClientRunning) &&
		hasLast && last.Value == string(model.ClientUnknown)
	// 3. Due to reconnect, but unknown for longer than the group allows.
	if due && !last.Time.Add(gr.lostAfter).After(now) {
		e.Rule, e.ClientStatus = "alloc.3", model.ClientLost
		p.Lost = append(p.Lost, e)
		return
	}
	// 4. Unknown and still desired to run: waiting to reconnect.
	if disc && cs == model.ClientUnknown && a.DesiredStatus == model.DesiredRun {
		e.Rule = "alloc.4"
		p.Ignore = append(p.Ignore, e)
		return
	}
	tn, tainted := f.tainted[a.NodeID]
	// 5. Its node is back and it is due to reconnect: record the reconnect.
	if disc && !tainted && due {
		e.Rule = "alloc.5"
		e.State = &model.AllocState{Field: model.AllocStateClientStatus, Value: string(cs), Time: now}
		p.Reconnecting = append(p.Reconnecting, e)
		f.countKept(gr, a)
		return
	}
	if tainted {
		switch {
		// 6. sysbatch work that already finished successfully.
		case f.sysbatch && cs == model.ClientComplete:
			e.Rule = "alloc.6"
			p.Ignore = append(p.Ignore, e)
		// 7. Disconnected node, handling on, running: disconnecting.
		case tn != nil && tn.Status == model.NodeStatusDisconnected && disc && cs == model.ClientRunning:
			e.Rule, e.ClientStatus = "alloc.7", model.ClientUnknown
			e.State = &model.AllocState{Field: model.AllocStateClientStatus, Value: string(model.ClientUnknown), Time: now}
			p.Disconnecting = append(p.Disconnecting, e)
		// 8. Node gone or down.
		case tn == nil || tn.Status == model.NodeStatusDown:
			e.Rule, e.ClientStatus = "alloc.8", model.ClientLost
			p.Lost = append(p.Lost, e)
		// 9. Tainted otherwise (draining, not yet migrating; disconnected
		// without handling).
		default:
			e.Rule = "alloc.9"
			p.Ignore = append(p.Ignore, e)
		}
		return
	}
	// 10. Node in scope but not ready.
	if f.notReady[a.NodeID] {
		e.Rule = "alloc.10"
		p.Ignore = append(p.Ignore, e)
		return
	}
	// 11. Node not a ready node.
	if f.ready[a.NodeID] == nil {
		e.Rule = "alloc.11"
		p.Stop = append(p.Stop, e)
		return
	}
	if a.JobVersion != f.version {
		gr.wantDeployment = true
		// 12. Canarying and not promoted: canary nodes update, the others wait.
		if gr.canarying {
			if !gr.canaryNodes[a.NodeID] {
				e.Rule, e.Canary = "alloc.12", false
				e.Reason = "waiting for the deployment to be promoted"
				p.AwaitingPromotion = append(p.AwaitingPromotion, e)
				gr.sum.Awaiting++
				return
			}
			e.Rule, e.Canary = "alloc.12", true
		} else {
			// 13. Outdated otherwise.
			e.Rule, e.Canary = "alloc.13", false
		}
		gr.sum.LeftToUpdate++
		if f.held != "" {
			e.Reason = "update held: deployment is " + string(f.held)
			gr.sum.UpdatesHeld = e.Reason
			p.Ignore = append(p.Ignore, e)
			return
		}
		e.JobVersion = f.version
		e.NewAllocID = AllocID(f.job.Namespace, f.job.ID, f.version, a.NodeID, a.Name, a.ID)
		p.Update = append(p.Update, e)
		return
	}
	// 14. Up to date.
	e.Rule = "alloc.14"
	p.Ignore = append(p.Ignore, e)
	f.countKept(gr, a)
}

// countKept counts an up-to-date allocation that stays in place into the
// group's health summary.
func (f *fleet) countKept(gr *group, a *model.Allocation) {
	if a.JobVersion != f.version {
		return
	}
	s := &gr.sum
	s.Placed++
	switch {
	case a.DeploymentStatus.IsHealthy():
		s.Healthy++
		if f.dep != nil && a.DeploymentID == f.dep.ID && a.DeploymentStatus.IsCanary() {
			s.CanariesHealthy++
		}
	case a.DeploymentStatus.IsUnhealthy():
		s.Unhealthy++
	}
}

// place applies the rules for a required name with no live allocation on
// the node.
func (f *fleet) place(nodeID string, gr *group, name string, p *Plan) {
	prev := f.terminal[nodeName{nodeID, name}]
	// 1. sysbatch: a terminal allocation of the name re-runs only for a
	// new job version; nothing is placed.
	if f.sysbatch && prev != nil {
		e := f.entry(prev, "name.1", "")
		e.Group = gr.name
		if prev.JobVersion != f.version {
			e.JobVersion = f.version
			e.NewAllocID = AllocID(f.job.Namespace, f.job.ID, f.version, nodeID, name, prev.ID)
			p.Update = append(p.Update, e)
			gr.sum.LeftToUpdate++
		} else {
			p.Ignore = append(p.Ignore, e)
		}
		return
	}
	// 2. Tainted, not-ready (or unknown) nodes get nothing.
	if _, t := f.tainted[nodeID]; t || f.notReady[nodeID] || f.ready[nodeID] == nil {
		return
	}
	// 3. Place, carrying the previous terminal allocation on this node.
	e := Entry{Name: name, Group: gr.name, NodeID: nodeID, Rule: "name.3", JobVersion: f.version,
		Canary: gr.canarying && gr.canaryNodes[nodeID]}
	prevID := ""
	if prev != nil {
		prevID = prev.ID
		e.PreviousAllocID = prevID
	}
	e.AllocID = AllocID(f.job.Namespace, f.job.ID, f.version, nodeID, name, prevID)
	p.Place = append(p.Place, e)
	gr.sum.LeftToPlace++
	if !f.ranHere[nodeName{nodeID, gr.name}] {
		gr.wantDeployment = true
	}
}
