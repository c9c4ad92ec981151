package services

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

func TestANameThatIsNoKeyIsRefused(t *testing.T) {
	for _, bad := range []string{"", "a.b", "a b", "a/b"} {
		if CheckName(bad) == nil {
			t.Errorf("CheckName(%q) accepted", bad)
		}
	}
	s := &Store{} // no bucket: a request would panic
	if err := s.Register(context.Background(), &model.ServiceRegistration{Name: "a.b"}); err == nil {
		t.Fatal("a bad name reached the bucket")
	}
	if err := CheckName("node-exporter_2"); err != nil {
		t.Fatal(err)
	}
}

func TestRegistrationsAreListedByNameAndDeregistered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, _ := testutil.JetStream(t)
	if _, err := Open(ctx, js, "hv", time.Second); !errors.Is(err, ErrNoBucket) {
		t.Fatalf("open before the agent: %v", err)
	}
	s, err := Ensure(ctx, js, "hv", 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a := &model.ServiceRegistration{Name: "web", AllocID: "a2", NodeID: "n2", Address: "10.0.0.2", Port: 8080, Tags: []string{"x"}}
	b := &model.ServiceRegistration{Name: "web", AllocID: "a1", NodeID: "n1", Address: "10.0.0.1", Port: 8080}
	c := &model.ServiceRegistration{Name: "db", AllocID: "a1", NodeID: "n1", Address: "10.0.0.1", Port: 5432, Index: 1}
	for _, r := range []*model.ServiceRegistration{a, b, c} {
		if err := s.Register(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	kv, _ := js.KeyValue(ctx, Bucket("hv"))
	if _, err := kv.Put(ctx, "junk.a9.0", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	got, bad, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got["web"]) != 2 || got["web"][0].NodeID != "n1" || got["web"][1].Tags[0] != "x" || len(got["db"]) != 1 {
		t.Fatalf("listed %+v", got)
	}
	if len(bad) != 1 || bad[0] != "junk.a9.0" {
		t.Fatalf("bad keys %v", bad)
	}
	if err := s.Deregister(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Deregister(ctx, a); err != nil {
		t.Fatalf("deregistering twice: %v", err)
	}
	got, _, _ = s.List(ctx)
	if len(got["web"]) != 1 || got["web"][0].AllocID != "a1" {
		t.Fatalf("after deregistering a2: %+v", got["web"])
	}
}

// TestAValueUnderAnotherNodesKeyIsReportedNotServed: the key names the node
// (what a fleet's permissions restrict), and a reader serves a registration
// only under the key its value names. A forged value under one node's key
// claiming another node is reported; a key of the earlier layout is still
// read and deregistered with its registration.
func TestAValueUnderAnotherNodesKeyIsReportedNotServed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, _ := testutil.JetStream(t)
	s, err := Ensure(ctx, js, "hv", 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	own := &model.ServiceRegistration{Name: "web", AllocID: "a1", NodeID: "n1", Address: "10.0.0.1", Port: 80}
	if err := s.Register(ctx, own); err != nil {
		t.Fatal(err)
	}
	if Key(own) != "web.n1.a1.0" {
		t.Fatalf("key %s does not name the node", Key(own))
	}
	kv, _ := js.KeyValue(ctx, Bucket("hv"))
	// n1's key, a value that says it is n2's allocation at another address.
	forged := []byte(`{"name":"web","alloc_id":"a2","node_id":"n2","group":"g","address":"6.6.6.6","port":80,"index":0}`)
	if _, err := kv.Put(ctx, "web.n1.a2.0", forged); err != nil {
		t.Fatal(err)
	}
	old := &model.ServiceRegistration{Name: "web", AllocID: "a3", NodeID: "n3", Address: "10.0.0.3", Port: 80}
	oldValue := []byte(`{"name":"web","alloc_id":"a3","node_id":"n3","group":"g","address":"10.0.0.3","port":80,"index":0}`)
	if _, err := kv.Put(ctx, "web.a3.0", oldValue); err != nil {
		t.Fatal(err)
	}
	got, bad, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 1 || bad[0] != "web.n1.a2.0" {
		t.Fatalf("bad keys %v, want the forged one", bad)
	}
	if len(got["web"]) != 2 || got["web"][0].NodeID != "n1" || got["web"][1].NodeID != "n3" {
		t.Fatalf("listed %+v, want n1's and the earlier layout's n3", got["web"])
	}
	inst, err := s.Instances(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range inst {
		if r.Address == "6.6.6.6" {
			t.Fatalf("the forged registration was served: %+v", r)
		}
	}
	if len(inst) != 2 {
		t.Fatalf("instances %+v", inst)
	}
	if err := s.Deregister(ctx, old); err != nil {
		t.Fatal(err)
	}
	if inst, _ := s.Instances(ctx, "web"); len(inst) != 1 || inst[0].NodeID != "n1" {
		t.Fatalf("after deregistering the earlier layout's key: %+v", inst)
	}
}
