// Package services owns the services bucket: where each node registers the
// services of its allocations (Nomad's provider = "nomad" services) and
// where `hivelet service list|info` reads them. A registration's key is
// <service name>.<node id>.<alloc id>.<index>; its value the
// model.ServiceRegistration.
//
// Invariants:
//   - Only the node running an allocation writes its registrations (the
//     allocation runner, through Register and Deregister). The key names
//     that node, so a fleet's NATS permissions can grant each agent
//     $KV.<prefix>_services.*.<its node>.> and nothing else
//     (examples/fleet/permissions.conf), and a reader lists a registration
//     only when its value names the node, allocation and index its key does:
//     a value written under another node's key is reported, never served.
//   - A key of the earlier layout, <name>.<alloc id>.<index>, is still
//     read, and Deregister deletes it as well, so an upgrade leaves none
//     behind.
//   - A name that is not a key token is refused before any request
//     (TestANameThatIsNoKeyIsRefused).
//   - A value that does not decode is reported, never listed as a service.
//   - The agent creates the bucket (Ensure); the CLI only opens it (Open).
//
// The service block is specified in docs/job-files.md ("Services"), the
// registration's JSON in docs/wire-format.md ("Services").
package services

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hivelet/hivelet/host/bucket"
	"github.com/hivelet/hivelet/host/model"
)

// Bucket is the bucket name for a prefix.
func Bucket(prefix string) string { return prefix + "_services" }

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// CheckName refuses a service name that cannot be a key token.
func CheckName(name string) error {
	if len(name) > 128 || !tokenRE.MatchString(name) {
		return fmt.Errorf("service name %q: want letters, digits, '-' and '_' (at most 128)", name)
	}
	return nil
}

// Key is a registration's key.
func Key(r *model.ServiceRegistration) string {
	return r.Name + "." + r.NodeID + "." + r.AllocID + "." + strconv.Itoa(r.Index)
}

// legacyKey is the key of the layout before the node was named in it.
func legacyKey(r *model.ServiceRegistration) string {
	return r.Name + "." + r.AllocID + "." + strconv.Itoa(r.Index)
}

// checkKey says why a decoded registration cannot be served under key k:
// its value names another service, node, allocation or index than the key.
func checkKey(k string, r *model.ServiceRegistration) error {
	if k == Key(r) || k == legacyKey(r) {
		return nil
	}
	return fmt.Errorf("key %s does not name the registration it holds (service %q, node %q, allocation %q, index %d)", k, r.Name, r.NodeID, r.AllocID, r.Index)
}

// Store is the services bucket.
type Store struct {
	kv      jetstream.KeyValue
	timeout time.Duration
}

// Ensure opens the bucket, creating it when absent (the agent's way).
func Ensure(ctx context.Context, js jetstream.JetStream, prefix string, replicas int, timeout time.Duration) (*Store, error) {
	kv, err := bucket.Ensure(ctx, js, jetstream.KeyValueConfig{Bucket: Bucket(prefix), History: 1,
		Replicas: max(replicas, 1), Description: "hivelet service registrations, written by the node running each allocation"}, timeout)
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

// Register writes a registration.
func (s *Store) Register(ctx context.Context, r *model.ServiceRegistration) error {
	if err := CheckName(r.Name); err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding service %s: %w", r.Name, err)
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.kv.Put(rctx, Key(r), b); err != nil {
		return fmt.Errorf("registering service %s: %w", r.Name, err)
	}
	return nil
}

// Deregister deletes a registration.
func (s *Store) Deregister(ctx context.Context, r *model.ServiceRegistration) error {
	if err := CheckName(r.Name); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.kv.Delete(rctx, Key(r)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("deregistering service %s: %w", r.Name, err)
	}
	// A key of the earlier layout is deleted only when there is one: under
	// a fleet's per-node permissions (hivelet_services.*.<node>.>) a write
	// of it is refused, and a registration made since the upgrade has none.
	if _, err := s.kv.Get(rctx, legacyKey(r)); err == nil {
		if err := s.kv.Delete(rctx, legacyKey(r)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("deregistering service %s (its key of the earlier layout %s): %w", r.Name, legacyKey(r), err)
		}
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("deregistering service %s: reading its key of the earlier layout: %w", r.Name, err)
	}
	return nil
}

// List returns every registration, by service name, each sorted by node
// then allocation; bad lists the keys whose value did not decode or names
// another registration than its key (a forged or misplaced write).
func (s *Store) List(ctx context.Context) (byName map[string][]*model.ServiceRegistration, bad []string, err error) {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	keys, err := s.kv.ListKeys(rctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing services: %w", err)
	}
	byName = map[string][]*model.ServiceRegistration{}
	for k := range keys.Keys() {
		e, err := s.kv.Get(rctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deregistered meanwhile
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading service %s: %w", k, err)
		}
		r, err := decode(k, e.Value())
		if err != nil {
			bad = append(bad, k)
			continue
		}
		byName[r.Name] = append(byName[r.Name], r)
	}
	for _, rs := range byName {
		sortInstances(rs)
	}
	sort.Strings(bad)
	return byName, bad, nil
}

// Instances returns the registrations of one service, sorted by node then
// allocation.
func (s *Store) Instances(ctx context.Context, name string) ([]*model.ServiceRegistration, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	keys, err := s.kv.ListKeysFiltered(rctx, name+".>")
	if err != nil {
		return nil, fmt.Errorf("listing service %s: %w", name, err)
	}
	var out []*model.ServiceRegistration
	for k := range keys.Keys() {
		e, err := s.kv.Get(rctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading service %s: %w", k, err)
		}
		r, err := decode(k, e.Value())
		if err != nil {
			continue // reported by List; an instance that does not decode, or not under its own key, is none
		}
		out = append(out, r)
	}
	sortInstances(out)
	return out, nil
}

// decode decodes the registration stored under key, strictly; it must be
// stored under its own Key, so that a value put under another service's key
// is never listed, nor returned by Instances, as an instance of that service.
func decode(key string, value []byte) (*model.ServiceRegistration, error) {
	var r model.ServiceRegistration
	if err := model.Decode(value, &r); err != nil {
		return nil, fmt.Errorf("decoding service registration %s: %w", key, err)
	}
	if err := CheckName(r.Name); err != nil {
		return nil, fmt.Errorf("service registration under key %q: %w", key, err)
	}
	if err := checkKey(key, &r); err != nil {
		return nil, fmt.Errorf("service registration belongs under key %q, not %q: %w", Key(&r), key, err)
	}
	return &r, nil
}

func sortInstances(rs []*model.ServiceRegistration) {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].NodeID != rs[j].NodeID {
			return rs[i].NodeID < rs[j].NodeID
		}
		if rs[i].AllocID != rs[j].AllocID {
			return rs[i].AllocID < rs[j].AllocID
		}
		return rs[i].Index < rs[j].Index
	})
}

// WatchServices sends on the returned channel after any registration or
// deregistration of one of names, coalescing bursts; it closes when ctx
// ends.
func (s *Store) WatchServices(ctx context.Context, names []string) (<-chan struct{}, error) {
	patterns := make([]string, len(names))
	for i, n := range names {
		if err := CheckName(n); err != nil {
			return nil, err
		}
		patterns[i] = n + ".>"
	}
	return bucket.Watch(ctx, s.kv, patterns)
}
