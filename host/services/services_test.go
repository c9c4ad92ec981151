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
