package policies

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hivelet/hivelet/host/model"
)

// DefaultBucket is the JetStream object store bucket holding custom policy
// modules.
const DefaultBucket = "hivelet-policies"

// Object names in the bucket: every pushed module's bytes under its digest
// (immutable: what a pinned reference fetches), and each policy name
// pointing at its current digest.
const (
	modulePrefix = "modules/"
	namePrefix   = "names/"
	metaDigest   = "sha256"
)

// Store distributes custom policy modules to the fleet through a JetStream
// object store, and caches them on the agent's disk. Every module is
// verified against its SHA-256 before it is handed to the engine: a
// mismatch (in the bucket or in the cache) is refused.
type Store struct {
	js       jetstream.JetStream
	bucket   string
	cacheDir string
}

// NewStore returns a store on bucket (DefaultBucket if empty), caching in
// cacheDir (no cache if empty). js is the agent's shared connection.
func NewStore(js jetstream.JetStream, bucket, cacheDir string) *Store {
	if bucket == "" {
		bucket = DefaultBucket
	}
	return &Store{js: js, bucket: bucket, cacheDir: cacheDir}
}

// StoredPolicy is one named policy in the bucket.
type StoredPolicy struct {
	Name     string
	Digest   string
	Size     uint64
	Modified time.Time
}

func (s *Store) objects(ctx context.Context, create bool) (jetstream.ObjectStore, error) {
	if create {
		return s.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: s.bucket, Description: "hivelet policy modules"})
	}
	return s.js.ObjectStore(ctx, s.bucket)
}

// Push stores wasm as the current module of policy name. It does not
// validate the module: the CLI compiles it first.
func (s *Store) Push(ctx context.Context, name string, wasm []byte) (StoredPolicy, error) {
	if name == "" || strings.HasPrefix(name, BuiltinPrefix) || strings.ContainsAny(name, "/ \t\n") {
		return StoredPolicy{}, fmt.Errorf("pushing policy %q: a name must be non-empty, without spaces or '/', and not start with %q", name, BuiltinPrefix)
	}
	if _, reserved := builtinKinds[name]; reserved {
		return StoredPolicy{}, fmt.Errorf("pushing policy %q: the name of a built-in policy is reserved for it (a job naming %q, or %q, runs the built-in); choose another name", name, name, BuiltinPrefix+name)
	}
	obs, err := s.objects(ctx, true)
	if err != nil {
		return StoredPolicy{}, fmt.Errorf("opening policy bucket %s: %w", s.bucket, err)
	}
	digest := Digest(wasm)
	meta := map[string]string{metaDigest: digest}
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: modulePrefix + digest, Metadata: meta}, strings.NewReader(string(wasm))); err != nil {
		return StoredPolicy{}, fmt.Errorf("pushing policy %s module %s: %w", name, digest, err)
	}
	info, err := obs.Put(ctx, jetstream.ObjectMeta{Name: namePrefix + name, Metadata: meta}, strings.NewReader(string(wasm)))
	if err != nil {
		return StoredPolicy{}, fmt.Errorf("pushing policy %s: %w", name, err)
	}
	return StoredPolicy{Name: name, Digest: digest, Size: info.Size, Modified: info.ModTime}, nil
}

