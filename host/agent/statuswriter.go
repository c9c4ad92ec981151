package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hivelet/hivelet/host/allocrunner"
	"github.com/hivelet/hivelet/host/model"
)

// statusWriter writes this node's allocations' status to the allocations
// bucket off the runners' goroutines: the newest status of each allocation
// wins (a burst of changes is one write), and a failed write is retried
// until it succeeds or a newer status replaces it (a node cut off from NATS
// catches up when it reconnects).
type statusWriter struct {
	w   AllocWriter
	log *slog.Logger
	// written, if set, is told the revision of every successful write (the
	// loop recognises the watch's echo of its own writes).
	written func(rev uint64)

	mu      sync.Mutex
	pending map[string]*model.Allocation
	deletes map[string]allocRef // keys to remove (older finished allocations), by allocation ID
	// acked is the KV revision of this writer's last successful put of each
	// allocation (dropped when its key is removed); inflight names those
	// being written or removed now. Together they tell this node's own
	// writes from anybody else's (the node is its keys' single writer).
	acked    map[string]uint64
	inflight map[string]bool
	wake     chan struct{}
	idle     *sync.Cond
	busy     bool
}

func newStatusWriter(w AllocWriter, log *slog.Logger) *statusWriter {
	s := &statusWriter{w: w, log: log, pending: map[string]*model.Allocation{}, deletes: map[string]allocRef{},
		acked: map[string]uint64{}, inflight: map[string]bool{}, wake: make(chan struct{}, 1)}
	s.idle = sync.NewCond(&s.mu)
	return s
}

// keyState reports the revision of this writer's last put of allocation
// id (0: none since this agent started, or removed) and whether a write or
// removal of it is queued or in flight, when a reader's view of the key
// may legitimately differ from what this node wrote.
func (s *statusWriter) keyState(id string) (rev uint64, busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, pending := s.pending[id]
	_, deleting := s.deletes[id]
	return s.acked[id], pending || deleting || s.inflight[id]
}

func (s *statusWriter) enqueue(a *model.Allocation) {
	if s.w == nil {
		return
	}
	s.mu.Lock()
	s.pending[a.ID] = a
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// forget queues the removal of an allocation's key (after any pending
// write of it).
func (s *statusWriter) forget(ref allocRef) {
	if s.w == nil {
		return
	}
	s.mu.Lock()
	delete(s.pending, ref.id)
	s.deletes[ref.id] = ref
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *statusWriter) run(ctx context.Context) {
	if s.w == nil {
		return
	}
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-retry.C:
		}
		if failed := s.writeAll(ctx); failed {
			retry.Reset(time.Second)
		}
	}
}

// writeAll writes every pending status once; it reports whether some failed
// (they stay pending unless a newer status arrived meanwhile).
func (s *statusWriter) writeAll(ctx context.Context) (failed bool) {
	s.mu.Lock()
	batch := s.pending
	s.pending = map[string]*model.Allocation{}
	deletes := s.deletes
	s.deletes = map[string]allocRef{}
	s.busy = true
	for id := range batch {
		s.inflight[id] = true
	}
	for id := range deletes {
		s.inflight[id] = true
	}
	s.mu.Unlock()
	for id, ref := range deletes {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.w.DeleteAlloc(wctx, ref.namespace, ref.job, id)
		cancel()
		s.mu.Lock()
		delete(s.inflight, id)
		if err == nil {
			delete(s.acked, id)
		}
		s.mu.Unlock()
		if err != nil {
			failed = true
			s.mu.Lock()
			s.deletes[id] = ref
			s.mu.Unlock()
			s.log.Warn("removing an old allocation's status; will retry", "alloc_id", id, "err", err)
		}
	}
	for id, a := range batch {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		// The bucket carries the compact value (each task's telling and
		// last events); the whole history stays here (AllocDetails).
		rev, err := s.w.PutAlloc(wctx, allocrunner.ForWire(a))
		cancel()
		if err == nil && s.written != nil {
			s.written(rev)
		}
		s.mu.Lock()
		delete(s.inflight, id)
		if err == nil {
			s.acked[id] = rev
		}
		s.mu.Unlock()
		if err != nil {
			failed = true
			s.mu.Lock()
			if _, newer := s.pending[id]; !newer {
				s.pending[id] = a
			}
			s.mu.Unlock()
			s.log.Warn("writing allocation status; will retry", "alloc_id", id, "err", err)
		}
	}
	s.mu.Lock()
	s.busy = false
	s.idle.Broadcast()
	s.mu.Unlock()
	return failed
}

// flush writes what is pending now, within ctx.
func (s *statusWriter) flush(ctx context.Context) {
	if s.w == nil {
		return
	}
	s.mu.Lock()
	for s.busy {
		s.idle.Wait()
	}
	s.mu.Unlock()
	s.writeAll(ctx)
}

// allocRef names an allocation's key: the allocations bucket's keys carry
// the job.
type allocRef struct{ namespace, job, id string }
