package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	hostnode "github.com/hivelet/hivelet/host/node"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/host/rollout"
	"github.com/hivelet/hivelet/host/state"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/mock"
	"github.com/hivelet/hivelet/sdk/driver"
)

// countingDriver wraps a driver and counts the calls the tests assert on.
type countingDriver struct {
	driver.Driver
	starts, recovers, stops atomic.Int64
	startedAt               chan time.Time // optional: one value per StartTask call
}

// WaitTaskFunc keeps the wrapped driver's callback wait (driver.WaitNotifier)
// visible, as the agent's own driver wrapper does.
func (c *countingDriver) WaitTaskFunc(ctx context.Context, taskID string, fn func(*driver.ExitResult)) error {
	return driver.WaitFunc(ctx, c.Driver, taskID, fn)
}

func (c *countingDriver) StartTask(ctx context.Context, cfg *driver.TaskConfig) (*driver.TaskHandle, error) {
	c.starts.Add(1)
	if c.startedAt != nil {
		select {
		case c.startedAt <- time.Now():
		default:
		}
	}
	return c.Driver.StartTask(ctx, cfg)
}
func (c *countingDriver) RecoverTask(ctx context.Context, h *driver.TaskHandle) error {
	c.recovers.Add(1)
	return c.Driver.RecoverTask(ctx, h)
}
func (c *countingDriver) StopTask(ctx context.Context, id string, t time.Duration, sig string) error {
	c.stops.Add(1)
	return c.Driver.StopTask(ctx, id, t, sig)
}

// drivers is an in-process Drivers: name → driver, with a switch to make
// one unreachable.
type drivers struct {
	mu   sync.Mutex
	m    map[string]driver.Driver
	down map[string]error
}

func (d *drivers) Driver(_ context.Context, name string) (driver.Driver, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.down[name]; err != nil {
		return nil, err
	}
	drv, ok := d.m[name]
	if !ok {
		return nil, fmt.Errorf("no driver %q", name)
	}
	return drv, nil
}

// world is one embedded NATS server with the buckets, shared by the agents
// and the "CLI" of a test.
type world struct {
	t     testing.TB
	emb   *fleet.Embedded
	conn  *fleet.Conn
	store *fleet.Store
	log   *slog.Logger
	// watchAll: the agents watch every allocation (Config.WatchAllAllocs),
	// for a comparison with the narrowed watches.
	watchAll bool
	// passCPU: the agents measure their passes' CPU (Config.PassCPU).
	passCPU bool
	// narrowDefault: the agents narrow their watches by the agent's
	// default rule (above DefaultNarrowAbove live nodes), not always.
	narrowDefault bool
	// stores, on a cluster (newClusterWorld), are one store per server's
	// connection: node k talks to server k mod 3. Empty: every node uses
	// store.
	stores []*fleet.Store
	nodes  atomic.Int64
	// connPerNode: every node started gets a NATS connection of its own
	// to the single server (in-process), as a fleet's agents each have
	// theirs, not the world's one. The benchmark sets it: a thousand
	// agents' deliveries on one connection made the server drop it as a
	// slow consumer, and every drop restarted every agent's watches.
	connPerNode bool
	ttl         time.Duration // the nodes bucket's TTL the world was made with
	// beatTimes: how long the heartbeaters' writes took to be answered
	// (or to fail), fleet-wide.
	beatTimes beatTimes
}

// beatTimes counts heartbeat writes by how long they took: the benchmark
// reports how many outlived the request timeout (3 s here), which a
// heartbeat no longer gives up at.
type beatTimes struct {
	writes, overRequest atomic.Int64
	maxNanos            atomic.Int64
}

