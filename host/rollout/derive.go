package rollout

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// Rendezvous is the rendezvous hash of (key, node): the order of nodes for
// a deployment's steward and deputies, a node's loss steward, the creator's
// rank and slot admission. Every agent computes the same order.
func Rendezvous(key, node string) uint64 {
	// FNV-1a over key, a zero byte and node, written out: hash/fnv's
	// hasher and the byte slices it takes cost an allocation each, and
	// every agent hashes the whole fleet for each ranking.
	const offset64, prime64 = 14695981039346656037, 1099511628211
	x := uint64(offset64)
	for i := 0; i < len(key); i++ {
		x ^= uint64(key[i])
		x *= prime64
	}
	x *= prime64 // the zero separator: x ^= 0
	for i := 0; i < len(node); i++ {
		x ^= uint64(node[i])
		x *= prime64
	}
	return splitmixFinal(x)
}

// splitmixFinal is splitmix64's finaliser: FNV alone orders similar names
// similarly.
func splitmixFinal(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// RankedNodes returns ids ordered by Rendezvous(key, id) (ties by ID).
func RankedNodes(key string, ids []string) []string {
	type ranked struct {
		h  uint64
		id string
	}
	rs := make([]ranked, len(ids))
	for i, id := range ids {
		rs[i] = ranked{Rendezvous(key, id), id} // each hash once, not once per comparison
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		switch {
		case a.h < b.h:
			return -1
		case a.h > b.h:
			return 1
		}
		return strings.Compare(a.id, b.id)
	})
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.id
	}
	return out
}

// rankAndFirst returns id's position in RankedNodes(key, ids) (-1 when ids
// lacks it) and that ranking's first ID ("" for none), in one pass over ids
// without sorting them: what a pass asks of the steward ranking is only
// who is first and where it stands itself.
func rankAndFirst(key string, ids []string, id string) (rank int, first string) {
	hs := Rendezvous(key, id)
	var fh uint64
	found, have := false, false
	for _, x := range ids {
		h := Rendezvous(key, x)
		if !have || h < fh || h == fh && x < first {
			first, fh, have = x, h, true
		}
		if x == id {
			found = true
			continue
		}
		if h < hs || h == hs && x < id {
			rank++
		}
	}
	if !found {
		return -1, first
	}
	return rank, first
}

