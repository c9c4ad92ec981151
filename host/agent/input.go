package agent

import (
	"encoding/json"
	"maps"
	"reflect"
	"sort"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
)

// fleetFacts is what a pass knows about the fleet besides the job: every
// node, every allocation of other nodes, and the job's deployments. It is
// built from the KV view; buildInput is pure over it.
type fleetFacts struct {
	Nodes []*model.Node
	// OtherAllocs are other nodes' allocations of the job, as they reported.
	OtherAllocs []*model.Allocation
	// Deployments are the job's deployments, any version.
	Deployments []*model.Deployment
}

// buildInput builds the reconciler input for one job from this node's own
// allocations (its stored intent, never the KV copy: "what diverged is
// measured against" the node's own memory), and the fleet facts.
//
// This node is classified from self (its own, current record), not from the
// fleet's copy: a node that is running is never "down" to itself, so its own
// allocations are never lost or disconnecting because the view lags.
func buildInput(job *model.Job, self *model.Node, own []*model.Allocation, facts fleetFacts, now time.Time, canaries reconcile.CanaryChooser) reconcile.Input {
	return inputFrom(job, self, own, classifyNodes(job, self, facts.Nodes), facts.OtherAllocs, facts.Deployments, now, canaries)
}

// fleetNodes is the node part of a whole-fleet plan's input for one job:
// every node classified, self by its own record. It is read-only once
// made (a pass keeps it while it cannot differ: Agent.fleetInput).
type fleetNodes struct {
	ready    []*model.Node
	notReady []string
	tainted  map[string]*model.Node
	known    map[string]bool
}

// classifyNodes classifies nodes (and self, in place of the fleet's copy
// of it) for job.
func classifyNodes(job *model.Job, self *model.Node, all []*model.Node) *fleetNodes {
	fn := &fleetNodes{tainted: map[string]*model.Node{}, known: make(map[string]bool, len(all)+1)}
	nodes := make([]*model.Node, 0, len(all)+1)
	for _, n := range all {
		if n.ID != self.ID {
			nodes = append(nodes, n)
		}
	}
	nodes = append(nodes, self)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	for _, n := range nodes {
		switch nodeClass(job, n) {
		case reconcile.NodeTainted:
			fn.tainted[n.ID] = n
		case reconcile.NodeNotReady:
			fn.notReady = append(fn.notReady, n.ID)
		case reconcile.NodeReady:
			fn.ready = append(fn.ready, n)
		}
		fn.known[n.ID] = true
	}
	return fn
}

// inputFrom is the reconciler input for one job from its classified nodes
// (never modified: the input gets its own tainted map), this node's own
// allocations and the other nodes'.
func inputFrom(job *model.Job, self *model.Node, own []*model.Allocation, fn *fleetNodes, others []*model.Allocation, deps []*model.Deployment, now time.Time, canaries reconcile.CanaryChooser) reconcile.Input {
	in := reconcile.Input{
		Job:                job,
		TaintedNodes:       maps.Clone(fn.tainted),
		ReadyNodes:         fn.ready,
		NotReadyNodes:      fn.notReady,
		Now:                now,
		DisconnectHandling: true,
		Canaries:           canaries,
	}
	// Allocations on nodes no longer known at all count as on a gone node.
	known := fn.known
	add := func(a *model.Allocation) {
		if a.JobID != job.ID || a.Namespace != job.Namespace {
			return
		}
		if a.Terminal() {
			in.TerminalAllocs = append(in.TerminalAllocs, a)
			return
		}
		in.LiveAllocs = append(in.LiveAllocs, a)
		if !known[a.NodeID] {
			in.TaintedNodes[a.NodeID] = nil
		}
	}
	for _, a := range ownForPlan(self, own, now) {
		add(a)
	}
	for _, a := range others {
		if a.NodeID != self.ID {
			add(a)
		}
	}
	in.Deployment = recordOf(job, deps)
	return in
}

// drainDue reports whether this node's drain has reached the point where its
// allocations must go: system and sysbatch allocations have nowhere else to
// migrate to, so, as in Nomad, they are stopped at the drain's deadline
// (at once when it has none).
func drainDue(self *model.Node, now time.Time) bool {
	d := self.Drain
	if d == nil {
		return false
	}
	if d.Deadline <= 0 || d.Started.IsZero() {
		return true
	}
	return !now.Before(d.Started.Add(d.Deadline.D()))
}

