package reconcile

import (
	"github.com/hivelet/hivelet/host/model"
)

// node is the per-node core: it applies the per-allocation rules (first
// match wins) to every live allocation on the node and the placement rules
// to every required name without one, adding entries to c and counting
// into the fleet-wide group summaries.
func (f *fleet) node(ni *nodeInfo, c *collector) {
	allocs := f.liveOf(ni)
	f.stamp++
	for i, a := range allocs {
		ref := ni.lo + int32(i) // a's place in f.live
		if !ni.ready {
			// A tainted, not-ready or not-ready-listed node: every live
			// allocation goes through the table on its own (a drain
			// migrates each of them, a down node marks each of them lost).
			gr, idx := f.required(a.Name)
			if gr != nil {
				gr.stamps[idx] = f.stamp
			}
			f.alloc(a, ref, gr, ni, c)
			continue
		}
		// allocs are sorted by name then ID: a run of equal names is a
		// duplicate set, of which one is kept and the others stopped.
		if i > 0 && allocs[i-1].Name == a.Name {
			continue
		}
		keep, kref := a, ref
		if i+1 < len(allocs) && allocs[i+1].Name == a.Name {
			for j, b := range allocs[i+1:] {
				if b.Name != a.Name {
					break
				}
				// The newest job version stays; ties: the one created last.
				if b.JobVersion > keep.JobVersion || (b.JobVersion == keep.JobVersion && b.CreateTime.After(keep.CreateTime)) {
					keep, kref = b, ref+1+int32(j)
				}
			}
			for j, b := range allocs[i:] {
				if b.Name != a.Name {
					break
				}
				if b != keep {
					c.add(decision{ref: ref + int32(j), gr: noGroup, pos: ni.pos, kind: bStop, rule: ruleDuplicate})
				}
			}
		}
		gr, idx := f.required(a.Name)
		if gr != nil {
			gr.stamps[idx] = f.stamp
		}
		f.alloc(keep, kref, gr, ni, c)
	}
	for _, gr := range f.groups {
		for idx, st := range gr.stamps {
			if st != f.stamp {
				f.place(ni, gr, idx, c)
			}
		}
	}
}

// rule identifies the rule that decided. Its text form is Entry.Rule.
type rule uint8

const (
	ruleAlloc1 rule = iota + 1 // ruleAlloc1+n-1 is per-allocation rule n
	ruleAlloc2
	ruleAlloc3
	ruleAlloc4
	ruleAlloc5
	ruleAlloc6
	ruleAlloc7
	ruleAlloc8
	ruleAlloc9
	ruleAlloc10
	ruleAlloc11
	ruleAlloc12
	ruleAlloc13
	ruleAlloc14
	ruleName1
	ruleName3
	ruleDuplicate
)

var ruleNames = [...]string{"", "alloc.1", "alloc.2", "alloc.3", "alloc.4", "alloc.5", "alloc.6", "alloc.7",
	"alloc.8", "alloc.9", "alloc.10", "alloc.11", "alloc.12", "alloc.13", "alloc.14", "name.1", "name.3", "duplicate"}

func (r rule) String() string { return ruleNames[r] }

// decision is a rule's verdict, which the collector turns into an entry
// at once (a single-node round builds entries, and derives IDs, for its
// own node only).
type decision struct {
	// ref is the allocation: live (f.live[ref]) for the per-allocation
	// rules and duplicates; terminal for name.1; the carried terminal, or
	// none, for name.3 (see fleet.ref).
	ref  int32
	pos  int32 // the node's position in f.nodes
	idx  int32 // name.3: the index of the required name
	gr   int32 // the group's position in f.groups; noGroup for rule 1 and duplicates
	kind bucket
	rule rule
	// canary: update, place: the new allocation is a canary.
	canary bool
	held   bool // an update held by the deployment's status
}

// noGroup and noAlloc are decision.gr and decision.ref for none.
const (
	noGroup int32 = -1
	noAlloc int32 = -1
)

// termRef is decision.ref for f.terms[i].
func termRef(i int32) int32 { return -2 - i }

// allocOf returns the decision's allocation, or nil.
func (f *fleet) allocOf(d *decision) *model.Allocation {
	switch {
	case d.ref >= 0:
		return f.live[d.ref]
	case d.ref == noAlloc:
		return nil
	}
	return f.terms[-2-d.ref]
}

