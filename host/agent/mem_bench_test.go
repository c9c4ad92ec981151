package agent

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/wait"
	"github.com/hivelet/hivelet/plugins/manager"
	"github.com/hivelet/hivelet/plugins/mock"
)

// BenchmarkMemoryPerAllocation runs one node with 1,000 mock allocations
// (one job, max_parallel 0; the mock driver as a plugin through the plugin
// manager, as the agent runs it) and reports the live heap, goroutine
// stacks and goroutines they add on the host side over the same node idle,
// once every allocation runs and its health is decided (steady state: the
// health trackers are done), after two full collections. The heap figure includes the embedded NATS
// server's share (the allocations' records in its stream), as a dev agent
// carries it. HIVELET_MEM_PROFILE=FILE also writes the heap profile (sampled
// finely, which slows the run) and a goroutine dump (FILE.goroutines) at that
// point.
func BenchmarkMemoryPerAllocation(b *testing.B) {
	const count = 1000
	if os.Getenv("HIVELET_MEM_PROFILE") != "" {
		// A sample every 64 bytes, not every 512 KB: what is left per
		// allocation is a few hundred bytes a site.
		runtime.MemProfileRate = 64
	}
	for b.Loop() {
		w := newWorld(b)
		dir := b.TempDir()
		m, err := manager.New(manager.Config{SelfExe: os.Args[0], Builtins: []string{mock.Name}, StateDir: filepath.Join(dir, "p"), Logger: w.log})
		if err != nil {
			b.Fatal(err)
		}
		drv, err := m.Driver(context.Background(), mock.Name)
		if err != nil {
			b.Fatal(err)
		}
		n := w.newNode("mem-node", &countingDriver{Driver: drv}, "")
		settle := func() runtime.MemStats {
			var ms runtime.MemStats
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&ms)
			return ms
		}
		before := settle()
		g0 := runtime.NumGoroutine()
		j := mockJob("big", 0, nil)
		j.Groups[0].Count = count
		j.Groups[0].Update.MaxParallel = 0
		j.Groups[0].Update.MinHealthyTime = model.Duration(time.Second)
		w.putJob(j)
		deadline := time.Now().Add(120 * time.Second)
		for running(n) < count {
			if time.Now().After(deadline) || !wait.For(b.Context(), 100*time.Millisecond) {
				b.Fatalf("%d of %d allocations running", running(n), count)
			}
		}
		after := settle()
		if f := os.Getenv("HIVELET_MEM_PROFILE"); f != "" {
			out, err := os.Create(f)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.WriteHeapProfile(out); err != nil {
				b.Fatal(err)
			}
			out.Close()
			g, _ := os.Create(f + ".goroutines")
			_ = pprof.Lookup("goroutine").WriteTo(g, 1)
			g.Close()
		}
		g1 := runtime.NumGoroutine()
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/count, "heap-B/alloc")
		b.ReportMetric(float64(after.StackInuse-before.StackInuse)/count, "stack-B/alloc")
		b.ReportMetric(float64(g1-g0)/count, "goroutines/alloc")
		n.stop(true)
		m.Kill()
		w.conn.Close()
		w.emb.Shutdown()
	}
}

// running counts the node's running allocations whose health is decided
// (the health tracker's goroutine ends then): the steady state measured.
func running(n *node) int {
	c := 0
	for _, a := range n.agent.Allocs() {
		if a.ClientStatus == model.ClientRunning && a.DeploymentStatus != nil && a.DeploymentStatus.Healthy != nil {
			c++
		}
	}
	return c
}
