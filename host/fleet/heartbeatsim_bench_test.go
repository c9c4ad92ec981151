package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/testutil"
)

// BenchmarkHeartbeatFleet simulates a fleet's heartbeats and the watches
// of them (the scale issue, part 4): HIVELET_SIM_NODES simulated agents
// (default 10,000, no drivers: each is its node record, ~0.8 KB, written
// once per HIVELET_SIM_PERIOD, default 10 s, at evenly spread offsets)
// against HIVELET_SIM_SERVERS JetStream servers (3: a routed cluster on
// loopback with R3 buckets; 1: one server, R1), watched by
// HIVELET_SIM_WATCHERS real fleet sources (default 10) of the nodes bucket,
// each on its own connection, the connections spread over the servers.
// HIVELET_SIM_WATCH picks the watchers: "source" (default, the agent's
// own), "woken" (the agent's source with two consumers of its change
// signal, as the daemon has: see wokenBy), "raw" (a bare KV watch with
// values) or "meta" (a presence-only watch: metadata without values). A
// "source" or "woken" watcher's view is taken every HIVELET_SIM_VIEW_EVERY
// (default 1 s), as an agent's passes take it.
// Everything runs in this process, so the CPU figure is the servers', the
// writers' and the watchers' together: the per-watcher cost comes from two
// runs that differ only in the watcher count.
//
// It reports the registration rate, the watchers' boot pull of the whole
// bucket, then over HIVELET_SIM_WINDOW (default 20 s) the heartbeat writes
// per second achieved against those asked, the put latency (p50, p99),
// what each watcher received per second and as a fraction of the writes
// (1.0: it keeps up), and the CPU cores the process used.
//
//	go test -run '^$' -bench HeartbeatFleet -benchtime 1x -timeout 30m ./host/fleet/
//	HIVELET_SIM_WATCHERS=0 go test -run '^$' -bench HeartbeatFleet -benchtime 1x ./host/fleet/
func BenchmarkHeartbeatFleet(b *testing.B) {
	nodes := simEnvInt(b, "HIVELET_SIM_NODES", 10000)
	period := simEnvDur(b, "HIVELET_SIM_PERIOD", 10*time.Second)
	watchers := simEnvInt(b, "HIVELET_SIM_WATCHERS", 10)
	servers := simEnvInt(b, "HIVELET_SIM_SERVERS", 3)
	window := simEnvDur(b, "HIVELET_SIM_WINDOW", 20*time.Second)
	if servers != 1 && servers != 3 {
		b.Fatalf("HIVELET_SIM_SERVERS=%d: 1 or 3", servers)
	}
	viewPeriod := simEnvDur(b, "HIVELET_SIM_VIEW_EVERY", time.Second)
	watch := os.Getenv("HIVELET_SIM_WATCH")
	switch watch {
	case "":
		watch = "source"
	case "source", "woken", "raw", "meta":
	default:
		b.Fatalf("HIVELET_SIM_WATCH=%q: source, woken, raw or meta", watch)
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		simHeartbeats(b, nodes, period, watchers, servers, window, watch, viewPeriod)
	}
}

// simWatcher is one watcher of the nodes bucket: the agent's fleet source
// ("source"), or a bare KV watch that counts what it receives, with the
// values ("raw") or only their metadata ("meta": a presence-only watch,
// jetstream.MetaOnly).
type simWatcher interface{ entries() uint64 }

type sourceWatcher struct{ *Source }

func (s sourceWatcher) entries() uint64 { return s.Delivered()[KindNodes].Entries }

type rawWatcher struct{ n atomic.Uint64 }

func (r *rawWatcher) entries() uint64 { return r.n.Load() }

// startRawWatcher watches the nodes bucket whole and counts its entries
// (the initial values too, then every update) until the benchmark ends.
func startRawWatcher(b *testing.B, st *Store, meta bool) *rawWatcher {
	var opts []jetstream.WatchOpt
	if meta {
		opts = append(opts, jetstream.MetaOnly())
	}
	ctx, cancel := context.WithCancel(context.Background())
	kw, err := st.Nodes.WatchAll(ctx, opts...)
	if err != nil {
		b.Fatal(err)
	}
	r := &rawWatcher{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range kw.Updates() {
			if e != nil {
				r.n.Add(1)
			}
		}
	}()
	b.Cleanup(func() { cancel(); _ = kw.Stop(); <-done })
	return r
}