// alloc applies the per-allocation rules 1–14 of docs/reconciler-rules.md.
// gr is the group the allocation's name is required by, or nil.
// ref is a's place in f.live.
func (f *fleet) alloc(a *model.Allocation, ref int32, gr *group, ni *nodeInfo, c *collector) {
	d := decision{ref: ref, gr: noGroup, pos: ni.pos}
	if gr != nil {
		d.gr = gr.pos
	}
	add := func(b bucket, r rule) {
		d.kind, d.rule = b, r
		c.add(d)
	}
	// 1. Not required (job stopped, group removed, count lowered).
	if gr == nil {
		add(bStop, ruleAlloc1)
		return
	}
	// 2. Marked for migration.
	if a.DesiredTransition.ShouldMigrate() {
		add(bMigrate, ruleAlloc2)
		gr.sum.LeftToMigrate++
		return
	}
	disc := f.in.DisconnectHandling && gr.lostAfter > 0
	cs := a.ClientStatus
	due, expired := false, false
	if disc && (cs == model.ClientUnknown || cs == model.ClientRunning) {
		if last, ok := a.LastClientTransition(); ok && last.Value == string(model.ClientUnknown) {
			due = true
			expired = !last.Time.Add(gr.lostAfter).After(f.in.Now)
		}
	}
	// 3. Due to reconnect, but unknown for longer than the group allows.
	if due && expired {
		add(bLost, ruleAlloc3)
		return
	}
	// 4. Unknown and still desired to run: waiting to reconnect.
	if disc && cs == model.ClientUnknown && a.DesiredStatus == model.DesiredRun {
		add(bIgnore, ruleAlloc4)
		return
	}
	// 5. Its node is back and it is due to reconnect: record the reconnect.
	if due && !ni.tainted {
		add(bReconnecting, ruleAlloc5)
		f.countKept(gr, a)
		return
	}
	if ni.tainted {
		tn := f.taintedNode(ni)
		switch {
		// 6. sysbatch work that already finished successfully.
		case f.sysbatch && cs == model.ClientComplete:
			add(bIgnore, ruleAlloc6)
		// 7. Disconnected node, handling on, running: disconnecting.
		case tn != nil && tn.Status == model.NodeStatusDisconnected && disc && cs == model.ClientRunning:
			add(bDisconnecting, ruleAlloc7)
		// 8. Node gone or down.
		case tn == nil || tn.Status == model.NodeStatusDown:
			add(bLost, ruleAlloc8)
		// 9. Tainted otherwise (draining, not yet migrating; disconnected
		// without handling).
		default:
			add(bIgnore, ruleAlloc9)
		}
		return
	}
	// 10. Node in scope but not ready.
	if ni.notReady {
		add(bIgnore, ruleAlloc10)
		return
	}
	// 11. Node not a ready node.
	if !ni.ready {
		add(bStop, ruleAlloc11)
		return
	}
	if a.JobVersion != f.version {
		gr.wantDeployment = true
		if gr.canaryingUnsure || gr.nodeUnsure {
			f.canaryUnsure(gr, ni)
		}
		r := ruleAlloc13 // 13. Outdated otherwise.
		// 12. Canarying and not promoted: canary nodes update, the others wait.
		if gr.canarying {
			if !gr.isCanary(ni) {
				add(bAwaiting, ruleAlloc12)
				gr.sum.Awaiting++
				return
			}
			r, d.canary = ruleAlloc12, true
		}
		gr.sum.LeftToUpdate++
		if f.held != "" {
			d.held = true
			gr.sum.UpdatesHeld = f.heldReason
			add(bIgnore, r)
			return
		}
		add(bUpdate, r)
		return
	}
	// 14. Up to date.
	add(bIgnore, ruleAlloc14)
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
		if f.depCanary(a) {
			s.CanariesHealthy++
		}
	case a.DeploymentStatus.IsUnhealthy():
		s.Unhealthy++
	}
}

// depCanary reports whether a is a canary of the deployment in force (a
// canary of an older rollout is not).
func (f *fleet) depCanary(a *model.Allocation) bool {
	return a.DeploymentStatus.IsCanary() && f.dep != nil && a.DeploymentID == f.dep.ID
}

