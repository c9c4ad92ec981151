package agent

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/state"
	"github.com/hivelet/hivelet/plugins/mock"
)

// The rollout's shared writes wait for this node's starts in flight
// (Config.StartsFirst): startsFirst returns once none is in flight, or
// after StartsFirst if one still is, or at once when told not to wait.
func TestStartsFirstWaitsForTheStartsInFlightBounded(t *testing.T) {
	newAgent := func(wait time.Duration) *Agent {
		st, err := state.Open(t.TempDir(), 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		a, err := New(Config{
			Store:       st,
			Node:        func() *model.Node { return &model.Node{ID: "n1", Name: "n1", Datacenter: "dc1"} },
			Source:      stillSource{},
			Drivers:     oneDriver{mock.New()},
			AllocRoot:   t.TempDir(),
			Logger:      slog.New(slog.DiscardHandler),
			StartsFirst: wait,
		})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	returns := func(a *Agent) <-chan time.Duration {
		out := make(chan time.Duration, 1)
		began := time.Now()
		go func() {
			a.startsFirst(context.Background())
			out <- time.Since(began)
		}()
		return out
	}

	// Nothing in flight: no wait, whatever the bound.
	if el := <-returns(newAgent(time.Hour)); el > time.Second {
		t.Fatalf("returned after %v with nothing in flight", el)
	}

	// A start in flight: held until it ends.
	a := newAgent(time.Hour)
	a.starts.Begin()
	done := returns(a)
	select {
	case el := <-done:
		t.Fatalf("returned after %v with a start in flight and an hour's bound", el)
	case <-time.After(200 * time.Millisecond):
	}
	a.starts.End()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting 5 s after the start ended")
	}

	// The bound.
	b := newAgent(30 * time.Millisecond)
	b.starts.Begin()
	defer b.starts.End()
	select {
	case el := <-returns(b):
		if el < 30*time.Millisecond {
			t.Fatalf("returned after %v, before its bound", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a 30 ms bound still waiting after 5 s")
	}

	// Told not to wait.
	c := newAgent(-1)
	c.starts.Begin()
	defer c.starts.End()
	if el := <-returns(c); el > time.Second {
		t.Fatalf("StartsFirst < 0 waited %v", el)
	}
}
