package reconcile

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/hivelet/hivelet/host/model"
)

// ReconcileFleet plans every node of the fleet: the CLI's dry run.
func ReconcileFleet(in Input) (*Plan, error) {
	f, err := prepare(&in)
	if err != nil {
		return nil, err
	}
	return f.run(""), nil
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
	return f.run(nodeID), nil
}

// group is the fleet-wide state of one job group during a round.
type group struct {
	name   string
	pos    int32 // in fleet.groups
	g      *model.Group
	count  int                   // required names: 0 when the job is stopped
	stamps []int                 // per index: see fleet.stamp
	update *model.UpdateStrategy // effective strategy; nil for sysbatch
	// hasCanaries: update.canary > 0 with a rolling strategy.
	hasCanaries bool
	promoted    bool
	// canarying: has canaries, not promoted, and something to roll out
	// (decided before the per-node pass, so every node sees the same).
	canarying bool
	// outdated: some ready node runs an older version of the group (set
	// only when the job has canaries).
	outdated  bool
	canaryAt  []bool // by nodeInfo.pos: a canary node of the group
	decision  *CanaryDecision
	lostAfter time.Duration // 0: no disconnect handling for this group
	// wantDeployment: some node has an update, an awaiting allocation, or a
	// placement of a version that never ran on it.
	wantDeployment bool
	sum            GroupSummary
	// A local round (ReconcileLocal) may not know whether the group is
	// canarying, or whether its node is a canary node: see canaryUnsure.
	canaryingUnsure, nodeUnsure bool
}

type nodeName struct{ node, name string }

// fleet is the prepared, indexed view of one round.
type fleet struct {
	in       *Input
	job      *model.Job
	version  uint64
	sysbatch bool
	groups   []*group          // sorted by name
	byName   map[string]*group // group name → group, for a job of more than 8 groups (see group)

	readyList []*model.Node       // effective ready nodes, sorted by ID
	nodes     []nodeInfo          // every node in view, sorted by ID
	live      []*model.Allocation // the live allocations, sorted by node, name and ID

	// The sorted lists the node view was merged from, which hold the
	// nodes' IDs (see nodeID); localID is a local round's one node.
	ready             []*model.Node
	notReady, tainted []string
	taintedRecs       []*model.Node // by place in tainted
	localID           string

	// terminal maps (node, name) to the newest terminal allocation of
	// that name on that node, in terms.
	terminal map[nodeName]int32
	terms    []*model.Allocation
	// ran holds the (node, group) pairs with a terminal allocation of the
	// current version (nil when there are none).
	ran map[nodeGroup]bool

	// stamp numbers the node being planned: group.stamps[i] == stamp means
	// it has a live allocation of index i (stamped, not cleared, so a big
	// group does not make every node pay to clear).
	stamp int

	dep        *model.Deployment      // current version's deployment (a copy), or nil
	held       model.DeploymentStatus // status of the deployment holding updates, or ""
	heldReason string
	updates    []model.DeploymentStatusUpdate
	// unsure is the first group whose unknown canary facts a local
	// round's decision depended on (see canaryUnsure).
	unsure *group

	// The last name required resolved, and its answer ("": none, which
	// is also the answer for "", a name that is never required).
	lastName  string
	lastGroup *group
	lastIdx   int
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
	}
	if err := f.indexGroups(); err != nil {
		return nil, err
	}
	if err := f.indexNodes(); err != nil {
		return nil, err
	}
	if err := f.resolveDeployment(false); err != nil {
		return nil, err
	}
	f.settleCanaries()
	return f, nil
}

func (f *fleet) indexGroups() error {
	if len(f.job.Groups) > 8 {
		f.byName = make(map[string]*group, len(f.job.Groups))
	}
	for _, g := range f.job.Groups {
		if g == nil {
			return fmt.Errorf("reconciling job %q: nil group", f.job.ID)
		}
		if f.group(g.Name) != nil {
			return fmt.Errorf("reconciling job %q: group %q declared twice", f.job.ID, g.Name)
		}
		if g.Count < 0 {
			return fmt.Errorf("reconciling job %q: group %q has negative count %d", f.job.ID, g.Name, g.Count)
		}
		gr := &group{name: g.Name, g: g, update: model.EffectiveUpdate(f.job, g)}
		gr.hasCanaries = gr.update.Rolling() && gr.update.Canary > 0
		if g.Disconnect != nil && g.Disconnect.LostAfter > 0 {
			gr.lostAfter = g.Disconnect.LostAfter.D()
		}
		gr.sum = GroupSummary{Name: g.Name}
		if gr.update != nil {
			gr.sum.MaxParallel = gr.update.MaxParallel
		}
		if f.byName != nil {
			f.byName[g.Name] = gr
		}
		f.groups = append(f.groups, gr)
	}
	slices.SortFunc(f.groups, func(a, b *group) int { return strings.Compare(a.name, b.name) })
	for i, gr := range f.groups {
		gr.pos = int32(i)
	}
	if !f.job.Stop { // a stopped job requires nothing
		for _, gr := range f.groups {
			gr.count = gr.g.Count
			gr.stamps = make([]int, gr.count)
		}
	}
	return nil
}

