package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/plugins/manager"
	"github.com/hivelet/hivelet/plugins/mock"
	"github.com/hivelet/hivelet/sdk/driver"
)

// TestMain lets this test binary serve the mock driver as a plugin, so the
// latency benchmark can go through the real plugin manager and gRPC.
func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == "plugin" && os.Args[2] == "serve" && os.Args[3] == mock.Name {
		driver.Serve(mock.New())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// timedDriver records when each StartTask call returned (host side: after
// the plugin RPC when the driver is a plugin) and how long the call took.
type timedDriver struct {
	driver.Driver
	started chan time.Time

	mu    sync.Mutex
	calls []time.Duration
}

// WaitTaskFunc keeps the wrapped driver's callback wait (driver.WaitNotifier)
// visible, as the agent's own driver wrapper does.
func (d *timedDriver) WaitTaskFunc(ctx context.Context, taskID string, fn func(*driver.ExitResult)) error {
	return driver.WaitFunc(ctx, d.Driver, taskID, fn)
}

func (d *timedDriver) StartTask(ctx context.Context, cfg *driver.TaskConfig) (*driver.TaskHandle, error) {
	t0 := time.Now()
	h, err := d.Driver.StartTask(ctx, cfg)
	t1 := time.Now()
	d.mu.Lock()
	d.calls = append(d.calls, t1.Sub(t0))
	d.mu.Unlock()
	d.started <- t1
	return h, err
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// benchPutToStart measures, for b.N new jobs, the time from the KV put of
// the job to the return of the driver's StartTask for its allocation,
// through the fleet watch and a reconcile pass. The jobs accumulate: the
// last one is placed on a node already running b.N-1 jobs. It runs with the
// agent's GC setting (hivelet agent sets GOGC 50), and also reports the
// StartTask call alone (call-µs: the plugin RPC when via the plugin).
// The node narrows its watches as an agent does by default (a one-node
// fleet does not), unless narrowed: then always, as on a fleet of more
// than DefaultNarrowAbove nodes, where this node, the only one running the
// jobs, is the steward of every one.
//
// With settled, each put waits for the node to be quiet first: the last
// job's allocation healthy and no pass for settleQuiet. That is the
// latency of one put on a node running b.N-1 jobs; without it the puts
// come back to back, and each also waits behind the writes and passes
// that the jobs just started cause (their health, deployment and summary).
func benchPutToStart(b *testing.B, viaPlugin, deployments, narrowed, settled bool) {
	defer debug.SetGCPercent(debug.SetGCPercent(50))
	w := newWorld(b)
	w.narrowDefault = !narrowed
	defer w.emb.Shutdown()
	defer w.conn.Close()
	var base driver.Driver = mock.New()
	if viaPlugin {
		dir, err := os.MkdirTemp("", "hvb-")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(dir)
		m, err := manager.New(manager.Config{SelfExe: os.Args[0], Builtins: []string{mock.Name}, StateDir: filepath.Join(dir, "p"), Logger: w.log})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Kill()
		if base, err = m.Driver(context.Background(), mock.Name); err != nil {
			b.Fatal(err)
		}
	}
	td := &timedDriver{Driver: base, started: make(chan time.Time, 16)}
	cd := &countingDriver{Driver: td}
	n := w.newNodeResync("bench-node", cd, "", 0) // the agent's default resync period
	defer n.stop(true)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		if settled && i > 0 {
			b.StopTimer()
			waitSettled(b, n, fmt.Sprintf("j%d", i-1), deployments)
			b.StartTimer()
		}
		j := mockJob(fmt.Sprintf("j%d", i), 0, nil)
		if !deployments {
			j.Groups[0].Update.MaxParallel = 0 // no deployment: nothing to write but the allocation
		}
		w.log.Debug("bench put", "job", j.ID) // HIVELET_TEST_LOG: where a job's trace starts
		t0 := time.Now()
		w.putJob(j)
		select {
		case t1 := <-td.started:
			lat = append(lat, t1.Sub(t0))
		case <-time.After(10 * time.Second):
			b.Fatalf("job %d never started", i)
		}
	}
	b.StopTimer()
	// This process's CPU (the agent, its embedded server, the benchmark;
	// not the plugin's process) per put, from the first put to the last
	// start: with puts back to back, what each costs the node.
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/put")
	st := n.agent.Status()
	b.ReportMetric(float64(st.Passes)/float64(b.N), "passes/put")
	b.Logf("passes by cause over %d puts: %v; rollout writes: %v", b.N, st.PassCauses, st.RolloutWrites)
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "p99-µs")
	td.mu.Lock()
	b.ReportMetric(float64(percentile(td.calls, 0.5).Microseconds()), "call-p50-µs")
	b.ReportMetric(float64(percentile(td.calls, 0.99).Microseconds()), "call-p99-µs")
	// The path up to the call (watch, pass, runner), put by put: one
	// StartTask per put, in order.
	if len(td.calls) == len(lat) {
		before := make([]time.Duration, len(lat))
		for i := range lat {
			before[i] = lat[i] - td.calls[i]
		}
		b.ReportMetric(float64(percentile(before, 0.5).Microseconds()), "before-call-p50-µs")
		b.ReportMetric(float64(percentile(before, 0.99).Microseconds()), "before-call-p99-µs")
	}
	td.mu.Unlock()
}

// settleQuiet is how long a node makes no pass before a settled put.
const settleQuiet = 25 * time.Millisecond

