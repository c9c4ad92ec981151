package state

import (
	"errors"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/sdk/driver"
)

func rec(id string) *AllocRecord {
	return &AllocRecord{
		Alloc:  &model.Allocation{ID: id, Name: "web.g[0]", JobID: "web", ClientStatus: model.ClientRunning, DesiredStatus: model.DesiredRun},
		Intent: model.DesiredRun,
		Job:    &model.Job{ID: "web", Type: model.JobTypeSystem, Version: 3},
	}
}

func TestEveryRecordKindSurvivesACloseAndReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"b", "a"} {
		if err := s.PutAlloc(rec(id)); err != nil {
			t.Fatal(err)
		}
	}
	h := &driver.TaskHandle{Version: 1, TaskID: "a/t", Driver: "mock", DriverState: []byte(`{"pid":7}`)}
	if err := s.PutHandle("a", "t", h); err != nil {
		t.Fatal(err)
	}
	if err := s.PutHandle("ab", "t", h); err != nil { // a prefix neighbour must not leak into "a"
		t.Fatal(err)
	}
	if err := s.PutPluginReattach("mock", []byte("addr")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutJob(&JobRecord{Job: &model.Job{ID: "web", Type: model.JobTypeSystem, Version: 3}, Revision: 9}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	allocs, err := s.Allocs()
	if err != nil {
		t.Fatal(err)
	}
	if len(allocs) != 2 || allocs[0].Alloc.ID != "a" || allocs[1].Alloc.ID != "b" || allocs[0].Job.Version != 3 || allocs[0].Intent != model.DesiredRun {
		t.Fatalf("allocs after reopen: %+v", allocs)
	}
	hs, err := s.Handles("a")
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || string(hs["t"].DriverState) != `{"pid":7}` {
		t.Fatalf("handles: %+v", hs)
	}
	data, ok, err := s.PluginReattach("mock")
	if err != nil || !ok || string(data) != "addr" {
		t.Fatalf("plugin reattach: %q %v %v", data, ok, err)
	}
	if _, ok, _ := s.PluginReattach("docker"); ok {
		t.Fatal("reattach data for a plugin never stored")
	}
	jobs, err := s.Jobs()
	if err != nil || jobs["default.web"].Revision != 9 {
		t.Fatalf("jobs: %+v %v", jobs, err)
	}

	// Deleting an allocation removes its handles, not its neighbour's.
	if err := s.DeleteAlloc("a"); err != nil {
		t.Fatal(err)
	}
	if hs, _ := s.Handles("a"); len(hs) != 0 {
		t.Fatalf("handles of a deleted allocation remain: %v", hs)
	}
	if hs, _ := s.Handles("ab"); len(hs) != 1 {
		t.Fatalf("neighbour's handle lost: %v", hs)
	}
	if _, ok, _ := s.Alloc("a"); ok {
		t.Fatal("deleted allocation still readable")
	}
	if _, ok, _ := s.Alloc("b"); !ok {
		t.Fatal("control: allocation b must still be there")
	}
}

func TestASecondOpenOfTheSameStoreFailsWithErrLocked(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Open(dir, 100*time.Millisecond)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: got %v, want ErrLocked", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("second open did not honour its timeout")
	}
	s.Close()
	// Control: once the first holder closes, the store opens.
	s2, err := Open(dir, 100*time.Millisecond)
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	s2.Close()
}

func TestACorruptRecordFailsTheWholeRestore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutAlloc(rec("good")); err != nil {
		t.Fatal(err)
	}
	// Control: a clean store lists its allocation.
	if all, err := s.Allocs(); err != nil || len(all) != 1 {
		t.Fatalf("control: %v %v", all, err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAllocs).Put([]byte("bad"), []byte("{not json"))
	}); err != nil {
		t.Fatal(err)
	}
	if all, err := s.Allocs(); err == nil {
		t.Fatalf("corrupt record skipped silently: %d records", len(all))
	}
	s.Close()
}
