package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// A record written with a TTL of its own expires at that TTL, under a
// bucket whose TTL is longer, and its watchers see it go down as they see
// a bucket-wide expiry. Control: a record written the same way with the
// bucket's TTL is still up.
func TestARecordWrittenWithItsOwnTTLExpiresAtIt(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	opts := BucketOptions{NodeTTL: time.Minute}
	owner := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), opts)
	src := runSource(t, mustEnsure(t, connect(t, srv.ClientURL(), log, nil), opts), SourceConfig{Log: log, Kinds: []string{KindNodes}})
	waitSynced(t, src)
	ctx := context.Background()
	short, long := nodeRecord("n1"), nodeRecord("n2")
	short.HeartbeatTTL, long.HeartbeatTTL = model.Duration(time.Second), model.Duration(time.Minute)
	if _, err := owner.ForNode("n1").PutNodeTTL(ctx, short, time.Second); err != nil {
		t.Fatal(err)
	}
	rev, err := owner.ForNode("n2").PutNodeTTL(ctx, long, time.Minute)
	if err != nil || rev == 0 {
		t.Fatalf("put with a TTL: revision %d, %v", rev, err)
	}
	testutil.Eventually(t, 5*time.Second, "both records seen", func() bool {
		v := src.View()
		return v.Node("n1") != nil && v.Node("n2") != nil
	})
	if got := src.View().Node("n2").HeartbeatTTL.D(); got != time.Minute {
		t.Fatalf("the record's own TTL read back as %s", got)
	}
	took := testutil.Eventually(t, 10*time.Second, "n1 down at its own TTL (1 s, the bucket's is 1 min)", func() bool {
		n := src.View().Node("n1")
		return n != nil && n.Status == model.NodeStatusDown
	})
	t.Logf("n1 seen down %s after it was seen", took)
	if n := src.View().Node("n2"); n == nil || n.Status != model.NodeStatusReady {
		t.Fatalf("control: n2, written with the bucket's TTL, is %+v", n)
	}
}

// The nodes bucket's TTL reads back as set, raised and lowered; lowered
// below the duplicate window, the window follows it (the server refuses a
// window longer than the stream's age limit).
func TestTheNodesBucketsTTLIsRaisedAndLowered(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	st := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{NodeTTL: 30 * time.Second})
	ctx := context.Background()
	for _, want := range []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Second, time.Minute} {
		if want != 30*time.Second {
			if err := st.SetNodeCeiling(ctx, want); err != nil {
				t.Fatalf("setting %s: %v", want, err)
			}
		}
		got, err := st.NodeCeiling(ctx)
		if err != nil || got != want {
			t.Fatalf("ceiling %s (%v), want %s", got, err, want)
		}
	}
	if err := st.SetNodeCeiling(ctx, 0); err == nil {
		t.Fatal("a zero TTL was accepted")
	}
	// The bucket still works as a KV bucket after the updates.
	if _, err := st.ForNode("n1").PutNodeTTL(ctx, nodeRecord("n1"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if e, err := st.Nodes.Get(ctx, "n1"); err != nil || len(e.Value()) == 0 {
		t.Fatalf("reading back: %v", err)
	}
}

// A node record's write keeps a caller's deadline when it is longer than
// the request timeout (a heartbeat waits up to a quarter of its period),
// and ReadNode reads back what was written. Control: without a deadline
// of its own, the same write gets the request timeout, here too short to
// be answered.
func TestANodeRecordsWriteKeepsTheCallersLongerDeadline(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	st := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{NodeTTL: time.Minute})
	st.conn.timeout = -time.Second // a request deadline already past when the request is made
	w := st.ForNode("n1")
	rec := nodeRecord("n1")
	rec.HeartbeatAt = time.Now().UTC()
	if _, err := w.PutNodeTTL(context.Background(), rec, 30*time.Second); err == nil {
		t.Fatal("control: a write with the microsecond request timeout was answered")
	}
	if _, err := w.PutNode(context.Background(), rec); err == nil {
		t.Fatal("control: a plain put with the microsecond request timeout was answered")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w.PutNodeTTL(ctx, rec, 30*time.Second); err != nil {
		t.Fatalf("a write with the caller's 10 s deadline: %v", err)
	}
	rec2 := *rec
	rec2.HeartbeatAt = rec.HeartbeatAt.Add(time.Second)
	if _, err := w.PutNode(ctx, &rec2); err != nil {
		t.Fatalf("a plain put with the caller's 10 s deadline: %v", err)
	}
	got, err := w.ReadNode(ctx)
	if err != nil || got == nil || !got.HeartbeatAt.Equal(rec2.HeartbeatAt) {
		t.Fatalf("read back %+v, %v; want the heartbeat at %v", got, err, rec2.HeartbeatAt)
	}
}
