package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hivelet/hivelet/internal/wait"
)

// atBoot runs a start-up step against JetStream (opening or creating the
// buckets) until it succeeds, trying again with backoff while JetStream
// does not answer yet: a cluster still forming or electing its leaders
// answers with timeouts, no responders or no peers to place a stream on.
// A refusal (permissions, a server too old) is returned at once, and so is
// the step's error when ctx ends.
func atBoot[T any](ctx context.Context, log *slog.Logger, what string, step func() (T, error)) (T, error) {
	for attempt := 0; ; attempt++ {
		v, err := step()
		if err == nil || ctx.Err() != nil || !jetStreamNotReady(err) {
			return v, err
		}
		log.Warn("JetStream not ready at start-up; trying again", "step", what, "err", err, "attempt", attempt+1)
		if !wait.For(ctx, min(time.Duration(attempt+1)*250*time.Millisecond, 5*time.Second)) {
			return v, err
		}
	}
}

// errNoPeers is JetStream's "no suitable peers for placement": a new
// cluster that cannot place a replicated stream yet.
const errNoPeers jetstream.ErrorCode = 10005

// jetStreamNotReady reports an error of JetStream not answering yet, as
// opposed to one refusing the request.
func jetStreamNotReady(err error) bool {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return api.Code == 503 || api.ErrorCode == errNoPeers
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders)
}
