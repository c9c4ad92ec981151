package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hivelet/hivelet/host/model"
)

// The fuzz targets of this file put arbitrary bytes under an arbitrary key
// of the store's allocation and job buckets (what a damaged or hand-edited
// state.db could hold; bbolt checks its pages, not the values) and read them
// back as the agent's Restore does, checking: no panic or hang; a refusal is
// an error naming the key; a record returned is one the agent can act on
// (an allocation with its ID, the one it is stored under, and no null task
// state the runner dereferences; a job) and that, written back as the agent
// writes it (PutAlloc, PutJob), reads back the same, byte for byte (and is
// the same document written with its job's encoding, as a runner writes it).

func fuzzStore(f *testing.F) *Store {
	s, err := Open(f.TempDir(), time.Second)
	if err != nil {
		f.Fatal(err)
	}
	s.db.NoSync = true // the values are under test, not the disk
	f.Cleanup(func() { s.Close() })
	return s
}

// replace leaves exactly one value in bucket: value under key (none for an
// empty key).
func replace(t *testing.T, s *Store, bucket []byte, key string, value []byte) {
	t.Helper()
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucket); err != nil {
			return err
		}
		b, err := tx.CreateBucket(bucket)
		if err != nil || key == "" {
			return err
		}
		return b.Put([]byte(key), value)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func FuzzStoredAllocation(f *testing.F) {
	s := fuzzStore(f)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, r := range []*AllocRecord{
		{Alloc: &model.Allocation{ID: "a-1", Name: "web.g[0]", JobID: "web", JobVersion: 2, TaskGroup: "g", NodeID: "n1",
			DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning,
			TaskStates: map[string]*model.TaskState{"t": {State: "running", StartedAt: now}},
			Ports:      []model.AllocatedPort{{Label: "http", Value: 20000, HostIP: "127.0.0.1"}}, CreateTime: now},
			Intent: model.DesiredRun,
			Job: &model.Job{ID: "web", Type: model.JobTypeSystem, Version: 2,
				Groups: []*model.Group{{Name: "g", Count: 1, Tasks: []*model.Task{{Name: "t", Driver: "mock"}}}}}},
		{Alloc: &model.Allocation{ID: "a-2", JobID: "web", NodeID: "n1", DesiredStatus: model.DesiredStop, ClientStatus: model.ClientComplete}, Intent: model.DesiredStop},
	} {
		b, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(r.Alloc.ID, b)
	}
	f.Add("a-3", []byte(`{"alloc":null}`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		if key == "" || len(key) > bolt.MaxKeySize {
			return // bbolt stores no such key
		}
		defer time.AfterFunc(30*time.Second, func() { panic(fmt.Sprintf("Allocs hangs on %q %q", key, value)) }).Stop()
		replace(t, s, bucketAllocs, key, value)
		recs, err := s.Allocs()
		if err != nil {
			if !strings.Contains(err.Error(), key) {
				t.Fatalf("refusal does not name the key %q: %v", key, err)
			}
			return
		}
		if len(recs) != 1 {
			t.Fatalf("%d records read from one value", len(recs))
		}
		r := recs[0]
		if r.Alloc == nil || r.Alloc.ID != key {
			t.Fatalf("record under key %q read as allocation %+v", key, r.Alloc)
		}
		for name, ts := range r.Alloc.TaskStates {
			if ts == nil {
				t.Fatalf("record read with a null state for task %q", name)
			}
		}
		first, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if r.Job != nil { // written with its job's encoding, as a runner writes it: the same document
			e, err := s.EncodeJob(r.Job)
			if err != nil {
				t.Fatal(err)
			}
			withEnc := *r
			withEnc.JobEncoding = e
			if b, err := encodeAllocRecord(&withEnc); err != nil || !bytes.Equal(b, first) {
				t.Fatalf("written with its job's encoding (%v):\n%s\nwhole:\n%s", err, b, first)
			}
		}
		if err := s.PutAlloc(r); err != nil {
			t.Fatalf("record read cannot be written back: %v", err)
		}
		again, err := s.Allocs()
		if err != nil || len(again) != 1 {
			t.Fatalf("record written back reads as %d records, %v\n%s", len(again), err, first)
		}
		second, _ := json.Marshal(again[0])
		if !bytes.Equal(first, second) {
			t.Fatalf("round trip differs:\n%s\n%s", first, second)
		}
	})
}

func FuzzStoredJob(f *testing.F) {
	s := fuzzStore(f)
	j := &model.Job{ID: "web", Namespace: "ops", Type: model.JobTypeSystem, Version: 2,
		Groups: []*model.Group{{Name: "g", Count: 1, Tasks: []*model.Task{{Name: "t", Driver: "mock"}}}}}
	b, err := json.Marshal(&JobRecord{Job: j, Revision: 7})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("ops.web", b)
	f.Add("web", b) // an older layout's key
	f.Add("x", []byte(`{"job":null,"revision":1}`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		if key == "" || len(key) > bolt.MaxKeySize {
			return
		}
		defer time.AfterFunc(30*time.Second, func() { panic(fmt.Sprintf("Jobs hangs on %q %q", key, value)) }).Stop()
		replace(t, s, bucketJobs, key, value)
		jobs, err := s.Jobs()
		if err != nil {
			if !strings.Contains(err.Error(), key) {
				t.Fatalf("refusal does not name the key %q: %v", key, err)
			}
			return
		}
		if len(jobs) != 1 {
			t.Fatalf("%d jobs read from one value", len(jobs))
		}
		for k, r := range jobs {
			if r.Job == nil || k != jobKey(r.Job) {
				t.Fatalf("job read under %q: %+v", k, r.Job)
			}
			first, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			replace(t, s, bucketJobs, "", nil)
			if err := s.PutJob(r); err != nil {
				t.Fatalf("job read cannot be written back: %v", err)
			}
			again, err := s.Jobs()
			if err != nil || again[k] == nil {
				t.Fatalf("job written back reads as %v, %v\n%s", again, err, first)
			}
			second, _ := json.Marshal(again[k])
			if !bytes.Equal(first, second) {
				t.Fatalf("round trip differs:\n%s\n%s", first, second)
			}
		}
	})
}
