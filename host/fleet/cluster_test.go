package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
)

// startCluster starts three JetStream servers routed together on loopback
// and waits until the cluster has a meta leader.
func startCluster(t testing.TB) []*Embedded {
	t.Helper()
	ports := []int{testutil.FreePort(t), testutil.FreePort(t), testutil.FreePort(t)}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	var srvs []*Embedded
	for i, p := range ports {
		e, err := StartEmbedded(context.Background(), EmbeddedConfig{
			StoreDir: t.TempDir(), Port: -1, ServerName: fmt.Sprintf("c%d", i),
			Cluster: &ClusterConfig{Name: "hivelet-test", Port: p, Routes: routes},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Shutdown)
		srvs = append(srvs, e)
	}
	testutil.Eventually(t, 30*time.Second, "a JetStream meta leader", func() bool {
		for _, s := range srvs {
			if s.Server().JetStreamIsLeader() {
				return true
			}
		}
		return false
	})
	return srvs
}

func TestAThreeServerClusterWithR3BucketsPullsWatchesAndCASes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-server JetStream cluster")
	}
	srvs := startCluster(t)
	log, _ := testLog(t)
	// Each client talks to a different server.
	url := func(i int) string { return srvs[i].ClientURL() }
	var a *Store
	testutil.Eventually(t, 30*time.Second, "R3 buckets created", func() bool {
		c := connect(t, url(0), log, nil)
		st, err := EnsureBuckets(context.Background(), c, Names("t"), BucketOptions{Replicas: 3})
		if err != nil {
			t.Logf("creating R3 buckets: %v (retrying)", err)
			return false
		}
		a = st
		return true
	})
	if r := bucketReplicas(t, a); r != 3 {
		t.Fatalf("jobs bucket has %d replicas, want 3", r)
	}
	putRaw(t, a, "default.web", jobJSON("web", 1, ""))

	b := mustEnsure(t, connect(t, url(1), log, nil), BucketOptions{Replicas: 3})
	casRace(t, a, b)

	// The source knows every server but starts on the third.
	sc, err := Connect(context.Background(), ConnConfig{URLs: []string{url(2), url(0), url(1)}, RequestTimeout: 2 * time.Second}, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.Close)
	testutil.Eventually(t, 10*time.Second, "source connected", func() bool { return sc.State() == StateConnected })
	src := runSource(t, mustEnsure(t, sc, BucketOptions{Replicas: 3}), SourceConfig{Log: log})
	waitSynced(t, src)
	if !hasJob(src, "web", 1)() {
		t.Fatal("boot pull through another server missed web v1")
	}
	putRaw(t, b, "default.web", jobJSON("web", 2, ""))
	testutil.Eventually(t, 10*time.Second, "live put through another server", hasJob(src, "web", 2))

	// The source's server dies: it moves to another one, its watchers resume,
	// and writes made meanwhile (once the stream has a leader again) arrive.
	srvs[2].Shutdown()
	testutil.Eventually(t, 30*time.Second, "a write accepted after the server died", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := a.Jobs.Put(ctx, "default.web", jobJSON("web", 3, ""))
		return err == nil
	})
	took := testutil.Eventually(t, 15*time.Second, "the source resumed on a surviving server", hasJob(src, "web", 3))
	t.Logf("resumed %s after the write was accepted", took)
}

func bucketReplicas(t *testing.T, st *Store) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := st.Jobs.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s.Config().Replicas
}

// The converse of TestAWatcherStalledUnderTheSameStreamLeaderResumesWithoutTheDisruptionGuard:
// a watcher that stalls while its stream's leader changes (a stepdown, as
// when the leader's server dies) starts the disruption guard when it is
// re-created: heartbeats may have failed while the stream had no leader.
func TestAWatcherStalledAcrossALeaderChangeResumesWithTheDisruptionGuard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-server JetStream cluster")
	}
	srvs := startCluster(t)
	log, logs := testLog(t)
	var st *Store
	testutil.Eventually(t, 30*time.Second, "R3 buckets created", func() bool {
		c := connect(t, srvs[0].ClientURL(), log, nil)
		s, err := EnsureBuckets(context.Background(), c, Names("t"), BucketOptions{Replicas: 3})
		if err != nil {
			t.Logf("creating R3 buckets: %v (retrying)", err)
			return false
		}
		st = s
		return true
	})
	obs := newObs()
	src, hold, _ := runHeldSource(t, st, log, obs)
	leader := func() string {
		info, err := src.streamInfo(context.Background(), st.Jobs)
		if err != nil || info.Cluster == nil {
			return ""
		}
		return info.Cluster.Leader
	}
	before := leader()
	if before == "" {
		t.Fatal("the jobs stream has no leader")
	}
	time.Sleep(1500 * time.Millisecond) // a stall check has read the leader
	testutil.Eventually(t, 20*time.Second, "the jobs stream led by another server", func() bool {
		if l := leader(); l != "" && l != before {
			return true
		}
		_, _ = st.conn.nc.Request("$JS.API.STREAM.LEADER.STEPDOWN.KV_t_jobs", nil, 2*time.Second)
		return false
	})
	close(hold)
	testutil.Eventually(t, 10*time.Second, "web written", func() bool {
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer rcancel()
		_, err := st.Jobs.Put(rctx, "default.web", jobJSON("web", 1, ""))
		return err == nil
	})
	testutil.Eventually(t, 15*time.Second, "web delivered after the stall", hasJob(src, "web", 1))
	if n := obs.get(func(o *countingObserver) map[string]int { return o.restarts }, KindJobs+"/stalled"); n == 0 {
		t.Fatalf("web arrived without a stalled restart (restarts %v); logs:\n%s", src.Restarts(), logs)
	}
	if src.ResumedAt(KindJobs).IsZero() {
		t.Fatalf("a stall across a leader change (%s, then %s) resumed without the disruption guard; logs:\n%s", before, leader(), logs)
	}
}