func (b *beatTimes) note(d time.Duration) {
	b.writes.Add(1)
	if d > 3*time.Second {
		b.overRequest.Add(1)
	}
	for {
		m := b.maxNanos.Load()
		if int64(d) <= m || b.maxNanos.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// timedNodeWriter is a node's writer timed into beatTimes.
type timedNodeWriter struct {
	*fleet.NodeWriter
	t *beatTimes
}

func (w timedNodeWriter) PutNode(ctx context.Context, n *model.Node) (uint64, error) {
	at := time.Now()
	defer func() { w.t.note(time.Since(at)) }()
	return w.NodeWriter.PutNode(ctx, n)
}

func (w timedNodeWriter) PutNodeTTL(ctx context.Context, n *model.Node, ttl time.Duration) (uint64, error) {
	at := time.Now()
	defer func() { w.t.note(time.Since(at)) }()
	return w.NodeWriter.PutNodeTTL(ctx, n, ttl)
}

// storeFor is the store the next node talks through.
func (w *world) storeFor() *fleet.Store {
	if len(w.stores) == 0 && w.connPerNode {
		return w.ownStore()
	}
	if len(w.stores) == 0 {
		return w.store
	}
	return w.stores[int(w.nodes.Add(1))%len(w.stores)]
}

// ownStore opens the buckets on a new in-process connection (loopback TCP
// with HIVELET_FLEET_CONN=tcp), closed when the test ends; a busy server
// gets half a minute to answer.
func (w *world) ownStore() *fleet.Store {
	w.t.Helper()
	var st *fleet.Store
	testutil.Eventually(w.t, 30*time.Second, "a node's own connection and buckets", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cfg := fleet.ConnConfig{InProcess: w.emb.Server(), RequestTimeout: 3 * time.Second}
		if os.Getenv("HIVELET_FLEET_CONN") == "tcp" { // loopback TCP, as a fleet's agents connect
			cfg = fleet.ConnConfig{URLs: []string{w.emb.ClientURL()}, RequestTimeout: 3 * time.Second}
		}
		conn, err := fleet.Connect(ctx, cfg, w.log, nil)
		if err != nil {
			return false
		}
		if st, err = fleet.EnsureBuckets(ctx, conn, fleet.Names(""), fleet.BucketOptions{NodeTTL: w.ttl}); err != nil {
			conn.Close()
			return false
		}
		w.t.Cleanup(conn.Close)
		return true
	})
	return st
}

// newClusterWorld is newWorldTTL on a three-server JetStream cluster on
// loopback with R3 buckets: the agents are spread over the servers, one
// client connection per server (as a fleet's agents connect to the server
// nearest them), and the test's own store talks to the first.
func newClusterWorld(t testing.TB, ttl time.Duration) *world {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := testLogger(t)
	ports := []int{testutil.FreePort(t), testutil.FreePort(t), testutil.FreePort(t)}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	w := &world{t: t, log: log}
	// All three servers first: an R3 bucket needs three servers up, so
	// none can be made while the first waits alone.
	servers := make([]*fleet.Embedded, len(ports))
	for i, p := range ports {
		e, err := fleet.StartEmbedded(ctx, fleet.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1, ServerName: fmt.Sprintf("c%d", i),
			Cluster: &fleet.ClusterConfig{Name: "hivelet-bench", Port: p, Routes: routes}, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Shutdown)
		servers[i] = e
	}
	for i, e := range servers {
		conn, err := fleet.Connect(ctx, fleet.ConnConfig{URLs: []string{e.ClientURL()}, RequestTimeout: 5 * time.Second}, log, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		if i == 0 {
			w.emb, w.conn = e, conn
		}
		var st *fleet.Store
		testutil.Eventually(t, 30*time.Second, "the R3 buckets on server "+e.ClientURL(), func() bool {
			st, err = fleet.EnsureBuckets(ctx, conn, fleet.Names(""), fleet.BucketOptions{NodeTTL: ttl, Replicas: 3})
			return err == nil
		})
		w.stores = append(w.stores, st)
	}
	w.store = w.stores[0]
	return w
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("HIVELET_TEST_LOG") != "" {
		// Microseconds: a trace of one job's way from put to start.
		micro := func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.String(slog.TimeKey, a.Value.Time().Format("15:04:05.000000"))
			}
			return a
		}
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: micro}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newWorld(t testing.TB) *world { return newWorldTTL(t, 0) }

// newWorldTTL is newWorld with the nodes bucket's TTL (0: the default).
// Agents heartbeat at a third of it.
func newWorldTTL(t testing.TB, ttl time.Duration) *world {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	log := testLogger(t)
	emb, err := fleet.StartEmbedded(ctx, fleet.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	conn, err := fleet.Connect(ctx, fleet.ConnConfig{InProcess: emb.Server(), RequestTimeout: 3 * time.Second}, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	st, err := fleet.EnsureBuckets(ctx, conn, fleet.Names(""), fleet.BucketOptions{NodeTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, emb: emb, conn: conn, store: st, log: log, ttl: ttl}
}

func (w *world) putJob(j *model.Job) {
	w.t.Helper()
	// A put waits its turn on a server that many in-process agents keep
	// busy: its deadline is generous, the tests' conditions are not.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := w.store.PutJob(ctx, j); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) putRaw(key string, value []byte) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := w.store.Jobs.Put(ctx, key, value); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) deployment(ns, job string, version uint64) *model.Deployment {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, _, err := w.store.GetDeployment(ctx, ns, job, version)
	if err != nil {
		return nil
	}
	return d
}

// node is one agent on the world, with its own state dir and mock driver.
type node struct {
	w       *world
	id      string
	dir     string
	mock    *countingDriver
	drivers *drivers
	st      *state.Store
	store   *fleet.Store // the buckets as this node's connection opened them
	src     *fleet.Source
	agent   *Agent
	cancel  context.CancelFunc
	done    chan struct{}
	resync  time.Duration
	// pending, when set before start, is the agent's PolicyPending.
	pending func(*model.Job) (bool, string)
	// completion, when set before start, is the agent's Completion.
	completion reconcile.CompletionDecider
	// metrics, when set before start, is the agent's Metrics.
	metrics Metrics
	// startsFirst, when set before start, is the agent's StartsFirst.
	startsFirst time.Duration
	// manual, when set before start, runs no agent loop: the test makes
	// the passes (the source, heartbeats and runners run as ever).
	manual bool
	// protocol, when set before start, is the rollout protocol level its
	// record advertises (0: rollout.HandoffProtocol, this agent's).
	protocol int
	// driverDown makes the node's record say its mock driver is unhealthy
	// (the fingerprint of a driver whose plugin died).
	driverDown atomic.Bool
	// hb is the node's heartbeater (its status counts lost answers).
	hb *hostnode.Heartbeater
}

// record is the node's current record, with the time it is built at as
// its heartbeat time, as the daemon's (host/node.Record).
func (n *node) record() *model.Node {
	r := nodeRecord(n.id)
	if n.protocol != 0 {
		r.RolloutProtocol = n.protocol
	}
	r.HeartbeatAt = time.Now().UTC()
	if n.driverDown.Load() {
		r.Drivers["mock"] = model.DriverInfo{Detected: true, Healthy: false, HealthDesc: "plugin exited"}
	}
	return r
}

func (w *world) newNode(id string, mockDrv *countingDriver, dir string) *node {
	return w.newNodeResync(id, mockDrv, dir, 500*time.Millisecond)
}

// newNodeResync is newNode with the period of the full backstop pass (tests
// use a short one; benchmarks the agent's default, 0).
func (w *world) newNodeResync(id string, mockDrv *countingDriver, dir string, resync time.Duration) *node {
	w.t.Helper()
	return w.newNodeWith(id, mockDrv, dir, resync, nil)
}

// newNodeWith is newNodeResync with a hook that sets the node up before
// its agent starts (its completion policy, say).
func (w *world) newNodeWith(id string, mockDrv *countingDriver, dir string, resync time.Duration, setup func(*node)) *node {
	w.t.Helper()
	if mockDrv == nil {
		mockDrv = &countingDriver{Driver: mock.New()}
	}
	if dir == "" {
		dir = w.t.TempDir()
	}
	n := &node{w: w, id: id, dir: dir, mock: mockDrv, resync: resync, drivers: &drivers{m: map[string]driver.Driver{"mock": mockDrv}, down: map[string]error{}}}
	if setup != nil {
		setup(n)
	}
	n.start()
	return n
}

func nodeRecord(id string) *model.Node {
	return &model.Node{ID: id, Name: id, Datacenter: "dc1", NodePool: "default", Status: model.NodeStatusReady, Eligibility: model.Eligible,
		Attributes: map[string]string{"kernel.name": "linux", "driver.mock": "1"}, Meta: map[string]string{},
		Drivers: map[string]model.DriverInfo{"mock": {Detected: true, Healthy: true}}, RolloutProtocol: rollout.HandoffProtocol}
}

func (n *node) start() {
	t := n.w.t
	t.Helper()
	// Every goroutine this node starts (its source, connection, heartbeat,
	// agent loop and runners) carries the label node=<id>, so a CPU
	// profile of a fleet run can be read one agent at a time
	// (go tool pprof -tagfocus node=node-156).
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("node", n.id)))
	defer pprof.SetGoroutineLabels(context.Background())
	st, err := state.Open(n.dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	n.st = st
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	store := n.w.storeFor()
	n.store = store
	n.src = fleet.NewSource(store, fleet.SourceConfig{Log: n.w.log})
	go n.src.Run(ctx)
	rec := nodeRecord(n.id)
	if n.protocol != 0 {
		rec.RolloutProtocol = n.protocol
	}
	// A busy server (a thousand agents pulling the buckets as they
	// start) may miss one write's deadline: try again for five minutes,
	// as the daemon would forever (a retried write is logged: how long the
	// server kept a write waiting is a figure of the run).
	var err2 error
	began := time.Now()
	for try := 0; time.Since(began) < 5*time.Minute; try++ {
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err2 = store.ForNode(n.id).PutNode(wctx, rec)
		wcancel()
		if try == 6 { // 30 s without an answer: where is everyone waiting?
			dumpGoroutines(t, n.id+"-register")
		}
		if err2 == nil {
			if try > 0 {
				t.Logf("%s: node record written at try %d, after %v", n.id, try+1, time.Since(began).Round(time.Second))
			}
			break
		}
	}
	if err2 != nil {
		t.Fatalf("%v (tried for %v)", err2, time.Since(began).Round(time.Second))
	}
	// The node's heartbeat, as the daemon's: its record is written with
	// the TTL the fleet's size asks for (node.Liveness, from the agent's
	// count of the fleet) until the agent stops; then it expires, as a
	// dead node's does.
	var counted atomic.Pointer[Agent]
	live := &hostnode.Liveness{Base: store.NodeTTL(), Ceiling: store, Fleet: func() hostnode.FleetFacts {
		if a := counted.Load(); a != nil {
			return a.Fleet()
		}
		return hostnode.FleetFacts{}
	}}
	hb := hostnode.NewHeartbeater(hostnode.HeartbeatConfig{Period: store.NodeTTL() / 3, Plan: live.Plan},
		timedNodeWriter{store.ForNode(n.id), &n.w.beatTimes}, n.record, nil)
	n.hb = hb
	go func() { _ = hb.Run(ctx) }()
	narrowAbove := -1 // the fleet tests run the narrowed watches whatever their size
	if n.w.narrowDefault {
		narrowAbove = 0
	}
	a, err := New(Config{
		Node:          n.record,
		Source:        n.src,
		Allocs:        store.ForNode(n.id),
		Deployments:   store,
		Store:         st,
		Drivers:       n.drivers,
		Validate:      driver.ValidateConfig,
		AllocRoot:     n.dir + "/alloc",
		Logger:        n.w.log,
		Resync:        n.resync,
		PolicyPending: n.pending,
		Completion:    n.completion,
		Metrics:       n.metrics,
		ServerNow:     n.src.ServerNow,
		NodeTTL:       store.NodeTTL(),
		LiveTTL:       live.TTL,
		BootID:        fmt.Sprintf("%s-%d", n.id, time.Now().UnixNano()),
		// Only the first nodes of each ranking see every allocation.
		NarrowAbove:    narrowAbove,
		WatchAllAllocs: n.w.watchAll,
		PassCPU:        n.w.passCPU,
		StartsFirst:    n.startsFirst,
	})
	if err != nil {
		t.Fatal(err)
	}
	n.agent = a
	counted.Store(a)
	if err := a.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	n.done = make(chan struct{})
	if n.manual {
		close(n.done)
		return
	}
	go func() {
		defer close(n.done)
		_ = a.Run(ctx)
	}()
}

// stop ends the agent; stopTasks as in dev mode.
func (n *node) stop(stopTasks bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n.cancel()
	<-n.done
	n.agent.Shutdown(ctx, stopTasks)
	n.st.Close()
}

func (n *node) live(job string) []*model.Allocation {
	var out []*model.Allocation
	for _, a := range n.agent.Allocs() {
		if a.JobID == job && !a.Terminal() {
			out = append(out, a)
		}
	}
	return out
}

func mockJob(id string, version uint64, cfg map[string]any) *model.Job {
	return &model.Job{ID: id, Type: model.JobTypeSystem, Version: version, Datacenters: []string{"dc1"}, Groups: []*model.Group{{
		Name: "g", Count: 1,
		Update:  &model.UpdateStrategy{MaxParallel: 1, MinHealthyTime: model.Duration(100 * time.Millisecond), HealthyDeadline: model.Duration(5 * time.Second), ProgressDeadline: model.Duration(10 * time.Second)},
		Restart: &model.RestartPolicy{Attempts: 1, Interval: model.Duration(time.Minute), Delay: model.Duration(10 * time.Millisecond), Mode: model.RestartModeFail},
		Tasks:   []*model.Task{{Name: "t", Driver: "mock", Config: cfg, KillTimeout: model.Duration(time.Second)}},
	}}}
}

func jobKey(id string) string { return wanted.JobKey("", id) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func fleetSource(w *world) *fleet.Source {
	return fleet.NewSource(w.store, fleet.SourceConfig{Log: w.log})
}

// waitQuiet waits until the node's agent has made a pass and then none
// for d.
func (n *node) waitQuiet(t *testing.T, d time.Duration) {
	t.Helper()
	waitStill(t, 10*time.Second, "the node quiet", d, func() uint64 { return n.agent.Status().Passes })
}

// waitStill waits, within limit, until count is above zero and has not
// moved for d.
func waitStill(t *testing.T, limit time.Duration, what string, d time.Duration, count func() uint64) {
	t.Helper()
	last, since := count(), time.Now()
	testutil.Eventually(t, limit, what, func() bool {
		if c := count(); c != last {
			last, since = c, time.Now()
		}
		return last > 0 && time.Since(since) > d
	})
}

// waitPasses waits until the node's agent made k more passes (full passes
// come every resync period): a "nothing happened" check waits for passes
// that could have made it happen, never for a length of time.
func (n *node) waitPasses(t *testing.T, k uint64) {
	t.Helper()
	base := n.agent.Status().Passes
	testutil.Eventually(t, 20*time.Second, fmt.Sprintf("%d more passes of %s", k, n.id), func() bool {
		return n.agent.Status().Passes >= base+k
	})
}

// dumpGoroutines writes the process's goroutines, grouped by stack, to a
// file in the test's temporary directory's parent (kept after the run), and
// logs its path: what a stalled fleet run waits on.
func dumpGoroutines(t testing.TB, what string) {
	f, err := os.CreateTemp("", "hivelet-goroutines-"+what+"-*.txt")
	if err != nil {
		t.Logf("goroutine dump: %v", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("goroutine").WriteTo(f, 1); err != nil {
		t.Logf("goroutine dump: %v", err)
		return
	}
	t.Logf("goroutines at %s: %s", what, f.Name())
}
