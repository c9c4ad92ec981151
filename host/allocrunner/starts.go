package allocrunner

import "sync"

// Starts counts the runners whose first start is under way, across an
// agent's runners (Config.Starts): from Run until the tasks' first start
// attempts are over, pendingWriteDelay at most. Work that can wait, such as
// the rollout's shared writes, lets those starts go first. A nil *Starts
// counts nothing and is always idle.
type Starts struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n falls to 0
}

// closedIdle is Idle's answer while no start is in flight.
var closedIdle = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Begin counts one more start in flight, until its End.
func (s *Starts) Begin() {
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.n == 0 {
		s.idle = make(chan struct{})
	}
	s.n++
	s.mu.Unlock()
}

// End ends a start Begin counted.
func (s *Starts) End() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.n--
	if s.n == 0 {
		close(s.idle)
	}
	s.mu.Unlock()
}

// Idle returns a channel closed once no start is in flight (at once, if
// none is now).
func (s *Starts) Idle() <-chan struct{} {
	if s == nil {
		return closedIdle
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		return closedIdle
	}
	return s.idle
}

// inFlight is the number of starts in flight.
func (s *Starts) inFlight() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}