// List returns the named policies in the bucket, sorted by name.
func (s *Store) List(ctx context.Context) ([]StoredPolicy, error) {
	obs, err := s.objects(ctx, false)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening policy bucket %s: %w", s.bucket, err)
	}
	infos, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing policy bucket %s: %w", s.bucket, err)
	}
	var out []StoredPolicy
	for _, info := range infos {
		if name, ok := strings.CutPrefix(info.Name, namePrefix); ok {
			out = append(out, StoredPolicy{Name: name, Digest: info.Metadata[metaDigest], Size: info.Size, Modified: info.ModTime})
		}
	}
	slices.SortFunc(out, func(a, b StoredPolicy) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Fetch returns the bytes of policy name, pinned to digest when digest is
// not empty (else the name's current digest), from the local cache or the
// bucket. The bytes always match the digest: otherwise Fetch returns a
// *Fault of kind FaultDigestMismatch and nothing is cached.
func (s *Store) Fetch(ctx context.Context, name, digest string) ([]byte, string, error) {
	digest = strings.ToLower(strings.TrimPrefix(digest, "sha256:"))
	if digest != "" {
		if b, ok := s.cached(digest); ok {
			return b, digest, nil
		}
	}
	obs, err := s.objects(ctx, false)
	if err != nil {
		return nil, "", fmt.Errorf("opening policy bucket %s: %w", s.bucket, err)
	}
	object := modulePrefix + digest
	if digest == "" {
		info, err := obs.GetInfo(ctx, namePrefix+name)
		if err != nil {
			return nil, "", fmt.Errorf("looking up policy %s: %w", name, err)
		}
		digest = info.Metadata[metaDigest]
		if digest == "" {
			return nil, "", fmt.Errorf("policy %s has no recorded digest", name)
		}
		if b, ok := s.cached(digest); ok {
			return b, digest, nil
		}
		object = namePrefix + name
	}
	b, err := obs.GetBytes(ctx, object)
	if err != nil {
		return nil, "", fmt.Errorf("fetching policy %s (sha256 %s): %w", name, digest, err)
	}
	if got := Digest(b); got != digest {
		return nil, "", &Fault{Kind: FaultDigestMismatch, Decision: "load", Policy: name, Digest: digest,
			Reason: fmt.Sprintf("fetched bytes have SHA-256 %s, pinned %s: refused", got, digest)}
	}
	if s.cacheDir != "" {
		if err := writeAtomic(filepath.Join(s.cacheDir, digest+".wasm"), b); err != nil {
			return nil, "", fmt.Errorf("caching policy %s: %w", name, err)
		}
	}
	return b, digest, nil
}

// cached returns a cached module if its bytes still match its digest; a
// corrupt cache entry is removed.
func (s *Store) cached(digest string) ([]byte, bool) {
	if s.cacheDir == "" {
		return nil, false
	}
	path := filepath.Join(s.cacheDir, digest+".wasm")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	if Digest(b) != digest {
		os.Remove(path)
		return nil, false
	}
	return b, true
}

func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".policy-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Ensure makes the module a reference names available to the engine,
// and for a name-only reference makes the name resolve to the name's
// current digest in the bucket:
//
//   - a built-in (by "builtin:name" or by its bare name, which is reserved
//     for it) is compiled if it is not yet; the bucket is not consulted;
//   - a reference pinned by digest loads that module (cache, then bucket),
//     verified; the name's current module is left as it is;
//   - a name-only reference looks the name up in the bucket every time,
//     and loads and points the name at that digest when it moved. The
//     engine then keeps following the name: Refresh moves it again.
//
// Modules are kept by digest: a version already loaded is not fetched or
// compiled again. The agent calls Ensure when a job names a policy, never
// on the decision path; the engine then calls Refresh in the background
// every Options.FollowInterval, through the last store given to Ensure.
func (s *Store) Ensure(ctx context.Context, e *Engine, ref *model.PolicyRef) error {
	if ref == nil {
		return nil
	}
	if _, reserved := builtinKinds[ref.Name]; reserved || strings.HasPrefix(ref.Name, BuiltinPrefix) {
		if ref.Digest == "" {
			return e.EnsureBuiltin(ctx, ref.Name)
		}
		// Pinned built-in: the pin must be the embedded module's.
		wasm, ok := BuiltinWasm(ref.Name)
		if !ok {
			return e.EnsureBuiltin(ctx, ref.Name) // its error names the unknown built-in
		}
		if got, want := Digest(wasm), normDigest(ref.Digest); got != want {
			f := &Fault{Kind: FaultDigestMismatch, Decision: "load", Policy: ref.Name, Digest: want,
				Reason: fmt.Sprintf("the built-in's SHA-256 is %s, the job pins %s", got, want)}
			e.refuse(ref.Name, f)
			return f
		}
		return e.EnsureBuiltin(ctx, ref.Name)
	}
	if ref.Digest != "" {
		digest := normDigest(ref.Digest)
		e.mu.RLock()
		_, have := e.byDigest[digest]
		e.mu.RUnlock()
		if have {
			return nil
		}
		b, digest, err := s.Fetch(ctx, ref.Name, digest)
		if err != nil {
			if f, ok := AsFault(err); ok {
				e.refuse(ref.Name, f)
			}
			return err
		}
		_, err = e.load(ctx, ref.Name, digest, b)
		return err
	}
	e.startFollowing(s)
	return s.follow(ctx, e, ref.Name)
}

// follow points name at its current digest in the bucket, fetching and
// loading that module if the engine does not have it.
func (s *Store) follow(ctx context.Context, e *Engine, name string) error {
	digest, err := s.current(ctx, name)
	if err != nil {
		return err
	}
	e.mu.RLock()
	m := e.byDigest[digest]
	cur := e.named[name]
	e.mu.RUnlock()
	if m == nil {
		b, _, err := s.Fetch(ctx, name, digest)
		if f, ok := AsFault(err); ok {
			e.refuse(name, f)
		} else if err == nil {
			m, err = e.load(ctx, name, digest, b) // a refusal is recorded by load
		}
		if _, ok := AsFault(err); ok {
			// The name's current module is refused: the name resolves to
			// nothing (decisions fall back, reported with the refusal), as
			// on every agent, rather than to an older version.
			e.mu.Lock()
			delete(e.named, name)
			e.follow[name] = true
			e.mu.Unlock()
		}
		if err != nil {
			return err
		}
	}
	if cur != m {
		e.point(name, m, true)
		e.log.Info("policy name now resolves to a new module", "policy", name, "policy_digest", digest)
	} else {
		e.mu.Lock()
		e.follow[name] = true
		e.mu.Unlock()
	}
	return nil
}

// current returns the digest name points at in the bucket.
func (s *Store) current(ctx context.Context, name string) (string, error) {
	obs, err := s.objects(ctx, false)
	if err != nil {
		return "", fmt.Errorf("opening policy bucket %s: %w", s.bucket, err)
	}
	info, err := obs.GetInfo(ctx, namePrefix+name)
	if err != nil {
		return "", fmt.Errorf("looking up policy %s: %w", name, err)
	}
	digest := info.Metadata[metaDigest]
	if digest == "" {
		return "", fmt.Errorf("policy %s has no recorded digest", name)
	}
	return digest, nil
}

// Refresh re-resolves every name the engine follows (those a name-only
// reference ensured) against the bucket, loading and switching to a
// name's new module when it was pushed again. Until the next Refresh an
// agent keeps evaluating the version it has; call it on every sync (one
// metadata lookup per name, nothing fetched or compiled when nothing
// moved). It returns the errors of the names it could not refresh; those
// keep their current module.
func (s *Store) Refresh(ctx context.Context, e *Engine) error {
	var errs []error
	for _, name := range e.followed() {
		if err := s.follow(ctx, e, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func normDigest(d string) string {
	return strings.ToLower(strings.TrimPrefix(d, "sha256:"))
}