// required resolves an allocation name: the group and index it stands for,
// or nil when the name is not required (job stopped, group removed, index
// beyond the count, or not a canonical "<job>.<group>[<index>]" name).
// Parsing the name instead of looking it up in a set of every required name
// keeps a round free of one string and one map entry per required name.
func (f *fleet) required(name string) (*group, int) {
	// Most nodes run the same names: the last name's answer is kept.
	if name == f.lastName {
		return f.lastGroup, f.lastIdx
	}
	gr, idx := f.parseRequired(name)
	f.lastName, f.lastGroup, f.lastIdx = name, gr, idx
	return gr, idx
}

// parseRequired is required without the last answer kept.
func (f *fleet) parseRequired(name string) (*group, int) {
	rest, ok := strings.CutPrefix(name, f.job.ID)
	if !ok || len(rest) < 4 || rest[0] != '.' || rest[len(rest)-1] != ']' {
		return nil, 0
	}
	open := strings.LastIndexByte(rest, '[')
	if open < 1 {
		return nil, 0
	}
	gr := f.group(rest[1:open])
	digits := rest[open+1 : len(rest)-1]
	if gr == nil || len(digits) == 0 || len(digits) > 9 || (digits[0] == '0' && len(digits) > 1) {
		return nil, 0
	}
	idx := 0
	for i := 0; i < len(digits); i++ {
		d := digits[i]
		if d < '0' || d > '9' {
			return nil, 0
		}
		idx = idx*10 + int(d-'0')
	}
	if idx >= gr.count {
		return nil, 0
	}
	return gr, idx
}

// group returns the job's group of that name, or nil. A job has a few
// groups: comparing names costs less than hashing one, and this runs once
// per allocation.
func (f *fleet) group(name string) *group {
	if f.byName != nil {
		return f.byName[name]
	}
	for _, gr := range f.groups {
		if gr.name == name {
			return gr
		}
	}
	return nil
}

