package docker

import (
	"context"
	"sync"

	"github.com/hivelet/hivelet/sdk/driver"
)

// broadcaster fans task events out to every TaskEvents subscriber. A slow
// subscriber loses events beyond its buffer rather than blocking the tasks.
type broadcaster struct {
	mu     sync.Mutex
	subs   map[chan *driver.TaskEvent]struct{}
	closed bool
}

func newBroadcaster() *broadcaster {
	return &broadcaster{subs: map[chan *driver.TaskEvent]struct{}{}}
}

func (b *broadcaster) subscribe(ctx context.Context) <-chan *driver.TaskEvent {
	ch := make(chan *driver.TaskEvent, 256)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		close(ch)
		return ch
	}
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	context.AfterFunc(ctx, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[ch]; ok {
			delete(b.subs, ch)
			close(ch)
		}
	})
	return ch
}

func (b *broadcaster) publish(ev *driver.TaskEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

func (b *broadcaster) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for ch := range b.subs {
		delete(b.subs, ch)
		close(ch)
	}
}