// tasksEqual reports whether two versions of a group run the same tasks:
// an update between them can be done in place (no task restart). The tasks
// the group meta (which tasks see through ${meta.*}), the network,
// max_run_duration and the group's services (whose checks the runner starts
// with the tasks) are compared; everything else (count, update, restart,
// disconnect) may differ.
func tasksEqual(a, b *model.Group) bool {
	if a == nil || b == nil {
		return false
	}
	// The network and the run limit shape what the tasks get (their ports,
	// their deadline): a change of either replaces the allocation.
	type shape struct {
		Tasks          []*model.Task
		Meta           map[string]string
		Network        *model.Network
		MaxRunDuration model.Duration
		Services       []model.Service
		ShutdownDelay  model.Duration
	}
	ja, err1 := json.Marshal(shape{a.Tasks, a.Meta, a.Network, a.MaxRunDuration, a.Services, a.ShutdownDelay})
	jb, err2 := json.Marshal(shape{b.Tasks, b.Meta, b.Network, b.MaxRunDuration, b.Services, b.ShutdownDelay})
	if err1 != nil || err2 != nil {
		return reflect.DeepEqual(a.Tasks, b.Tasks) && reflect.DeepEqual(a.Meta, b.Meta) &&
			reflect.DeepEqual(a.Network, b.Network) && a.MaxRunDuration == b.MaxRunDuration &&
			reflect.DeepEqual(a.Services, b.Services) && a.ShutdownDelay == b.ShutdownDelay
	}
	return string(ja) == string(jb)
}

// localInput builds the reconciler's one-node input for a job whose record
// of the version in force is stored (d): this node's classification and
// its own allocations only, nothing of the other nodes, so a plan costs
// what this node runs and not what the fleet runs
// (reconcile.ReconcileLocal). It classifies this node and marks its
// allocations for migration exactly as buildInput does.
func localInput(job *model.Job, self *model.Node, own []*model.Allocation, d *model.Deployment, now time.Time) reconcile.NodeInput {
	in := reconcile.NodeInput{Job: job, NodeID: self.ID, Deployment: d, Now: now, DisconnectHandling: true,
		Class: nodeClass(job, self)}
	if in.Class == reconcile.NodeTainted {
		in.Tainted = self
	}
	for _, a := range ownForPlan(self, own, now) {
		if a.JobID != job.ID || a.Namespace != job.Namespace {
			continue
		}
		if a.Terminal() {
			in.TerminalAllocs = append(in.TerminalAllocs, a)
		} else {
			in.LiveAllocs = append(in.LiveAllocs, a)
		}
	}
	return in
}

// nodeClass is the reconciler's node set for n in job's round: out of the
// job's scope, tainted (down, draining, disconnected), not ready (or a
// driver the job uses is unhealthy), or ready.
func nodeClass(job *model.Job, n *model.Node) reconcile.NodeClass {
	switch {
	case !inScope(job, n):
		return reconcile.NodeOutOfView
	case n.Tainted():
		return reconcile.NodeTainted
	case !n.Ready() || !driversOK(job, n):
		return reconcile.NodeNotReady
	}
	return reconcile.NodeReady
}

// ownForPlan returns this node's allocations as a plan reads them: once
// its drain is due, each live one not yet marked for migration is a
// marked copy (the runner's snapshot is never modified).
func ownForPlan(self *model.Node, own []*model.Allocation, now time.Time) []*model.Allocation {
	if !drainDue(self, now) {
		return own
	}
	yes := true
	out := make([]*model.Allocation, len(own))
	for i, a := range own {
		if !a.Terminal() && !a.DesiredTransition.ShouldMigrate() {
			c := *a
			c.DesiredTransition.Migrate = &yes
			a = &c
		}
		out[i] = a
	}
	return out
}

// recordOf returns the stored record of job's version among deps, or nil:
// never an older one (its cancellation is the rollout core's, I3) nor a
// newer one (a stale job view: the core holds the job).
func recordOf(job *model.Job, deps []*model.Deployment) *model.Deployment {
	var out *model.Deployment
	for _, d := range deps {
		if d.JobID == job.ID && d.Namespace == job.Namespace && d.JobVersion == job.Version {
			out = d
		}
	}
	return out
}
