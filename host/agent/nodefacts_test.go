package agent

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/host/rollout"
	"github.com/hivelet/hivelet/host/wanted"
)

// rolloutNodesRebuilt is the rollout facts' node list derived afresh from
// the view, as before the cache: the reference the cache must equal.
func rolloutNodesRebuilt(job *model.Job, self *model.Node, view *fleet.View, allocs []*model.Allocation) []rollout.Node {
	downSince := view.LostSince()
	carrying := map[string]bool{}
	for _, al := range allocs {
		carrying[al.NodeID] = true
	}
	var out []rollout.Node
	for k, st := range view.Nodes.All() {
		n := st.Value
		if n == nil || k == self.ID {
			continue
		}
		if !inScope(job, n) && !carrying[n.ID] {
			continue
		}
		expired := st.Expired
		if st.Absent && expired.IsZero() {
			expired = downSince[n.ID]
		}
		eligible := inScope(job, n) && n.Eligibility != model.Ineligible && n.Drain == nil
		rn := rollout.Node{ID: n.ID, Live: !st.Absent, Eligible: eligible, Protocol: n.RolloutProtocol, Record: n,
			Ready: eligible && !st.Absent && n.Ready() && len(driversHealthy(job, n)) == 0, DownSince: expired}
		if st.Absent {
			rn.LostSince = downSince[n.ID]
		}
		out = append(out, rn)
	}
	eligible := inScope(job, self) && self.Eligibility != model.Ineligible && self.Drain == nil
	out = append(out, rollout.Node{ID: self.ID, Live: true, Eligible: eligible, Protocol: self.RolloutProtocol, Record: self,
		Ready: eligible && self.Ready() && len(driversHealthy(job, self)) == 0})
	slices.SortFunc(out, func(x, y rollout.Node) int { return strings.Compare(x.ID, y.ID) })
	return out
}

