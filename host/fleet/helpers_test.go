package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/testutil"
)

func testLog(t *testing.T) (*slog.Logger, *testutil.SyncBuffer) {
	buf := &testutil.SyncBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// countingObserver counts what the source makes visible.
type countingObserver struct {
	mu       sync.Mutex
	restarts map[string]int
	rejected map[string]int
	states   []ConnState
}

func newObs() *countingObserver {
	return &countingObserver{restarts: map[string]int{}, rejected: map[string]int{}}
}

func (o *countingObserver) WatchRestarted(bucket, reason string) {
	o.mu.Lock()
	o.restarts[bucket+"/"+reason]++
	o.mu.Unlock()
}

func (o *countingObserver) DeclarationRejected(bucket, key string) {
	o.mu.Lock()
	o.rejected[bucket+"/"+key]++
	o.mu.Unlock()
}

func (o *countingObserver) ConnState(s ConnState) {
	o.mu.Lock()
	o.states = append(o.states, s)
	o.mu.Unlock()
}

func (o *countingObserver) get(m func(*countingObserver) map[string]int, k string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return m(o)[k]
}

func startServer(t testing.TB, dir string, port int) *Embedded {
	t.Helper()
	e, err := StartEmbedded(context.Background(), EmbeddedConfig{StoreDir: dir, Port: port, ServerName: "test-" + fmt.Sprint(port)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	return e
}

func connect(t testing.TB, url string, log *slog.Logger, obs Observer) *Conn {
	t.Helper()
	c, err := Connect(context.Background(), ConnConfig{URLs: []string{url}, RequestTimeout: 2 * time.Second, FailFast: true}, log, obs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func jobJSON(id string, version int, extra string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"type":"system","version":%d,"groups":[{"name":"g","count":1,"tasks":[{"name":"t","driver":"mock"}]}]%s}`, id, version, extra)
}

func putRaw(t testing.TB, st *Store, key string, v []byte) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rev, err := st.Jobs.Put(ctx, key, v)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return rev
}

func runSource(t testing.TB, st *Store, cfg SourceConfig) *Source {
	t.Helper()
	src := NewSource(st, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return src
}

// watcherLog records the watchers a source creates, in order.
type watcherLog struct {
	mu sync.Mutex
	ws []jetstream.KeyWatcher
}

func (l *watcherLog) all() []jetstream.KeyWatcher {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ws)
}

// runWatchedSource is runSource with every watcher the source creates
// recorded (its watchHook), for tests that end one under it.
func runWatchedSource(t testing.TB, st *Store, cfg SourceConfig) (*Source, *watcherLog) {
	t.Helper()
	src := NewSource(st, cfg)
	l := &watcherLog{}
	src.watchHook = func(_ string, w jetstream.KeyWatcher) jetstream.KeyWatcher {
		l.mu.Lock()
		l.ws = append(l.ws, w)
		l.mu.Unlock()
		return w
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return src, l
}

func waitSynced(t testing.TB, src *Source) {
	t.Helper()
	select {
	case <-src.Synced():
	case <-time.After(10 * time.Second):
		t.Fatal("source never synced")
	}
}

func jobVersion(v *View, id string) (uint64, bool) {
	st, ok := v.Job("", id)
	if !ok || st.Value == nil {
		return 0, false
	}
	return st.Value.Version, true
}

func hasJob(src *Source, id string, version uint64) func() bool {
	return func() bool {
		v, ok := jobVersion(src.View(), id)
		return ok && v == version
	}
}

func mustEnsure(t testing.TB, c *Conn, o BucketOptions) *Store {
	t.Helper()
	st, err := EnsureBuckets(context.Background(), c, Names("t"), o)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func deployment(job string, version uint64) *model.Deployment {
	return &model.Deployment{ID: fmt.Sprintf("%s-%d", job, version), JobID: job, JobVersion: version,
		Status: model.DeploymentRunning, TaskGroups: map[string]*model.DeploymentState{"g": {DesiredTotal: 1}}}
}

func nodeRecord(id string) *model.Node {
	return &model.Node{ID: id, Name: id, Datacenter: "dc1", NodePool: "default", Status: model.NodeStatusReady,
		Eligibility: model.Eligible, Attributes: map[string]string{}, Meta: map[string]string{}}
}

var _ = strings.Contains
var _ = wanted.JobKey
