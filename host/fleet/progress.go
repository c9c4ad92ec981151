package fleet

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// WatchProbe judges, from outside, whether a Source's watches keep up with
// their buckets: on each Check it reads every watched bucket's newest
// revision and compares it with the revision the Source applied. A bucket
// that cannot be read (its stream gone: "stream not found"), or a watch
// that stays behind its bucket without applying anything for the window,
// is a problem, named for the node's health. The Source repairs what it
// can itself; the probe only says when that is not enough
// (TestAWatchWhoseBucketIsGoneOrThatStallsIsAProblemForTheProbe).
type WatchProbe struct {
	src    *Source
	window time.Duration

	mu       sync.Mutex
	behind   map[string]behindMark // kind → since when it has been behind at that revision
	problems []string
}

type behindMark struct {
	applied uint64
	since   time.Time
}

// NewWatchProbe returns a probe of src's watches; a watch behind its bucket
// for window without progress is stalled.
func NewWatchProbe(src *Source, window time.Duration) *WatchProbe {
	return &WatchProbe{src: src, window: window, behind: map[string]behindMark{}}
}

// Check probes every watched bucket now and returns the problems found
// (also kept for Problems). A bucket whose boot pull is not complete is
// left to the health's own "boot pull" check.
func (p *WatchProbe) Check(ctx context.Context, now time.Time) []string {
	s := p.src
	var problems []string
	for _, b := range s.st.buckets() {
		if !contains(s.kinds, b.kind) || b.kv == nil {
			continue
		}
		s.mu.Lock()
		synced := s.synced[b.kind]
		s.mu.Unlock()
		if !synced {
			continue
		}
		last, err := s.lastRevision(ctx, b.kv, nil)
		applied := s.revision(b.kind)
		p.mu.Lock()
		switch {
		case err != nil:
			delete(p.behind, b.kind)
			problems = append(problems, fmt.Sprintf("bucket %s cannot be read: %v", b.name, err))
		case last <= applied:
			delete(p.behind, b.kind)
		default:
			m, ok := p.behind[b.kind]
			if !ok || m.applied != applied {
				p.behind[b.kind] = behindMark{applied: applied, since: now}
			} else if d := now.Sub(m.since); d >= p.window {
				problems = append(problems, fmt.Sprintf("bucket %s: the watch applied revision %d, the bucket is at %d, no progress for %s", b.name, applied, last, d.Round(time.Second)))
			}
		}
		p.mu.Unlock()
	}
	sort.Strings(problems)
	p.mu.Lock()
	p.problems = problems
	p.mu.Unlock()
	return problems
}

// Problems is what the last Check found.
func (p *WatchProbe) Problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.problems...)
}