// The cached node list of the rollout facts equals the one derived afresh
// after each of 3,000 random steps: records replaced (driver health, drain,
// eligibility, datacenter), nodes joining, expiring, coming back and
// leaving, verdicts written and withdrawn, the job replaced by a version
// with another scope or driver or by one with the same scope (scopeSig: the
// list is then patched, not built again), allocations carried by nodes out
// of scope.
func TestTheRolloutFactsNodeCacheEqualsTheNodesDerivedAfresh(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	jobs := []*model.Job{
		{ID: "web", Namespace: "default", Datacenters: []string{"dc1"}, Groups: []*model.Group{{Name: "g", Tasks: []*model.Task{{Name: "t", Driver: "mock"}}}}},
		{ID: "web", Namespace: "default", Datacenters: []string{"dc*"}, Groups: []*model.Group{{Name: "g", Tasks: []*model.Task{{Name: "t", Driver: "mock"}, {Name: "u", Driver: "exec"}}}}},
		// The next versions of those two: other tasks' configs, the same scopes.
		{ID: "web", Namespace: "default", Version: 2, Datacenters: []string{"dc1"}, Groups: []*model.Group{{Name: "g", Count: 2, Tasks: []*model.Task{{Name: "t", Driver: "mock", Config: map[string]any{"image": "b"}}}}}},
		{ID: "web", Namespace: "default", Version: 2, Datacenters: []string{"dc*"}, Groups: []*model.Group{{Name: "g", Tasks: []*model.Task{{Name: "t", Driver: "mock", Config: map[string]any{"image": "b"}}, {Name: "u", Driver: "exec"}}}}},
	}
	sameScopeSwitches := 0 // calls after a switch to another job of the same scope that patched the list
	switched := false
	record := func(id string) *model.Node {
		n := &model.Node{ID: id, Name: id, Datacenter: []string{"dc1", "dc2"}[rng.IntN(2)], NodePool: "default",
			Status: model.NodeStatusReady, Eligibility: model.Eligible, RolloutProtocol: rng.IntN(2),
			Drivers: map[string]model.DriverInfo{"mock": {Detected: true, Healthy: rng.IntN(4) > 0}, "exec": {Detected: rng.IntN(3) > 0, Healthy: true}}}
		if rng.IntN(6) == 0 {
			n.Eligibility = model.Ineligible
		}
		if rng.IntN(8) == 0 {
			n.Drain = &model.DrainStrategy{}
		}
		return n
	}
	self := record("node-self")
	view := &fleet.View{Nodes: fleet.MapOf(map[string]wanted.NodeState{}), Downs: fleet.MapOf(map[string]wanted.VerdictState{})}
	job := jobs[0]
	var allocs []*model.Allocation
	var c, p nodeFactsCache // c rebuilt each time, p patched from log
	type handedList struct {
		step       int
		list, copy []rollout.Node
	}
	var handed []handedList
	log := &fakeChanges{}
	kinds := []string{fleet.KindJobs, fleet.KindAllocs, fleet.KindRollout, fleet.KindDeployments}
	var gen uint64
	base := time.Unix(1_000_000, 0)
	for step := 0; step < 3000; step++ {
		// Each step changes a copy of the maps, as the source's snapshots do.
		nodes := make(map[string]wanted.NodeState, view.Nodes.Len())
		for k, v := range view.Nodes.All() {
			nodes[k] = v
		}
		id := fmt.Sprintf("node-%03d", rng.IntN(60))
		op := rng.IntN(11)
		nodeStep := op <= 5 || op == 10
		beat := false
		switch {
		case op < 4:
			nodes[id] = wanted.NodeState{Key: id, Value: record(id), Revision: uint64(step + 1)}
		case op == 4:
			if st, ok := nodes[id]; ok {
				st.Absent, st.Expired = true, base.Add(time.Duration(step)*time.Second)
				if rng.IntN(2) == 0 {
					st.Expired = time.Time{}
				}
				nodes[id] = st
			}
		case op == 5:
			delete(nodes, id)
		case op == 6:
			downs := map[string]wanted.VerdictState{}
			for k, v := range view.Downs.All() {
				downs[k] = v
			}
			if _, ok := downs[id]; ok {
				delete(downs, id)
			} else {
				downs[id] = wanted.VerdictState{Key: id, Value: &model.LossVerdict{Node: id, DownSince: base.Add(time.Duration(step) * time.Minute)}}
			}
			view = &fleet.View{Nodes: view.Nodes, Downs: fleet.MapOf(downs)}
		case op == 7:
			next := jobs[rng.IntN(len(jobs))]
			switched = switched || next != job && scopeSig(next) == scopeSig(job)
			job = next
		case op == 8:
			allocs = append(allocs[:0:0], allocs...)
			allocs = append(allocs, &model.Allocation{ID: fmt.Sprint(step), NodeID: id})
			if len(allocs) > 5 {
				allocs = allocs[1:]
			}
		case op == 9:
			self = record("node-self")
		case op == 10: // a heartbeat folded into the record: a new record, its time alone new
			if st, ok := nodes[id]; ok && st.Value != nil {
				beat = !st.Absent // what the source flags HeartbeatOnly
				v := *st.Value
				v.HeartbeatAt = base.Add(time.Duration(step) * time.Second)
				st.Value = &v
				nodes[id] = st
			}
			if rng.IntN(2) == 0 { // the daemon builds self's record anew each pass
				v := *self
				v.HeartbeatAt = base.Add(time.Duration(step) * time.Second)
				self = &v
			}
		}
		gen++
		switch {
		case rng.IntN(100) == 0: // a bucket-wide change: a pull, a filter change
			log.changes = append(log.changes, fleet.Change{Gen: gen, Kind: fleet.KindNodes})
		case rng.IntN(60) == 0: // the log no longer reaches back
			log.floor = gen
			log.changes = append(log.changes, fleet.Change{Gen: gen, Kind: fleet.KindNodes, Key: id})
		default: // the key touched (also when the step changed something else)
			log.changes = append(log.changes, fleet.Change{Gen: gen, Kind: kinds[rng.IntN(len(kinds))], Key: id})
			if nodeStep {
				log.changes[len(log.changes)-1].Kind = fleet.KindNodes
				log.changes[len(log.changes)-1].HeartbeatOnly = beat
			}
		}
		view = &fleet.View{Generation: gen, Nodes: fleet.MapOf(nodes), Downs: view.Downs}
		if rng.IntN(3) == 0 {
			continue // the next call patches several changes at once
		}
		want := rolloutNodesRebuilt(job, self, view, allocs)
		got, idx := c.nodes(job, self, view, allocs, nil)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: the cached node list differs from the one derived afresh:\n got %+v\nwant %+v", step, got, want)
		}
		if idx != nil {
			t.Fatalf("step %d: a list built without a change log came with an index", step)
		}
		patchesBefore := p.patches
		got, idx = p.nodes(job, self, view, allocs, log)
		if switched && p.patches > patchesBefore {
			sameScopeSwitches++
		}
		switched = false
		// A list handed out again may hold a record older by its heartbeat
		// time alone (nothing a decision reads): equal but for that.
		if !reflect.DeepEqual(withoutBeats(got), withoutBeats(want)) {
			t.Fatalf("step %d: the node list patched from the change log differs from the one derived afresh:\n got %+v\nwant %+v", step, got, want)
		}
		if idx != nil {
			if !idx.For(got) {
				t.Fatalf("step %d: the index came with another list", step)
			}
			// The index answers as the list itself does.
			fresh := rollout.Facts{Nodes: slices.Clone(got)}
			indexed := rollout.Facts{Nodes: got, Index: idx}
			if !slices.Equal(indexed.LiveEligible(), fresh.LiveEligible()) {
				t.Fatalf("step %d: the index's live eligible nodes %v, the list's %v", step, indexed.LiveEligible(), fresh.LiveEligible())
			}
		}
		// Every list handed out is never modified afterwards: the facts
		// of passes still under way share it.
		for _, h := range handed {
			if !reflect.DeepEqual(h.list, h.copy) {
				t.Fatalf("step %d: a node list handed out at step %d was modified since", step, h.step)
			}
		}
		handed = append(handed, handedList{step: step, list: got, copy: slices.Clone(got)})
		if len(handed) > 20 {
			handed = handed[1:]
		}
	}
	// Control: lists were handed out again unchanged, not only built.
	if p.reused < 50 {
		t.Fatalf("the node list was handed out again %d times in 3,000 steps: the test no longer reaches the reuse path", p.reused)
	}
	t.Logf("reused %d times", p.reused)
	// Control: the patch path was taken, not only rebuilds.
	if p.patches < 300 {
		t.Fatalf("the node list was patched %d times in 3,000 steps: the test no longer reaches the patch path", p.patches)
	}
	t.Logf("patched %d times", p.patches)
	// Control: a new version of the same scope kept the list.
	if sameScopeSwitches < 20 {
		t.Fatalf("the list was patched after %d switches to a job of the same scope: the test no longer reaches that path", sameScopeSwitches)
	}
	t.Logf("patched after %d switches to a job of the same scope", sameScopeSwitches)
}