func simHeartbeats(b *testing.B, nodes int, period time.Duration, watchers, servers int, window time.Duration, watch string, viewPeriod time.Duration) {
	var urls []string
	if servers == 3 {
		for _, s := range startCluster(b) {
			urls = append(urls, s.ClientURL())
		}
	} else {
		urls = []string{startServer(b, b.TempDir(), -1).ClientURL()}
	}
	log := slog.New(slog.DiscardHandler) // an agent's debug lines are off by default
	opts := BucketOptions{Replicas: servers, NodeTTL: 3 * period}
	// Create the buckets that mustEnsure opens below once the cluster can
	// place them (a new cluster refuses R3 streams for a moment).
	testutil.Eventually(b, 60*time.Second, "the buckets", func() bool {
		c := connect(b, urls[0], log, nil)
		if _, err := EnsureBuckets(context.Background(), c, Names("t"), opts); err != nil {
			b.Logf("creating the buckets: %v (retrying)", err)
			return false
		}
		return true
	})

	// The writers: a few connections, each a store on one server, and a
	// pool of workers taking the node indices due.
	const conns, workers = 8, 64
	writers := make([]*Store, conns)
	for k := range writers {
		writers[k] = mustEnsure(b, connect(b, urls[k%len(urls)], log, nil), opts)
	}
	record := func(i int, at time.Time) []byte {
		n := simNode(i)
		n.HeartbeatAt = at
		v, err := json.Marshal(n)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	var (
		putErrs atomic.Uint64
		latMu   sync.Mutex
		lats    []time.Duration
		written atomic.Uint64
	)
	due := make(chan int, workers)
	var wg sync.WaitGroup
	for k := 0; k < workers; k++ {
		st := writers[k%conns]
		wg.Go(func() {
			var mine []time.Duration
			for i := range due {
				v := record(i, time.Now())
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := st.Nodes.Put(ctx, wanted.NodeKey(simID(i)), v)
				cancel()
				if err != nil {
					putErrs.Add(1)
					continue
				}
				written.Add(1)
				mine = append(mine, time.Since(t0))
			}
			latMu.Lock()
			lats = append(lats, mine...)
			latMu.Unlock()
		})
	}
	regStart := time.Now()
	for i := 0; i < nodes; i++ {
		due <- i
	}
	for written.Load()+putErrs.Load() < uint64(nodes) {
		time.Sleep(10 * time.Millisecond)
	}
	reg := time.Since(regStart)
	b.ReportMetric(float64(nodes)/reg.Seconds(), "registrations/s")
	latMu.Lock()
	lats = lats[:0]
	latMu.Unlock()

	// The watchers, each on its own connection; the boot pull (or the
	// initial values) of every record is timed.
	srcs := make([]simWatcher, watchers)
	var wakes atomic.Uint64 // the woken watchers' consumers' wakes
	bootStart := time.Now()
	for k := range srcs {
		st := mustEnsure(b, connect(b, urls[k%len(urls)], log, nil), opts)
		switch watch {
		case "source", "woken":
			src := runSource(b, st, SourceConfig{Log: log, Kinds: []string{KindNodes}})
			srcs[k] = sourceWatcher{src}
			viewEvery(b, src, viewPeriod)
			if watch == "woken" {
				wokenBy(b, src, &wakes)
			}
		default:
			srcs[k] = startRawWatcher(b, st, watch == "meta")
		}
	}
	for _, s := range srcs {
		testutil.Eventually(b, 5*time.Minute, "a watcher's boot pull", func() bool {
			if src, ok := s.(sourceWatcher); ok {
				v := src.View()
				return v.Synced && v.Nodes.Len() >= nodes
			}
			return s.entries() >= uint64(nodes)
		})
	}
	if watchers > 0 {
		b.ReportMetric(time.Since(bootStart).Seconds(), "boot-pull-s")
	}

	// The window: heartbeats at nodes/period per second, evenly spread.
	delivered := func() (n uint64) {
		for _, s := range srcs {
			n += s.entries()
		}
		return n
	}
	d0, w0, e0, k0 := delivered(), written.Load(), putErrs.Load(), wakes.Load()
	cpu0 := simCPU()
	start := time.Now()
	interval := period / time.Duration(nodes)
	next := 0
	for tick := start; time.Since(start) < window; {
		tick = tick.Add(interval)
		if wait := time.Until(tick); wait > time.Millisecond {
			time.Sleep(wait)
		}
		due <- next
		next = (next + 1) % nodes
	}
	asked := float64(window) / float64(interval)
	close(due)
	wg.Wait()
	elapsed := time.Since(start) // the writes' time
	w := written.Load() - w0
	// Let the watchers take in the last writes (up to 10 s; what they
	// have not by then counts as not kept up with).
	for end := time.Now().Add(10 * time.Second); delivered()-d0 < w*uint64(watchers) && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	cpu := simCPU() - cpu0
	cpuWall := time.Since(start)
	d := delivered() - d0

	latMu.Lock()
	slices.Sort(lats)
	latMu.Unlock()
	pct := func(p float64) float64 {
		if len(lats) == 0 {
			return 0
		}
		return float64(lats[min(int(p*float64(len(lats))), len(lats)-1)]) / float64(time.Millisecond)
	}
	b.ReportMetric(asked/window.Seconds(), "asked-writes/s")
	b.ReportMetric(float64(w)/elapsed.Seconds(), "writes/s")
	b.ReportMetric(pct(0.5), "put-p50-ms")
	b.ReportMetric(pct(0.99), "put-p99-ms")
	b.ReportMetric(float64(putErrs.Load()-e0), "put-errors")
	if watchers > 0 {
		b.ReportMetric(float64(d)/float64(watchers)/elapsed.Seconds(), "deliveries/s/watcher")
		b.ReportMetric(float64(d)/float64(watchers)/float64(max(w, 1)), "delivered/written")
		if watch == "woken" {
			b.ReportMetric(float64(wakes.Load()-k0)/float64(watchers)/elapsed.Seconds(), "wakes/s/watcher")
		}
	}
	b.ReportMetric(cpu.Seconds()/cpuWall.Seconds(), "cpu-cores")
	b.Logf("%d nodes every %s on %d server(s), %d %s watchers: %d writes in %s (%.0f asked), %d deliveries, %.1f CPU-s",
		nodes, period, servers, watchers, watch, w, elapsed.Round(time.Millisecond), asked, d, cpu.Seconds())
}

// viewEvery takes a snapshot of src every period until the benchmark
// ends, as an agent's passes do (a pass a second is a fleet agent's
// median during a rollout): a snapshot folds the heartbeats applied since
// the last one (View.NodeBeats), which a source nobody reads keeps
// appending to, so a watcher without it pays for a log no agent keeps.
func viewEvery(b *testing.B, src *Source, period time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = src.View()
			}
		}
	}()
	b.Cleanup(func() { cancel(); <-done })
}