// LiveEligible returns the IDs of the live eligible nodes, sorted: the
// steward's candidates (RankedNodes(deployment ID, these)[0] is the
// steward) and the nodes a group's desired total counts.
func (f *Facts) LiveEligible() []string {
	if x := f.index(); x != nil {
		return x.live // clipped: a caller's append copies
	}
	var out []string
	for _, n := range f.Nodes {
		if n.Live && n.Eligible {
			out = append(out, n.ID)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (f *Facts) node(id string) (Node, bool) {
	if x := f.index(); x != nil {
		i, ok := x.pos[id]
		if !ok {
			return Node{}, false
		}
		return f.Nodes[i], true
	}
	if f.nodeIdx == nil {
		// Built once per decision: lookups by node are on every path.
		f.nodeIdx = make(map[string]int, len(f.Nodes))
		for i, n := range f.Nodes {
			if _, dup := f.nodeIdx[n.ID]; !dup {
				f.nodeIdx[n.ID] = i
			}
		}
	}
	i, ok := f.nodeIdx[id]
	if !ok {
		return Node{}, false
	}
	return f.Nodes[i], true
}

// live reports whether node id's heartbeat key is present. A node this
// round knows nothing of is not live.
func (f *Facts) live(id string) bool {
	n, ok := f.node(id)
	return ok && n.Live
}

// Disruption reports whether the disruption guard holds: more than
// DisruptionPercent of the job's eligible nodes expired within one node
// TTL of now, or this agent reconnected within one TTL. While it holds
// nobody writes a loss verdict, reclaims a slot, or fails a deployment
// (the default completion pauses rather than fails).
func (f *Facts) Disruption() (bool, string) {
	ttl := f.NodeTTL
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	if !f.ReconnectedAt.IsZero() && f.Now.Sub(f.ReconnectedAt) < ttl {
		return true, "this agent reconnected to NATS within one node TTL"
	}
	eligible, recent := 0, 0
	for _, n := range f.Nodes {
		if !n.Eligible {
			continue
		}
		eligible++
		if !n.DownSince.IsZero() && f.Now.Sub(n.DownSince) < ttl {
			recent++
		}
	}
	if eligible > 0 && recent*100 > DisruptionPercent*eligible {
		return true, "many nodes expired at once (" + itoa(recent) + " of " + itoa(eligible) + " within one TTL)"
	}
	return false, ""
}

func itoa(n int) string { return strconv.Itoa(n) }

// groupOf returns the job's group named name, or nil.
func groupOf(job *model.Job, name string) *model.Group {
	if job == nil {
		return nil
	}
	for _, g := range job.Groups {
		if g.Name == name {
			return g
		}
	}
	return nil
}

// canaryNode reports whether id is a canary node of st.
func canaryNode(st *model.DeploymentState, id string) bool {
	return st != nil && slices.Contains(st.CanaryNodes, id)
}

// canarySet is st's canary node set, for the loops that ask of every
// allocation of a group (a scan of CanaryNodes for each of them was
// quadratic: 1,000 canaries of 10,000 nodes made a third of a steward's
// decision, BenchmarkStewardDecide). Nil when st has none.
func canarySet(st *model.DeploymentState) map[string]bool {
	if st == nil || len(st.CanaryNodes) == 0 {
		return nil
	}
	set := make(map[string]bool, len(st.CanaryNodes))
	for _, id := range st.CanaryNodes {
		set[id] = true
	}
	return set
}

// canaryGate is canarying(st) and, while it is, the canary set: then only
// the set's nodes may update (a nil set: none). After the promotion no set
// is built.
func canaryGate(st *model.DeploymentState) (bool, map[string]bool) {
	if !canarying(st) {
		return false, nil
	}
	return true, canarySet(st)
}

// canarying reports whether st still waits for promotion.
// A group whose canary policy chose nobody (with its reason) still waits
// for a promotion: it never silently skips its canary phase.
func canarying(st *model.DeploymentState) bool {
	return st != nil && !st.Promoted && (st.DesiredCanaries > 0 || st.CanaryPolicy != "")
}

// mayUpdate reports whether node id takes part in admission: live, in
// scope and eligible, and ready (a node the reconciler leaves alone, not
// ready or ineligible, would hold its rank without ever taking a slot).
func (f *Facts) mayUpdate(id string) bool {
	n, ok := f.node(id)
	return ok && n.Live && n.Eligible && n.Ready
}

// owes reports whether node id's outdated allocations block completion:
// live, in scope and eligible (a node whose driver is briefly unhealthy
// still owes the rollout its allocations; one an operator made
// ineligible does not).
func (f *Facts) owes(id string) bool {
	n, ok := f.node(id)
	return ok && n.Live && n.Eligible
}

// Derive counts each group of the record d from the facts: what the CLI
// shows, what the completion policy is given, and what admission and the
// steward decide on. Only allocations of d's job count; "healthy" is the
// health verdict their own node wrote.
func Derive(d *model.Deployment, f *Facts) map[string]Counts {
	out := map[string]Counts{}
	if d == nil {
		return out
	}
	nodes := f.LiveEligible()
	isCounted := f.liveEligibleSet()
	held := map[string]bool{} // old allocations a slot is replacing
	for _, s := range f.Slots {
		held[s.Slot.OldAlloc] = true
	}
	for name, st := range d.TaskGroups {
		if st == nil {
			continue
		}
		c := Counts{DesiredCanaries: st.DesiredCanaries, Canarying: canarying(st), MaxParallel: st.MaxParallel}
		if g := groupOf(f.Job, name); g != nil && f.Job.Version == d.JobVersion {
			c.Desired = g.Count * len(nodes)
		} else {
			c.Desired = st.DesiredTotal
		}
		unhealthyNodes := map[string]bool{}
		canaries := canarySet(st)
		for _, a := range f.groupAllocs(d, name) {
			if a.Terminal() {
				if a.JobVersion == d.JobVersion && (a.DeploymentID == d.ID || a.DeploymentID == "") && a.DeploymentStatus.IsUnhealthy() {
					c.Unhealthy++
					unhealthyNodes[a.NodeID] = true
				}
				continue
			}
			switch {
			case a.JobVersion == d.JobVersion:
				if !isCounted(a.NodeID) {
					continue
				}
				c.Placed++
				switch {
				case a.DeploymentStatus.IsHealthy():
					c.Healthy++
					if canaries[a.NodeID] {
						c.CanariesHealthy++
					}
				case a.DeploymentStatus.IsUnhealthy():
					c.Unhealthy++
					unhealthyNodes[a.NodeID] = true
				default:
					c.Pending++
				}
			case a.JobVersion < d.JobVersion && f.owes(a.NodeID):
				c.Outdated++
				if !held[a.ID] && f.mayUpdate(a.NodeID) && (!c.Canarying || canaries[a.NodeID]) {
					c.Waiting++
				}
			}
		}
		var holders []Slot
		midway := map[string]bool{} // nodes gone in the middle of their replacement
		for _, s := range f.Slots {
			if s.Slot.Group != name || s.Slot.JobID != d.JobID || s.Slot.Namespace != d.Namespace {
				continue
			}
			c.InFlight++
			if !f.live(s.Slot.Holder) {
				c.ExpiredHolders++
				midway[s.Slot.Holder] = true
			}
			holders = append(holders, s)
		}
		f.awayCounts(&c, d, name, midway)
		slices.SortFunc(holders, func(a, b Slot) int { return a.Slot.Index - b.Slot.Index })
		for _, s := range holders {
			c.Holders = append(c.Holders, s.Slot.Holder)
		}
		c.UnhealthyNodes = slices.Sorted(func(yield func(string) bool) {
			for id := range unhealthyNodes {
				if !yield(id) {
					return
				}
			}
		})
		c.Complete = c.Outdated == 0 && c.InFlight-c.ExpiredHolders == 0 && !c.Canarying &&
			c.Desired > 0 && c.Healthy >= c.Desired
		out[name] = c
	}
	return out
}

// groupAllocs are the allocations of f.Allocs of record d's job in group
// name, remembered for the decision: the counts, the lost and disconnected
// ones and the waiters each go through them, and on a loaded fleet each
// comparison of an allocation's job, namespace and group read memory no
// cache held (most of a steward's decision at 1,000 agents).
//
// An empty namespace is "default" (wanted.JobKey), on either side: a job
// declared without one and declared again with "default" is one job, and
// its allocations of either spelling are its own.
func (f *Facts) groupAllocs(d *model.Deployment, name string) []*model.Allocation {
	ns := wanted.NamespaceOr(d.Namespace)
	k := groupKey{ns: ns, job: d.JobID, group: name}
	if as, ok := f.groupMemo[k]; ok {
		return as
	}
	var as []*model.Allocation
	for _, a := range f.Allocs {
		if a.TaskGroup == name && a.JobID == d.JobID && wanted.NamespaceOr(a.Namespace) == ns {
			as = append(as, a)
		}
	}
	if f.groupMemo == nil {
		f.groupMemo = map[groupKey][]*model.Allocation{}
	}
	f.groupMemo[k] = as
	return as
}

type groupKey struct{ ns, job, group string }

// awayCounts derives the group's allocations on nodes that are not live:
// lost or disconnected by the loss verdict and the group's
// disconnect.lost_after (rollout.md, "Liveness"), and the nodes lost in
// the middle of a replacement (midway holds those holding a slot).
func (f *Facts) awayCounts(c *Counts, d *model.Deployment, name string, midway map[string]bool) {
	var lostAfter time.Duration
	if g := groupOf(f.Job, name); g != nil && g.Disconnect != nil {
		lostAfter = g.Disconnect.LostAfter.D()
	}
	lost, disc := map[string]bool{}, map[string]bool{}
	for _, a := range f.groupAllocs(d, name) {
		if a.Terminal() {
			continue
		}
		n, ok := f.node(a.NodeID)
		if ok && n.Live {
			continue
		}
		if a.JobVersion == d.JobVersion && !verdictKnown(a) {
			midway[a.NodeID] = true
		}
		// A node without a record at all is gone: lost (reconcile rule 8).
		if !ok || !n.LostSince.IsZero() && (lostAfter <= 0 || !f.Now.Before(n.LostSince.Add(lostAfter))) {
			c.Lost++
			lost[a.NodeID] = true
		} else {
			c.Disconnected++
			disc[a.NodeID] = true
		}
	}
	c.LostInFlight = len(midway)
	c.LostNodes = slices.Sorted(maps.Keys(lost))
	c.DisconnectedNodes = slices.Sorted(maps.Keys(disc))
}
