package node

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// The TTL doubles with the fleet so that the period (a third of it) is at
// least live / BeatWritesPerSecond seconds: the fleet writes at most that
// many heartbeats a second. It stays the configured one while a live node
// writes no TTL of its own.
func TestTheHeartbeatTTLDoublesWithTheFleet(t *testing.T) {
	base := 30 * time.Second
	for _, c := range []struct {
		live int
		grow bool
		want time.Duration
	}{
		{1, true, base},
		{500, true, base}, // period 10 s = 500 / 50
		{501, true, 60 * time.Second},
		{1000, true, 60 * time.Second},
		{1001, true, 120 * time.Second},
		{10000, true, 960 * time.Second}, // period 320 s ≥ 200 s
		{100000, true, 7680 * time.Second},
		{100000, false, base},
	} {
		got := BeatTTL(base, c.live, c.grow)
		if got != c.want {
			t.Errorf("BeatTTL(%s, %d, %v) = %s, want %s", base, c.live, c.grow, got, c.want)
		}
		if c.grow && c.live > 0 {
			if writes := float64(c.live) / (got / 3).Seconds(); writes > BeatWritesPerSecond {
				t.Errorf("%d nodes at a %s period write %.1f heartbeats/s", c.live, got/3, writes)
			}
		}
	}
}

// fakeCeiling is a nodes bucket's TTL.
type fakeCeiling struct {
	mu       sync.Mutex
	ttl      time.Duration
	reads    int
	sets     []time.Duration
	failRead bool
}

func (c *fakeCeiling) NodeCeiling(context.Context) (time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	if c.failRead {
		return 0, errors.New("no responders")
	}
	return c.ttl, nil
}

func (c *fakeCeiling) SetNodeCeiling(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sets = append(c.sets, d)
	c.ttl = d
	return nil
}

// A fleet that grows past what the configured TTL allows raises the
// bucket's TTL first, then writes the longer TTL; a fleet with a node that
// writes no TTL of its own does not (that node's record would then live
// as long as the raised ceiling). Control: a small fleet changes nothing.
func TestTheCeilingIsRaisedOnlyWhenEveryLiveNodeWritesItsOwnTTL(t *testing.T) {
	base := 30 * time.Second
	for _, c := range []struct {
		name       string
		facts      FleetFacts
		wantTTL    time.Duration
		wantRaised bool
	}{
		{"a small fleet", FleetFacts{Live: 100, Grow: true, Counted: true}, base, false},
		{"1,000 nodes", FleetFacts{Live: 1000, Grow: true, Counted: true}, 60 * time.Second, true},
		{"1,000 nodes, one older", FleetFacts{Live: 1000, Grow: false, Counted: true}, base, false},
		{"not counted yet", FleetFacts{Live: 1000, Grow: true}, base, false},
	} {
		ceil := &fakeCeiling{ttl: base}
		l := &Liveness{Base: base, Ceiling: ceil, Fleet: func() FleetFacts { return c.facts }}
		b := l.Plan(context.Background())
		if b.TTL != c.wantTTL || b.Period != c.wantTTL/3 || l.TTL() != c.wantTTL {
			t.Errorf("%s: plan %+v (TTL() %s), want TTL %s every %s", c.name, b, l.TTL(), c.wantTTL, c.wantTTL/3)
		}
		if raised := len(ceil.sets) > 0; raised != c.wantRaised || (raised && ceil.sets[0] != c.wantTTL) {
			t.Errorf("%s: ceiling set %v, want raised %v", c.name, ceil.sets, c.wantRaised)
		}
	}
}

// A bucket made with a shorter TTL than this agent's node_ttl bounds the
// TTL (the record would otherwise expire between two heartbeats); and a
// bucket whose TTL cannot be read leaves the configured one.
func TestTheBucketsTTLBoundsTheRecordsTTL(t *testing.T) {
	ceil := &fakeCeiling{ttl: 30 * time.Second}
	l := &Liveness{Base: 60 * time.Second, Ceiling: ceil, Fleet: func() FleetFacts { return FleetFacts{Live: 3, Counted: true} }}
	if b := l.Plan(context.Background()); b.TTL != 30*time.Second || b.Period != 10*time.Second {
		t.Fatalf("plan %+v under a 30 s bucket, want 30 s every 10 s", b)
	}
	if len(ceil.sets) != 0 {
		t.Fatalf("the ceiling was set (%v) with a node that writes no TTL of its own", ceil.sets)
	}
	l = &Liveness{Base: 30 * time.Second, Ceiling: &fakeCeiling{failRead: true}}
	if b := l.Plan(context.Background()); b.TTL != 30*time.Second || b.Period != 10*time.Second {
		t.Fatalf("plan %+v with the bucket unread, want the configured 30 s", b)
	}
}

