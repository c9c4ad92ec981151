package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// startCluster starts three JetStream servers routed together on loopback
// and waits until the cluster has a meta leader.
func startCluster(t *testing.T) []*Embedded {
	t.Helper()
	ports := []int{freePort(t), freePort(t), freePort(t)}
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
	eventually(t, 30*time.Second, "a JetStream meta leader", func() bool {
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
	eventually(t, 30*time.Second, "R3 buckets created", func() bool {
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
	src := runSource(t, mustEnsure(t, connect(t, url(2), log, nil), BucketOptions{Replicas: 3}), SourceConfig{Log: log})
	waitSynced(t, src)
	if !hasJob(src, "web", 1)() {
		t.Fatal("boot pull through another server missed web v1")
	}
	putRaw(t, b, "default.web", jobJSON("web", 2, ""))
	eventually(t, 10*time.Second, "live put through another server", hasJob(src, "web", 2))
	casRace(t, a, b)
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