// BenchmarkRolloutFactsNodes: the rollout facts' node list for a job over
// 1,000 nodes, derived afresh (the code before the cache) and through the
// cache with one record replaced between calls (a heartbeat's worth of
// change). go test -run '^$' -bench RolloutFactsNodes ./host/agent/
func BenchmarkRolloutFactsNodes(b *testing.B) {
	job := &model.Job{ID: "web", Namespace: "default", Datacenters: []string{"dc1"},
		Groups: []*model.Group{{Name: "g", Tasks: []*model.Task{{Name: "t", Driver: "mock"}}}}}
	record := func(id string) *model.Node {
		return &model.Node{ID: id, Name: id, Datacenter: "dc1", NodePool: "default", Status: model.NodeStatusReady,
			Eligibility: model.Eligible, Drivers: map[string]model.DriverInfo{"mock": {Detected: true, Healthy: true}}}
	}
	nodes := map[string]wanted.NodeState{}
	for i := range 1000 {
		id := fmt.Sprintf("node-%04d", i)
		nodes[id] = wanted.NodeState{Key: id, Value: record(id)}
	}
	self := record("node-0000")
	view := &fleet.View{Nodes: fleet.MapOf(nodes)}
	b.Run("afresh", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			id := fmt.Sprintf("node-%04d", i%1000)
			nodes[id] = wanted.NodeState{Key: id, Value: record(id)}
			if len(rolloutNodesRebuilt(job, self, view, nil)) != 1000 {
				b.Fatal("wrong count")
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		var c nodeFactsCache
		for i := 0; b.Loop(); i++ {
			id := fmt.Sprintf("node-%04d", i%1000)
			nodes[id] = wanted.NodeState{Key: id, Value: record(id)}
			if l, _ := c.nodes(job, self, view, nil, nil); len(l) != 1000 {
				b.Fatal("wrong count")
			}
		}
	})
	// Patched from the change log, which names the one record replaced.
	b.Run("patched", func(b *testing.B) {
		var c nodeFactsCache
		log := &fakeChanges{}
		for i := 0; b.Loop(); i++ {
			id := fmt.Sprintf("node-%04d", i%1000)
			nodes[id] = wanted.NodeState{Key: id, Value: record(id)}
			view.Generation++
			log.changes = append(log.changes[:0], fleet.Change{Gen: view.Generation, Kind: fleet.KindNodes, Key: id})
			if l, _ := c.nodes(job, self, view, nil, log); len(l) != 1000 {
				b.Fatal("wrong count")
			}
		}
		if c.patches == 0 {
			b.Fatal("never patched")
		}
	})
}

