package reconcile

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// NodeClass says which of a round's node sets a node is in (see Input).
type NodeClass uint8

const (
	// NodeOutOfView: in no set (Input lists it nowhere; it only carries
	// allocations). Its allocations are stopped (rule 11).
	NodeOutOfView NodeClass = iota
	// NodeReady: an effective ready node (in Input.ReadyNodes and in neither
	// other set).
	NodeReady
	// NodeNotReady: in Input.NotReadyNodes (and not tainted).
	NodeNotReady
	// NodeTainted: in Input.TaintedNodes, whatever the other sets say.
	NodeTainted
)

// NodeInput is one node's round: what the node runs and the job's record,
// nothing about the other nodes. ReconcileLocal plans from it in time that
// grows with the node's allocations and the deployment record, not with the
// fleet; its buckets equal ReconcileNode's for the same node
// (TestLocalPlanMatchesTheFleetViewForEveryNode).
type NodeInput struct {
	Job    *model.Job
	NodeID string
	Class  NodeClass
	// Tainted is the node's record when Class is NodeTainted; nil means the
	// node is gone.
	Tainted *model.Node
	// LiveAllocs and TerminalAllocs are the job's allocations on this node
	// only, as in Input (several terminal ones of a name: the newest wins).
	LiveAllocs     []*model.Allocation
	TerminalAllocs []*model.Allocation
	// Deployment is the job's current deployment record, or nil.
	Deployment         *model.Deployment
	Now                time.Time
	DisconnectHandling bool
	// Canary gives, by group, the fleet's canary facts for a group whose
	// canary set the deployment does not record yet. It is consulted only
	// where the node's decisions depend on those facts; without them there,
	// ReconcileLocal returns ErrFleetFactsNeeded. Once the deployment
	// records the canary set (it does from the round that creates it on),
	// the record alone decides and Canary may be nil.
	Canary map[string]NodeCanary
}

// NodeCanary is one group's canary facts as the fleet-wide round settles
// them (Plan.Groups[].Canary): Input.NodeInput computes them.
type NodeCanary struct {
	// Canarying: the group is in its canary phase (it has canaries, is not
	// promoted, and some ready node runs an older version of it).
	Canarying bool
	// Canary: this node is one of the group's canary nodes.
	Canary bool
}

// ErrFleetFactsNeeded is returned (wrapped, naming the group) by
// ReconcileLocal when the node's decisions depend on canary facts that
// neither the deployment record nor NodeInput.Canary gives: the round
// before a canary set is recorded. The caller plans that round with the
// fleet view (ReconcileNode), or passes the facts.
var ErrFleetFactsNeeded = errors.New("the node's plan needs the fleet's canary facts")

// ReconcileLocal plans one node from its own allocations and the job's
// record. The buckets (and AwaitingPromotion) equal those of
// ReconcileNode for the same node over a fleet view that agrees with the
// input. What is fleet-wide is not decided here: Deployment is nil (the
// record is the caller's; it is read, never copied, created or refreshed;
// DeploymentCreated and DeploymentChanged are false), DeploymentUpdates
// holds only the
// cancellation of a deployment the job's version or stop has left behind,
// and Groups count this node's part (DesiredTotal is the group's count on
// a ready node, 0 elsewhere; Canary is nil; Complete says this node has
// nothing left and its healthy allocations cover its part). Summing the
// counts of every node's local plan gives the fleet's
// (TestLocalGroupCountsSumToTheFleetCounts).
func ReconcileLocal(in NodeInput) (*Plan, error) {
	if in.NodeID == "" {
		return nil, errors.New("reconciling a node: empty node ID")
	}
	f, ni, err := prepareLocal(&in)
	if err != nil {
		return nil, err
	}
	// At least one entry per live allocation, or per required name on a
	// ready node, whichever is more; at most one per allocation and name.
	c := collector{f: f}
	est := max(len(in.LiveAllocs), f.names())
	if f.sysbatch {
		est += len(in.TerminalAllocs)
	}
	c.reserve(est, len(in.LiveAllocs)+len(in.TerminalAllocs)+f.names())
	if in.Class != NodeOutOfView || len(in.LiveAllocs) > 0 {
		// A node in no set and with no live allocation is not in the
		// fleet round's view: it has nothing planned (not even its
		// terminal allocations).
		f.node(ni, &c)
	}
	if f.unsure != nil {
		return nil, fmt.Errorf("reconciling job %q on node %s: group %q: %w", f.job.ID, in.NodeID, f.unsure.name, ErrFleetFactsNeeded)
	}
	p := c.plan()
	p.DeploymentUpdates = f.updates
	for _, gr := range f.groups {
		s := gr.sum
		if ni.ready {
			s.DesiredTotal = gr.count
		}
		s.Complete = s.LeftToPlace == 0 && s.LeftToUpdate == 0 && s.LeftToMigrate == 0 &&
			!gr.canarying && s.Healthy >= s.DesiredTotal
		p.Groups = append(p.Groups, s)
	}
	p.finish()
	return p, nil
}

