// Package wait owns the one way the module's loops pause: For, a sleep that
// ends early when its context does. Invariant: For never returns true once
// ctx has ended before the pause was over, so a loop that checks its
// answer stops promptly on shutdown (TestForEndsWithItsContext). It holds
// no state and starts no goroutine. No other package writes this pause
// again (internal/lint's TestTheModulePausesOnlyThroughWaitFor).
package wait

import (
	"context"
	"time"
)

// For pauses for d and reports true, or returns false as soon as ctx ends
// (at once if it already has). The timer is released either way.
func For(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