// The fleet count a pass skips after heartbeats alone is the count it would
// have made: over a random history of heartbeats (kept beside the node
// records, as the source keeps them: the records' map and its NodesCopy
// unchanged), TTL and protocol changes, expiries, returns, joins, other
// buckets' changes and folds (the same records copied anew), the kept
// FleetFacts always equal a fresh count of the view, and the kept "a node
// expired" (the loss walk's gate) what the view says.
func TestAFleetCountSkippedAfterHeartbeatsEqualsAFreshCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	src := &fakeChanges{view: &fleet.View{Nodes: fleet.MapOf(map[string]wanted.NodeState{}), NodesCopy: 1}}
	a := &Agent{nodeID: "node-self", cfg: Config{Source: src}}
	fresh := &Agent{nodeID: "node-self"}
	skipped, expiredSeen := 0, false
	copies := uint64(1)
	for step := 0; step < 3000; step++ {
		nodes := src.view.Nodes
		id := fmt.Sprintf("node-%02d", rng.IntN(30))
		prev, had := nodes.Get(id)
		changed := func(st wanted.NodeState) {
			nodes = nodes.With(id, st)
			copies++
		}
		switch op := rng.IntN(10); {
		case op < 6 && had && prev.Value != nil && !prev.Absent:
			// A heartbeat: beside the records, which stay as they are.
		case op < 8:
			n := &model.Node{ID: id, RolloutProtocol: rng.IntN(3), HeartbeatTTL: model.Duration(time.Duration(1+rng.IntN(3)) * 10 * time.Second),
				HeartbeatAt: time.Unix(int64(step), 0)}
			changed(wanted.NodeState{Key: id, Value: n})
		case op == 8 && had:
			prev.Absent = !prev.Absent
			prev.Expired, prev.Applied = time.Time{}, 0
			if prev.Absent && rng.IntN(2) == 0 { // expired by the server, with its marker's revision
				prev.Expired, prev.Applied = time.Unix(int64(step), 0), uint64(step+1)
			}
			changed(prev)
		case op == 9 && rng.IntN(4) == 0: // a fold: the same records, copied anew
			nodes = fleet.MapOf(nodes.Clone())
			copies++
		default:
			// Another bucket's change.
		}
		src.view = &fleet.View{Generation: src.view.Generation + 1, Nodes: nodes, NodesCopy: copies}
		if a.fleetCountStale(src.view) { // as a pass does
			a.countFleet(src.view)
			a.nodeExpiredInView = anyNodeExpired(src.view, a.nodeID)
		} else {
			skipped++
		}
		fresh.countFleet(src.view)
		if a.Fleet() != fresh.Fleet() {
			t.Fatalf("step %d: kept %+v, a fresh count %+v", step, a.Fleet(), fresh.Fleet())
		}
		if want := anyNodeExpired(src.view, a.nodeID); a.nodeExpiredInView != want {
			t.Fatalf("step %d: kept 'a node expired' %v, the view says %v", step, a.nodeExpiredInView, want)
		}
		expiredSeen = expiredSeen || a.nodeExpiredInView
	}
	if !expiredSeen {
		t.Fatal("no step had a node expired: the test no longer reaches the loss walk")
	}
	if skipped < 500 {
		t.Fatalf("only %d counts skipped in 3,000 steps: the test no longer reaches the skip", skipped)
	}
	t.Logf("%d of 3,000 counts skipped", skipped)
	// A View not made by a Source is always counted, the second time too.
	for try := range 2 {
		if !a.fleetCountStale(&fleet.View{Nodes: src.view.Nodes}) {
			t.Fatalf("a view without NodesCopy was not counted (try %d)", try+1)
		}
	}
}