// Once the fleet shrank, the ceiling comes down one halving at a time,
// each after a lower one has done for a whole ceiling, and never below
// what a live record says it was written with. Control: a record that
// still says 120 s keeps the ceiling up.
func TestTheCeilingIsLoweredOneHalvingAtATimeOnceNoRecordNeedsIt(t *testing.T) {
	base := 30 * time.Second
	now := time.Unix(1_000_000, 0)
	facts := FleetFacts{Live: 100, Grow: true, Counted: true, MaxTTL: 120 * time.Second}
	ceil := &fakeCeiling{ttl: 120 * time.Second}
	l := &Liveness{Base: base, Ceiling: ceil, Now: func() time.Time { return now }, Fleet: func() FleetFacts { return facts }}
	step := func(d time.Duration) Beat {
		now = now.Add(d)
		return l.Plan(context.Background())
	}
	for range 10 {
		step(time.Minute)
	}
	if len(ceil.sets) != 0 {
		t.Fatalf("lowered %v while a live record says 120 s", ceil.sets)
	}
	facts.MaxTTL = base
	step(time.Second) // a lower ceiling would do from now
	if b := step(119 * time.Second); len(ceil.sets) != 0 || b.TTL != base {
		t.Fatalf("after 119 s: sets %v, plan %+v", ceil.sets, b)
	}
	step(time.Second)
	if len(ceil.sets) != 1 || ceil.sets[0] != 60*time.Second {
		t.Fatalf("after a whole ceiling: sets %v, want [1m0s]", ceil.sets)
	}
	step(30 * time.Second)
	step(59 * time.Second)
	if len(ceil.sets) != 1 {
		t.Fatalf("lowered again before a whole (new) ceiling: %v", ceil.sets)
	}
	step(time.Second)
	if len(ceil.sets) != 2 || ceil.sets[1] != base {
		t.Fatalf("sets %v, want [1m0s 30s]", ceil.sets)
	}
	for range 10 {
		step(time.Minute)
	}
	if len(ceil.sets) != 2 {
		t.Fatalf("lowered below what the fleet needs: %v", ceil.sets)
	}
}

// ttlWriter records the TTL of each write.
type ttlWriter struct {
	fakeWriter
	ttls []time.Duration
}

func (w *ttlWriter) PutNodeTTL(ctx context.Context, n *model.Node, ttl time.Duration) (uint64, error) {
	w.mu.Lock()
	w.ttls = append(w.ttls, ttl)
	w.mu.Unlock()
	return w.PutNode(ctx, n)
}

// The heartbeater writes with the plan's TTL, says it in the record, and
// waits the plan's period. Control: a writer without TTLs gets plain puts.
func TestTheHeartbeaterWritesThePlansTTLEveryPlannedPeriod(t *testing.T) {
	w := &ttlWriter{}
	plans := 0
	var mu sync.Mutex
	plan := func(context.Context) Beat {
		mu.Lock()
		defer mu.Unlock()
		plans++
		return Beat{Period: 20 * time.Millisecond, TTL: 3 * time.Second}
	}
	build := func() *model.Node { return Build("n1", Config{}, nil, nil, wanted.Intent{}, time.Now()) }
	hb := NewHeartbeater(HeartbeatConfig{Period: time.Hour, Plan: plan}, w, build, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hb.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for w.count() < 4 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if w.count() < 4 {
		t.Fatalf("%d writes in 5 s with a 20 ms planned period (the configured one is an hour)", w.count())
	}
	w.mu.Lock()
	for i, n := range w.written {
		if w.ttls[i] != 3*time.Second || n.HeartbeatTTL.D() != 3*time.Second {
			t.Fatalf("write %d: TTL %s, record says %s", i, w.ttls[i], n.HeartbeatTTL)
		}
	}
	w.mu.Unlock()

	plain := &fakeWriter{}
	hb = NewHeartbeater(HeartbeatConfig{Period: time.Hour, Plan: plan}, plain, build, nil)
	ctx, cancel = context.WithCancel(context.Background())
	go func() { done <- hb.Run(ctx) }()
	deadline = time.Now().Add(5 * time.Second)
	for plain.count() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	plain.mu.Lock()
	defer plain.mu.Unlock()
	if len(plain.written) < 2 || plain.written[0].HeartbeatTTL != 0 {
		t.Fatalf("plain writer: %d writes, first says TTL %s", len(plain.written), plain.written[0].HeartbeatTTL)
	}
}
