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

// hasName reports whether the bucket has a policy of that name.
func (s *Store) hasName(ctx context.Context, name string) bool {
	obs, err := s.objects(ctx, false)
	if err != nil {
		return false
	}
	_, err = obs.GetInfo(ctx, namePrefix+name)
	return err == nil
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

// Ensure makes the module a reference names available to the engine: a
// built-in is compiled if it is not yet; a custom module is fetched (cache,
// then bucket), verified and loaded, unless the engine already has it. The
// agent calls it when a job names a policy, never on the decision path.
func (s *Store) Ensure(ctx context.Context, e *Engine, ref *model.PolicyRef) error {
	if ref == nil {
		return nil
	}
	if strings.HasPrefix(ref.Name, BuiltinPrefix) {
		return e.EnsureBuiltin(ctx, ref.Name)
	}
	e.mu.RLock()
	_, haveDigest := e.byDigest[strings.ToLower(strings.TrimPrefix(ref.Digest, "sha256:"))]
	_, haveName := e.named[ref.Name]
	_, builtin := e.builtins[ref.Name]
	e.mu.RUnlock()
	if (ref.Digest != "" && haveDigest) || (ref.Digest == "" && (haveName || builtin)) {
		return nil
	}
	if _, isBuiltin := builtinKinds[ref.Name]; isBuiltin && ref.Digest == "" {
		if _, err := s.objects(ctx, false); err != nil || !s.hasName(ctx, ref.Name) {
			return e.EnsureBuiltin(ctx, ref.Name)
		}
	}
	b, digest, err := s.Fetch(ctx, ref.Name, ref.Digest)
	if err != nil {
		if f, ok := AsFault(err); ok {
			e.refuse(ref.Name, f)
		}
		return err
	}
	_, err = e.Load(ctx, ref.Name, digest, b)
	return err
}
