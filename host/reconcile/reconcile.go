package reconcile

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// ReconcileFleet plans every node of the fleet: the CLI's dry run.
func ReconcileFleet(in Input) (*Plan, error) {
	f, err := prepare(&in)
	if err != nil {
		return nil, err
	}
	return f.run(func(string) bool { return true }), nil
}

// ReconcileNode plans one node: the daemon's round for its own node. The
// input is the same fleet view as ReconcileFleet's, because the canary set,
// the deployment and completion are fleet-wide; only the buckets are
// restricted to nodeID. Its buckets equal the nodeID part of
// ReconcileFleet's, and its deployment and updates equal ReconcileFleet's.
func ReconcileNode(in Input, nodeID string) (*Plan, error) {
	if nodeID == "" {
		return nil, errors.New("reconciling a node: empty node ID")
	}
	f, err := prepare(&in)
	if err != nil {
		return nil, err
	}
	return f.run(func(id string) bool { return id == nodeID }), nil
}

// group is the fleet-wide state of one job group during a round.
type group struct {
	name   string
	g      *model.Group
	update *model.UpdateStrategy // effective strategy; nil for sysbatch
	// hasCanaries: update.canary > 0 with a rolling strategy.
	hasCanaries bool
	promoted    bool
	// canarying: has canaries, not promoted, and something to roll out
	// (decided before the per-node pass, so every node sees the same).
	canarying   bool
	canaryNodes map[string]bool
	decision    *CanaryDecision
	lostAfter   time.Duration // 0: no disconnect handling for this group
	// wantDeployment: some node has an update, an awaiting allocation, or a
	// placement of a version that never ran on it.
	wantDeployment bool
	sum            GroupSummary
}

type nodeName struct{ node, name string }

// fleet is the prepared, indexed view of one round.
type fleet struct {
	in       *Input
	job      *model.Job
	version  uint64
	sysbatch bool
	groups   []*group          // sorted by name
	byName   map[string]*group // group name → group
	required map[string]*group // required alloc name → group
	names    [][]string        // per group (same order), its required names

	readyList []*model.Node // effective ready nodes, sorted by ID
	ready     map[string]*model.Node
	notReady  map[string]bool
	tainted   map[string]*model.Node // presence = tainted; nil value = gone
	nodes     []string               // every node in view, sorted

	live     map[string][]*model.Allocation // by node
	terminal map[nodeName]*model.Allocation
	// ranHere records (node, group) pairs where an allocation of the
	// current version exists, live or terminal.
	ranHere map[nodeName]bool

	dep     *model.Deployment // current version's deployment (a copy), or nil
	held    model.DeploymentStatus
	updates []model.DeploymentStatusUpdate
}

// prepare validates and indexes the input and settles the facts every node
// must agree on before the per-node pass: the deployment in force and the
// canary sets.
func prepare(in *Input) (*fleet, error) {
	if in.Job == nil {
		return nil, errors.New("reconciling: no job")
	}
	job := in.Job
	if job.Type != model.JobTypeSystem && job.Type != model.JobTypeSysbatch {
		return nil, fmt.Errorf("reconciling job %q: job type %q is not system or sysbatch", job.ID, job.Type)
	}
	f := &fleet{
		in:       in,
		job:      job,
		version:  job.Version,
		sysbatch: job.Type == model.JobTypeSysbatch,
		byName:   make(map[string]*group, len(job.Groups)),
		required: make(map[string]*group),
		ready:    make(map[string]*model.Node, len(in.ReadyNodes)),
		notReady: make(map[string]bool, len(in.NotReadyNodes)),
		tainted:  make(map[string]*model.Node, len(in.TaintedNodes)),
		live:     make(map[string][]*model.Allocation),
		terminal: make(map[nodeName]*model.Allocation, len(in.TerminalAllocs)),
		ranHere:  make(map[nodeName]bool),
	}
	if err := f.indexGroups(); err != nil {
		return nil, err
	}
	if err := f.indexNodes(); err != nil {
		return nil, err
	}
	if err := f.indexAllocs(); err != nil {
		return nil, err
	}
	if err := f.resolveDeployment(); err != nil {
		return nil, err
	}
	f.settleCanaries()
	return f, nil
}

