// Package bucket opens the KV buckets the agent adds beside the fleet's own
// (variables, services): Ensure opens one and creates it when absent, as
// every agent of a fleet does at start, concurrently; Open only opens (the
// CLI's way: it creates nothing).
//
// Invariants:
//   - Agents racing to create the same bucket all end with it open: the
//     loser of the creation opens what the winner made
//     (TestAgentsRacingToCreateABucketAllOpenIt). A bucket that exists is
//     opened as it is, never reconfigured.
//   - Every request has the caller's deadline.
//
// The buckets and their keys are listed in docs/wire-format.md ("NATS buckets
// and keys").
package bucket

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrMissing is Open's answer for a bucket no agent created yet.
var ErrMissing = errors.New("the bucket does not exist: start `hivelet agent` first (it creates the buckets)")

// Ensure opens cfg.Bucket, creating it with cfg when absent.
func Ensure(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig, timeout time.Duration) (jetstream.KeyValue, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	kv, err := js.KeyValue(rctx, cfg.Bucket)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("opening bucket %s: %w", cfg.Bucket, err)
	}
	kv, err = js.CreateKeyValue(rctx, cfg)
	if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		kv, err = js.KeyValue(rctx, cfg.Bucket) // another agent created it first
	}
	if err != nil {
		return nil, fmt.Errorf("creating bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// Open opens an existing bucket.
func Open(ctx context.Context, js jetstream.JetStream, name string, timeout time.Duration) (jetstream.KeyValue, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	kv, err := js.KeyValue(rctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%s: %w", name, ErrMissing)
	}
	if err != nil {
		return nil, fmt.Errorf("opening bucket %s: %w", name, err)
	}
	return kv, nil
}

// Watch watches each key pattern of kv for updates (not the values it
// holds now) and merges them (Merge); a pattern that cannot be watched
// stops the ones already made.
func Watch(ctx context.Context, kv jetstream.KeyValue, patterns []string) (<-chan struct{}, error) {
	var ws []jetstream.KeyWatcher
	for _, p := range patterns {
		w, err := kv.Watch(ctx, p, jetstream.UpdatesOnly())
		if err != nil {
			for _, w := range ws {
				_ = w.Stop()
			}
			return nil, fmt.Errorf("watching %s: %w", p, err)
		}
		ws = append(ws, w)
	}
	return Merge(ctx, ws), nil
}

// Merge turns key watchers into one channel that receives after any update
// any of them sees (bursts coalesce); the watchers are stopped and the
// channel closed when ctx ends or every watcher has ended.
func Merge(ctx context.Context, ws []jetstream.KeyWatcher) <-chan struct{} {
	out := make(chan struct{}, 1)
	done := make(chan struct{}, len(ws))
	for _, w := range ws {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				select {
				case <-ctx.Done():
					return
				case e, ok := <-w.Updates():
					if !ok {
						return
					}
					if e == nil {
						continue
					}
					select {
					case out <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	go func() {
		for range ws {
			<-done
		}
		for _, w := range ws {
			_ = w.Stop()
		}
		close(out)
	}()
	return out
}
