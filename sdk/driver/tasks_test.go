package driver_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hivelet/hivelet/sdk/driver"
)

// Of many concurrent Finish calls exactly one wins, its result is the one
// every waiter sees, and every waiter wakes.
func TestFirstFinishWinsAndEveryWaiterWakes(t *testing.T) {
	var e driver.Exit
	if e.Exited() || e.Result() != nil || !e.ExitedAt().IsZero() {
		t.Fatalf("fresh latch: exited %v result %v at %v", e.Exited(), e.Result(), e.ExitedAt())
	}
	select {
	case <-e.Done():
		t.Fatal("Done closed before Finish")
	default:
	}

	const waiters, finishers = 20, 20
	got := make(chan *driver.ExitResult, waiters)
	var wg sync.WaitGroup
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.Wait(context.Background())
			if err != nil {
				t.Errorf("Wait: %v", err)
			}
			got <- r
		}()
	}
	start := make(chan struct{})
	wins := make(chan int, finishers)
	var fw sync.WaitGroup
	for i := 0; i < finishers; i++ {
		fw.Add(1)
		go func() {
			defer fw.Done()
			<-start
			if e.Finish(&driver.ExitResult{ExitCode: i}) {
				wins <- i
			}
		}()
	}
	close(start)
	fw.Wait()
	close(wins)
	var winners []int
	for w := range wins {
		winners = append(winners, w)
	}
	if len(winners) != 1 {
		t.Fatalf("%d Finish calls reported winning, want 1: %v", len(winners), winners)
	}
	wg.Wait()
	close(got)
	n := 0
	for r := range got {
		n++
		if r == nil || r.ExitCode != winners[0] {
			t.Fatalf("a waiter got %+v, want exit code %d (the winner's)", r, winners[0])
		}
	}
	if n != waiters {
		t.Fatalf("%d of %d waiters woke", n, waiters)
	}
	if !e.Exited() || e.ExitedAt().IsZero() {
		t.Fatalf("after Finish: exited %v at %v", e.Exited(), e.ExitedAt())
	}
	if e.Finish(&driver.ExitResult{ExitCode: 99}) || e.Result().ExitCode != winners[0] {
		t.Fatalf("a late Finish changed the result to %+v", e.Result())
	}
}

// The latch keeps its own copy: neither the caller's pointer nor a copy
// handed out can change what later readers see.
func TestExitResultIsACopy(t *testing.T) {
	var e driver.Exit
	r := &driver.ExitResult{ExitCode: 3}
	e.Finish(r)
	r.ExitCode = 4
	got := e.Result()
	got.ExitCode = 5
	if c := e.Result().ExitCode; c != 3 {
		t.Fatalf("exit code %d, want 3", c)
	}
}

func TestFinishWithNilPanicsSayingWhy(t *testing.T) {
	var e driver.Exit
	defer func() {
		p := recover()
		if s, _ := p.(string); s == "" || e.Exited() {
			t.Fatalf("recovered %v, exited %v; want a message and no exit", p, e.Exited())
		}
	}()
	e.Finish(nil)
}

// Wait returns ctx's error when ctx ends first; WaitChan then closes with
// nothing sent. Control: once finished, both deliver the result.
func TestWaitHonoursTheContext(t *testing.T) {
	var e driver.Exit
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if r, err := e.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) || r != nil {
		t.Fatalf("Wait on an unfinished latch: %v, %v; want deadline exceeded", r, err)
	}
	if r, ok := <-e.WaitChan(ctx); ok {
		t.Fatalf("WaitChan sent %+v after ctx ended", r)
	}

	e.Finish(&driver.ExitResult{Signal: 9})
	if r, err := e.Wait(context.Background()); err != nil || r.Signal != 9 {
		t.Fatalf("Wait after Finish: %+v, %v", r, err)
	}
	ch := e.WaitChan(context.Background())
	if r := <-ch; r == nil || r.Signal != 9 {
		t.Fatalf("WaitChan after Finish sent %+v", r)
	}
	if _, ok := <-ch; ok {
		t.Fatal("WaitChan did not close after its one result")
	}
}

func TestTasks(t *testing.T) {
	ts := driver.NewTasks[*int]("exec task")
	if _, err := ts.Get("x"); !errors.Is(err, driver.ErrTaskNotFound) || err.Error() != "exec task x: task not found" {
		t.Fatalf("Get of an unknown ID: %v", err)
	}
	a, b := new(int), new(int)
	if _, added := ts.Add("x", a, nil); !added {
		t.Fatal("Add to an empty ID refused")
	}
	if got, err := ts.Get("x"); err != nil || got != a {
		t.Fatalf("Get after Add: %v, %v", got, err)
	}
	if old, added := ts.Add("x", b, nil); added || old != a {
		t.Fatalf("Add over a held ID with nil busy: added %v, old %v", added, old)
	}
	if _, added := ts.Add("x", b, func(*int) bool { return true }); added {
		t.Fatal("Add over a busy task succeeded")
	}
	if _, added := ts.Add("x", b, func(*int) bool { return false }); !added {
		t.Fatal("Add over a task that is not busy refused")
	}
	if ts.DeleteIf("x", a) {
		t.Fatal("DeleteIf removed a task that was replaced")
	}
	if got, _ := ts.Get("x"); got != b {
		t.Fatal("DeleteIf of a replaced task removed its successor")
	}
	ts.Put("y", a)
	n := 0
	for id, v := range ts.All() {
		n++
		ts.Delete(id) // the body may use the table
		if (id == "x" && v != b) || (id == "y" && v != a) {
			t.Fatalf("All yielded %s=%p", id, v)
		}
	}
	if n != 2 {
		t.Fatalf("All yielded %d tasks, want 2", n)
	}
	if _, err := ts.Get("y"); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	ts.Put("z", a)
	if !ts.DeleteIf("z", a) {
		t.Fatal("DeleteIf of the held task refused")
	}
}

// Of concurrent Adds of one ID with a nil busy, exactly one succeeds.
func TestConcurrentAddsOfOneIDOneWins(t *testing.T) {
	ts := driver.NewTasks[*int]("task")
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, added := ts.Add("same", new(int), nil); added {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d Adds won, want 1", wins)
	}
}