// place applies the rules for a required name (group gr, index idx) with
// no live allocation on the node.
func (f *fleet) place(ni *nodeInfo, gr *group, idx int, c *collector) {
	// Terminal allocations are looked up by name: build it only when this
	// node has any, or when the name is placed.
	var prev *model.Allocation
	pref := noAlloc
	if ni.hasTerminal {
		if i, ok := f.terminal[nodeName{f.nodeID(ni), f.allocName(gr, idx)}]; ok {
			prev, pref = f.terms[i], termRef(i)
		}
	}
	// 1. sysbatch: a terminal allocation of the name re-runs only for a
	// new job version; nothing is placed.
	if f.sysbatch && prev != nil {
		d := decision{ref: pref, gr: gr.pos, pos: ni.pos, rule: ruleName1, kind: bIgnore}
		if prev.JobVersion != f.version {
			d.kind = bUpdate
			gr.sum.LeftToUpdate++
		}
		c.add(d)
		return
	}
	// 2. Tainted, not-ready (or unknown) nodes get nothing.
	if ni.tainted || ni.notReady || !ni.ready {
		return
	}
	// 3. Place, carrying the previous terminal allocation on this node.
	if gr.canaryingUnsure || gr.nodeUnsure {
		f.canaryUnsure(gr, ni)
	}
	c.add(decision{ref: pref, gr: gr.pos, pos: ni.pos, idx: int32(idx), kind: bPlace, rule: ruleName3,
		canary: gr.canarying && gr.isCanary(ni)})
	gr.sum.LeftToPlace++
	if !gr.wantDeployment && !f.ranHere(ni, gr.name) {
		gr.wantDeployment = true
	}
}

// entry fills e (a zero entry) with a decision's plan entry, but for new
// allocation IDs (a placement's AllocID, an update's NewAllocID: see
// collector.plan). It writes in place: an entry is big, and a round
// builds thousands.
//
// An allocation's entry takes its node ID from the allocation (the same
// ID as its node's, as every allocation of a node's window, or terminal
// allocation carried on it, has): the pass reads no node.
func (f *fleet) entry(d *decision, e *Entry) {
	a := f.allocOf(d)
	if d.rule == ruleName3 {
		ni, gr := &f.nodes[d.pos], f.groups[d.gr]
		e.Name, e.Group, e.NodeID, e.Canary, e.Rule, e.JobVersion = f.allocName(gr, int(d.idx)), gr.name, f.nodeID(ni), d.canary, d.rule.String(), f.version
		if a != nil {
			e.PreviousAllocID = a.ID
		}
		return
	}
	group := a.TaskGroup
	if d.gr != noGroup {
		group = f.groups[d.gr].name
	}
	e.Name, e.Group, e.NodeID, e.AllocID, e.Rule, e.JobVersion, e.Canary =
		a.Name, group, a.NodeID, a.ID, d.rule.String(), a.JobVersion, f.depCanary(a)
	switch d.rule {
	case ruleAlloc3, ruleAlloc8:
		e.ClientStatus = model.ClientLost
	case ruleAlloc5:
		e.State = &model.AllocState{Field: model.AllocStateClientStatus, Value: string(a.ClientStatus), Time: f.in.Now}
	case ruleAlloc7:
		e.ClientStatus = model.ClientUnknown
		e.State = &model.AllocState{Field: model.AllocStateClientStatus, Value: string(model.ClientUnknown), Time: f.in.Now}
	case ruleDuplicate:
		e.Reason = "another live allocation of this name on this node is kept"
	case ruleAlloc12, ruleAlloc13, ruleName1:
		if d.kind == bAwaiting {
			e.Canary, e.Reason = false, "waiting for the deployment to be promoted"
			break
		}
		if d.rule != ruleName1 {
			e.Canary = d.canary
		}
		if d.held {
			e.Reason = f.heldReason
			break
		}
		if d.kind == bUpdate {
			e.JobVersion = f.version // its NewAllocID: collector.plan
		}
	}
}

// ranHere reports whether an allocation of the group at the current
// version, live or terminal, exists on the node: then a placement is a
// re-placement of a version that already ran there, which wants no
// deployment.
func (f *fleet) ranHere(ni *nodeInfo, group string) bool {
	for _, a := range f.liveOf(ni) {
		if a.TaskGroup == group && a.JobVersion == f.version {
			return true
		}
	}
	return f.ran[nodeGroup{f.nodeID(ni), group}]
}