// waitSettled waits until job's allocation on n is healthy (or running,
// without deployments) and n has made no pass for settleQuiet.
func waitSettled(b *testing.B, n *node, job string, deployments bool) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok := false
		for _, a := range n.agent.Allocs() {
			if a.JobID == job {
				ok = a.ClientStatus == model.ClientRunning && (!deployments || a.DeploymentStatus.IsHealthy())
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("job %s never settled", job)
		}
		time.Sleep(5 * time.Millisecond)
	}
	last, since := n.agent.Status().Passes, time.Now()
	for time.Since(since) < settleQuiet {
		time.Sleep(5 * time.Millisecond)
		if p := n.agent.Status().Passes; p != last {
			last, since = p, time.Now()
		}
		if time.Now().After(deadline) {
			b.Fatalf("the node never went quiet after job %s", job)
		}
	}
}

func BenchmarkKVPutToDriverStartInProcess(b *testing.B) {
	benchPutToStart(b, false, true, false, false)
}

func BenchmarkKVPutToDriverStartViaPlugin(b *testing.B) {
	benchPutToStart(b, true, true, false, false)
}

// BenchmarkKVPutToDriverStartSettledViaPlugin is the plugin case with each
// put made on a quiet node (benchPutToStart's settled).
func BenchmarkKVPutToDriverStartSettledViaPlugin(b *testing.B) {
	benchPutToStart(b, true, true, false, true)
}

// BenchmarkKVPutToDriverStartSettledInProcess is the in-process case with
// each put made on a quiet node.
func BenchmarkKVPutToDriverStartSettledInProcess(b *testing.B) {
	benchPutToStart(b, false, true, false, true)
}

// BenchmarkKVPutToDriverStartNarrowedViaPlugin is the plugin case on a
// node that narrows its watches and stewards every job: each new job is
// held until its allocations are watched (watch_held), and past
// maxJobFilters jobs the allocation and rollout buckets are watched whole.
func BenchmarkKVPutToDriverStartNarrowedViaPlugin(b *testing.B) {
	benchPutToStart(b, true, true, true, false)
}

// BenchmarkKVPutToDriverStartNoDeployment is the in-process case with jobs
// that create no deployment (max_parallel = 0), to weigh the deployments'
// background work in the same run.
func BenchmarkKVPutToDriverStartNoDeployment(b *testing.B) {
	benchPutToStart(b, false, false, false, false)
}

// BenchmarkPassWith1000Allocations times one reconcile pass (nothing to do)
// over a node running one job with 1,000 mock allocations.
func BenchmarkPassWith1000Allocations(b *testing.B) {
	w := newWorld(b)
	defer w.emb.Shutdown()
	defer w.conn.Close()
	n := w.newNode("bench-node", nil, "")
	defer n.stop(true)
	j := mockJob("big", 0, nil)
	j.Groups[0].Count = 1000
	j.Groups[0].Update.MaxParallel = 0
	w.putJob(j)
	deadline := time.Now().Add(120 * time.Second)
	for {
		running := 0
		for _, a := range n.agent.Allocs() {
			if a.ClientStatus == model.ClientRunning {
				running++
			}
		}
		if running == 1000 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of 1000 allocations running", running)
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.cancel() // stop the loop: the benchmark drives the passes
	<-n.done
	ctx := context.Background()
	// pass: the whole pass; reconcile: the reconcile it runs (the input
	// built from the same allocations and view, and the plan), for the
	// ratio of the scale issue (a pass ≤ 1.3× its reconcile).
	// cpu-ns/op is the process's CPU per op (user + system, the GC's
	// included): the steadier figure on a shared machine, where the wall
	// time of either half moves by a third from run to run.
	cpuPerOp := func(b *testing.B, cpu0 time.Duration) {
		b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	b.Run("pass", func(b *testing.B) {
		cpu0 := processCPU()
		for b.Loop() {
			n.agent.Pass(ctx)
		}
		cpuPerOp(b, cpu0)
		if c := n.agent.Status().LastCounts; c.Ignore != 1000 || c.Place+c.Stop+c.Update != 0 {
			b.Fatalf("the pass did not see a converged node: %+v", c)
		}
	})
	own := n.agent.Allocs()
	self := n.record()
	view := n.src.View()
	nodes := view.NodeList()
	b.Run("reconcile", func(b *testing.B) {
		cpu0 := processCPU()
		for b.Loop() {
			in := buildInput(j, self, own, fleetFacts{Nodes: nodes}, time.Now(), nil)
			if p, err := reconcile.ReconcileNode(in, self.ID); err != nil || len(p.Ignore) != 1000 {
				b.Fatalf("%v %d", err, len(p.Ignore))
			}
		}
		cpuPerOp(b, cpu0)
	})
}

// BenchmarkKVPutToWatchDelivery is the floor of the two above, measured in
// the same run: from the put of a job to the fleet view holding it (watch
// delivery and apply), with no reconcile and no driver.
func BenchmarkKVPutToWatchDelivery(b *testing.B) {
	w := newWorld(b)
	defer w.emb.Shutdown()
	defer w.conn.Close()
	src := fleetSource(w)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go src.Run(ctx)
	<-src.Synced()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := mockJob(fmt.Sprintf("j%d", i), 0, nil)
		t0 := time.Now()
		w.putJob(j)
		for {
			if _, ok := src.View().Jobs.Get(jobKey(j.ID)); ok {
				break
			}
			select {
			case <-src.Changed():
			case <-time.After(10 * time.Second):
				b.Fatalf("job %d never seen", i)
			}
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "p99-µs")
}
