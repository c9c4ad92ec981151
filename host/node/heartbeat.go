package node

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/wait"
)

// Writer writes this node's record (fleet.NodeWriter implements it).
type Writer interface {
	PutNode(ctx context.Context, n *model.Node) (uint64, error)
}

// Reader reads this node's record back as the bucket holds it
// (fleet.NodeWriter implements it). A heartbeat whose answer did not come
// is looked for before it is written again: a write that timed out on a
// loaded server has often landed, and every write, landed twice or not,
// reaches every watcher of the nodes bucket.
type Reader interface {
	ReadNode(ctx context.Context) (*model.Node, error)
}

// TTLWriter is a Writer that can write the record with a TTL of its own
// (fleet.NodeWriter: a per-message TTL under the bucket's).
type TTLWriter interface {
	PutNodeTTL(ctx context.Context, n *model.Node, ttl time.Duration) (uint64, error)
}

// HeartbeatConfig tunes registration and heartbeats.
type HeartbeatConfig struct {
	// Period between heartbeats; it must be well below the nodes bucket's
	// TTL (a third of it by default: DefaultPeriod).
	Period time.Duration
	// Grace: registration failures during this long after Run starts are
	// retried without an error log (a dev server may still be electing).
	Grace time.Duration
	// RetryMin and RetryMax bound the jittered registration backoff.
	RetryMin, RetryMax time.Duration
	// Observe, if set, is called after every write with its error (nil on
	// success): api.Metrics.HeartbeatResult counts them.
	Observe func(err error)
	// Plan, if set, plans each write (Liveness.Plan): the record is
	// written with the plan's TTL (through a TTLWriter, and in the
	// record's HeartbeatTTL) and the next one comes after its period,
	// instead of Period's.
	Plan func(ctx context.Context) Beat
	// WriteTimeout is the shortest deadline of one write
	// (DefaultWriteTimeout). A write waits a quarter of the planned period
	// when that is longer: at a thousand nodes a beat comes every 100 s,
	// and an answer later than a few seconds is no reason to write again.
	// The writer must keep a deadline the caller set (fleet.NodeWriter
	// does).
	WriteTimeout time.Duration
}

// Default heartbeat settings.
const (
	DefaultPeriod = 10 * time.Second
	DefaultGrace  = 10 * time.Second
	// DefaultWriteTimeout is fleet.DefaultRequestTimeout: a short period's
	// write waits as any other request.
	DefaultWriteTimeout = 5 * time.Second
)

// Heartbeater registers the node and keeps its record alive.
type Heartbeater struct {
	cfg   HeartbeatConfig
	w     Writer
	build func() *model.Node
	log   *slog.Logger
	poke  chan struct{}

	// unanswered is the last write when it failed: the record sent and
	// when (Run's goroutine only).
	unanswered *sent

	mu         sync.Mutex
	registered bool
	last       time.Time
	lastErr    error
	beats      uint64
	failures   uint64
	landed     uint64
}

// sent is one write of the record.
type sent struct {
	rec *model.Node
	at  time.Time
}

// NewHeartbeater returns a heartbeater that writes build()'s record through
// w. build is called before every write, so drain/eligibility intents and
// driver health changes go out with the next beat (or at once after Poke).
func NewHeartbeater(cfg HeartbeatConfig, w Writer, build func() *model.Node, log *slog.Logger) *Heartbeater {
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = 100 * time.Millisecond
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 5 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Heartbeater{cfg: cfg, w: w, build: build, log: log, poke: make(chan struct{}, 1)}
}

// Poke asks for a write of the record now (coalesced).
func (h *Heartbeater) Poke() {
	select {
	case h.poke <- struct{}{}:
	default:
	}
}

// Status is the heartbeater's state for the API.
type Status struct {
	Registered    bool      `json:"registered"`
	LastHeartbeat time.Time `json:"last_heartbeat,omitzero"`
	LastError     string    `json:"last_error,omitempty"`
	Heartbeats    uint64    `json:"heartbeats"`
	// Failures counts writes that failed or whose answer did not come in
	// time; FoundLanded those of them that the read-back found in the
	// bucket (so not written again).
	Failures    uint64 `json:"failures,omitempty"`
	FoundLanded uint64 `json:"found_landed,omitempty"`
}

// Status returns the current state.
func (h *Heartbeater) Status() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := Status{Registered: h.registered, LastHeartbeat: h.last, Heartbeats: h.beats, Failures: h.failures, FoundLanded: h.landed}
	if h.lastErr != nil {
		s.LastError = h.lastErr.Error()
	}
	return s
}

