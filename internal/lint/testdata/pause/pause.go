package pause

import (
	"context"
	"time"
)

func loops(ctx context.Context, changed <-chan struct{}) {
	select { // a pause: line 9
	case <-ctx.Done():
		return
	case <-time.After(time.Second):
	}
	select { // a pause, the other way round: line 14
	case <-time.After(time.Second):
	case <-ctx.Done():
	}
	select { // waits for a change, with a timeout: not a pause
	case <-changed:
	case <-time.After(time.Second):
	}
	select { // a timeout that does something: not a pause
	case <-ctx.Done():
	case <-time.After(time.Second):
		panic("late")
	}
}
