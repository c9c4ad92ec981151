package fleet

import (
	"context"
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
	w, err := watchKV(ctx, c.JetStream(), st.Allocs.Bucket(), []string{"a.>"}, 0)
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
	nw, err := watchKV(ctx, c.JetStream(), st.Nodes.Bucket(), nil, 0)
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
	rw, err := watchKV(ctx, c.JetStream(), st.Allocs.Bucket(), []string{"a.>"}, purgedAt+1)
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
