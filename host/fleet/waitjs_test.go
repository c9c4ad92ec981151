package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
)

func TestWaitJetStreamWaitsForEveryPeerOfTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-server JetStream cluster")
	}
	srvs := startCluster(t)
	for i, s := range srvs {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := s.WaitJetStream(ctx, 3)
		cancel()
		if err != nil {
			t.Fatalf("server %d: %v", i, err)
		}
	}
	// One member down: two peers remain online, three are no longer there.
	srvs[2].Shutdown()
	testutil.Eventually(t, 30*time.Second, "the stopped member seen offline", func() bool {
		n, _ := srvs[0].jetStreamPeers()
		return n == 2
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := srvs[0].WaitJetStream(ctx, 3); err == nil {
		t.Fatal("three peers reported ready with one member stopped")
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	if err := srvs[0].WaitJetStream(ctx2, 2); err != nil {
		t.Fatalf("two of three: %v", err)
	}
}

func TestWaitJetStreamOnASingleServerAcceptsOnlyOneReplica(t *testing.T) {
	e, err := StartEmbedded(context.Background(), EmbeddedConfig{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	if err := e.WaitJetStream(context.Background(), 1); err != nil {
		t.Fatalf("one replica: %v", err)
	}
	if err := e.WaitJetStream(context.Background(), 3); err == nil {
		t.Fatal("three replicas on a single server reported ready")
	}
}

func TestANonLoopbackClusterListenerNeedsConsent(t *testing.T) {
	port := testutil.FreePort(t)
	cfg := EmbeddedConfig{StoreDir: t.TempDir(), Port: -1, ReadyTimeout: 20 * time.Second,
		Cluster: &ClusterConfig{Name: "c", Host: "0.0.0.0", Port: port, Routes: []string{fmt.Sprintf("nats-route://127.0.0.1:%d", port)}}}
	if e, err := StartEmbedded(context.Background(), cfg); err == nil {
		e.Shutdown()
		t.Fatal("a cluster listener on 0.0.0.0 started without AllowNonLoopback")
	}
	// Control: the same on loopback starts.
	cfg.Cluster.Host = "127.0.0.1"
	e, err := StartEmbedded(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.Shutdown()
}

func TestAClusterMemberStartedAloneWaitsForItsPeersThenJoins(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-server JetStream cluster")
	}
	ports := []int{testutil.FreePort(t), testutil.FreePort(t), testutil.FreePort(t)}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	start := func(i int) *Embedded {
		e, err := StartEmbedded(context.Background(), EmbeddedConfig{StoreDir: t.TempDir(), Port: -1, ServerName: fmt.Sprintf("m%d", i),
			Cluster: &ClusterConfig{Name: "alone", Port: ports[i], Routes: routes}})
		if err != nil {
			t.Fatalf("member %d alone: %v", i, err)
		}
		t.Cleanup(e.Shutdown)
		return e
	}
	first := start(0) // its peers' ports are closed: it still accepts clients
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := first.WaitJetStream(ctx, 3); err == nil {
		t.Fatal("a lone member reported a three-peer cluster")
	}
	start(1)
	start(2)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	if err := first.WaitJetStream(ctx2, 3); err != nil {
		t.Fatalf("after its peers started: %v", err)
	}
}
