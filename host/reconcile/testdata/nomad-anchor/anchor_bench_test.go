// anchor_bench_test.go — a benchmark harness written for the hivelet project
// (not part of Nomad). It times Nomad's system-job node reconciler,
// (*NodeReconciler).Compute, on the fleet shapes of hivelet's
// BenchmarkReconciler (host/reconcile/bench_scale_test.go): one system job
// "web" with one task group (count 1), one running allocation per ready node,
// and a version-2 deployment in force. No Nomad code is copied anywhere; this
// file only calls Nomad's API.
//
// Cases (each at 1,000 and 10,000 nodes):
//
//	steady   job v2, every allocation's Job at v2 (same JobModifyIndex)
//	update   job v2, every allocation's Job at v1 (older JobModifyIndex),
//	         update block max_parallel 1 (hivelet's default), canary 0
//	canary25 as update, with update.canary = 25 (percent, as Nomad system
//	         jobs express it) and the deployment not promoted
//
// BenchmarkAnchorNoDeployment repeats the cases with no deployment passed in
// (Compute then decides whether to create one, as on the first evaluation
// after a job registration).
//
// Rerun:
//
//	go test -run '^TestAnchorCounts$' -v ./scheduler/reconciler
//	go test -run '^$' -bench Anchor -benchmem ./scheduler/reconciler
package reconciler

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/nomad/mock"
	"github.com/hashicorp/nomad/nomad/structs"
)

type anchorFleet struct {
	job        *structs.Job
	nodes      []*structs.Node
	live       []*structs.Allocation
	deployment *structs.Deployment // template; Compute gets a copy
}

// anchorFleetAt builds the fleet: nodes ready nodes, one allocation each,
// whose Job is at allocVersion (2 = current, 1 = one behind), and canary the
// update block's canary percentage.
func anchorFleetAt(nodes, canary int, allocVersion uint64, withDeployment bool) *anchorFleet {
	job := mock.SystemJob()
	job.ID = "web"
	job.Name = "web"
	job.Version = 2
	job.CreateIndex = 42
	job.JobModifyIndex = 200
	job.ModifyIndex = 200
	tg := job.TaskGroups[0]
	tg.Name = "web"
	tg.Count = 1
	u := structs.DefaultUpdateStrategy.Copy() // max_parallel 1, as hivelet's default
	u.Canary = canary
	tg.Update = u

	allocJob := job
	if allocVersion != job.Version {
		allocJob = job.Copy()
		allocJob.Version = allocVersion
		allocJob.JobModifyIndex = 100
		allocJob.ModifyIndex = 100
	}

	f := &anchorFleet{job: job}
	name := fmt.Sprintf("%s.%s[0]", job.Name, tg.Name)
	for i := range nodes {
		n := mock.Node()
		// UUID-shaped IDs, as in hivelet's bench.
		n.ID = fmt.Sprintf("7c9e6679-7425-40de-944b-%012d", i)
		n.Name = n.ID
		n.Attributes["nomad.version"] = "2.0.6" // a node new enough for system deployments
		f.nodes = append(f.nodes, n)
		f.live = append(f.live, &structs.Allocation{
			ID:            fmt.Sprintf("f47ac10b-58cc-4372-%04d-%012d", 0, i),
			Namespace:     job.Namespace,
			NodeID:        n.ID,
			JobID:         job.ID,
			Job:           allocJob,
			TaskGroup:     tg.Name,
			Name:          name,
			DesiredStatus: structs.AllocDesiredStatusRun,
			ClientStatus:  structs.AllocClientStatusRunning,
		})
	}
	if withDeployment {
		d := structs.NewDeployment(job, job.Priority, time.Unix(0, 0).UnixNano())
		d.TaskGroups[tg.Name] = &structs.DeploymentState{DesiredTotal: nodes}
		f.deployment = d
	}
	return f
}

type anchorCase struct {
	name         string
	canary       int
	allocVersion uint64
}