// withoutBeats is list with each record's heartbeat time cleared (copies).
func withoutBeats(list []rollout.Node) []rollout.Node {
	out := slices.Clone(list)
	for i := range out {
		if r := out[i].Record; r != nil {
			v := *r
			v.HeartbeatAt = time.Time{}
			out[i].Record = &v
		}
	}
	return out
}

// A whole-fleet plan's classified nodes, kept across passes
// (fleetNodesOf), are what a fresh classification of the view's newest
// records makes: over a random history of heartbeats (the records' map and
// NodesCopy kept, self's record rebuilt with a new heartbeat time), node
// changes (status, eligibility, drain, datacenter, drivers, joins and
// expiries: a new map), folds (the same records copied anew), job changes
// (datacenters, driver) and changes of self's own record, the inputs agree
// on every ready node (but for heartbeat times), the not-ready and the
// tainted ones, and the known set. Controls: the memo is used (most
// heartbeat steps hit it, and a new job value of the same scope hits it:
// scopeSig), and a memo that ignored the job would differ.
func TestAFleetPlansKeptNodeClassificationEqualsAFreshOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	a := &Agent{nodeID: "node-00"}
	mkJob := func() *model.Job {
		j := &model.Job{ID: "web", Type: model.JobTypeSystem, Version: 1, Groups: []*model.Group{{Name: "g", Count: 1,
			Tasks: []*model.Task{{Name: "t", Driver: []string{"mock", "exec"}[rng.IntN(2)]}}}}}
		if rng.IntN(2) == 0 {
			j.Datacenters = []string{"dc1"}
		}
		return j
	}
	mkNode := func(id string, at time.Time) *model.Node {
		n := &model.Node{ID: id, Name: id, Datacenter: []string{"dc1", "dc2"}[rng.IntN(2)], NodePool: "default",
			Status:      []model.NodeStatus{model.NodeStatusReady, model.NodeStatusReady, model.NodeStatusInitializing}[rng.IntN(3)],
			Eligibility: []model.Eligibility{model.Eligible, model.Eligible, model.Ineligible}[rng.IntN(3)],
			Attributes:  map[string]string{"kernel.name": "linux"}, Meta: map[string]string{},
			Drivers:     map[string]model.DriverInfo{"mock": {Detected: true, Healthy: rng.IntN(4) > 0}, "exec": {Detected: rng.IntN(2) == 0, Healthy: true}},
			HeartbeatAt: at}
		if rng.IntN(8) == 0 {
			n.Drain = &model.DrainStrategy{}
		}
		return n
	}
	job := mkJob()
	nodes := map[string]wanted.NodeState{}
	for i := range 20 {
		id := fmt.Sprintf("node-%02d", i)
		nodes[id] = wanted.NodeState{Key: id, Value: mkNode(id, time.Unix(0, 0))}
	}
	copies := uint64(1)
	self := mkNode("node-00", time.Unix(0, 0))
	view := &fleet.View{Nodes: fleet.MapOf(nodes), NodesCopy: copies}
	hits, differsWithoutJob := 0, false
	sameScope, sameScopeHits := false, 0
	for step := 0; step < 3000; step++ {
		at := time.Unix(int64(step), 0)
		id := fmt.Sprintf("node-%02d", 1+rng.IntN(24))
		switch op := rng.IntN(20); {
		case op < 12: // heartbeats: self's record rebuilt, the others beside the map
			c := *self
			c.HeartbeatAt = at
			self = &c
		case op < 16: // a node changed, joined or expired
			nodes = maps.Clone(nodes)
			st := wanted.NodeState{Key: id, Value: mkNode(id, at)}
			if rng.IntN(5) == 0 {
				st.Absent = true
			}
			nodes[id] = st
			copies++
		case op == 16: // a fold
			nodes = maps.Clone(nodes)
			copies++
		case op == 17:
			prev := job
			job = mkJob()
			sameScope = scopeSig(prev) == scopeSig(job)
		case op == 18:
			self = mkNode("node-00", at)
		default:
		}
		view = &fleet.View{Nodes: fleet.MapOf(nodes), NodesCopy: copies}
		prevMemo := a.fleetNodes[wanted.JobKey(job.Namespace, job.ID)]
		kept := a.fleetNodesOf(job, self, view)
		if prevMemo != nil && prevMemo.nodes == kept {
			hits++
			if sameScope {
				sameScopeHits++
			}
		}
		sameScope = false
		var all []*model.Node
		for _, st := range nodes {
			if n := wanted.NodeView(st); n != nil {
				all = append(all, n)
			}
		}
		fresh := classifyNodes(job, self, all)
		if !sameClasses(kept, fresh) {
			t.Fatalf("step %d: kept %s\nfresh %s", step, classesString(kept), classesString(fresh))
		}
		if other := mkJob(); !sameClasses(classifyNodes(other, self, all), fresh) {
			differsWithoutJob = true
		}
	}
	if hits < 1000 {
		t.Fatalf("the kept classification was used %d times in 3,000 steps: the test no longer reaches the memo", hits)
	}
	if !differsWithoutJob {
		t.Fatal("no other job classified the nodes differently: the job control proves nothing")
	}
	if sameScopeHits < 10 {
		t.Fatalf("the kept classification was used %d times for a new job of the same scope: the test no longer reaches that path", sameScopeHits)
	}
	t.Logf("kept classification used at %d of 3,000 steps (%d for a new job of the same scope)", hits, sameScopeHits)
}

