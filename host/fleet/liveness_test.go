package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/node"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/testutil"
)

// The heartbeat's liveness plan against a real nodes bucket: a fleet large
// enough for a 3 s node_ttl to be too short (60 nodes need a period of
// 1.2 s) raises the bucket's TTL to 6 s and writes its record with it, so
// the record outlives the bucket's first TTL once the heartbeats stop and
// expires at the second. Control: with one node that writes no TTL of its
// own, the TTL stays 3 s and the bucket's is not raised.
func TestALargerFleetRaisesTheBucketsTTLAndItsRecordsLiveByIt(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	opts := BucketOptions{NodeTTL: 3 * time.Second}
	st := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), opts)
	src := runSource(t, mustEnsure(t, connect(t, srv.ClientURL(), log, nil), opts), SourceConfig{Log: log, Kinds: []string{KindNodes}})
	waitSynced(t, src)
	ctx := context.Background()

	older := &node.Liveness{Base: 3 * time.Second, Ceiling: st, Fleet: func() node.FleetFacts {
		return node.FleetFacts{Live: 60, Grow: false, Counted: true}
	}}
	if b := older.Plan(ctx); b.TTL != 3*time.Second || b.Period != time.Second {
		t.Fatalf("with an older node live: plan %+v, want 3 s every 1 s", b)
	}
	if c, err := st.NodeCeiling(ctx); err != nil || c != 3*time.Second {
		t.Fatalf("with an older node live the bucket's TTL is %s (%v), want 3s", c, err)
	}

	live := &node.Liveness{Base: 3 * time.Second, Ceiling: st, Fleet: func() node.FleetFacts {
		return node.FleetFacts{Live: 60, Grow: true, Counted: true}
	}}
	hb := node.NewHeartbeater(node.HeartbeatConfig{Period: time.Second, Plan: live.Plan}, st.ForNode("n1"),
		func() *model.Node { return nodeRecord("n1") }, nil)
	hbCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = hb.Run(hbCtx) }()
	testutil.Eventually(t, 5*time.Second, "n1's record written with a 6 s TTL", func() bool {
		n := src.View().Node("n1")
		return n != nil && n.HeartbeatTTL.D() == 6*time.Second
	})
	if c, err := st.NodeCeiling(ctx); err != nil || c != 6*time.Second {
		t.Fatalf("the bucket's TTL is %s (%v), want raised to 6s", c, err)
	}
	stop()
	<-done
	stopped := time.Now()
	testutil.Eventually(t, 15*time.Second, "n1 down once its heartbeats stopped", func() bool {
		return src.View().Node("n1").Status == model.NodeStatusDown
	})
	// The last write came at most one period (2 s) before the stop; the
	// record lives 6 s from it, past the bucket's former 3 s.
	if gone := time.Since(stopped); gone < 3500*time.Millisecond || gone > 9*time.Second {
		t.Fatalf("n1 seen down %s after its last heartbeat's stop, want between the old and new TTL", gone)
	}
	if st := src.View().Nodes.At(wanted.NodeKey("n1")); !st.Absent {
		t.Fatalf("n1's key not absent after the expiry: %+v", st)
	}
}
