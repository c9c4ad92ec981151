package policies

import (
	"context"
	"slices"
	"time"
)

// This file is the follower: for every name-only reference, the engine
// re-resolves the name in the object store every FollowInterval and
// switches the name to the digest it points at now.

// startFollowing makes s the store the background follower refreshes
// through, and starts the follower once.
func (e *Engine) startFollowing(s *Store) {
	e.followStore.Store(s)
	if e.opts.FollowInterval < 0 {
		return
	}
	e.followOnce.Do(func() {
		e.bg.Add(1)
		go e.runFollower(e.bgCtx)
	})
}

// runFollower refreshes the followed names every FollowInterval until ctx
// ends. A failure is logged when it differs from the previous one (an
// unreachable bucket is not logged every interval); the names keep their
// current modules.
func (e *Engine) runFollower(ctx context.Context) {
	defer e.bg.Done()
	t := time.NewTicker(e.opts.FollowInterval)
	defer t.Stop()
	var last string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, max(e.opts.FollowInterval, 10*time.Second))
		err := e.followStore.Load().Refresh(rctx, e)
		cancel()
		switch {
		case err == nil && last != "":
			e.log.Info("policy names refreshed again")
			last = ""
		case err != nil && ctx.Err() == nil && err.Error() != last:
			e.log.Warn("refreshing policy names failed; they keep their current modules", "err", err)
			last = err.Error()
		}
	}
}

// followed lists the names that track the object store, sorted.
func (e *Engine) followed() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]string, 0, len(e.follow))
	for n := range e.follow {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