func sameClasses(x, y *fleetNodes) bool {
	if len(x.ready) != len(y.ready) || !slices.Equal(x.notReady, y.notReady) || !maps.Equal(x.known, y.known) || len(x.tainted) != len(y.tainted) {
		return false
	}
	for i := range x.ready {
		if !model.SameButHeartbeat(x.ready[i], y.ready[i]) {
			return false
		}
	}
	for k, n := range x.tainted {
		m, ok := y.tainted[k]
		if !ok || !model.SameButHeartbeat(n, m) {
			return false
		}
	}
	return true
}

func classesString(f *fleetNodes) string {
	var ready []string
	for _, n := range f.ready {
		ready = append(ready, n.ID)
	}
	return fmt.Sprintf("ready %v not ready %v tainted %d known %d", ready, f.notReady, len(f.tainted), len(f.known))
}

// A rollout summary counts in a job's signature (a new one makes a pass)
// only where it can change the node's decisions: a node that may steward
// the job or watches every allocation for the version in force, one with
// an allocation of the job at an older version, one holding a slot of the
// job. A node whose allocations are all at the job's version (done, or
// placing) is not woken by it, nor is one that watches only for the next
// version's sake.
func TestASummaryWakesOnlyTheNodesItCanDecideFor(t *testing.T) {
	job := &model.Job{ID: "web", Version: 3}
	at := func(v uint64, status model.ClientStatus) *model.Allocation {
		return &model.Allocation{ID: fmt.Sprintf("a%d", v), JobID: "web", JobVersion: v, DesiredStatus: model.DesiredRun, ClientStatus: status}
	}
	mine := []rollout.Slot{{Slot: model.Slot{Holder: "self", JobID: "web"}}}
	other := []rollout.Slot{{Slot: model.Slot{Holder: "n2", JobID: "web"}}}
	for _, c := range []struct {
		name      string
		narrowed  bool
		watching  bool
		own       []*model.Allocation
		slots     []rollout.Slot
		wantWoken bool
	}{
		{"done: every allocation at the job's version", true, false, []*model.Allocation{at(3, model.ClientRunning)}, other, false},
		{"no allocation of the job", true, false, nil, nil, false},
		{"an older version stopped already (terminal)", true, false, []*model.Allocation{at(2, model.ClientComplete), at(3, model.ClientPending)}, nil, false},
		{"a waiter: an allocation at an older version", true, false, []*model.Allocation{at(2, model.ClientRunning)}, nil, true},
		{"a holder: its replacement in flight", true, false, []*model.Allocation{at(3, model.ClientPending)}, mine, true},
		{"a steward candidate", true, true, []*model.Allocation{at(3, model.ClientRunning)}, nil, true},
		{"not narrowed: every node watches everything", false, false, []*model.Allocation{at(3, model.ClientRunning)}, nil, true},
		{"watching only for the next version, done", true, true, []*model.Allocation{at(3, model.ClientRunning)}, other, false},
		{"watching only for the next version, a waiter", true, true, []*model.Allocation{at(2, model.ClientRunning)}, nil, true},
	} {
		ahead := strings.HasPrefix(c.name, "watching only for the next version")
		a := &Agent{nodeID: "self", narrowNow: c.narrowed, watchJobs: map[string]bool{"default.web": c.watching}, aheadJobs: map[string]bool{"default.web": ahead}}
		if got := a.summaryMatters("default.web", job, c.own, c.slots); got != c.wantWoken {
			t.Errorf("%s: woken %v, want %v", c.name, got, c.wantWoken)
		}
	}
}

