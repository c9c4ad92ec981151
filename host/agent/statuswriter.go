package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

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

	mu      sync.Mutex
	pending map[string]*model.Allocation
	wake    chan struct{}
	idle    *sync.Cond
	busy    bool
}

func newStatusWriter(w AllocWriter, log *slog.Logger) *statusWriter {
	s := &statusWriter{w: w, log: log, pending: map[string]*model.Allocation{}, wake: make(chan struct{}, 1)}
	s.idle = sync.NewCond(&s.mu)
	return s
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
	s.busy = true
	s.mu.Unlock()
	for id, a := range batch {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := s.w.PutAlloc(wctx, a)
		cancel()
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
