package state

import (
	"errors"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// committer joins concurrent writes into one bbolt transaction (a group
// commit): a bbolt commit costs two fdatasyncs whatever it holds, and an
// agent placing or stopping many allocations at once writes from as many
// goroutines. Every write still returns only once it is on disk.
//
// No goroutine and no timer: the first writer to find no commit in flight
// commits everything queued so far; writes arriving meanwhile queue, and
// when the commit is done the oldest of them is handed the turn and commits
// the whole queue. A lone write therefore commits at once, and under load
// each commit carries what arrived during the previous one.
type committer struct {
	mu      sync.Mutex
	busy    bool
	pending []*write
	commits uint64 // transactions committed or tried (tests read it)
}

// write is one caller's change. done receives true when the caller must
// commit the queue itself, false when its change was committed (err set).
type write struct {
	fn   func(*bolt.Tx) error
	err  error
	done chan bool
}

// update runs fn in a write transaction, possibly shared with other
// callers' changes. fn must change nothing but tx: when a shared
// transaction fails, each change is run again in its own, so that one bad
// write fails only its own caller. A change that panics fails the others
// of its transaction (errPanicked) and panics in the goroutine that ran the
// transaction; no writer is left waiting.
func (s *Store) update(fn func(*bolt.Tx) error) error {
	w := &write{fn: fn, done: make(chan bool, 1)}
	c := &s.commits
	c.mu.Lock()
	c.pending = append(c.pending, w)
	if c.busy {
		c.mu.Unlock()
		if lead := <-w.done; !lead {
			return w.err
		}
		c.mu.Lock()
	}
	c.busy = true
	batch := c.pending
	c.pending = nil
	c.mu.Unlock()

	committed := false
	defer func() {
		if committed {
			return
		}
		// A change panicked inside the shared transaction (bbolt rolled it
		// back): fail the others and pass the turn on before the panic goes
		// on, so that no writer waits for ever.
		for _, o := range batch {
			o.err = errPanicked
		}
		s.handOff(batch, w)
	}()
	s.commitBatch(batch)
	committed = true
	s.handOff(batch, w)
	return w.err
}

// errPanicked is the error of the writes that shared a transaction with a
// change that panicked.
var errPanicked = errors.New("state store: not written: another change in the same transaction panicked")

// handOff gives the turn to the oldest queued write, if any, and tells the
// batch's other writers their result.
func (s *Store) handOff(batch []*write, self *write) {
	c := &s.commits
	c.mu.Lock()
	if len(c.pending) > 0 {
		c.pending[0].done <- true // its caller commits the queue
	} else {
		c.busy = false
	}
	c.mu.Unlock()
	for _, o := range batch {
		if o != self {
			o.done <- false
		}
	}
}

// commitBatch commits the batch's changes in one transaction, or, when that
// fails, each in its own, setting every write's err.
func (s *Store) commitBatch(batch []*write) {
	s.commits.mu.Lock()
	s.commits.commits++
	s.commits.mu.Unlock()
	err := s.apply(func(tx *bolt.Tx) error {
		for _, o := range batch {
			if err := o.fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil || len(batch) == 1 {
		for _, o := range batch {
			o.err = err
		}
		return
	}
	for _, o := range batch {
		o.err = s.apply(o.fn)
	}
}

// changeErr is an error a change returned: its caller's, not the store's.
type changeErr struct{ error }

// apply runs fn in one write transaction and notes whether the store took
// the write (writeHealth). An error fn returns says nothing about the
// store, and is returned as fn returned it.
func (s *Store) apply(fn func(*bolt.Tx) error) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := fn(tx); err != nil {
			return changeErr{err}
		}
		return nil
	})
	if ce, ok := err.(changeErr); ok {
		return ce.error
	}
	s.health.note(err)
	return err
}

func (s *Store) commitCount() uint64 {
	s.commits.mu.Lock()
	defer s.commits.mu.Unlock()
	return s.commits.commits
}

func (s *Store) pendingCount() int {
	s.commits.mu.Lock()
	defer s.commits.mu.Unlock()
	return len(s.commits.pending)
}
