package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The watch keeps the KV watch's contract: the last value of each key its
// filters match, a nil entry once they are delivered, then each change
// with its operation (a put, a delete, a purge, an expiry marker); from a
// revision on when resumed; and Stop closes Updates and removes its
// consumer from the server. Control: a key no filter matches is never
// delivered.
func TestAWatchDeliversLastValuesThenAMarkerThenChangesAndStopRemovesItsConsumer(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	c := connect(t, srv.ClientURL(), log, nil)
	st := mustEnsure(t, c, BucketOptions{NodeTTL: time.Second})
	ctx := context.Background()
	for _, kv := range []struct{ k, v string }{{"a.x", "1"}, {"a.x", "2"}, {"a.y", "3"}, {"b.z", "4"}} {
		if _, err := st.Allocs.Put(ctx, kv.k, []byte(kv.v)); err != nil {
			t.Fatal(err)
		}
	}
	next := func(w *kvWatch) jetstream.KeyValueEntry {
		t.Helper()
		select {
		case e, ok := <-w.Updates():
			if !ok {
				t.Fatal("updates closed")
			}
			return e
		case <-time.After(5 * time.Second):
			t.Fatal("no entry in 5 s")
		}
		return nil
	}
	w, err := watchKV(ctx, c.JetStream(), st.Allocs.Bucket(), []string{"a.>"}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for e := next(w); e != nil; e = next(w) {
		got[e.Key()] = string(e.Value())
	}
	if len(got) != 2 || got["a.x"] != "2" || got["a.y"] != "3" {
		t.Fatalf("initial values %v, want a.x=2 a.y=3 (and not b.z)", got)
	}
	if _, err := st.Allocs.Put(ctx, "b.z", []byte("5")); err != nil {
		t.Fatal(err)
	}
	if err := st.Allocs.Delete(ctx, "a.x"); err != nil {
		t.Fatal(err)
	}
	if e := next(w); e.Key() != "a.x" || e.Operation() != jetstream.KeyValueDelete {
		t.Fatalf("after a delete: %s %v (b.z's put must not come)", e.Key(), e.Operation())
	}
	if err := st.Allocs.Purge(ctx, "a.y"); err != nil {
		t.Fatal(err)
	}
	e := next(w)
	if e.Key() != "a.y" || e.Operation() != jetstream.KeyValuePurge {
		t.Fatalf("after a purge: %s %v", e.Key(), e.Operation())
	}
	purgedAt := e.Revision()

	// An expiry reaches a watch of the nodes bucket as a purge.
	nw, err := watchKV(ctx, c.JetStream(), st.Nodes.Bucket(), nil, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e := next(nw); e != nil {
		t.Fatalf("empty bucket: first entry %v, want the marker", e.Key())
	}
	if _, err := st.ForNode("n1").PutNode(ctx, nodeRecord("n1")); err != nil {
		t.Fatal(err)
	}
	if e := next(nw); e.Key() != "n1" || e.Operation() != jetstream.KeyValuePut {
		t.Fatalf("node put: %s %v", e.Key(), e.Operation())
	}
	if e := next(nw); e.Key() != "n1" || e.Operation() != jetstream.KeyValuePurge {
		t.Fatalf("node expiry: %s %v", e.Key(), e.Operation())
	}
	_ = nw.Stop()

	// Resumed after the purge: only what came after it.
	if _, err := st.Allocs.Put(ctx, "a.w", []byte("6")); err != nil {
		t.Fatal(err)
	}
	rw, err := watchKV(ctx, c.JetStream(), st.Allocs.Bucket(), []string{"a.>"}, purgedAt+1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e := next(rw); e == nil || e.Key() != "a.w" || string(e.Value()) != "6" {
		t.Fatalf("resumed: first entry %v", e)
	}
	if e := next(rw); e != nil {
		t.Fatalf("resumed: %s after the last entry, want the marker", e.Key())
	}

	consumers := func() int {
		s, err := c.JetStream().Stream(ctx, "KV_"+st.Allocs.Bucket())
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().State.Consumers
	}
	if n := consumers(); n != 2 {
		t.Fatalf("%d consumers on the allocations stream with two watches, want 2", n)
	}
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-w.Updates(); ok {
		for range w.Updates() {
		}
	}
	if n := consumers(); n != 1 {
		t.Fatalf("%d consumers after one watch stopped, want 1", n)
	}
	_ = rw.Stop()
}

// A watch's idle heartbeat grows with the fleet: 5 s up to 250 nodes,
// N / 50 s beyond, never past 30 s.
func TestAWatchHeartbeatGrowsWithTheFleetWithinItsBounds(t *testing.T) {
	for _, c := range []struct {
		nodes int
		want  time.Duration
	}{{0, 5 * time.Second}, {100, 5 * time.Second}, {250, 5 * time.Second}, {300, 6 * time.Second},
		{1000, 20 * time.Second}, {1500, 30 * time.Second}, {100000, 30 * time.Second}} {
		if got := watchBeat(c.nodes); got != c.want {
			t.Errorf("watchBeat(%d) = %s, want %s", c.nodes, got, c.want)
		}
	}
}

// A watch idle through several of its pull requests' expiries keeps its
// consumer (no reset: the heartbeats and the re-issued pulls reach it) and
// still delivers the next change. Controls: the consumer's name is read
// from the server before and after, and the idle heartbeats the connection
// received show the watch's own beat is in force (at nats.go's default of
// 5 s there would be one or two).
func TestAnIdleWatchOutlivesItsPullExpiriesWithoutAReset(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	c := connect(t, srv.ClientURL(), log, nil)
	st := mustEnsure(t, c, BucketOptions{NodeTTL: time.Second})
	ctx := context.Background()
	beat := 500 * time.Millisecond // the server's smallest; pulls expire every 3 s
	w, err := watchKV(ctx, c.JetStream(), st.Jobs.Bucket(), nil, 0, beat)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if e := <-w.Updates(); e != nil {
		t.Fatalf("empty bucket: first entry %v, want the marker", e.Key())
	}
	before := w.cons.CachedInfo().Name
	in0 := c.nc.Stats().InMsgs
	time.Sleep(3*watchExpiryBeats*beat + beat) // three expiries
	if idle := c.nc.Stats().InMsgs - in0; idle < 10 {
		t.Fatalf("%d messages while idle for %v: the %v heartbeat is not in force", idle, 3*watchExpiryBeats*beat+beat, beat)
	}
	if _, err := st.Jobs.Put(ctx, "default.web", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	select {
	case e, ok := <-w.Updates():
		if !ok || e == nil || e.Key() != "default.web" {
			t.Fatalf("after idling: %v %v, want default.web's put", e, ok)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery after idling through three pull expiries")
	}
	if after := w.cons.CachedInfo().Name; after != before {
		t.Fatalf("consumer %s replaced by %s: the idle watch was reset", before, after)
	}
	stream, err := c.JetStream().Stream(ctx, "KV_"+st.Jobs.Bucket())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	lister := stream.ConsumerNames(ctx)
	for n := range lister.Name() {
		names[n] = true
	}
	if err := lister.Err(); err != nil {
		t.Fatal(err)
	}
	if !names[before] || len(names) != 1 {
		t.Fatalf("consumers on the server %v, want only %s", names, before)
	}
}

// A source reads the nodes bucket's key count before its first watches, so
// an agent joining a large fleet paces its watches for it from the start.
func TestASourceKnowsTheFleetSizeBeforeItsPull(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	c := connect(t, srv.ClientURL(), log, nil)
	st := mustEnsure(t, c, BucketOptions{NodeTTL: time.Minute})
	ctx := context.Background()
	for i := range 300 {
		id := fmt.Sprintf("n%03d", i)
		if _, err := st.ForNode(id).PutNode(ctx, nodeRecord(id)); err != nil {
			t.Fatal(err)
		}
	}
	s := NewSource(st, SourceConfig{Log: log})
	if n := s.fleetSize(); n != 0 {
		t.Fatalf("before the read: %d nodes", n)
	}
	s.readFleetSize(ctx)
	if n := s.fleetSize(); n != 300 {
		t.Fatalf("fleet size %d, want 300", n)
	}
	if b := watchBeat(s.fleetSize()); b != 6*time.Second {
		t.Fatalf("beat %s, want 6s", b)
	}
}
