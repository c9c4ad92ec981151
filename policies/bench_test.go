package policies

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/internal/policywire"
	"github.com/hivelet/hivelet/policies/rules"
	"github.com/hivelet/hivelet/sdk/policy"
)

// Every benchmark here runs with the deadline enforced: the engine's
// default 100 ms per call, WithCloseOnContextDone on (it is always on).
//
// Latency benchmarks time one decision as the reconciler waits for it, with
// a restored instance ready: between timed calls they wait (untimed) for the
// background memory restore, as the agent's sparse decisions do. The
// restore's cost shows in BenchmarkParallelEvaluations, which does not wait.

// latencies records per-call durations and reports median and p99, and
// how many calls faulted (a fault is counted, not fatal: a deadline hit on
// a loaded machine is a result).
type latencies struct {
	d      []time.Duration
	faults int
}

func (l *latencies) time(fn func() error) {
	start := time.Now()
	err := fn()
	l.d = append(l.d, time.Since(start))
	if err != nil {
		l.faults++
	}
}

func (l *latencies) report(b *testing.B) {
	if len(l.d) == 0 {
		return
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	b.ReportMetric(float64(s[len(s)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(s[min(len(s)-1, len(s)*99/100)].Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(l.faults), "faults")
}

// settle waits, untimed, for the engine's background restores.
func settle(b *testing.B, e *Engine) {
	b.StopTimer()
	e.resets.Wait()
	b.StartTimer()
}

// nativeCanary runs the same logic as a module natively, through the same
// pipeline minus WASM: host encoding, the guest's decoding (the shared
// codec, into nodes laid out as the SDK's), the rule, the answer's encoding
// and strict decoding and validation. The rule is handed sdkIn, the same
// input built beforehand with the SDK's NewNode: only the SDK itself can
// hand a rule the nodes it decoded.
func nativeCanary(m *Module, fn func(policy.CanaryInput) (policy.CanaryOutput, error), req reconcile.CanaryRequest, sdkIn policy.CanaryInput) error {
	fields, attr, meta := m.Manifest.keys(params(req.Policy), req.Eligible)
	in := appendCanaryInput(nil, &req, fields, attr, meta)
	if _, _, err := policywire.DecodeCanaryInput(in, bindGuestNode); err != nil {
		return err
	}
	answer, err := fn(sdkIn)
	if err != nil {
		return err
	}
	out, err := policywire.DecodeCanaryOutput(policywire.AppendCanaryOutput(nil, policywire.CanaryOutput(answer)))
	if err != nil {
		return err
	}
	return validateCanary(&req, out)
}

// guestNode has the layout of the SDK's Node (five strings, the key tables,
// an offset), so decoding into it costs what the guest's decoding does.
type guestNode struct {
	f   policywire.NodeFields
	t   *policywire.Tables
	off int32
}

func bindGuestNode(n *guestNode, f policywire.NodeFields, t *policywire.Tables, off int32) {
	*n = guestNode{f, t, off}
}

// sdkCanaryInput is req as the SDK would decode it for module m: the
// attribute and meta keys m's manifest declares.
func sdkCanaryInput(m *Module, req reconcile.CanaryRequest) policy.CanaryInput {
	_, attr, meta := m.Manifest.keys(params(req.Policy), req.Eligible)
	in := policy.CanaryInput{JobID: req.JobID, JobVersion: req.JobVersion, DeploymentID: req.DeploymentID, Group: req.Group,
		Percent: req.Percent, Count: req.Count, Params: params(req.Policy), Existing: req.Existing, Nodes: make([]policy.Node, len(req.Eligible))}
	pick := func(from map[string]string, keys []string) map[string]string {
		out := map[string]string{}
		for _, k := range keys {
			if v, ok := from[k]; ok {
				out[k] = v
			}
		}
		return out
	}
	for i, n := range req.Eligible {
		in.Nodes[i] = policy.NewNode(n.ID, n.Name, n.Datacenter, n.NodePool, n.Class, pick(n.Attributes, attr), pick(n.Meta, meta))
	}
	return in
}

func BenchmarkCanary(b *testing.B) {
	e, _, _ := newTestEngine(b, Options{Deadline: 100 * time.Millisecond})
	for _, p := range []struct {
		name string
		fn   func(policy.CanaryInput) (policy.CanaryOutput, error)
	}{{"percent", rules.Percent}, {"spread", rules.Spread}, {"rendezvous", rules.Rendezvous}, {"labelled", rules.Labelled}} {
		m := loadBuiltin(b, e, p.name)
		for _, n := range []int{10, 1000, 10000} {
			req := canaryReq(genNodes(n, 3), max(1, n/10), &model.PolicyRef{Name: p.name})
			b.Run(fmt.Sprintf("%s/nodes=%d/wasm", p.name, n), func(b *testing.B) {
				var l latencies
				for b.Loop() {
					l.time(func() error { _, err := m.Canary(context.Background(), req); return err })
					settle(b, e)
				}
				l.report(b)
			})
			b.Run(fmt.Sprintf("%s/nodes=%d/native", p.name, n), func(b *testing.B) {
				sdkIn := sdkCanaryInput(m, req)
				var l latencies
				for b.Loop() {
					l.time(func() error { return nativeCanary(m, p.fn, req, sdkIn) })
				}
				l.report(b)
			})
		}
	}
	b.Run("native-default/nodes=1000", func(b *testing.B) {
		req := canaryReq(genNodes(1000, 3), 100, nil)
		var l latencies
		for b.Loop() {
			l.time(func() error { NativeCanary(req); return nil })
		}
		l.report(b)
	})
}

func BenchmarkCompletion(b *testing.B) {
	e, _, _ := newTestEngine(b, Options{Deadline: 100 * time.Millisecond})
	for _, p := range []struct {
		name string
		fn   func(policy.CompletionInput) (policy.CompletionOutput, error)
	}{{"default", rules.CompletionDefault}, {"quorum", rules.Quorum}} {
		m := loadBuiltin(b, e, p.name)
		in := genCompletion(10, time.Unix(1_800_000_000, 0))
		b.Run(p.name+"/groups=10/wasm", func(b *testing.B) {
			var l latencies
			for b.Loop() {
				l.time(func() error { _, err := m.Completion(context.Background(), in); return err })
				settle(b, e)
			}
			l.report(b)
		})
		b.Run(p.name+"/groups=10/native", func(b *testing.B) {
			var l latencies
			for b.Loop() {
				l.time(func() error {
					ci := completionInput(&in)
					decoded, err := policywire.DecodeCompletionInput(policywire.AppendCompletionInput(nil, &ci, ABIVersion))
					if err != nil {
						return err
					}
					answer, err := p.fn(sdkCompletionInput(decoded))
					if err != nil {
						return err
					}
					out, err := policywire.DecodeCompletionOutput(policywire.AppendCompletionOutput(nil, wireCompletionOutput(answer)))
					if err != nil {
						return err
					}
					return validateCompletion(&in, out)
				})
			}
			l.report(b)
		})
	}
	b.Run("native-default/groups=10", func(b *testing.B) {
		in := genCompletion(10, time.Unix(1_800_000_000, 0))
		var l latencies
		for b.Loop() {
			l.time(func() error { NativeCompletion(in); return nil })
		}
		l.report(b)
	})
}

// BenchmarkFreshVersusPooledInstances is the measurement behind pooling:
// a fresh instance per evaluation against a restored one.
func BenchmarkFreshVersusPooledInstances(b *testing.B) {
	for _, fresh := range []bool{true, false} {
		e, _, _ := newTestEngine(b, Options{FreshInstances: fresh, Deadline: 100 * time.Millisecond})
		m := loadBuiltin(b, e, "percent")
		for _, n := range []int{10, 1000} {
			req := canaryReq(genNodes(n, 3), max(1, n/10), &model.PolicyRef{Name: "percent"})
			name := "pooled"
			if fresh {
				name = "fresh"
			}
			b.Run(fmt.Sprintf("%s/nodes=%d", name, n), func(b *testing.B) {
				var l latencies
				for b.Loop() {
					l.time(func() error { _, err := m.Canary(context.Background(), req); return err })
					settle(b, e)
				}
				l.report(b)
			})
		}
	}
}

// BenchmarkColdLoad measures loading the percent module into a new engine
// (agent start): with an empty compilation cache, and with a warm one.
func BenchmarkColdLoad(b *testing.B) {
	wasm, _ := BuiltinWasm("percent")
	load := func(b *testing.B, dir string) {
		e, err := New(context.Background(), Options{CacheDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.Compile(context.Background(), "percent", wasm); err != nil {
			b.Fatal(err)
		}
		e.Close(context.Background())
	}
	b.Run("no-cache", func(b *testing.B) {
		var l latencies
		for b.Loop() {
			dir := b.TempDir()
			l.time(func() error { load(b, dir); return nil })
		}
		l.report(b)
	})
	b.Run("warm-cache", func(b *testing.B) {
		dir := b.TempDir()
		load(b, dir)
		var l latencies
		for b.Loop() {
			l.time(func() error { load(b, dir); return nil })
		}
		l.report(b)
	})
}

// BenchmarkParallelEvaluations reports evaluations per second from two
// goroutines on one module.
func BenchmarkParallelEvaluations(b *testing.B) {
	e, _, _ := newTestEngine(b, Options{Deadline: 100 * time.Millisecond, PoolSize: 4})
	for _, tc := range []struct {
		name string
		call func(*Module) error
	}{
		{"percent/nodes=1000", func() func(*Module) error {
			req := canaryReq(genNodes(1000, 3), 100, &model.PolicyRef{Name: "percent"})
			return func(m *Module) error { _, err := m.Canary(context.Background(), req); return err }
		}()},
		{"default/groups=10", func() func(*Module) error {
			in := genCompletion(10, time.Unix(1_800_000_000, 0))
			return func(m *Module) error { _, err := m.Completion(context.Background(), in); return err }
		}()},
	} {
		name, _, _ := cutSlash(tc.name)
		m := loadBuiltin(b, e, name)
		b.Run(tc.name+"/goroutines=2", func(b *testing.B) {
			var calls, faults atomic.Int64
			b.SetParallelism(1)
			prev := runtime.GOMAXPROCS(2)
			defer runtime.GOMAXPROCS(prev)
			// Warm the pool (instances are created on demand) untimed.
			b.StopTimer()
			var warm sync.WaitGroup
			for range 4 {
				warm.Add(1)
				go func() { defer warm.Done(); _ = tc.call(m) }()
			}
			warm.Wait()
			e.resets.Wait()
			b.StartTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := tc.call(m); err != nil {
						faults.Add(1)
					}
					calls.Add(1)
				}
			})
			b.ReportMetric(float64(calls.Load())/time.Since(start).Seconds(), "evals/s")
			b.ReportMetric(float64(faults.Load()), "faults")
		})
	}
}

func cutSlash(s string) (string, string, bool) {
	for i := range s {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// soakIterations reads HIVELET_POLICY_SOAK: empty means the default,
// 1,500; anything but a positive integer is an error, so a typo cannot
// run zero iterations and pass.
func soakIterations(s string) (int, error) {
	if s == "" {
		return 1500, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("HIVELET_POLICY_SOAK=%q: want a positive number of evaluations", s)
	}
	return n, nil
}

func TestABadSoakCountFails(t *testing.T) {
	for _, c := range []struct {
		env  string
		want int // 0: an error
	}{{"", 1500}, {"20", 20}, {"1e6", 0}, {"0", 0}, {"-5", 0}, {"lots", 0}} {
		n, err := soakIterations(c.env)
		if (err != nil) != (c.want == 0) || n != c.want {
			t.Errorf("HIVELET_POLICY_SOAK=%q: %d, %v; want %d", c.env, n, err, c.want)
		}
	}
}

// TestInstanceMemoryStaysFlat evaluates one pooled instance many times
// (HIVELET_POLICY_SOAK, default 1,500; BENCHMARKS.md records a 1,000,000
// run) and checks that the guest's linear memory never grows and the
// host's heap does not drift. The control is the first evaluation, which
// must answer.
func TestInstanceMemoryStaysFlat(t *testing.T) {
	n, err := soakIterations(os.Getenv("HIVELET_POLICY_SOAK"))
	if err != nil {
		t.Fatal(err)
	}
	e, _, _ := newTestEngine(t, Options{PoolSize: 1})
	m := loadBuiltin(t, e, "default")
	in := genCompletion(10, time.Unix(1_800_000_000, 0))
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	guestPages := func() uint32 {
		e.resets.Wait()
		inst := <-m.idle
		defer func() { m.idle <- inst }()
		return inst.mem.Size() / wasmPage
	}
	if d, err := m.Completion(context.Background(), in); err != nil || d.Decision != reconcile.DecisionContinue {
		t.Fatalf("first evaluation: %+v %v", d, err)
	}
	pages0, heap0 := guestPages(), heap()
	start := time.Now()
	for i := range n {
		if _, err := m.Completion(context.Background(), in); err != nil {
			t.Fatalf("evaluation %d: %v", i, err)
		}
	}
	took := time.Since(start)
	pages1, heap1 := guestPages(), heap()
	t.Logf("%d evaluations in %v; guest memory %d -> %d pages (%d KiB); host heap %d -> %d KiB; live instances %d",
		n, took, pages0, pages1, pages1*64, heap0>>10, heap1>>10, m.live.Load())
	if pages1 != pages0 {
		t.Fatalf("guest memory grew from %d to %d pages", pages0, pages1)
	}
	if heap1 > heap0+8<<20 {
		t.Fatalf("host heap grew from %d to %d bytes", heap0, heap1)
	}
}

// BenchmarkLoadBuiltins measures an agent start: a new engine loading all
// six built-ins concurrently from a warm compilation cache, and the
// process's resident memory growth it causes (compiled code, one instance
// and its snapshot per module).
func BenchmarkLoadBuiltins(b *testing.B) {
	dir := b.TempDir()
	warm, err := New(context.Background(), Options{CacheDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	if err := warm.LoadBuiltins(context.Background()); err != nil {
		b.Fatal(err)
	}
	warm.Close(context.Background())
	var l latencies
	var rss int64
	for b.Loop() {
		b.StopTimer()
		debug.FreeOSMemory()
		before := residentKiB()
		b.StartTimer()
		var e *Engine
		l.time(func() error {
			var err error
			if e, err = New(context.Background(), Options{CacheDir: dir}); err != nil {
				return err
			}
			return e.LoadBuiltins(context.Background())
		})
		rss = max(rss, residentKiB()-before)
		e.Close(context.Background())
	}
	l.report(b)
	b.ReportMetric(float64(rss)/1024, "rss-growth-MiB")
}

// residentKiB reads the process's resident set size (Linux).
func residentKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}