// A job ranked by the summary alone converges while everything its plan
// asks is updates held Unlisted (waitsUnlisted), and a summary counts in
// its signature only by whether it lists this node (summaryLists: as a
// waiter or a slot's holder). Controls: a listed hold, a placement beside
// the hold, an update not held.
func TestAnUnlistedWaiterConvergesUntilASummaryListsIt(t *testing.T) {
	sum := &model.RolloutSummary{Groups: map[string]*model.GroupSummary{
		"g": {Waiting: []model.SummaryWaiter{{Node: "n2", Alloc: "a2"}}, Slots: []model.SummarySlot{{Index: 0, Holder: "n3"}}},
		"h": nil,
	}}
	for node, want := range map[string]bool{"n1": false, "n2": true, "n3": true} {
		if got := summaryLists(sum, node); got != want {
			t.Errorf("summaryLists(%s) = %v, want %v", node, got, want)
		}
	}
	if summaryLists(nil, "n1") {
		t.Error("no summary lists n1")
	}
	upd := reconcile.Entry{AllocID: "a1", Rule: "alloc.13"}
	plan := &reconcile.Plan{Update: []reconcile.Entry{upd}}
	for _, c := range []struct {
		name string
		plan *reconcile.Plan
		dec  rollout.Decision
		want bool
	}{
		{"held unlisted", plan, rollout.Decision{Held: []rollout.Held{{Entry: upd, Unlisted: true}}}, true},
		{"held, listed", plan, rollout.Decision{Held: []rollout.Held{{Entry: upd}}}, false},
		{"a placement beside it", &reconcile.Plan{Update: plan.Update, Place: []reconcile.Entry{{AllocID: "p"}}},
			rollout.Decision{Held: []rollout.Held{{Entry: upd, Unlisted: true}}}, false},
		{"the update not held (a take)", plan, rollout.Decision{}, false},
		{"nothing planned", &reconcile.Plan{}, rollout.Decision{}, false},
	} {
		if got := waitsUnlisted(c.plan, &c.dec); got != c.want {
			t.Errorf("%s: waitsUnlisted = %v, want %v", c.name, got, c.want)
		}
	}
}
