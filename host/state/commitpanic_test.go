package state

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A change that panics inside a shared transaction fails the writes that
// shared it, and the store keeps working: no writer waits for ever.
func TestAPanickingChangeWedgesNoWriter(t *testing.T) {
	s, err := Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hold := make(chan struct{})
	holding := make(chan struct{})
	go func() { _ = s.update(func(*bolt.Tx) error { close(holding); <-hold; return nil }) }()
	<-holding

	// Queue a panicking change first (it leads the next batch), then others.
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_ = s.update(func(*bolt.Tx) error { panic("boom") })
	}()
	for s.pendingCount() < 1 {
		runtime.Gosched()
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.PutAlloc(rec(fmt.Sprintf("x%d", i)))
		}()
	}
	for s.pendingCount() < 1+len(errs) {
		runtime.Gosched()
	}
	close(hold)
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("the writes that shared a transaction with a panicking change never returned")
	}
	if p := <-panicked; p != "boom" {
		t.Fatalf("the panic did not reach its own caller: %v", p)
	}
	for i, err := range errs {
		if !errors.Is(err, errPanicked) {
			t.Fatalf("write %d sharing the transaction returned %v, want errPanicked", i, err)
		}
	}
	// The store still works (control: a write after it lands).
	if err := s.PutAlloc(rec("after")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Alloc("after"); err != nil || !ok {
		t.Fatalf("a write after the panic: ok %v err %v", ok, err)
	}
}