// allocName is model.AllocName built without fmt: it runs once per placement.
func (f *fleet) allocName(gr *group, idx int) string {
	var stack [64]byte
	b := append(stack[:0], f.job.ID...)
	b = append(b, '.')
	b = append(b, gr.name...)
	b = append(b, '[')
	b = strconv.AppendInt(b, int64(idx), 10)
	return string(append(b, ']'))
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
	if !slices.ContainsFunc(f.groups, func(gr *group) bool { return gr.hasCanaries }) {
		return
	}
	// Groups with canaries and an outdated allocation on a ready node
	// (the only groups it is read of): the search ends when every such
	// group has one, as in a rollout, at its first allocation.
	left := 0
	for _, gr := range f.groups {
		if gr.hasCanaries {
			left++
		}
	}
	for i := 0; i < len(f.nodes) && left > 0; i++ {
		ni := &f.nodes[i]
		if !ni.ready {
			continue
		}
		for _, a := range f.liveOf(ni) {
			if a.JobVersion != f.version {
				if gr, _ := f.required(a.Name); gr != nil && gr.hasCanaries && !gr.outdated {
					gr.outdated = true
					left--
				}
			}
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
		if !gr.outdated && !recorded {
			continue
		}
		gr.canarying = true
		// The existing canary nodes: recorded (sorted by resolveDeployment)
		// or carrying a canary allocation of the deployment.
		var ex []string
		if st != nil {
			ex = slices.Clone(st.CanaryNodes)
		}
		if f.dep != nil {
			mark := func(a *model.Allocation) {
				// The cheapest test first: most allocations are no canary.
				if a.DeploymentStatus.IsCanary() && a.DeploymentID == f.dep.ID && a.TaskGroup == gr.name {
					ex = append(ex, a.NodeID)
				}
			}
			for _, a := range f.in.LiveAllocs {
				mark(a)
			}
			for _, a := range f.in.TerminalAllocs {
				mark(a)
			}
		}
		if !slices.IsSorted(ex) {
			slices.Sort(ex)
		}
		ex = slices.Compact(ex)
		if len(ex) == 0 {
			ex = nil // as ever: no existing canary nodes is a nil list
		}
		target := canaryTarget(gr.update.Canary, len(f.readyList))
		count, limit := max(target-len(ex), 0), -1
		if _, builtin := chooser.(DefaultCanaryChooser); builtin {
			// Only the first Count eligible nodes matter to the built-in
			// choice, and no other chooser sees this request.
			limit = count
		}
		req := CanaryRequest{
			JobID:        f.job.ID,
			JobVersion:   f.version,
			DeploymentID: DeploymentID(f.job.Namespace, f.job.ID, f.version),
			Group:        gr.name,
			Percent:      gr.update.Canary,
			Count:        count,
			Eligible:     eligibleFor(f.readyList, ex, limit),
			Existing:     ex,
			Policy:       gr.update.CanaryPolicy,
		}
		if f.dep != nil {
			req.DeploymentID = f.dep.ID
		}
		// A recorded group's canary set is settled (I4 of docs/rollout.md):
		// it is never chosen again, only read.
		settled := st != nil && (len(st.CanaryNodes) > 0 || st.DesiredCanaries > 0 || st.CanaryPolicy != "")
		gr.decision = settleCanaries(chooser, req, target, f.held == "" && !settled)
		gr.canaryAt = f.mark(gr.decision.Nodes)
	}
}

// mark returns, by node position, whether the node is in ids (sorted,
// without repeats): one merge of two sorted lists.
func (f *fleet) mark(ids []string) []bool {
	at := make([]bool, len(f.nodes))
	i := 0
	for _, id := range ids {
		// Equality first: canary nodes are often consecutive nodes (the
		// default choice takes the first eligible ones), and an equality
		// test of IDs sharing a long prefix costs less than an ordering.
		for i < len(f.nodes) {
			if n := f.nodeID(&f.nodes[i]); n == id || n > id {
				break
			}
			i++
		}
		if i < len(f.nodes) && f.nodeID(&f.nodes[i]) == id {
			at[i] = true
			i++
		}
	}
	return at
}

// isCanary reports whether the node is a canary node of the group.
func (gr *group) isCanary(ni *nodeInfo) bool {
	return int(ni.pos) < len(gr.canaryAt) && gr.canaryAt[ni.pos]
}

// run does the per-node pass over every node (only names the node whose
// entries go into the plan, "" for all; every node is counted) and then
// the fleet-wide deployment decisions.
func (f *fleet) run(only string) *Plan {
	c := collector{f: f}
	if only == "" {
		// A round has about one decision per live allocation or per
		// required name, whichever is more (at least that many: every
		// live allocation and every required name on a ready node has
		// one): sized for that and a little more, it grows (once, to
		// the most a round can have) only when many allocations are off
		// their names (stopped, duplicates) while many names are placed.
		est := max(len(f.in.LiveAllocs), len(f.readyList)*f.names())
		c.reserve(wholePages(est+min(64, est/64+4)), len(f.in.LiveAllocs)+len(f.readyList)*f.names()+len(f.terms))
	}
	for i := range f.nodes {
		ni := &f.nodes[i]
		c.skip = only != "" && f.nodeID(ni) != only
		f.node(ni, &c)
	}
	p := c.plan()
	f.decideDeployment(p)
	p.DeploymentUpdates = append(p.DeploymentUpdates, f.updates...)
	for _, gr := range f.groups {
		p.Groups = append(p.Groups, gr.sum)
	}
	p.finish()
	return p
}

// names is the number of required names per ready node.
func (f *fleet) names() int {
	n := 0
	for _, gr := range f.groups {
		n += gr.count
	}
	return n
}

type bucket uint8

const (
	bPlace bucket = iota
	bUpdate
	bMigrate
	bStop
	bIgnore
	bLost
	bDisconnecting
	bReconnecting
	bAwaiting
	nBuckets
)

// collector builds a round's entries as the node pass decides them: each
// entry is written while its allocation is fresh in the cache, in place,
// in decision (node) order, into one array; plan then lays the buckets
// out of it. Decisions come in node order, so only two entries of one
// node in one bucket can be out of order: that is checked as the entries
// are added, not by a pass of comparisons over every list.
type collector struct {
	f       *fleet
	entries []Entry  // in decision order; zero beyond len
	kinds   []bucket // entries[i]'s bucket
	n       [nBuckets]int
	// lastAt and lastPos are the index in entries and the node of each
	// bucket's last entry (valid when n[b] > 0).
	lastAt   [nBuckets]int32
	lastPos  [nBuckets]int32
	unsorted [nBuckets]bool
	top      bucket // the greatest bucket added so far
	mixed    bool   // an entry's bucket precedes an earlier entry's
	skip     bool   // the node being planned is not in the plan (ReconcileNode)
	most     int    // the most entries the round can have (0: unknown)
}

// wholePages returns n, or more entries when an array of n entries, big
// enough to take whole pages of memory (8 KiB, past 32 KiB: Go's large
// objects), leaves room in its last page: that room costs nothing.
func wholePages(n int) int {
	const size, page = int(unsafe.Sizeof(Entry{})), 8 << 10
	if b := n * size; b > 32<<10 {
		return max(n, (b+page-1)&^(page-1)/size)
	}
	return n
}

// reserve sizes the collector for n entries, and for at most most (the
// size it grows to at once if n falls short).
func (c *collector) reserve(n, most int) {
	c.entries, c.kinds, c.most = make([]Entry, 0, n), make([]bucket, 0, n), most
}

// add builds the decision's entry (unless its node is skipped).
func (c *collector) add(d decision) {
	if c.skip {
		return
	}
	i := len(c.entries)
	if i == cap(c.entries) {
		grow := max(c.most-i, i/2+8)
		c.entries, c.kinds = slices.Grow(c.entries, grow), slices.Grow(c.kinds, grow)
	}
	c.entries = c.entries[:i+1]
	e := &c.entries[i]
	c.f.entry(&d, e)
	b := d.kind
	c.kinds = append(c.kinds, b)
	if c.n[b] > 0 && c.lastPos[b] == d.pos && compareEntries(&c.entries[c.lastAt[b]], e) > 0 {
		c.unsorted[b] = true
	}
	c.lastAt[b], c.lastPos[b] = int32(i), d.pos
	c.n[b]++
	if b < c.top {
		c.mixed = true
	}
	c.top = max(c.top, b)
}

// plan lays the buckets out of the entries. Entries in bucket order (one
// bucket, or a rollout's updates on its first nodes and the rest awaiting
// promotion) are the buckets as they are. Otherwise the largest bucket
// stays in the array, moved up over the others' entries, and each other
// bucket gets an array of its own. Then the new allocation IDs are
// derived (into one buffer of the exact size) and the buckets out of
// order are sorted.
func (c *collector) plan() *Plan {
	f := c.f
	p := &Plan{}
	lists := p.lists()
	es := c.entries
	if es == nil {
		es = []Entry{} // an empty bucket is an empty list, never nil
	}
	if !c.mixed {
		at := 0
		for b, l := range lists {
			*l = es[at : at+c.n[b] : at+c.n[b]]
			at += c.n[b]
		}
	} else {
		keep := bucket(0)
		for b := range nBuckets {
			if c.n[b] > c.n[keep] {
				keep = b
			}
		}
		for b, l := range lists {
			if bucket(b) != keep {
				*l = make([]Entry, 0, c.n[b])
			}
		}
		w := 0
		for i, b := range c.kinds {
			if b != keep {
				*lists[b] = append(*lists[b], es[i])
				continue
			}
			if w != i {
				es[w] = es[i]
			}
			w++
		}
		clear(es[w:])
		*lists[keep] = es[:w:w]
	}
	// Only placements and updates get new IDs.
	if n := c.n[bPlace] + c.n[bUpdate]; n > 0 {
		ids := newIDBatch(n, f.job.Namespace, f.job.ID, f.version)
		for i := range p.Place {
			e := &p.Place[i]
			e.AllocID = ids.alloc(e.NodeID, e.Name, e.PreviousAllocID)
		}
		for i := range p.Update {
			e := &p.Update[i]
			e.NewAllocID = ids.alloc(e.NodeID, e.Name, e.AllocID)
		}
	}
	for b, l := range lists {
		if c.unsorted[b] {
			slices.SortFunc(*l, func(a, b Entry) int { return compareEntries(&a, &b) })
		}
	}
	return p
}

// lists returns the plan's nine lists in bucket order.
func (p *Plan) lists() [nBuckets]*[]Entry {
	return [nBuckets]*[]Entry{&p.Place, &p.Update, &p.Migrate, &p.Stop, &p.Ignore, &p.Lost,
		&p.Disconnecting, &p.Reconnecting, &p.AwaitingPromotion}
}

// normalize sorts every list and replaces nil lists by empty ones, so the
// JSON form is stable and every list prints as [].
func (p *Plan) normalize() {
	for _, l := range p.lists() {
		if *l == nil {
			*l = []Entry{}
		}
		// Entries come out of the node pass almost always in order
		// already; checking is linear, sorting is not.
		cmp := func(a, b Entry) int { return compareEntries(&a, &b) }
		if !slices.IsSortedFunc(*l, cmp) {
			slices.SortFunc(*l, cmp)
		}
	}
	p.finish()
}

// finish replaces the plan's nil fleet lists by empty ones.
func (p *Plan) finish() {
	if p.DeploymentUpdates == nil {
		p.DeploymentUpdates = []model.DeploymentStatusUpdate{}
	}
	if p.Groups == nil {
		p.Groups = []GroupSummary{}
	}
}

// compareEntries orders entries by node ID, then name, then allocation ID.
func compareEntries(a, b *Entry) int {
	if c := strings.Compare(a.NodeID, b.NodeID); c != 0 {
		return c
	}
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return strings.Compare(a.AllocID, b.AllocID)
}
