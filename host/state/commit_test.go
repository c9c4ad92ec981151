package state

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// Concurrent writers share transactions, and every write is there after.
func TestConcurrentWritesShareCommitsAndAllLand(t *testing.T) {
	s, err := Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 200
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			id := fmt.Sprintf("a%03d", i)
			if err := s.PutAlloc(rec(id)); err != nil {
				t.Error(err)
			}
		}()
	}
	before := s.commitCount()
	close(start)
	wg.Wait()
	got, err := s.Allocs()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d allocations stored, want %d", len(got), n)
	}
	commits := s.commitCount() - before
	if commits >= n {
		t.Fatalf("%d writers took %d commits: nothing was shared", n, commits)
	}
	t.Logf("%d concurrent writes in %d commits", n, commits)

	// Control: sequential writes commit one by one.
	before = s.commitCount()
	for i := 0; i < 5; i++ {
		if err := s.PutAlloc(rec(fmt.Sprintf("s%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if c := s.commitCount() - before; c != 5 {
		t.Fatalf("5 sequential writes took %d commits, want 5", c)
	}
}

// A failing change in a shared transaction fails only its own caller: the
// others are committed.
func TestAFailingWriteFailsOnlyItsCaller(t *testing.T) {
	s, err := Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bad := errors.New("bad change")
	// Hold the turn so that the writes below queue into one batch.
	hold := make(chan struct{})
	holding := make(chan struct{})
	go func() {
		_ = s.update(func(tx *bolt.Tx) error { close(holding); <-hold; return nil })
	}()
	<-holding
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 3 {
				errs[i] = s.update(func(tx *bolt.Tx) error {
					if err := tx.Bucket(bucketJobs).Put([]byte("half-done"), []byte("{}")); err != nil {
						return err
					}
					return bad
				})
				return
			}
			errs[i] = s.PutAlloc(rec(fmt.Sprintf("ok%d", i)))
		}()
	}
	for s.pendingCount() < len(errs) {
		runtime.Gosched()
	}
	close(hold)
	wg.Wait()
	for i, err := range errs {
		if i == 3 {
			if !errors.Is(err, bad) {
				t.Fatalf("the failing write returned %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("write %d failed with its batch: %v", i, err)
		}
	}
	got, err := s.Allocs()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(errs)-1 {
		t.Fatalf("%d allocations stored, want %d", len(got), len(errs)-1)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketJobs).Get([]byte("half-done")); v != nil {
			return fmt.Errorf("the failing change was partly committed: %s", v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
