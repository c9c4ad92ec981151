package node

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// A large fleet's heartbeats (docs/scale.md, "Heartbeats that grow with
// the fleet"). Every agent receives every node's heartbeat, so with a fixed
// period the fleet's deliveries grow as N². Once every live node writes its
// record with a TTL of its own (per-message TTL, advertised as BeatProtocol),
// the TTL doubles with the fleet: a third of it, the period, stays at least
// N / BeatWritesPerSecond seconds, so the whole fleet writes at most
// BeatWritesPerSecond heartbeats a second and each agent receives at most
// that many. The nodes bucket's bucket-wide TTL (its MaxAge, the Ceiling)
// stays the longest any record lives: it is raised before a longer TTL is
// written and lowered again, one halving at a time, once no live node
// writes a TTL above the lower value. While a node that writes no TTL of
// its own is live, the TTL stays the configured one and the ceiling is
// never raised: that node's record lives as long as the ceiling.

// BeatWritesPerSecond bounds a large fleet's heartbeat writes per second.
const BeatWritesPerSecond = 50

// BeatTTL is the TTL of a node record in a fleet of live nodes: base (the
// configured node_ttl) while grow is false (a live node writes no TTL of its
// own) or the fleet is small, else base doubled until a third of it is at
// least live / BeatWritesPerSecond seconds. Doubling lets agents that count
// the fleet slightly differently agree, and changes the TTL only when the
// fleet doubles or halves.
func BeatTTL(base time.Duration, live int, grow bool) time.Duration {
	if base <= 0 {
		base = 3 * DefaultPeriod
	}
	if !grow {
		return base
	}
	need := time.Duration(live) * time.Second / BeatWritesPerSecond // the least period
	ttl := base
	for ttl/3 < need && ttl < 24*time.Hour {
		ttl *= 2
	}
	return ttl
}

// Beat is one heartbeat's plan: the wait before the next one, and the TTL
// the record is written with (0: the bucket's, written as a plain put).
type Beat struct {
	Period, TTL time.Duration
}

// Ceiling reads and sets the nodes bucket's bucket-wide TTL
// (fleet.Store implements it).
type Ceiling interface {
	NodeCeiling(ctx context.Context) (time.Duration, error)
	SetNodeCeiling(ctx context.Context, ttl time.Duration) error
}

// FleetFacts is what the liveness plan reads of the fleet: the live nodes,
// whether every live node writes a TTL of its own (grow), and the longest
// TTL a live node's record says it is written with.
type FleetFacts struct {
	Live    int
	Grow    bool
	MaxTTL  time.Duration
	Counted bool // false until the fleet has been counted once (the base TTL until then)
}

// Liveness plans this node's heartbeats (HeartbeatConfig.Plan): the TTL
// BeatTTL names for the fleet, never above the bucket's ceiling; it raises
// the ceiling when the TTL must grow and lowers it when the fleet shrank.
type Liveness struct {
	// Base is the configured node TTL (node_ttl).
	Base time.Duration
	// Fleet reports the fleet as this agent sees it.
	Fleet func() FleetFacts
	// Ceiling is the nodes bucket.
	Ceiling Ceiling
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	Log *slog.Logger

	mu         sync.Mutex
	ceiling    time.Duration // the bucket's TTL as last read or set (0: not known)
	readAt     time.Time     // when it was read
	lowerSince time.Time     // since when a lower ceiling would do (zero: it would not)
	ttl        time.Duration // the TTL of the last plan
}

// ceilingReread is how often the ceiling is read again: another agent
// may have changed it.
const ceilingReread = 5 * time.Minute

// Plan returns the next heartbeat's period and TTL.
func (l *Liveness) Plan(ctx context.Context) Beat {
	now := time.Now()
	if l.Now != nil {
		now = l.Now()
	}
	f := FleetFacts{}
	if l.Fleet != nil {
		f = l.Fleet()
	}
	want := BeatTTL(l.Base, f.Live, f.Grow && f.Counted)
	l.mu.Lock()
	defer l.mu.Unlock()
	grow := f.Grow && f.Counted
	if l.ceiling <= 0 || now.Sub(l.readAt) >= ceilingReread || (want > l.ceiling && grow) {
		// Unknown, old, or about to be raised: another agent may have
		// raised it already.
		if c, err := l.Ceiling.NodeCeiling(ctx); err == nil && c > 0 {
			l.ceiling, l.readAt = c, now
		} else if err != nil {
			l.log().Debug("reading the nodes bucket's TTL", "err", err)
		}
	}
	switch {
	case l.ceiling <= 0:
		// Not known: the configured TTL (as before the ceiling was read).
		l.ttl = min(want, l.Base)
		return Beat{Period: l.ttl / 3, TTL: l.ttl}
	case want > l.ceiling && grow:
		l.setCeiling(ctx, want, now, "raised: the fleet grew", f.Live)
		l.lowerSince = time.Time{}
	case want > l.ceiling && l.ttl != l.ceiling:
		l.log().Warn("the nodes bucket's TTL is shorter than this node's: heartbeating within the bucket's",
			"bucket_ttl", l.ceiling, "node_ttl", want)
	case want < l.ceiling && f.Counted && max(want, f.MaxTTL) <= l.ceiling/2:
		// The fleet shrank, or a node that writes no TTL of its own came
		// back: lower the ceiling one halving at a time, once a lower one
		// has done for a whole ceiling (every record since written lower).
		if l.lowerSince.IsZero() {
			l.lowerSince = now
		} else if now.Sub(l.lowerSince) >= l.ceiling {
			l.setCeiling(ctx, l.ceiling/2, now, "lowered: the fleet shrank", f.Live)
			l.lowerSince = time.Time{}
		}
	default:
		l.lowerSince = time.Time{}
	}
	l.ttl = min(want, l.ceiling)
	return Beat{Period: l.ttl / 3, TTL: l.ttl}
}

// setCeiling sets the bucket's TTL and, once it took, the ceiling held
// (l.mu held).
func (l *Liveness) setCeiling(ctx context.Context, to time.Duration, now time.Time, what string, live int) {
	if err := l.Ceiling.SetNodeCeiling(ctx, to); err != nil {
		l.log().Warn("setting the nodes bucket's TTL", "from", l.ceiling, "to", to, "err", err)
		return
	}
	l.log().Info("nodes bucket TTL "+what, "from", l.ceiling, "to", to, "live_nodes", live)
	l.ceiling, l.readAt = to, now
}

// TTL is the TTL of the last plan (the base before the first): how long
// this node's record lives without a heartbeat, and the window of the
// disruption guard.
func (l *Liveness) TTL() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ttl > 0 {
		return l.ttl
	}
	return l.Base
}

func (l *Liveness) log() *slog.Logger {
	if l.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l.Log
}
