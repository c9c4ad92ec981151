package fleet_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/services"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/testutil"
)

// userSeed creates an NKey user, exports its public key as env for the
// configuration to read, and writes its seed file.
func userSeed(t *testing.T, env string) string {
	t.Helper()
	u, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := u.PublicKey()
	seed, _ := u.Seed()
	t.Setenv(env, pub)
	p := filepath.Join(t.TempDir(), env+".nk")
	if err := os.WriteFile(p, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTheShippedPermissionsLetAnAgentWriteOnlyItsOwnKeys loads
// permissions.conf as shipped into an in-process nats-server on loopback
// and drives it through host/fleet as the agents and the CLI do: an agent's
// own writes, watches and compare-and-sets are served; its writes of
// another node's keys, of jobs and of node intents are refused by the
// server (hivelet's own owner checks are bypassed by writing the bucket
// directly), and the key stays absent. The operator (control) writes jobs.
func TestTheShippedPermissionsLetAnAgentWriteOnlyItsOwnKeys(t *testing.T) {
	seeds := map[string]string{}
	for _, u := range []string{"OPERATOR", "AGENT_1", "AGENT_2", "AGENT_3", "AGENT_4"} {
		seeds[u] = userSeed(t, u+"_NKEY")
	}
	opts, err := server.ProcessConfigFile("permissions.conf")
	if err != nil {
		t.Fatalf("permissions.conf: %v", err)
	}
	opts.JetStream, opts.StoreDir = true, t.TempDir()
	s := testutil.StartNATS(t, opts)

	ctx := context.Background()
	connect := func(user string) *fleet.Conn {
		t.Helper()
		c, err := fleet.Connect(ctx, fleet.ConnConfig{URLs: []string{s.ClientURL()}, NKeySeedFile: seeds[user],
			RequestTimeout: 2 * time.Second, FailFast: true, Name: user}, nil, nil)
		if err != nil {
			t.Fatalf("connecting as %s: %v", user, err)
		}
		t.Cleanup(c.Close)
		return c
	}
	names := fleet.Names("")
	// The first agent creates the buckets (an agent's start, or an emptied store).
	c1 := connect("AGENT_1")
	a1, err := fleet.EnsureBuckets(ctx, c1, names, fleet.BucketOptions{NodeTTL: time.Minute})
	if err != nil {
		t.Fatalf("agent-1 creating the buckets: %v", err)
	}
	a2, err := fleet.EnsureBuckets(ctx, connect("AGENT_2"), names, fleet.BucketOptions{NodeTTL: time.Minute})
	if err != nil {
		t.Fatalf("agent-2 opening the buckets: %v", err)
	}
	opConn := connect("OPERATOR")
	op, err := fleet.OpenStore(ctx, opConn, names)
	if err != nil {
		t.Fatal(err)
	}

	// agent-1 watches agent-2's allocations (every agent reads the whole fleet).
	w, err := a1.Allocs.Watch(ctx, wanted.AllocKeyPrefix("agent-2"))
	if err != nil {
		t.Fatalf("agent-1 watching: %v", err)
	}
	defer w.Stop()
	if e := <-w.Updates(); e != nil {
		t.Fatalf("an empty bucket's watch starts with nil, got %s", e.Key())
	}

	// Its own writes are served.
	if _, err := a1.ForNode("agent-1").PutNode(ctx, &model.Node{ID: "agent-1", Name: "agent-1"}); err != nil {
		t.Fatalf("agent-1 writing its node record: %v", err)
	}
	own := &model.Allocation{ID: "a1", NodeID: "agent-1", Namespace: "default", JobID: "web"}
	if _, err := a1.ForNode("agent-1").PutAlloc(ctx, own); err != nil {
		t.Fatalf("agent-1 writing its allocation: %v", err)
	}
	if err := a1.ForNode("agent-1").DeleteAlloc(ctx, "default", "web", "a1"); err != nil {
		t.Fatalf("agent-1 deleting its allocation: %v", err)
	}
	d := &model.Deployment{ID: "web-1", Namespace: "default", JobID: "web", JobVersion: 1, Status: model.DeploymentRunning}
	_, rev, created, err := a1.CreateDeployment(ctx, d)
	if err != nil || !created {
		t.Fatalf("agent-1 creating a deployment: created %v, %v", created, err)
	}
	d.Status = model.DeploymentSuccessful
	if _, err := a1.UpdateDeployment(ctx, d, rev); err != nil {
		t.Fatalf("agent-1 updating the deployment by compare-and-set: %v", err)
	}
	if _, err := a2.UpdateDeployment(ctx, d, rev); !errors.Is(err, fleet.ErrLostRace) {
		t.Fatalf("agent-2's compare-and-set on an old revision: %v, want ErrLostRace", err)
	}
	sl := model.Slot{Namespace: "default", JobID: "web", Group: "g", Index: 0, Holder: "agent-1", Nonce: "n1"}
	if _, err := a1.TakeSlot(ctx, wanted.SlotKey("default", "web", "g", 0), sl, time.Minute); err != nil {
		t.Fatalf("agent-1 taking a slot: %v", err)
	}
	if err := a1.CreateVerdict(ctx, wanted.DownKey("agent-3", 7), model.LossVerdict{Node: "agent-3", WrittenBy: "agent-1"}); err != nil {
		t.Fatalf("agent-1 writing a loss verdict: %v", err)
	}
	if _, err := a1.ServerNow(ctx); err != nil {
		t.Fatalf("agent-1 reading the server's clock: %v", err)
	}
	svc1, err := services.Ensure(ctx, c1.JetStream(), "hivelet", 1, 2*time.Second)
	if err != nil {
		t.Fatalf("agent-1 creating the services bucket: %v", err)
	}
	ownSvc := &model.ServiceRegistration{Name: "web", AllocID: "a1", NodeID: "agent-1", Address: "10.0.0.1", Port: 80}
	if err := svc1.Register(ctx, ownSvc); err != nil {
		t.Fatalf("agent-1 registering its own service: %v", err)
	}
	if err := svc1.Deregister(ctx, ownSvc); err != nil {
		t.Fatalf("agent-1 deregistering its own service: %v", err)
	}
	if err := svc1.Register(ctx, ownSvc); err != nil {
		t.Fatalf("agent-1 registering its own service again: %v", err)
	}

	// agent-2's own allocation reaches agent-1's watch.
	theirs := &model.Allocation{ID: "a2", NodeID: "agent-2", Namespace: "default", JobID: "web"}
	if _, err := a2.ForNode("agent-2").PutAlloc(ctx, theirs); err != nil {
		t.Fatalf("agent-2 writing its allocation: %v", err)
	}
	select {
	case e := <-w.Updates():
		if e == nil || e.Key() != wanted.AllocKey("agent-2", "default", "web", "a2") {
			t.Fatalf("agent-1's watch got %v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("agent-1's watch never saw agent-2's allocation")
	}

	// What agent-1 may not write, straight into the buckets.
	forged := wanted.AllocKey("agent-2", "default", "web", "a2")
	refused := []struct {
		what    string
		kv, ops jetstream.KeyValue // agent-1's handle, the operator's
		key     string
		exists  bool
	}{
		{"another node's allocation", a1.Allocs, op.Allocs, forged, true},
		{"another node's allocation (new key)", a1.Allocs, op.Allocs, wanted.AllocKey("agent-2", "default", "web", "a9"), false},
		{"another node's record", a1.Nodes, op.Nodes, wanted.NodeKey("agent-2"), false},
		{"a job", a1.Jobs, op.Jobs, wanted.JobKey("default", "evil"), false},
		{"a job version", a1.JobVersions, op.JobVersions, wanted.JobVersionKey("default", "evil", 1), false},
		{"a node intent (drain)", a1.Intents, op.Intents, wanted.NodeKey("agent-2"), false},
		{"another node's service registration", svcKV(t, c1), svcKV(t, opConn), services.Key(&model.ServiceRegistration{Name: "web", NodeID: "agent-2", AllocID: "a2"}), false},
	}
	for _, r := range refused {
		before, _ := op.Allocs.Get(ctx, forged)
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := r.kv.Put(rctx, r.key, []byte(`{"id":"x","desired_status":"stop"}`))
		cancel()
		if err == nil {
			t.Errorf("agent-1 wrote %s (%s)", r.what, r.key)
			continue
		}
		// The server says why; the request itself only times out.
		if le := c1.NATS().LastError(); !errors.Is(le, nats.ErrPermissionViolation) || !strings.Contains(le.Error(), `"$KV.`+r.kv.Bucket()+"."+r.key+`"`) {
			t.Errorf("agent-1 writing %s: %v; the connection's last error %v is not the server refusing it", r.what, err, le)
		}
		if !r.exists {
			if _, err := r.ops.Get(ctx, r.key); !errors.Is(err, jetstream.ErrKeyNotFound) {
				t.Errorf("%s %s: after the refusal: %v, want not found", r.what, r.key, err)
			}
		} else if after, err := op.Allocs.Get(ctx, forged); err != nil || after.Revision() != before.Revision() {
			t.Errorf("%s %s changed after the refusal: %v", r.what, r.key, err)
		}
	}

	// Control: the operator writes jobs.
	if _, err := op.PutJob(ctx, &model.Job{ID: "web", Namespace: "default", Type: model.JobTypeSystem, Version: 1}); err != nil {
		t.Fatalf("the operator writing a job: %v", err)
	}
}

// svcKV is the services bucket through c (created by then).
func svcKV(t *testing.T, c *fleet.Conn) jetstream.KeyValue {
	t.Helper()
	kv, err := c.JetStream().KeyValue(context.Background(), services.Bucket("hivelet"))
	if err != nil {
		t.Fatalf("opening the services bucket: %v", err)
	}
	return kv
}
