package rollout

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// stewardMidway is a fleet of n nodes halfway through a rollout with
// max_parallel maxP and a tenth of the nodes canaries, promoted: a third
// of the allocations replaced and healthy (the canaries among them),
// maxP slots held with their replacements pending, the rest waiting, every
// node at HandoffProtocol (the steward assigns and queues), and a summary
// of the moment before stored. It returns the steward's facts.
func stewardMidway(tb testing.TB, n, maxP int) Facts {
	_, f := midwayWorld(tb, n, maxP)
	return f
}

// midwayWorld is stewardMidway with its world.
func midwayWorld(tb testing.TB, n, maxP int) (*world, Facts) {
	w := newWorld(n, maxP, 0)
	for i := range w.nodes {
		w.nodes[i].Protocol = HandoffProtocol
	}
	d := w.record(func(d *model.Deployment) {
		st := d.TaskGroups["g"]
		for i := range n / 10 {
			st.CanaryNodes = append(st.CanaryNodes, fmt.Sprintf("n%d", i+1))
		}
		st.DesiredCanaries, st.Promoted = n/10, true
	})
	healthy := true
	for i := 0; i < n/3; i++ {
		id := fmt.Sprintf("n%d", i+1)
		w.allocs[i].DesiredStatus, w.allocs[i].ClientStatus = model.DesiredStop, model.ClientComplete
		w.allocs = append(w.allocs, &model.Allocation{ID: "b-" + id, Name: "web.g[0]", JobID: "web", JobVersion: 2, TaskGroup: "g",
			NodeID: id, DeploymentID: d.ID, DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning,
			DeploymentStatus: &model.AllocDeploymentStatus{Healthy: &healthy}})
	}
	for k := 0; k < maxP; k++ {
		i := n/3 + k
		id := fmt.Sprintf("n%d", i+1)
		w.allocs = append(w.allocs, &model.Allocation{ID: "b-" + id, Name: "web.g[0]", JobID: "web", JobVersion: 2, TaskGroup: "g",
			NodeID: id, DeploymentID: d.ID, DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning})
		w.slots = append(w.slots, Slot{Key: wanted.SlotKey("", "web", "g", k), Revision: uint64(k + 1), Time: t0,
			Slot: model.Slot{JobID: "web", JobVersion: 2, DeploymentID: d.ID, Group: "g", Index: k, Holder: id,
				OldAlloc: "a-" + id, NewAlloc: "b-" + id}})
	}
	d.TaskGroups["g"].HealthyAllocs = n / 3
	steward := w.stewardOf(tb)
	f := w.facts(tb, steward)
	g := f // the facts' memory of this decision stays with it
	sum := Summarize(d, &g, Derive(d, &g))
	sum.Time = t0.Add(-SummaryLazy / 2)
	f.Summary = sum
	return w, f
}

// BenchmarkMidwayWaiterDecide: a waiting node's decision in the fleet of
// stewardMidway (1,000 nodes, max_parallel 100, every slot held, the
// steward's summary listing the held slots and 200 waiters), the node
// listed and queued on a held slot, its facts narrowed to the summary and
// its own slots (what a fleet agent decides on each summary it hears),
// with the NodeIndex the agent keeps across passes.
//
//	go test -run '^$' -bench MidwayWaiterDecide -benchmem ./host/rollout/
func BenchmarkMidwayWaiterDecide(b *testing.B) {
	w, f := midwayWorld(b, 1000, 100)
	sum := f.Summary
	if sum == nil || len(sum.Groups["g"].Slots) != 100 || len(sum.Groups["g"].Waiting) < 150 {
		b.Fatalf("the steward's summary: %+v", sum)
	}
	self := sum.Groups["g"].Waiting[120].Node
	base := w.ownOnly(b, self, sum)
	base.Index = NewNodeIndex(base.Nodes)
	for b.Loop() {
		g := base // a pass's own copy of the facts
		d := Decide(g)
		if len(d.Takes) != 0 || len(d.Held) != 1 {
			b.Fatalf("a queued waiter decided %d takes, %d held", len(d.Takes), len(d.Held))
		}
	}
}

// BenchmarkStewardDecide: the steward's decision for a job with one
// allocation on each of 1,000 nodes in the middle of a rollout
// (max_parallel 100, 100 canaries promoted), and of 10,000 (1,000 and
// 1,000), as its pass makes it on each change it hears:
// derive the counts, the summary, the duties.
//
//	go test -run '^$' -bench StewardDecide -benchmem ./host/rollout/
func BenchmarkStewardDecide(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		base := stewardMidway(b, n, n/10)
		base.Index = NewNodeIndex(base.Nodes)
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for b.Loop() {
				f := base
				if d := Decide(f); d.StewardRank != 0 || d.Counts["g"].InFlight != n/10 {
					b.Fatalf("not the steward's decision: rank %d, counts %+v", d.StewardRank, d.Counts["g"])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/alloc")
		})
	}
}

// BenchmarkStewardDecideCold is BenchmarkStewardDecide as a steward of a
// fleet makes it: the allocations decoded from their JSON one by one among
// other values (each string of each allocation a copy of its own,
// scattered over the heap, as in an agent's view), the node IDs likewise,
// and the caches emptied before each decision (a steward's decisions are a
// few a second, among everything else its process does). "decoded" is
// that; "interned" shares the strings that repeat across the fleet
// (model.Intern, as wanted.DecodeAlloc and DecodeNode do).
//
//	go test -run '^$' -bench StewardDecideCold -benchtime 200x ./host/rollout/
func BenchmarkStewardDecideCold(b *testing.B) {
	evict := make([]byte, 64<<20) // larger than this machine kind's caches
	for _, n := range []int{1000, 10000} {
		for _, interned := range []bool{false, true} {
			base := stewardMidway(b, n, n/10)
			var keep [][]byte // the values decoded between the allocations
			allocs := make([]*model.Allocation, len(base.Allocs))
			for i, a := range base.Allocs {
				raw, err := json.Marshal(a)
				if err != nil {
					b.Fatal(err)
				}
				var c model.Allocation
				if err := json.Unmarshal(raw, &c); err != nil {
					b.Fatal(err)
				}
				if interned {
					c.InternStrings()
				}
				allocs[i] = &c
				keep = append(keep, make([]byte, 512+i%7*256))
			}
			nodes := slices.Clone(base.Nodes)
			for i := range nodes {
				nodes[i].ID = strings.Clone(nodes[i].ID)
				if interned {
					nodes[i].ID = model.Intern(nodes[i].ID)
				}
				keep = append(keep, make([]byte, 256))
			}
			base.Allocs, base.Nodes = allocs, nodes
			base.Index = NewNodeIndex(base.Nodes)
			name := "decoded"
			if interned {
				name = "interned"
			}
			b.Run(fmt.Sprintf("nodes=%d/%s", n, name), func(b *testing.B) {
				var sum byte
				for range b.N {
					b.StopTimer()
					for i := 0; i < len(evict); i += 64 {
						evict[i]++
						sum += evict[i]
					}
					f := base
					b.StartTimer()
					if d := Decide(f); d.StewardRank != 0 || d.Counts["g"].InFlight != n/10 {
						b.Fatalf("not the steward's decision: rank %d, counts %+v", d.StewardRank, d.Counts["g"])
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/alloc")
				runtime.KeepAlive(keep)
				_ = sum
			})
		}
	}
}
