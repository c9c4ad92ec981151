package reconcile

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// benchFleet: nodes × perNode allocations of a job at version 2, every
// allocation still at version 1 (a rollout: the heaviest path, each update
// derives a new allocation ID), a deployment of version 2 in force.
func benchFleet(nodes, perNode, canary int) Input { return benchFleetAt(nodes, perNode, canary, 1) }

// benchFleetAt is benchFleet with the allocations at allocVersion (2: the
// steady state, nothing to do).
func benchFleetAt(nodes, perNode, canary int, allocVersion uint64) Input {
	g := withUpdate(grp("web", perNode), func(u *model.UpdateStrategy) { u.Canary = canary })
	in := fleetOf(sysJob(2, g))
	// IDs are UUID-shaped, as in a real fleet (their length matters to
	// the hashing of new allocation IDs).
	for i := range nodes {
		id := fmt.Sprintf("7c9e6679-7425-40de-944b-%012d", i)
		in.ReadyNodes = append(in.ReadyNodes, rnode(id))
		for k := range perNode {
			in.LiveAllocs = append(in.LiveAllocs, al(fmt.Sprintf("f47ac10b-58cc-4372-%04d-%012d", k, i), id, "web", k, allocVersion))
		}
	}
	in.Deployment = dep(2, model.DeploymentRunning, map[string]*model.DeploymentState{"web": {DesiredTotal: nodes * perNode}})
	return in
}

// benchReconcile reports, besides ns/op, the wall and the CPU time per
// allocation. The CPU time (this process's user+system time, GC included)
// is the figure to read on a shared machine: wall time there includes the
// time other engineers' processes held the CPUs.
func benchReconcile(b *testing.B, in Input, node string) {
	allocs := len(in.LiveAllocs)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		var err error
		if node == "" {
			_, err = ReconcileFleet(in)
		} else {
			_, err = ReconcileNode(in, node)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(allocs), "ns/alloc")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(allocs), "cpu-ns/alloc")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The three fleets of the brief.
func BenchmarkFleet1Node10000Allocs(b *testing.B)  { benchReconcile(b, benchFleet(1, 10000, 0), "") }
func BenchmarkFleet1000Nodes10Allocs(b *testing.B) { benchReconcile(b, benchFleet(1000, 10, 0), "") }
func BenchmarkFleet10000Nodes1AllocCanary25(b *testing.B) {
	benchReconcile(b, benchFleet(10000, 1, 25), "")
}

// Linearity: the same shape at 100, 1,000 and 10,000 nodes.
func BenchmarkFleetNodesX1(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchReconcile(b, benchFleet(n, 1, 0), "") })
	}
}

// The steady state: 10,000 nodes, every allocation up to date.
func BenchmarkFleet10000Nodes1AllocSteady(b *testing.B) {
	benchReconcile(b, benchFleetAt(10000, 1, 0, 2), "")
}

// The daemon's round: one node's plan from a 10,000-node fleet view (it
// still counts completion on every node).
func BenchmarkNode10000Nodes1Alloc(b *testing.B) {
	benchReconcile(b, benchFleet(10000, 1, 25), "7c9e6679-7425-40de-944b-000000005000")
}

// recorded is benchFleet after its first round: the deployment records
// the canary set the round settled, as the agents' record does.
func recorded(b *testing.B, in Input) Input {
	p, err := ReconcileFleet(in)
	if err != nil {
		b.Fatal(err)
	}
	in.Deployment = p.Deployment
	return in
}

// benchLocal times ReconcileLocal for one node of the fleet: the node's
// input is split out once, outside the timing (the agent builds it from
// its own allocations). ns/alloc is per allocation of that node.
func benchLocal(b *testing.B, in Input, node string) {
	ni, err := in.NodeInput(node)
	if err != nil {
		b.Fatal(err)
	}
	ni.Canary = nil // the record alone decides
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := ReconcileLocal(ni); err != nil {
			b.Fatal(err)
		}
	}
	cpu := cpuTime() - cpu0
	allocs := max(len(ni.LiveAllocs), 1)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(allocs), "ns/alloc")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(allocs), "cpu-ns/alloc")
}

// One node's plan, whole-fleet path (ReconcileNode) against the local one
// (ReconcileLocal), at growing fleet sizes: the first grows with the
// fleet, the second must not. The node is a canary node of a recorded 25%
// canary set (an update), or any node in the steady state.
func BenchmarkOneNodePlan(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		node := fmt.Sprintf("7c9e6679-7425-40de-944b-%012d", 0) // first in ID order: a canary node
		rollout := recorded(b, benchFleet(n, 1, 25))
		steady := benchFleetAt(n, 1, 0, 2)
		if n <= 10000 {
			b.Run(fmt.Sprintf("whole-fleet/canary25/nodes=%d", n), func(b *testing.B) { benchReconcile(b, rollout, node) })
			b.Run(fmt.Sprintf("whole-fleet/steady/nodes=%d", n), func(b *testing.B) { benchReconcile(b, steady, node) })
		}
		b.Run(fmt.Sprintf("local/canary25/nodes=%d", n), func(b *testing.B) { benchLocal(b, rollout, node) })
		b.Run(fmt.Sprintf("local/steady/nodes=%d", n), func(b *testing.B) { benchLocal(b, steady, node) })
	}
}