func (f *fleet) indexGroups() error {
	for _, g := range f.job.Groups {
		if g == nil {
			return fmt.Errorf("reconciling job %q: nil group", f.job.ID)
		}
		if _, dup := f.byName[g.Name]; dup {
			return fmt.Errorf("reconciling job %q: group %q declared twice", f.job.ID, g.Name)
		}
		if g.Count < 0 {
			return fmt.Errorf("reconciling job %q: group %q has negative count %d", f.job.ID, g.Name, g.Count)
		}
		gr := &group{name: g.Name, g: g, update: effectiveUpdate(f.job, g)}
		gr.hasCanaries = gr.update.Rolling() && gr.update.Canary > 0
		if g.Disconnect != nil && g.Disconnect.LostAfter > 0 {
			gr.lostAfter = g.Disconnect.LostAfter.D()
		}
		gr.sum = GroupSummary{Name: g.Name}
		if gr.update != nil {
			gr.sum.MaxParallel = gr.update.MaxParallel
		}
		f.byName[g.Name] = gr
		f.groups = append(f.groups, gr)
	}
	slices.SortFunc(f.groups, func(a, b *group) int { return strings.Compare(a.name, b.name) })
	f.names = make([][]string, len(f.groups))
	if f.job.Stop {
		return nil // a stopped job requires nothing
	}
	for i, gr := range f.groups {
		names := make([]string, gr.g.Count)
		for k := range names {
			names[k] = model.AllocName(f.job.ID, gr.name, k)
			f.required[names[k]] = gr
		}
		slices.Sort(names)
		f.names[i] = names
	}
	return nil
}

// effectiveUpdate is the group's update strategy. The job parser stores the
// effective (inherited, overridden, defaulted) strategy on each group; for a
// hand-written job that did not, the job-level block, then the system
// defaults, apply. sysbatch jobs take no update block.
func effectiveUpdate(job *model.Job, g *model.Group) *model.UpdateStrategy {
	switch {
	case job.Type == model.JobTypeSysbatch:
		return nil
	case g.Update != nil:
		return g.Update
	case job.Update != nil:
		return job.Update
	}
	return model.DefaultUpdateStrategy()
}

func (f *fleet) indexNodes() error {
	in := f.in
	for id, n := range in.TaintedNodes {
		f.tainted[id] = n
	}
	for _, id := range in.NotReadyNodes {
		f.notReady[id] = true
	}
	for _, n := range in.ReadyNodes {
		if n == nil || n.ID == "" {
			return errors.New("reconciling: a ready node has no ID")
		}
		if _, t := f.tainted[n.ID]; t || f.notReady[n.ID] {
			continue
		}
		if _, dup := f.ready[n.ID]; dup {
			continue
		}
		f.ready[n.ID] = n
		f.readyList = append(f.readyList, n)
	}
	slices.SortFunc(f.readyList, func(a, b *model.Node) int { return strings.Compare(a.ID, b.ID) })
	return nil
}

func (f *fleet) indexAllocs() error {
	seen := make(map[string]bool, len(f.ready)+len(f.notReady)+len(f.tainted))
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			f.nodes = append(f.nodes, id)
		}
	}
	for _, n := range f.readyList {
		add(n.ID)
	}
	for id := range f.notReady {
		add(id)
	}
	for id := range f.tainted {
		add(id)
	}
	for _, a := range f.in.LiveAllocs {
		if a == nil || a.ID == "" {
			return errors.New("reconciling: a live allocation has no ID")
		}
		add(a.NodeID)
		f.live[a.NodeID] = append(f.live[a.NodeID], a)
		if a.JobVersion == f.version {
			f.ranHere[nodeName{a.NodeID, a.TaskGroup}] = true
		}
	}
	for _, a := range f.in.TerminalAllocs {
		if a == nil || a.ID == "" {
			return errors.New("reconciling: a terminal allocation has no ID")
		}
		k := nodeName{a.NodeID, a.Name}
		if old, ok := f.terminal[k]; !ok || newerTerminal(a, old) {
			f.terminal[k] = a
		}
		if a.JobVersion == f.version {
			f.ranHere[nodeName{a.NodeID, a.TaskGroup}] = true
		}
	}
	slices.Sort(f.nodes)
	for _, allocs := range f.live {
		slices.SortFunc(allocs, func(a, b *model.Allocation) int {
			return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
		})
	}
	return nil
}

func newerTerminal(a, b *model.Allocation) bool {
	if c := a.ModifyTime.Compare(b.ModifyTime); c != 0 {
		return c > 0
	}
	if c := a.CreateTime.Compare(b.CreateTime); c != 0 {
		return c > 0
	}
	return a.ID > b.ID
}

