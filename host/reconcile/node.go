package reconcile

import (
	"github.com/hivelet/hivelet/host/model"
)

// node is the per-node core: it applies the per-allocation rules (first
// match wins) to every live allocation on the node and the placement rules
// to every required name without one, adding entries to c and counting
// into the fleet-wide group summaries.
func (f *fleet) node(ni *nodeInfo, c *collector) {
	allocs := ni.live
	f.stamp++
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
				c.add(bStop, f.entry(b, "duplicate", "another live allocation of this name on this node is kept"))
			}
		}
		gr, idx := f.required(a.Name)
		if gr != nil {
			gr.stamps[idx] = f.stamp
		}
		f.alloc(keep, gr, ni, c)
	}
	for _, gr := range f.groups {
		for idx, st := range gr.stamps {
			if st != f.stamp {
				f.place(ni, gr, f.allocName(gr, idx), c)
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
// gr is the group the allocation's name is required by, or nil.
func (f *fleet) alloc(a *model.Allocation, gr *group, ni *nodeInfo, c *collector) {
	// 1. Not required (job stopped, group removed, count lowered).
	if gr == nil {
		c.add(bStop, f.entry(a, "alloc.1", ""))
		return
	}
	e := f.entry(a, "", "")
	e.Group = gr.name
	// 2. Marked for migration.
	if a.DesiredTransition.ShouldMigrate() {
		e.Rule = "alloc.2"
		c.add(bMigrate, e)
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
		c.add(bLost, e)
		return
	}
	// 4. Unknown and still desired to run: waiting to reconnect.
	if disc && cs == model.ClientUnknown && a.DesiredStatus == model.DesiredRun {
		e.Rule = "alloc.4"
		c.add(bIgnore, e)
		return
	}
	tn, tainted := ni.taintedNode, ni.tainted
	// 5. Its node is back and it is due to reconnect: record the reconnect.
	if disc && !tainted && due {
		e.Rule = "alloc.5"
		e.State = &model.AllocState{Field: model.AllocStateClientStatus, Value: string(cs), Time: now}
		c.add(bReconnecting, e)
		f.countKept(gr, a)
		return
	}
	if tainted {
		switch {
		// 6. sysbatch work that already finished successfully.
		case f.sysbatch && cs == model.ClientComplete:
			e.Rule = "alloc.6"
			c.add(bIgnore, e)
		// 7. Disconnected node, handling on, running: disconnecting.
		case tn != nil && tn.Status == model.NodeStatusDisconnected && disc && cs == model.ClientRunning:
			e.Rule, e.ClientStatus = "alloc.7", model.ClientUnknown
			e.State = &model.AllocState{Field: model.AllocStateClientStatus, Value: string(model.ClientUnknown), Time: now}
			c.add(bDisconnecting, e)
		// 8. Node gone or down.
		case tn == nil || tn.Status == model.NodeStatusDown:
			e.Rule, e.ClientStatus = "alloc.8", model.ClientLost
			c.add(bLost, e)
		// 9. Tainted otherwise (draining, not yet migrating; disconnected
		// without handling).
		default:
			e.Rule = "alloc.9"
			c.add(bIgnore, e)
		}
		return
	}
	// 10. Node in scope but not ready.
	if ni.notReady {
		e.Rule = "alloc.10"
		c.add(bIgnore, e)
		return
	}
	// 11. Node not a ready node.
	if ni.ready == nil {
		e.Rule = "alloc.11"
		c.add(bStop, e)
		return
	}
	if a.JobVersion != f.version {
		gr.wantDeployment = true
		// 12. Canarying and not promoted: canary nodes update, the others wait.
		if gr.canarying {
			if !gr.canaryNodes[a.NodeID] {
				e.Rule, e.Canary = "alloc.12", false
				e.Reason = "waiting for the deployment to be promoted"
				c.add(bAwaiting, e)
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
			c.add(bIgnore, e)
			return
		}
		e.JobVersion = f.version
		e.NewAllocID = AllocID(f.job.Namespace, f.job.ID, f.version, a.NodeID, a.Name, a.ID)
		c.add(bUpdate, e)
		return
	}
	// 14. Up to date.
	e.Rule = "alloc.14"
	c.add(bIgnore, e)
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
func (f *fleet) place(ni *nodeInfo, gr *group, name string, c *collector) {
	nodeID := ni.id
	prev := f.terminal[nodeName{nodeID, name}]
	// 1. sysbatch: a terminal allocation of the name re-runs only for a
	// new job version; nothing is placed.
	if f.sysbatch && prev != nil {
		e := f.entry(prev, "name.1", "")
		e.Group = gr.name
		if prev.JobVersion != f.version {
			e.JobVersion = f.version
			e.NewAllocID = AllocID(f.job.Namespace, f.job.ID, f.version, nodeID, name, prev.ID)
			c.add(bUpdate, e)
			gr.sum.LeftToUpdate++
		} else {
			c.add(bIgnore, e)
		}
		return
	}
	// 2. Tainted, not-ready (or unknown) nodes get nothing.
	if ni.tainted || ni.notReady || ni.ready == nil {
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
	c.add(bPlace, e)
	gr.sum.LeftToPlace++
	if !f.ranHere[nodeName{nodeID, gr.name}] {
		gr.wantDeployment = true
	}
}
