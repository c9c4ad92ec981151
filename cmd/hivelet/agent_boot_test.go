package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A start-up step against a JetStream that does not answer yet (seen in
// the multihost test: an agent of a forming R3 cluster exited on "opening
// bucket hivelet_vars: context deadline exceeded") is tried again until it
// succeeds; a refusal is returned at once (control), and so is the step's
// error once ctx ends.
func TestAStartUpStepWaitsForJetStreamButNotForARefusal(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	notReady := []error{
		fmt.Errorf("opening bucket x: %w", context.DeadlineExceeded),
		nats.ErrTimeout,
		nats.ErrNoResponders,
		&jetstream.APIError{Code: 500, ErrorCode: 10005, Description: "no suitable peers for placement"},
		&jetstream.APIError{Code: 503, Description: "JetStream system temporarily unavailable"},
	}
	for _, e := range notReady {
		calls := 0
		v, err := atBoot(context.Background(), log, "test", func() (int, error) {
			calls++
			if calls < 3 {
				return 0, e
			}
			return 7, nil
		})
		if err != nil || v != 7 || calls != 3 {
			t.Errorf("%v: %d, %v after %d calls; want 7 after 3", e, v, err, calls)
		}
	}
	refused := &jetstream.APIError{Code: 400, ErrorCode: 10003, Description: "bad request"}
	for _, e := range []error{refused, nats.ErrPermissionViolation, errors.New("node liveness needs limit markers")} {
		calls := 0
		if _, err := atBoot(context.Background(), log, "test", func() (int, error) { calls++; return 0, e }); !errors.Is(err, e) || calls != 1 {
			t.Errorf("%v: %v after %d calls; want it returned after 1", e, err, calls)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	calls := 0
	start := time.Now()
	if _, err := atBoot(ctx, log, "test", func() (int, error) { calls++; return 0, nats.ErrNoResponders }); !errors.Is(err, nats.ErrNoResponders) || calls < 2 {
		t.Fatalf("until ctx ends: %v after %d calls", err, calls)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("returned %v after ctx ended at 600ms", d)
	}
}