// wokenBy gives src the two consumers of its change signal a daemon's
// source has, each doing on a wake the least its counterpart does: the
// reconcile loop (Changed: the changes since it last read, as
// agent.ownEchoes does to find them heartbeats or its own writes) and the
// policy loader (Subscribe: a View). wakes counts their wakes.
func wokenBy(b *testing.B, src *Source, wakes *atomic.Uint64) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		read := src.Generation()
		for {
			select {
			case <-ctx.Done():
				return
			case <-src.Changed():
			}
			wakes.Add(1)
			gen := src.Generation()
			if _, ok := src.ChangesSince(read, gen); !ok {
				_ = src.View() // a pass would read the view whole
			}
			read = gen
		}
	}()
	ch, unsub := src.Subscribe()
	go func() {
		defer wg.Done()
		defer unsub()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
			}
			wakes.Add(1)
			_ = src.View()
		}
	}()
	b.Cleanup(func() { cancel(); wg.Wait() })
}

// simNode is simulated node i's record, of an agent's size (~0.8 KB).
func simNode(i int) *model.Node {
	n := &model.Node{ID: simID(i), Name: fmt.Sprintf("sim-%05d", i), Datacenter: "dc1", NodePool: "default",
		Status: model.NodeStatusReady, Eligibility: model.Eligible, Meta: map[string]string{"rack": strconv.Itoa(i % 40)},
		Attributes: map[string]string{}}
	for _, kv := range [][2]string{{"kernel.name", "linux"}, {"cpu.arch", "amd64"}, {"os.name", "debian"},
		{"os.version", "12"}, {"unique.hostname", n.Name}, {"unique.network.ip-address", fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)},
		{"cpu.numcores", "2"}, {"memory.totalbytes", "8331399168"}, {"driver.exec", "1"}, {"driver.docker", "1"},
		{"driver.docker.version", "28.1.1"}, {"driver.mock", "1"}, {"hivelet.version", "0.9.0"}, {"hivelet.rollout_protocol", "1"}} {
		n.Attributes[kv[0]] = kv[1]
	}
	return n
}

func simID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

func simCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func simEnvInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: a count", name, v)
	}
	return n
}

func simEnvDur(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("%s=%q: a duration", name, v)
	}
	return d
}
