package vars

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
)

func TestPathsAreCheckedBeforeAnyRequest(t *testing.T) {
	for _, bad := range []string{"", "a.b", "/a", "a/", "a//b", "a b", "ünï"} {
		if CheckPath(bad) == nil {
			t.Errorf("CheckPath(%q) accepted", bad)
		}
	}
	for _, good := range []string{"app", "nomad/jobs/web", "a-b/c_d/e=f"} {
		if err := CheckPath(good); err != nil {
			t.Errorf("CheckPath(%q): %v", good, err)
		}
	}
	s := &Store{} // no bucket: a request would panic
	if err := s.Put(context.Background(), "a.b", nil); err == nil {
		t.Fatal("a bad path reached the bucket")
	}
}

// TestAVariableIsPutReadListedWatchedAndDeleted: the CLI's open fails
// before the agent created the bucket; then a put is read back, listed by
// prefix, seen by a watch of its path, and deleted (the watch sees that too).
func TestAVariableIsPutReadListedWatchedAndDeleted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, _ := testutil.JetStream(t)
	if _, err := Open(ctx, js, "hv", time.Second); !errors.Is(err, ErrNoBucket) {
		t.Fatalf("open before the agent created the bucket: %v", err)
	}
	s, err := Ensure(ctx, js, "hv", 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := s.Watch(ctx, []string{"app/db"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "app/other", map[string]string{"x": "1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "app/db", map[string]string{"password": "s3cret", "user": "app"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changes:
	case <-ctx.Done():
		t.Fatal("the watch never saw the put")
	}
	got, ok, err := s.Get(ctx, "app/db")
	if err != nil || !ok || !reflect.DeepEqual(got, map[string]string{"password": "s3cret", "user": "app"}) {
		t.Fatalf("get: %v %v %v", got, ok, err)
	}
	if _, ok, err := s.Get(ctx, "app/none"); ok || err != nil {
		t.Fatalf("a missing variable: ok %v err %v", ok, err)
	}
	paths, err := s.List(ctx, "app/")
	if err != nil || !reflect.DeepEqual(paths, []string{"app/db", "app/other"}) {
		t.Fatalf("list: %v %v", paths, err)
	}
	if err := s.Delete(ctx, "app/db"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changes:
	case <-ctx.Done():
		t.Fatal("the watch never saw the delete")
	}
	if _, ok, _ := s.Get(ctx, "app/db"); ok {
		t.Fatal("deleted variable still read")
	}
	// A value that is not an object of strings is an error, not empty.
	kv, _ := js.KeyValue(ctx, Bucket("hv"))
	if _, err := kv.Put(ctx, "app/bad", []byte(`{"n": 1}`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "app/bad"); err == nil {
		t.Fatal("a malformed value read as a variable")
	}
}
