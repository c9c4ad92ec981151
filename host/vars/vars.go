// Package vars owns the variables store: the counterpart of Nomad
// variables, read by task templates ({{ with nomadVar "path" }}) and
// written by `hivelet var put`. A variable is a path ("nomad/jobs/web",
// "app/db") holding string items; it lives in the NATS JetStream KV bucket
// <prefix>_vars under its path, as a JSON object of strings.
//
// Invariants:
//   - A path is segments of letters, digits, '-', '_' and '=' joined by '/'
//     (a NATS key without dots); anything else is refused before any
//     request (TestPathsAreCheckedBeforeAnyRequest).
//   - A value that does not decode as an object of strings is an error for
//     its path, never an empty variable.
//   - Every request has the deadline its caller's context gives; Watch ends
//     when its context does.
//   - The agent creates the bucket (Ensure); the CLI only opens it (Open).
//
// The operator's view is docs/job-files.md ("Variables store: `hivelet
// var`").
package vars

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hivelet/hivelet/host/bucket"
)

// Bucket is the bucket name for a prefix.
func Bucket(prefix string) string { return prefix + "_vars" }

var pathRE = regexp.MustCompile(`^[A-Za-z0-9_=-]+(/[A-Za-z0-9_=-]+)*$`)

// CheckPath refuses a path that is not a valid variable path.
func CheckPath(path string) error {
	if len(path) > 256 || !pathRE.MatchString(path) {
		return fmt.Errorf("variable path %q: want segments of letters, digits, '-', '_' or '=' separated by '/' (at most 256 characters)", path)
	}
	return nil
}

// Store is the variables bucket.
type Store struct {
	kv      jetstream.KeyValue
	timeout time.Duration
}

// Ensure opens the bucket, creating it when absent (the agent's way).
func Ensure(ctx context.Context, js jetstream.JetStream, prefix string, replicas int, timeout time.Duration) (*Store, error) {
	kv, err := bucket.Ensure(ctx, js, jetstream.KeyValueConfig{Bucket: Bucket(prefix), History: 8,
		Replicas: max(replicas, 1), Description: "hivelet variables read by task templates"}, timeout)
	if err != nil {
		return nil, err
	}
	return &Store{kv: kv, timeout: timeout}, nil
}

// ErrNoBucket is Open's answer when no agent created the bucket yet.
var ErrNoBucket = bucket.ErrMissing

// Open opens an existing bucket (the CLI's way).
func Open(ctx context.Context, js jetstream.JetStream, prefix string, timeout time.Duration) (*Store, error) {
	kv, err := bucket.Open(ctx, js, Bucket(prefix), timeout)
	if err != nil {
		return nil, err
	}
	return &Store{kv: kv, timeout: timeout}, nil
}

// Put writes a variable's items, replacing what it held.
func (s *Store) Put(ctx context.Context, path string, items map[string]string) error {
	if err := CheckPath(path); err != nil {
		return err
	}
	b, err := json.Marshal(items)
	if err != nil {
		return fmt.Errorf("encoding variable %s: %w", path, err)
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.kv.Put(rctx, path, b); err != nil {
		return fmt.Errorf("writing variable %s: %w", path, err)
	}
	return nil
}

// Get reads a variable; ok is false when it does not exist.
func (s *Store) Get(ctx context.Context, path string) (items map[string]string, ok bool, err error) {
	if err := CheckPath(path); err != nil {
		return nil, false, err
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	e, err := s.kv.Get(rctx, path)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading variable %s: %w", path, err)
	}
	items, err = decode(path, e.Value())
	return items, err == nil, err
}

func decode(path string, b []byte) (map[string]string, error) {
	var items map[string]string
	if err := json.Unmarshal(b, &items); err != nil || items == nil {
		return nil, fmt.Errorf("variable %s does not hold an object of strings", path)
	}
	return items, nil
}

// Delete removes a variable.
func (s *Store) Delete(ctx context.Context, path string) error {
	if err := CheckPath(path); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.kv.Delete(rctx, path); err != nil {
		return fmt.Errorf("deleting variable %s: %w", path, err)
	}
	return nil
}

// List returns the paths that start with prefix, sorted.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	keys, err := s.kv.ListKeys(rctx)
	if err != nil {
		return nil, fmt.Errorf("listing variables: %w", err)
	}
	var out []string
	for k := range keys.Keys() {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Watch sends on the returned channel after any change (put or delete) of
// one of paths, coalescing bursts; the channel closes when ctx ends or the
// watch breaks.
func (s *Store) Watch(ctx context.Context, paths []string) (<-chan struct{}, error) {
	for _, p := range paths {
		if err := CheckPath(p); err != nil {
			return nil, err
		}
	}
	return bucket.Watch(ctx, s.kv, paths)
}
