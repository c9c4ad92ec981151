package driver

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"time"
)

// This file holds the bookkeeping every driver repeats: the table of its
// tasks by ID and each task's exit latch. Using them is optional; the
// Driver contract does not depend on them.

// Exit is a task's exit latch: it is finished at most once, and finishing it
// wakes every waiter. Invariant: Result and ExitedAt are set before Done is
// closed, and never change afterwards. The zero value is an unfinished latch
// ready to use; an Exit must not be copied after first use.
type Exit struct {
	mu     sync.Mutex
	done   chan struct{} // made on first use; closed by the first Finish
	result *ExitResult
	at     time.Time
}

// doneLocked returns the done channel, making it if needed. Called with
// e.mu held.
func (e *Exit) doneLocked() chan struct{} {
	if e.done == nil {
		e.done = make(chan struct{})
	}
	return e.done
}

// Finish records r as the task's exit, stamped with the current time, and
// wakes every waiter. Only the first call counts: it reports whether it was
// this call. r must not be nil (Finish panics, saying so); the latch keeps
// its own copy, so r may be reused by the caller.
func (e *Exit) Finish(r *ExitResult) bool {
	if r == nil {
		panic("driver: Exit.Finish called with a nil *ExitResult; pass the exit to record")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.result != nil {
		return false
	}
	c := *r
	e.result, e.at = &c, time.Now()
	close(e.doneLocked())
	return true
}

// Done returns a channel closed once the task has exited.
func (e *Exit) Done() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.doneLocked()
}

// Exited reports whether Finish was called.
func (e *Exit) Exited() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.result != nil
}

// Result returns a copy of the recorded exit, or nil while the task runs.
func (e *Exit) Result() *ExitResult {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.result == nil {
		return nil
	}
	c := *e.result
	return &c
}

// ExitedAt returns when Finish recorded the exit; the zero time while the
// task runs.
func (e *Exit) ExitedAt() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.at
}

// Wait blocks until the task has exited and returns a copy of its exit, or
// returns ctx's error if ctx ends first.
func (e *Exit) Wait(ctx context.Context) (*ExitResult, error) {
	select {
	case <-e.Done():
		return e.Result(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// WaitChan is the body of a Driver's WaitTask: a channel that yields the
// task's exit once it has exited and is then closed, or is closed with
// nothing sent if ctx ends first (which the host reads as "wait again").
func (e *Exit) WaitChan(ctx context.Context) <-chan *ExitResult {
	ch := make(chan *ExitResult, 1)
	go func() {
		defer close(ch)
		if r, err := e.Wait(ctx); err == nil {
			ch <- r
		}
	}()
	return ch
}

// Tasks is a driver's table of tasks by ID, safe for concurrent use. Get of
// an ID it does not hold returns an error wrapping ErrTaskNotFound, which is
// what every Driver method taking a task ID must return. Create it with
// NewTasks.
type Tasks[T comparable] struct {
	kind string

	mu sync.Mutex
	m  map[string]T
}

// NewTasks returns an empty table. kind names its tasks in errors: with
// kind "exec task", an unknown ID x reads "exec task x: task not found".
func NewTasks[T comparable](kind string) *Tasks[T] {
	return &Tasks[T]{kind: kind, m: map[string]T{}}
}

// Get returns the task with the given ID, or an error wrapping
// ErrTaskNotFound.
func (ts *Tasks[T]) Get(id string) (T, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.m[id]
	if !ok {
		var zero T
		return zero, fmt.Errorf("%s %s: %w", ts.kind, id, ErrTaskNotFound)
	}
	return t, nil
}

// Put sets the task with the given ID, replacing any task held under it.
func (ts *Tasks[T]) Put(id string, t T) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.m[id] = t
}

// Add sets the task with the given ID unless the table holds a task under
// it that busy reports true for (busy nil: any task held under the ID). It
// reports whether t was added and, if not, returns the task in the way.
// The check and the write are one step: of two concurrent Adds of one ID
// with a nil busy, exactly one succeeds.
func (ts *Tasks[T]) Add(id string, t T, busy func(old T) bool) (old T, added bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if old, ok := ts.m[id]; ok && (busy == nil || busy(old)) {
		return old, false
	}
	ts.m[id] = t
	return t, true
}

// All yields the tasks held when it was called, by ID in no set order. It
// yields from a snapshot, so the loop body may call the table's methods.
func (ts *Tasks[T]) All() iter.Seq2[string, T] {
	ts.mu.Lock()
	snap := make(map[string]T, len(ts.m))
	for id, t := range ts.m {
		snap[id] = t
	}
	ts.mu.Unlock()
	return func(yield func(string, T) bool) {
		for id, t := range snap {
			if !yield(id, t) {
				return
			}
		}
	}
}

// Delete forgets the task with the given ID, if any.
func (ts *Tasks[T]) Delete(id string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.m, id)
}

// DeleteIf forgets the task with the given ID only if it is still t (not a
// task put under the same ID since), and reports whether it did.
func (ts *Tasks[T]) DeleteIf(id string, t T) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if cur, ok := ts.m[id]; !ok || cur != t {
		return false
	}
	delete(ts.m, id)
	return true
}