// settleCanaries decides, for each group, whether it is canarying and its
// canary node set (spec "Canary nodes").
func (f *fleet) settleCanaries() {
	if f.job.Stop {
		return
	}
	outdated := make(map[string]bool) // groups with an outdated allocation on a ready node
	for _, a := range f.in.LiveAllocs {
		if gr := f.required[a.Name]; gr != nil && a.JobVersion != f.version && f.ready[a.NodeID] != nil {
			outdated[gr.name] = true
		}
	}
	chooser := f.in.Canaries
	if chooser == nil {
		chooser = DefaultCanaryChooser{}
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
		recorded := st != nil && (st.DesiredCanaries > 0 || len(st.CanaryNodes) > 0)
		if !outdated[gr.name] && !recorded {
			continue
		}
		gr.canarying = true
		existing := make(map[string]bool)
		if st != nil {
			for _, id := range st.CanaryNodes {
				existing[id] = true
			}
		}
		if f.dep != nil {
			mark := func(a *model.Allocation) {
				if a.TaskGroup == gr.name && a.DeploymentID == f.dep.ID && a.DeploymentStatus.IsCanary() {
					existing[a.NodeID] = true
				}
			}
			for _, a := range f.in.LiveAllocs {
				mark(a)
			}
			for _, a := range f.in.TerminalAllocs {
				mark(a)
			}
		}
		target := canaryTarget(gr.update.Canary, len(f.readyList))
		ex := slices.Sorted(func(yield func(string) bool) {
			for id := range existing {
				if !yield(id) {
					return
				}
			}
		})
		req := CanaryRequest{
			JobID:        f.job.ID,
			JobVersion:   f.version,
			DeploymentID: DeploymentID(f.job.Namespace, f.job.ID, f.version),
			Group:        gr.name,
			Percent:      gr.update.Canary,
			Count:        max(target-len(ex), 0),
			Eligible:     eligibleFor(f.readyList, existing),
			Existing:     ex,
			Policy:       gr.update.CanaryPolicy,
		}
		if f.dep != nil {
			req.DeploymentID = f.dep.ID
		}
		gr.decision = settleCanaries(chooser, req, target, f.held == "")
		gr.canaryNodes = make(map[string]bool, len(gr.decision.Nodes))
		for _, id := range gr.decision.Nodes {
			gr.canaryNodes[id] = true
		}
	}
}

// run does the per-node pass over every node (keep says which nodes'
// entries go into the plan; every node is counted) and then the fleet-wide
// deployment decisions.
func (f *fleet) run(keep func(nodeID string) bool) *Plan {
	p := &Plan{}
	var scratch Plan
	for _, id := range f.nodes {
		if keep(id) {
			f.node(id, p)
		} else {
			f.node(id, &scratch)
			scratch = Plan{Place: scratch.Place[:0], Update: scratch.Update[:0], Migrate: scratch.Migrate[:0],
				Stop: scratch.Stop[:0], Ignore: scratch.Ignore[:0], Lost: scratch.Lost[:0],
				Disconnecting: scratch.Disconnecting[:0], Reconnecting: scratch.Reconnecting[:0],
				AwaitingPromotion: scratch.AwaitingPromotion[:0]}
		}
	}
	f.decideDeployment(p)
	p.DeploymentUpdates = append(p.DeploymentUpdates, f.updates...)
	for _, gr := range f.groups {
		p.Groups = append(p.Groups, gr.sum)
	}
	p.normalize()
	return p
}

// normalize sorts every list and replaces nil lists by empty ones, so the
// JSON form is stable and every list prints as [].
func (p *Plan) normalize() {
	for _, l := range []*[]Entry{&p.Place, &p.Update, &p.Migrate, &p.Stop, &p.Ignore, &p.Lost,
		&p.Disconnecting, &p.Reconnecting, &p.AwaitingPromotion} {
		if *l == nil {
			*l = []Entry{}
		}
		slices.SortFunc(*l, func(a, b Entry) int {
			return cmp.Or(strings.Compare(a.NodeID, b.NodeID), strings.Compare(a.Name, b.Name),
				strings.Compare(a.AllocID, b.AllocID))
		})
	}
	if p.DeploymentUpdates == nil {
		p.DeploymentUpdates = []model.DeploymentStatusUpdate{}
	}
	if p.Groups == nil {
		p.Groups = []GroupSummary{}
	}
}