// Run registers the node (retrying with jittered backoff, silent during the
// grace period), then heartbeats until ctx ends. The first heartbeat after
// registration is staggered by a random fraction of the period.
func (h *Heartbeater) Run(ctx context.Context) error {
	start := time.Now()
	var period time.Duration // the planned period, as of the registration's write
	for attempt := 0; ; attempt++ {
		n := h.build()
		var err error
		period, err = h.write(ctx, n)
		h.record(err)
		if err == nil {
			h.log.Info("node registered", "node_id", n.ID, "name", n.Name, "datacenter", n.Datacenter, "node_pool", n.NodePool)
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(start) > h.cfg.Grace {
			h.log.Error("node registration failed; retrying", "node_id", n.ID, "err", err, "attempt", attempt+1)
		} else {
			h.log.Debug("node registration failed within grace period; retrying", "node_id", n.ID, "err", err)
		}
		if !wait.For(ctx, jitter(attempt, h.cfg.RetryMin, h.cfg.RetryMax)) {
			return ctx.Err()
		}
	}
	// Stagger the first heartbeat so a fleet restarting together spreads out.
	t := time.NewTimer(rand.N(period) + 1)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-h.poke:
			if !t.Stop() {
				<-t.C
			}
		}
		n := h.build()
		next, err := h.write(ctx, n)
		h.record(err)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// Retry sooner than the period, backing off; say it once.
			if failures == 0 {
				h.log.Warn("heartbeat failed; retrying", "node_id", n.ID, "err", err)
			} else {
				h.log.Debug("heartbeat still failing", "node_id", n.ID, "err", err, "failures", failures+1)
			}
			failures++
			// Sooner than the period, but not at once: the record lives
			// its TTL (three periods by default) past its last write, so a
			// quarter of the period still leaves several tries before it
			// expires; and a write that timed out on a loaded server may
			// well have landed. Retried within a few hundred milliseconds,
			// every node's beat reached the server again while it was
			// slowest, each one delivered to every watcher (a 1,000-agent
			// rollout here saw 10 to 30 node writes a second at a planned
			// 10).
			next = min(next, max(jitter(failures, h.cfg.RetryMin, h.cfg.RetryMax), next/4))
		case failures > 0:
			h.log.Info("heartbeat recovered", "node_id", n.ID, "failures", failures)
			failures = 0
		}
		t.Reset(next)
	}
}

// write writes the record as planned and returns the wait before the
// next write. After a write that failed, the record is read back first: if
// that write landed after all and nothing but the heartbeat time changed
// since, it stands for this one (no write), and the next comes a period
// after it was sent.
func (h *Heartbeater) write(ctx context.Context, n *model.Node) (next time.Duration, err error) {
	next = h.cfg.Period
	var ttl time.Duration
	tw, canTTL := h.w.(TTLWriter)
	if h.cfg.Plan != nil {
		b := h.cfg.Plan(ctx)
		if b.Period > 0 {
			next = b.Period
		}
		if canTTL && b.TTL >= time.Second {
			ttl = b.TTL
		}
	}
	if ttl > 0 {
		n.HeartbeatTTL = model.Duration(ttl)
	}
	if prev := h.unanswered; prev != nil {
		h.unanswered = nil
		if wait, ok := h.landedAfterAll(ctx, prev, n, next); ok {
			return wait, nil
		}
	}
	wctx, cancel := context.WithTimeout(ctx, max(h.cfg.WriteTimeout, next/4))
	defer cancel()
	at := time.Now()
	if ttl == 0 {
		_, err = h.w.PutNode(wctx, n)
	} else {
		_, err = tw.PutNodeTTL(wctx, n, ttl)
	}
	if err != nil && ctx.Err() == nil {
		h.unanswered = &sent{rec: n, at: at}
	}
	return next, err
}

// landedAfterAll reports whether prev, a write that failed, is the record
// the bucket holds and n says nothing else (so writing n would only move
// the heartbeat time); if so, the wait before the next write: the period
// from when prev was sent (it landed no earlier), unless that is already
// (nearly) out.
func (h *Heartbeater) landedAfterAll(ctx context.Context, prev *sent, n *model.Node, period time.Duration) (time.Duration, bool) {
	r, ok := h.w.(Reader)
	if !ok || prev.rec.HeartbeatAt.IsZero() || !model.SameButHeartbeat(prev.rec, n) {
		return 0, false
	}
	wait := period - time.Since(prev.at)
	if wait < h.cfg.RetryMax {
		return 0, false
	}
	rctx, cancel := context.WithTimeout(ctx, h.cfg.WriteTimeout)
	defer cancel()
	got, err := r.ReadNode(rctx)
	if err != nil || got == nil || !got.HeartbeatAt.Equal(prev.rec.HeartbeatAt) {
		return 0, false
	}
	h.mu.Lock()
	h.landed++
	h.mu.Unlock()
	return wait, true
}

func (h *Heartbeater) record(err error) {
	if h.cfg.Observe != nil {
		h.cfg.Observe(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastErr = err
	if err == nil {
		h.registered = true
		h.last = time.Now()
		h.beats++
	} else {
		h.failures++
	}
}

func jitter(attempt int, lo, hi time.Duration) time.Duration {
	d := lo << min(attempt, 16)
	if d > hi || d <= 0 {
		d = hi
	}
	return d/2 + rand.N(d/2+1)
}

// IntentSource is what FollowIntent reads: a change signal of its own
// (fleet.Source.Subscribe) and the operator intent in force
// (fleet.View.Intent).
type IntentSource interface {
	Subscribe() (<-chan struct{}, func())
	Intent(nodeID string) wanted.Intent
}

// FollowIntent pokes the heartbeater whenever the operator's intent for
// nodeID changes, so that a drain or an eligibility change reaches the node
// record (and every reconciler) at once instead of with the next heartbeat.
// It returns when ctx ends.
func FollowIntent(ctx context.Context, src IntentSource, nodeID string, hb *Heartbeater) {
	ch, cancel := src.Subscribe()
	defer cancel()
	last := src.Intent(nodeID)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
		in := src.Intent(nodeID)
		if !sameIntent(in, last) {
			last = in
			hb.Poke()
		}
	}
}

func sameIntent(a, b wanted.Intent) bool {
	if a.Eligibility != b.Eligibility || (a.Drain == nil) != (b.Drain == nil) {
		return false
	}
	return a.Drain == nil || (a.Drain.Deadline == b.Drain.Deadline && a.Drain.Started.Equal(b.Drain.Started))
}