// prepareLocal is prepare for one node: the same group and deployment
// facts, the node's info built directly (no fleet index), and the canary
// facts settled from the record, the node's own allocations and in.Canary.
func prepareLocal(in *NodeInput) (*fleet, *nodeInfo, error) {
	if in.Job == nil {
		return nil, nil, errors.New("reconciling: no job")
	}
	job := in.Job
	if job.Type != model.JobTypeSystem && job.Type != model.JobTypeSysbatch {
		return nil, nil, fmt.Errorf("reconciling job %q: job type %q is not system or sysbatch", job.ID, job.Type)
	}
	// The fleet core reads Job, Deployment, Now and DisconnectHandling from
	// an Input; this one holds the node's part only.
	view := &Input{Job: job, LiveAllocs: in.LiveAllocs, TerminalAllocs: in.TerminalAllocs, Deployment: in.Deployment,
		Now: in.Now, DisconnectHandling: in.DisconnectHandling}
	f := &fleet{
		in:       view,
		job:      job,
		version:  job.Version,
		sysbatch: job.Type == model.JobTypeSysbatch,
	}
	if err := f.indexGroups(); err != nil {
		return nil, nil, err
	}
	f.nodes, f.localID = []nodeInfo{{}}, in.NodeID // the one node in view, at position 0
	ni := &f.nodes[0]
	switch in.Class {
	case NodeReady:
		ni.ready = true
	case NodeNotReady:
		ni.notReady = true
	case NodeTainted:
		ni.tainted, f.taintedRecs = true, []*model.Node{in.Tainted}
	case NodeOutOfView:
	default:
		return nil, nil, fmt.Errorf("reconciling node %s: unknown node class %d", in.NodeID, in.Class)
	}
	for _, a := range in.LiveAllocs {
		if a == nil || a.ID == "" {
			return nil, nil, errors.New("reconciling: a live allocation has no ID")
		}
		if a.NodeID != in.NodeID {
			return nil, nil, fmt.Errorf("reconciling node %s: live allocation %s is on node %q", in.NodeID, a.ID, a.NodeID)
		}
	}
	f.live = sortedCopy(in.LiveAllocs, byNodeNameID)
	ni.hi = int32(len(f.live))
	for _, a := range in.TerminalAllocs {
		if a == nil || a.ID == "" {
			return nil, nil, errors.New("reconciling: a terminal allocation has no ID")
		}
		if a.NodeID != in.NodeID {
			return nil, nil, fmt.Errorf("reconciling node %s: terminal allocation %s is on node %q", in.NodeID, a.ID, a.NodeID)
		}
		f.addTerminal(a, ni)
	}
	if err := f.resolveDeployment(true); err != nil {
		return nil, nil, err
	}
	f.settleLocal(in, ni)
	return f, ni, nil
}