var anchorCases = []anchorCase{
	{"steady", 0, 2},
	{"update", 0, 1},
	{"canary25", 25, 1},
}

func (f *anchorFleet) compute() (*NodeReconciler, *NodeReconcileResult) {
	nr := NewNodeReconciler(f.deployment)
	res := nr.Compute(f.job, f.nodes, map[string]struct{}{}, map[string]*structs.Node{}, f.live, structs.TerminalByNodeByName{})
	return nr, res
}

// TestAnchorCounts prints what Compute decides in each case (the sanity
// check of the harness) and checks it does not mutate its inputs.
func TestAnchorCounts(t *testing.T) {
	for _, withDep := range []bool{true, false} {
		for _, c := range anchorCases {
			for _, n := range []int{1000, 10000} {
				f := anchorFleetAt(n, c.canary, c.allocVersion, withDep)
				var depBefore *structs.Deployment
				if f.deployment != nil {
					depBefore = f.deployment.Copy()
				}
				nr, res := f.compute()
				canaries := 0
				for _, u := range res.Update {
					if u.Canary {
						canaries++
					}
				}
				dep := "none"
				if nr.DeploymentCurrent != nil {
					dep = fmt.Sprintf("v%d %s tgs=%d", nr.DeploymentCurrent.JobVersion, nr.DeploymentCurrent.Status, len(nr.DeploymentCurrent.TaskGroups))
				}
				t.Logf("deploymentIn=%v %s/nodes=%d: place=%d update=%d (canary-flagged=%d) ignore=%d stop=%d migrate=%d lost=%d disconnecting=%d reconnecting=%d | DeploymentCurrent=%s DeploymentUpdates=%d",
					withDep, c.name, n, len(res.Place), len(res.Update), canaries, len(res.Ignore), len(res.Stop),
					len(res.Migrate), len(res.Lost), len(res.Disconnecting), len(res.Reconnecting), dep, len(nr.DeploymentUpdates))
				// Inputs unchanged?
				if depBefore != nil {
					if len(f.deployment.TaskGroups) != len(depBefore.TaskGroups) || f.deployment.Status != depBefore.Status ||
						f.deployment.TaskGroups["web"].DesiredTotal != depBefore.TaskGroups["web"].DesiredTotal {
						t.Errorf("%s: Compute mutated the deployment passed in", c.name)
					}
				}
				for i, a := range f.live {
					if a.ClientStatus != structs.AllocClientStatusRunning || len(a.AllocStates) != 0 || a.NodeID != f.nodes[i].ID {
						t.Errorf("%s: Compute mutated allocation %d", c.name, i)
						break
					}
				}
			}
		}
	}
}

func anchorCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchAnchor times NewNodeReconciler + Compute only. The fleet is built
// once, outside the timing; Compute does not mutate its inputs in these
// cases (checked by TestAnchorCounts), so no per-iteration copy is needed.
func benchAnchor(b *testing.B, f *anchorFleet) {
	allocs := len(f.live)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := anchorCPU()
	for b.Loop() {
		_, res := f.compute()
		if res == nil {
			b.Fatal("nil result")
		}
	}
	cpu := anchorCPU() - cpu0
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(allocs), "ns/alloc")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(allocs), "cpu-ns/alloc")
}

func BenchmarkAnchor(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, c := range anchorCases {
			f := anchorFleetAt(n, c.canary, c.allocVersion, true)
			b.Run(fmt.Sprintf("%s/nodes=%d", c.name, n), func(b *testing.B) { benchAnchor(b, f) })
		}
	}
}

func BenchmarkAnchorNoDeployment(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, c := range anchorCases {
			f := anchorFleetAt(n, c.canary, c.allocVersion, false)
			b.Run(fmt.Sprintf("%s/nodes=%d", c.name, n), func(b *testing.B) { benchAnchor(b, f) })
		}
	}
}
