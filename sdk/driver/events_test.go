package driver_test

import (
	"context"
	"testing"

	"github.com/hivelet/hivelet/sdk/driver"
)

func TestEventsFanOut(t *testing.T) {
	var ev driver.Events
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b := ev.Subscribe(ctx), ev.Subscribe(ctx)
	lateCtx, lateCancel := context.WithCancel(ctx)
	for i := range 3 {
		ev.Publish(&driver.TaskEvent{TaskID: "t", Message: string(rune('a' + i))})
	}
	late := ev.Subscribe(lateCtx)
	ev.Publish(&driver.TaskEvent{TaskID: "t", Message: "d"})

	read := func(ch <-chan *driver.TaskEvent, n int) string {
		s := ""
		for range n {
			s += (<-ch).Message
		}
		return s
	}
	if got := read(a, 4); got != "abcd" {
		t.Errorf("subscriber a got %q, want abcd in order", got)
	}
	if got := read(b, 4); got != "abcd" {
		t.Errorf("subscriber b got %q, want abcd in order", got)
	}
	if got := read(late, 1); got != "d" {
		t.Errorf("a late subscriber got %q, want only what was published after it subscribed", got)
	}

	// A reader that does not keep up loses what is beyond its buffer, and
	// Publish does not block on it (this loop would hang otherwise).
	for range driver.EventBuffer + 10 {
		ev.Publish(&driver.TaskEvent{Message: "x"})
	}
	if len(a) != driver.EventBuffer {
		t.Errorf("a slow subscriber holds %d events, want its buffer, %d", len(a), driver.EventBuffer)
	}

	// Ending a subscriber's ctx closes its channel, and only its channel.
	lateCancel()
	for range late {
	}
	ev.Publish(&driver.TaskEvent{Message: "after"})
	select {
	case _, ok := <-b:
		if !ok {
			t.Fatal("b was closed by another subscriber's ctx")
		}
	default:
	}

	// Close closes everyone; a later Subscribe gets a closed channel, and a
	// later ctx end does not close anything twice.
	ev.Close()
	for range a {
	}
	for range b {
	}
	if _, ok := <-ev.Subscribe(context.Background()); ok {
		t.Fatal("Subscribe after Close got an event")
	}
	cancel()
	ev.Publish(&driver.TaskEvent{Message: "nobody"})
}