// settleLocal settles each group's canary facts for one node as
// settleCanaries does for the fleet, from what the node can know: the
// record's canary set, its own allocations, and in.Canary. A fact it
// cannot know is marked unsure; the node pass reports it only if a
// decision depends on it (see (*fleet).canaryUnsure).
func (f *fleet) settleLocal(in *NodeInput, ni *nodeInfo) {
	if f.job.Stop {
		return
	}
	for _, gr := range f.groups {
		var st *model.DeploymentState
		if f.dep != nil {
			st = f.dep.TaskGroups[gr.name]
		}
		gr.promoted = st != nil && st.Promoted
		if !gr.hasCanaries || gr.promoted || (f.dep != nil && !f.dep.Status.Active()) {
			continue
		}
		if fc, ok := in.Canary[gr.name]; ok {
			gr.canarying = fc.Canarying
			if fc.Canary {
				gr.canaryAt = []bool{true}
			}
			continue
		}
		recorded := st != nil && (st.DesiredCanaries > 0 || len(st.CanaryNodes) > 0)
		settled := st != nil && (recorded || st.CanaryPolicy != "")
		// An outdated allocation on this ready node makes the group
		// canary for the whole fleet; without one, another node may.
		outdated := false
		if ni.ready {
			for _, a := range f.liveOf(ni) {
				if g, _ := f.required(a.Name); g == gr && a.JobVersion != f.version {
					outdated = true
					break
				}
			}
		}
		gr.canarying = recorded || outdated
		gr.canaryingUnsure = !gr.canarying
		// This node is a canary node when the record or one of its own
		// canary allocations of the deployment says so; otherwise only a
		// settled set (or a held deployment, which chooses nothing) says it
		// is not: the chooser picks among every ready node.
		mine := st != nil && slices.Contains(st.CanaryNodes, in.NodeID)
		if !mine && f.dep != nil {
			own := func(a *model.Allocation) bool {
				return a.TaskGroup == gr.name && a.DeploymentID == f.dep.ID && a.DeploymentStatus.IsCanary()
			}
			mine = slices.ContainsFunc(in.LiveAllocs, own) || slices.ContainsFunc(in.TerminalAllocs, own)
		}
		if mine {
			gr.canaryAt = []bool{true}
		} else {
			gr.nodeUnsure = !settled && f.held == ""
		}
	}
}

// canaryUnsure is called where a decision reads gr.canarying and
// gr.isCanary(ni) together. In a local round where either fact is
// unknown, and the answer could go either way, it records the group: the
// round then fails with ErrFleetFactsNeeded instead of guessing.
func (f *fleet) canaryUnsure(gr *group, ni *nodeInfo) {
	if !gr.canaryingUnsure && !gr.nodeUnsure {
		return
	}
	maybeCanarying := gr.canarying || gr.canaryingUnsure
	maybeNode := gr.isCanary(ni) || gr.nodeUnsure
	if maybeCanarying && maybeNode && f.unsure == nil {
		f.unsure = gr
	}
}

// NodeInput splits the fleet view into one node's input for
// ReconcileLocal, with the fleet's canary facts for every group whose
// canary set the deployment does not record. It costs what a fleet round's
// preparation costs: it is for the CLI, tests, and a caller that holds the
// fleet view anyway.
func (in Input) NodeInput(nodeID string) (NodeInput, error) {
	f, err := prepare(&in)
	if err != nil {
		return NodeInput{}, err
	}
	out := NodeInput{Job: in.Job, NodeID: nodeID, Deployment: in.Deployment, Now: in.Now,
		DisconnectHandling: in.DisconnectHandling}
	if ni := f.find(nodeID); ni != nil {
		switch {
		case ni.tainted:
			out.Class, out.Tainted = NodeTainted, f.taintedNode(ni)
		case ni.notReady:
			out.Class = NodeNotReady
		case ni.ready:
			out.Class = NodeReady
		}
	}
	for _, a := range in.LiveAllocs {
		if a.NodeID == nodeID {
			out.LiveAllocs = append(out.LiveAllocs, a)
		}
	}
	for _, a := range in.TerminalAllocs {
		if a.NodeID == nodeID {
			out.TerminalAllocs = append(out.TerminalAllocs, a)
		}
	}
	for _, gr := range f.groups {
		if !gr.hasCanaries || f.job.Stop {
			continue
		}
		if out.Canary == nil {
			out.Canary = map[string]NodeCanary{}
		}
		ni := f.find(nodeID)
		out.Canary[gr.name] = NodeCanary{Canarying: gr.canarying, Canary: ni != nil && gr.isCanary(ni)}
	}
	return out, nil
}
