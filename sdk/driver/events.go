package driver

import (
	"context"
	"sync"
)

// Events fans task events out to every TaskEvents subscriber: a driver
// calls Publish where something happens to a task and returns Subscribe
// from its TaskEvents. Invariants (TestEventsFanOut): every subscriber
// receives each event published while it is subscribed, in order, up to
// its buffer; a subscriber that does not keep up loses the events beyond
// its buffer, and Publish never blocks, so a slow reader cannot stall a
// task; a subscriber's channel is closed exactly once, when its ctx ends or
// the Events is closed. The zero value is ready to use.
type Events struct {
	mu     sync.Mutex
	subs   map[chan *TaskEvent]struct{}
	closed bool
}

// EventBuffer is how many events a subscriber may fall behind before it
// loses some.
const EventBuffer = 256

// Subscribe returns a channel of the events published from now until ctx
// ends or the Events is closed; then the channel is closed.
func (e *Events) Subscribe(ctx context.Context) <-chan *TaskEvent {
	ch := make(chan *TaskEvent, EventBuffer)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		close(ch)
		return ch
	}
	if e.subs == nil {
		e.subs = map[chan *TaskEvent]struct{}{}
	}
	e.subs[ch] = struct{}{}
	e.mu.Unlock()
	context.AfterFunc(ctx, func() { e.drop(ch) })
	return ch
}

// drop unsubscribes and closes ch unless that was already done.
func (e *Events) drop(ch chan *TaskEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.subs[ch]; ok {
		delete(e.subs, ch)
		close(ch)
	}
}

// Publish sends ev to every subscriber that has room for it. Subscribers
// share ev: it must not be changed after Publish.
func (e *Events) Publish(ev *TaskEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for ch := range e.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

// Close closes every subscriber's channel; later Subscribes get a closed
// channel and later Publishes reach nobody. A driver closes its Events when
// it shuts down.
func (e *Events) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for ch := range e.subs {
		delete(e.subs, ch)
		close(ch)
	}
}
