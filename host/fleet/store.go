package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/wait"
)

// DefaultPrefix is the default bucket name prefix.
const DefaultPrefix = "hivelet"

// DefaultNodeTTL is how long a node record lives without a heartbeat. The
// heartbeat period must be well below it (node.DefaultHeartbeat is a third).
const DefaultNodeTTL = 30 * time.Second

// DefaultMaxWatchers is how many consumers each bucket's stream takes by
// default (BucketOptions.MaxWatchers). Every agent keeps one watch (one
// consumer) on each bucket, a CLI following a job one more, and a watch
// being re-created holds two for a moment, so a bucket's consumers grow
// with the fleet. nats-server (2.15, as this project embeds it) caps a
// stream that sets no limit at 1,000 consumers (its
// jetstream.limits.default_max_consumers); a fleet near 1,000 agents then
// sees watch creations fail with "maximum consumers limit reached" (met at
// 1,000 agents in one process: BENCHMARKS.md, "1,000 agents, 2026-12-04").
// 100,000 is past where one stream's leader stops being the limit
// (docs/scale.md).
const DefaultMaxWatchers = 100_000

// Bucket kinds, as used in logs, metrics and View.Revisions.
const (
	KindJobs        = "jobs"
	KindNodes       = "nodes"
	KindIntents     = "node_intents"
	KindAllocs      = "allocs"
	KindDeployments = "deployments"
	KindRollout     = "rollout"
	KindJobVersions = "job_versions"
)

// BucketNames are the names of the buckets.
type BucketNames struct {
	Jobs, Nodes, Intents, Allocs, Deployments, Rollout, JobVersions string
	// Prefix is the prefix they were derived from (Names); the core NATS
	// subjects of the fleet (a slot's release hint) start with it.
	Prefix string
}

// Names derives the bucket names from a prefix: <prefix>_jobs,
// <prefix>_nodes, <prefix>_node_intents, <prefix>_allocs,
// <prefix>_deployments. An empty prefix is DefaultPrefix.
func Names(prefix string) BucketNames {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return BucketNames{
		Jobs:        prefix + "_jobs",
		Nodes:       prefix + "_nodes",
		Intents:     prefix + "_node_intents",
		Allocs:      prefix + "_allocs",
		Deployments: prefix + "_deployments",
		Rollout:     prefix + "_rollout",
		JobVersions: prefix + "_job_versions",
		Prefix:      prefix,
	}
}

// Of is the name of kind's bucket ("" for an unknown kind).
func (n BucketNames) Of(kind string) string {
	switch kind {
	case KindJobs:
		return n.Jobs
	case KindNodes:
		return n.Nodes
	case KindIntents:
		return n.Intents
	case KindAllocs:
		return n.Allocs
	case KindDeployments:
		return n.Deployments
	case KindRollout:
		return n.Rollout
	case KindJobVersions:
		return n.JobVersions
	}
	return ""
}

// BucketOptions are the settings buckets are created with when absent.
type BucketOptions struct {
	// Replicas: 1 for a single server, 3 for a fleet cluster. Default 1.
	Replicas int
	// NodeTTL is the nodes bucket's bucket-wide TTL; default DefaultNodeTTL.
	NodeTTL time.Duration
	// MaxWatchers is the consumer limit set on each bucket's stream, so
	// that the server's default limit (1,000 per stream) does not bound
	// the fleet; default DefaultMaxWatchers. A bucket found with a lower
	// limit (or none, which the server's default fills) is raised to it;
	// one with a higher limit is left as it is.
	MaxWatchers int
}

// Store holds the opened buckets on one Conn and makes every read and write
// with the connection's deadline.
type Store struct {
	conn  *Conn
	names BucketNames
	// The buckets; nil when OpenStore found one missing.
	Jobs, Nodes, Intents, Allocs, Deployments jetstream.KeyValue
	// Rollout holds the update slots (per-key TTL); JobVersions every
	// version of every job as submitted (immutable; reverts read it).
	Rollout, JobVersions jetstream.KeyValue
	nodeTTL              time.Duration
	stats                *storeStats
}

// storeStats counts the rollout protocol's KV operations (for the figures
// of BENCHMARKS.md and the metrics).
type storeStats struct {
	rolloutOps, casConflicts, slotConflicts atomic.Int64
	slotAdopted, slotAmbiguous              atomic.Int64
	nodeWrites, nodeBytes                   atomic.Int64
}

// Stats are the rollout KV operations made through a Store.
type Stats struct {
	// RolloutOps counts slot takes, releases, record reads and writes.
	RolloutOps int64
	// CASConflicts counts record compare-and-sets lost to another writer;
	// SlotConflicts slot takes lost to another taker.
	CASConflicts, SlotConflicts int64
	// SlotAdopted counts takes refused by a slot this holder's same boot
	// had already taken for the same replacement (an earlier attempt
	// whose answer was lost), adopted as taken; SlotAmbiguous takes that
	// ended in an error that was neither (a timeout: the key is read).
	SlotAdopted, SlotAmbiguous int64
	// NodeWrites counts node records written (registrations and
	// heartbeats), NodeBytes their values' bytes.
	NodeWrites, NodeBytes int64
}

// Stats returns the counts so far.
func (s *Store) Stats() Stats {
	if s.stats == nil {
		return Stats{}
	}
	return Stats{RolloutOps: s.stats.rolloutOps.Load(), CASConflicts: s.stats.casConflicts.Load(), SlotConflicts: s.stats.slotConflicts.Load(),
		SlotAdopted: s.stats.slotAdopted.Load(), SlotAmbiguous: s.stats.slotAmbiguous.Load(),
		NodeWrites: s.stats.nodeWrites.Load(), NodeBytes: s.stats.nodeBytes.Load()}
}

// EnsureBuckets opens the five buckets, creating any that is absent (the
// agent's boot step). History: jobs 16 (job history), deployments 8, the rest
// 1. The nodes bucket has a bucket-wide TTL plus LimitMarkerTTL, so an
// expired heartbeat reaches every watcher as a purge: a per-key TTL would stop
// applying once the key is updated.
func EnsureBuckets(ctx context.Context, c *Conn, names BucketNames, o BucketOptions) (*Store, error) {
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.NodeTTL <= 0 {
		o.NodeTTL = DefaultNodeTTL
	}
	if o.MaxWatchers <= 0 {
		o.MaxWatchers = DefaultMaxWatchers
	}
	st := &Store{conn: c, names: names, nodeTTL: o.NodeTTL, stats: &storeStats{}}
	cfgs := []struct {
		dst *jetstream.KeyValue
		cfg jetstream.KeyValueConfig
	}{
		{&st.Jobs, jetstream.KeyValueConfig{Bucket: names.Jobs, History: 16, Description: "hivelet declared jobs"}},
		{&st.Nodes, jetstream.KeyValueConfig{Bucket: names.Nodes, History: 1, TTL: o.NodeTTL, LimitMarkerTTL: o.NodeTTL, Description: "hivelet node records (heartbeat)"}},
		{&st.Intents, jetstream.KeyValueConfig{Bucket: names.Intents, History: 4, Description: "hivelet operator intents per node (drain, eligibility)"}},
		{&st.Allocs, jetstream.KeyValueConfig{Bucket: names.Allocs, History: 1, Description: "hivelet allocation status, written by the owning node"}},
		{&st.Deployments, jetstream.KeyValueConfig{Bucket: names.Deployments, History: 8, Description: "hivelet deployments, changed by compare-and-set"}},
		// Per-key TTLs (slots) need LimitMarkerTTL; an expired slot reaches
		// every watcher as a marker.
		{&st.Rollout, jetstream.KeyValueConfig{Bucket: names.Rollout, History: 1, LimitMarkerTTL: time.Minute, Description: "hivelet rollout slots (per-key TTL)"}},
		{&st.JobVersions, jetstream.KeyValueConfig{Bucket: names.JobVersions, History: 1, Description: "hivelet job versions as submitted (immutable)"}},
	}
	for _, b := range cfgs {
		b.cfg.Replicas = o.Replicas
		kv, err := ensureBucket(ctx, c, b.cfg)
		if err != nil {
			return nil, err
		}
		*b.dst = kv
	}
	// The consumer limits, all at once: an agent whose permissions do not
	// cover a stream update gets no answer, and waits out one timeout, not
	// one per bucket.
	var wg sync.WaitGroup
	for _, b := range cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ensureWatchers(ctx, c, b.cfg.Bucket, o.MaxWatchers)
		}()
	}
	wg.Wait()
	return st, nil
}

func ensureBucket(ctx context.Context, c *Conn, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	rctx, cancel := c.withTimeout(ctx)
	defer cancel()
	kv, err := c.js.KeyValue(rctx, cfg.Bucket)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("opening bucket %s: %w", cfg.Bucket, err)
	}
	kv, err = c.js.CreateKeyValue(rctx, cfg)
	if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		kv, err = c.js.KeyValue(rctx, cfg.Bucket) // another agent won the creation
	}
	if errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) {
		return nil, fmt.Errorf("creating bucket %s: node liveness needs limit markers (nats-server 2.11 or later): %w", cfg.Bucket, err)
	}
	if err != nil {
		return nil, fmt.Errorf("creating bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// ensureWatchers raises the consumer limit of bucket's stream to want
// when it is lower (see DefaultMaxWatchers). A limit at or above want is
// kept (another agent, or the operator, set it). It never fails the
// agent's start: an account whose own consumer limit is lower refuses the
// raise, and an agent whose permissions do not allow stream updates (as
// examples/fleet/permissions.conf grants none) gets no answer. Either is
// logged with what the operator can do, and the limit in force stays.
func ensureWatchers(ctx context.Context, c *Conn, bucket string, want int) {
	rctx, cancel := c.withTimeout(ctx)
	defer cancel()
	stream, err := c.js.Stream(rctx, "KV_"+bucket)
	if err != nil {
		c.log.Warn("reading the bucket's consumer limit failed", "bucket", bucket, "err", err)
		return
	}
	cfg := stream.CachedInfo().Config
	if cfg.MaxConsumers >= want {
		return
	}
	was := cfg.MaxConsumers
	cfg.MaxConsumers = want
	_, err = c.js.UpdateStream(rctx, cfg)
	if apiErr := (*jetstream.APIError)(nil); errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeMaximumConsumersLimit {
		c.log.Warn("the account's consumer limit is below the bucket's wanted watcher limit: the account's applies, and a fleet with more agents cannot watch this bucket",
			"bucket", bucket, "wanted", want, "err", err)
		return
	}
	if err != nil {
		c.log.Warn("could not raise the bucket's consumer limit: with the server's default (1,000 consumers per stream) a fleet of more agents cannot watch it; "+
			"set max_consumers on the stream, or jetstream { limits { default_max_consumers: -1 } } on the servers, or allow the agent $JS.API.STREAM.UPDATE of it",
			"bucket", bucket, "stream", "KV_"+bucket, "limit", was, "wanted", want, "err", err)
	}
}

// OpenStore opens the buckets that exist and creates none (the CLI's way).
// A missing bucket is left nil; Missing lists them so the caller can log the
// quiet case wanted.QuietNoBucket.
func OpenStore(ctx context.Context, c *Conn, names BucketNames) (*Store, error) {
	st := &Store{conn: c, names: names, nodeTTL: DefaultNodeTTL, stats: &storeStats{}}
	for _, b := range []struct {
		dst  *jetstream.KeyValue
		name string
	}{{&st.Jobs, names.Jobs}, {&st.Nodes, names.Nodes}, {&st.Intents, names.Intents}, {&st.Allocs, names.Allocs}, {&st.Deployments, names.Deployments},
		{&st.Rollout, names.Rollout}, {&st.JobVersions, names.JobVersions}} {
		rctx, cancel := c.withTimeout(ctx)
		kv, err := c.js.KeyValue(rctx, b.name)
		cancel()
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("opening bucket %s: %w", b.name, err)
		}
		*b.dst = kv
	}
	return st, nil
}

// Names returns the bucket names of the store.
func (s *Store) Names() BucketNames { return s.names }

// Conn returns the store's connection.
func (s *Store) Conn() *Conn { return s.conn }

// NodeTTL is the nodes bucket's TTL (heartbeats must come more often).
func (s *Store) NodeTTL() time.Duration { return s.nodeTTL }

// Missing lists the kinds of the buckets that OpenStore did not find.
func (s *Store) Missing() []string {
	var out []string
	for _, b := range s.buckets() {
		if b.kv == nil {
			out = append(out, b.kind)
		}
	}
	return out
}

type bucketRef struct {
	kind, name string
	kv         jetstream.KeyValue
}

func (s *Store) buckets() []bucketRef {
	return []bucketRef{
		{KindJobs, s.names.Jobs, s.Jobs},
		{KindNodes, s.names.Nodes, s.Nodes},
		{KindIntents, s.names.Intents, s.Intents},
		{KindAllocs, s.names.Allocs, s.Allocs},
		{KindDeployments, s.names.Deployments, s.Deployments},
		{KindRollout, s.names.Rollout, s.Rollout},
		{KindJobVersions, s.names.JobVersions, s.JobVersions},
	}
}

// ErrNoBucket is returned by reads and writes on a bucket OpenStore did not
// find: the quiet case wanted.QuietNoBucket.
var ErrNoBucket = errors.New(wanted.QuietNoBucket.Message())

// ErrLostRace reports a compare-and-set that lost to another writer: re-read
// and re-decide. It wraps jetstream.ErrKeyRevisionMismatch.
var ErrLostRace = fmt.Errorf("lost a compare-and-set race: %w", jetstream.ErrKeyRevisionMismatch)

// ErrNotFound is the quiet case wanted.QuietNoKey.
var ErrNotFound = errors.New(wanted.QuietNoKey.Message())

func (s *Store) get(ctx context.Context, kv jetstream.KeyValue, key string) (jetstream.KeyValueEntry, error) {
	return s.getWithin(ctx, kv, key, s.conn.withTimeout)
}

// getWithin is get with the deadline within gives.
func (s *Store) getWithin(ctx context.Context, kv jetstream.KeyValue, key string, within func(context.Context) (context.Context, context.CancelFunc)) (jetstream.KeyValueEntry, error) {
	if kv == nil {
		return nil, ErrNoBucket
	}
	rctx, cancel := within(ctx)
	defer cancel()
	e, err := kv.Get(rctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, ErrNotFound
	}
	return e, err
}

func (s *Store) put(ctx context.Context, kv jetstream.KeyValue, key string, v any) (uint64, error) {
	return s.putWithin(ctx, kv, key, v, s.conn.withTimeout)
}

// putNodeRecord is put for a node record: the caller's deadline is kept
// when it is the longer (Conn.withLongerTimeout).
func (s *Store) putNodeRecord(ctx context.Context, n *model.Node) (uint64, error) {
	return s.putWithin(ctx, s.Nodes, wanted.NodeKey(n.ID), n, s.conn.withLongerTimeout)
}

// putWithin puts v's JSON under key, with the deadline within gives.
func (s *Store) putWithin(ctx context.Context, kv jetstream.KeyValue, key string, v any, within func(context.Context) (context.Context, context.CancelFunc)) (uint64, error) {
	if kv == nil {
		return 0, ErrNoBucket
	}
	b, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	if len(b) > wanted.MaxValueSize {
		return 0, fmt.Errorf("%w: %d bytes", wanted.ErrOversize, len(b))
	}
	rctx, cancel := within(ctx)
	defer cancel()
	return kv.Put(rctx, key, b)
}

// PutJob writes a job under wanted.JobKey (the CLI's `job run`). It returns
// the new revision.
func (s *Store) PutJob(ctx context.Context, j *model.Job) (uint64, error) {
	if err := wanted.CheckTokens(wanted.DefaultNamespace, j.ID); err != nil {
		return 0, fmt.Errorf("writing job: %w", err)
	}
	if j.Namespace != "" {
		if err := wanted.CheckTokens(j.Namespace); err != nil {
			return 0, fmt.Errorf("writing job: %w", err)
		}
	}
	rev, err := s.put(ctx, s.Jobs, wanted.JobKey(j.Namespace, j.ID), j)
	if err != nil {
		return 0, fmt.Errorf("writing job %s: %w", j.ID, err)
	}
	return rev, nil
}

// GetJob reads and decodes one job, closed. ErrNotFound if absent.
func (s *Store) GetJob(ctx context.Context, namespace, id string) (*model.Job, uint64, error) {
	key := wanted.JobKey(namespace, id)
	e, err := s.get(ctx, s.Jobs, key)
	if err != nil {
		return nil, 0, fmt.Errorf("reading job %s: %w", key, err)
	}
	j, err := wanted.DecodeJob(key, e.Value())
	if err != nil {
		return nil, e.Revision(), fmt.Errorf("reading job %s: %w", key, err)
	}
	return j, e.Revision(), nil
}

// GetIntent reads a node's operator intent; a missing key is the zero
// Intent (eligible, not draining) with revision 0.
func (s *Store) GetIntent(ctx context.Context, nodeID string) (wanted.Intent, uint64, error) {
	e, err := s.get(ctx, s.Intents, wanted.NodeKey(nodeID))
	if errors.Is(err, ErrNotFound) {
		return wanted.Intent{}, 0, nil
	}
	if err != nil {
		return wanted.Intent{}, 0, fmt.Errorf("reading intent of node %s: %w", nodeID, err)
	}
	in, err := wanted.DecodeIntent(e.Value())
	return in, e.Revision(), err
}

// PutIntent writes a node's operator intent (the CLI's `node drain` and
// `node eligibility`); the owning agent merges it into its node record.
func (s *Store) PutIntent(ctx context.Context, nodeID string, in wanted.Intent) (uint64, error) {
	if err := wanted.CheckTokens(nodeID); err != nil {
		return 0, fmt.Errorf("writing node intent: %w", err)
	}
	rev, err := s.put(ctx, s.Intents, wanted.NodeKey(nodeID), in)
	if err != nil {
		return 0, fmt.Errorf("writing intent of node %s: %w", nodeID, err)
	}
	return rev, nil
}

// ModifyIntent changes a node's operator intent by compare-and-set: it reads
// the intent, applies change, and writes it only if nobody wrote in between
// (create-if-absent for a node with none), re-reading and re-applying on a
// lost race, so two operators changing drain and eligibility at once both
// land. It returns the intent written and its revision.
func (s *Store) ModifyIntent(ctx context.Context, nodeID string, change func(*wanted.Intent)) (wanted.Intent, uint64, error) {
	if err := wanted.CheckTokens(nodeID); err != nil {
		return wanted.Intent{}, 0, fmt.Errorf("writing node intent: %w", err)
	}
	if s.Intents == nil {
		return wanted.Intent{}, 0, ErrNoBucket
	}
	key := wanted.NodeKey(nodeID)
	for attempt := 0; ; attempt++ {
		in, rev, err := s.GetIntent(ctx, nodeID)
		if err != nil {
			return wanted.Intent{}, 0, err
		}
		change(&in)
		b, err := json.Marshal(in)
		if err != nil {
			return wanted.Intent{}, 0, err
		}
		rctx, cancel := s.conn.withTimeout(ctx)
		var nrev uint64
		if rev == 0 {
			nrev, err = s.Intents.Create(rctx, key, b)
		} else {
			nrev, err = s.Intents.Update(rctx, key, b, rev)
		}
		cancel()
		if err == nil {
			return in, nrev, nil
		}
		lost := errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
		if !lost || attempt >= 20 {
			return wanted.Intent{}, 0, fmt.Errorf("writing intent of node %s: %w", nodeID, err)
		}
		if !wait.For(ctx, backoff(attempt, 2*time.Millisecond, 100*time.Millisecond)) {
			return wanted.Intent{}, 0, ctx.Err()
		}
	}
}

// GetNode reads one node record (nil, ErrNotFound when its heartbeat expired).
func (s *Store) GetNode(ctx context.Context, nodeID string) (*model.Node, uint64, error) {
	e, err := s.get(ctx, s.Nodes, wanted.NodeKey(nodeID))
	if err != nil {
		return nil, 0, fmt.Errorf("reading node %s: %w", nodeID, err)
	}
	n, err := wanted.DecodeNode(wanted.NodeKey(nodeID), e.Value())
	return n, e.Revision(), err
}

// GetDeployment reads a deployment with its revision (for UpdateDeployment).
func (s *Store) GetDeployment(ctx context.Context, namespace, jobID string, version uint64) (*model.Deployment, uint64, error) {
	key := wanted.DeploymentKey(namespace, jobID, version)
	s.countOp()
	e, err := s.get(ctx, s.Deployments, key)
	if err != nil {
		return nil, 0, fmt.Errorf("reading deployment %s: %w", key, err)
	}
	d, err := wanted.DecodeDeployment(key, e.Value())
	if err != nil {
		return nil, e.Revision(), fmt.Errorf("reading deployment %s: %w", key, err)
	}
	return d, e.Revision(), nil
}

// CreateDeployment creates the deployment of d's job version if absent. It
// is idempotent per job version: when the key exists (another host, or an
// earlier pass, created it) it returns the stored deployment with created
// false, and the caller adopts it. The returned revision is the one to pass to
// UpdateDeployment.
func (s *Store) CreateDeployment(ctx context.Context, d *model.Deployment) (cur *model.Deployment, rev uint64, created bool, err error) {
	if s.Deployments == nil {
		return nil, 0, false, ErrNoBucket
	}
	if err := wanted.CheckTokens(d.JobID); err != nil {
		return nil, 0, false, fmt.Errorf("creating deployment: %w", err)
	}
	key := wanted.DeploymentKey(d.Namespace, d.JobID, d.JobVersion)
	b, err := json.Marshal(d)
	if err != nil {
		return nil, 0, false, err
	}
	rctx, cancel := s.conn.withTimeout(ctx)
	s.countOp()
	rev, err = s.Deployments.Create(rctx, key, b)
	cancel()
	if err == nil {
		return d, rev, true, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return nil, 0, false, fmt.Errorf("creating deployment %s: %w", key, err)
	}
	// The key exists. A replicated bucket may answer the read from a replica
	// that has not applied the winner's write yet: retry "not found" until
	// the request deadline.
	deadline := time.Now().Add(s.conn.RequestTimeout())
	for attempt := 0; ; attempt++ {
		cur, rev, err = s.GetDeployment(ctx, d.Namespace, d.JobID, d.JobVersion)
		if !errors.Is(err, ErrNotFound) || time.Now().After(deadline) {
			return cur, rev, false, err
		}
		if !wait.For(ctx, backoff(attempt, 5*time.Millisecond, 200*time.Millisecond)) {
			return nil, 0, false, ctx.Err()
		}
	}
}

// UpdateDeployment writes d only if the stored revision is still rev. A lost
// race returns an error wrapping ErrLostRace (and so
// jetstream.ErrKeyRevisionMismatch): re-read with GetDeployment and decide
// again, or use ModifyDeployment.
func (s *Store) UpdateDeployment(ctx context.Context, d *model.Deployment, rev uint64) (uint64, error) {
	if s.Deployments == nil {
		return 0, ErrNoBucket
	}
	key := wanted.DeploymentKey(d.Namespace, d.JobID, d.JobVersion)
	b, err := json.Marshal(d)
	if err != nil {
		return 0, err
	}
	rctx, cancel := s.conn.withTimeout(ctx)
	defer cancel()
	s.countOp()
	nrev, err := s.Deployments.Update(rctx, key, b, rev)
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, fmt.Errorf("updating deployment %s at revision %d: %w", key, rev, ErrLostRace)
	}
	if err != nil {
		return 0, fmt.Errorf("updating deployment %s: %w", key, err)
	}
	return nrev, nil
}

// ModifyDeployment is the re-read-and-re-decide loop around
// UpdateDeployment: it reads the deployment, calls decide with a copy, and
// writes the result by compare-and-set, retrying from the read when another
// writer got there first (at most attempts times, default 8). decide returning
// nil means "nothing to change" and ends the loop without a write. Reads may
// come from a replica that is behind (direct get on a replicated bucket): a
// stale revision loses the compare-and-set and is re-read, so staleness costs
// a retry, never a lost update.
func (s *Store) ModifyDeployment(ctx context.Context, namespace, jobID string, version uint64, attempts int,
	decide func(cur model.Deployment) (*model.Deployment, error)) (*model.Deployment, uint64, error) {
	if attempts <= 0 {
		attempts = 8
	}
	var err error
	for attempt := range attempts {
		cur, rev, gerr := s.GetDeployment(ctx, namespace, jobID, version)
		if errors.Is(gerr, ErrNotFound) && attempt < attempts-1 {
			// Possibly a replica behind a just-created record: read again.
			err = gerr
			if !wait.For(ctx, backoff(attempt, 5*time.Millisecond, 200*time.Millisecond)) {
				return nil, 0, ctx.Err()
			}
			continue
		}
		if gerr != nil {
			return nil, 0, gerr
		}
		next, derr := decide(*cur)
		if derr != nil {
			return nil, 0, derr
		}
		if next == nil {
			return cur, rev, nil
		}
		nrev, uerr := s.UpdateDeployment(ctx, next, rev)
		if uerr == nil {
			return next, nrev, nil
		}
		if !errors.Is(uerr, ErrLostRace) {
			// Ambiguous (a timeout, a leader change): the write may have
			// landed. Re-read and recognise it by its nonce; never read an
			// ambiguous write as a failure.
			if next.Nonce != "" && next.Nonce != cur.Nonce {
				if back, brev, berr := s.GetDeployment(ctx, namespace, jobID, version); berr == nil && back.Nonce == next.Nonce {
					return back, brev, nil
				}
			}
			return nil, 0, uerr
		}
		s.stats.casConflicts.Add(1)
		err = uerr
	}
	return nil, 0, fmt.Errorf("modifying deployment: gave up after %d attempts: %w", attempts, err)
}

// ListDeployments reads every deployment record (CLI `deployment list`).
// Undecodable records are returned in rejected, not dropped silently.
func (s *Store) ListDeployments(ctx context.Context) (ds []wanted.DeploymentState, rejected []wanted.Rejection, err error) {
	entries, err := s.pullAll(ctx, s.Deployments)
	if err != nil {
		return nil, nil, fmt.Errorf("listing deployments: %w", err)
	}
	for _, e := range entries {
		st, eff := wanted.ApplyDeployment(wanted.DeploymentState{}, e)
		switch eff {
		case wanted.EffectAccepted:
			ds = append(ds, st)
		case wanted.EffectRejected:
			r := *st.Rejection
			r.Bucket = s.names.Deployments
			rejected = append(rejected, r)
		}
	}
	return ds, rejected, nil
}

// ListNodes reads every live node record, merged with nothing (CLI `node
// status`). Expired records are absent.
func (s *Store) ListNodes(ctx context.Context) ([]*model.Node, []wanted.Rejection, error) {
	entries, err := s.pullAll(ctx, s.Nodes)
	if err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	var out []*model.Node
	var rejected []wanted.Rejection
	for _, e := range entries {
		st, eff := wanted.ApplyNode(wanted.NodeState{}, e)
		switch eff {
		case wanted.EffectAccepted:
			out = append(out, st.Value)
		case wanted.EffectRejected:
			rejected = append(rejected, *st.Rejection)
		}
	}
	return out, rejected, nil
}

// NodeWriter is the only writer of one node's keys: its node record and its
// allocations' status. Get one from Store.ForNode.
type NodeWriter struct {
	s      *Store
	nodeID string
}

// ForNode returns the writer of nodeID's keys.
func (s *Store) ForNode(nodeID string) *NodeWriter { return &NodeWriter{s: s, nodeID: nodeID} }

// NodeID is the node this writer writes for.
func (w *NodeWriter) NodeID() string { return w.nodeID }

// PutNode writes the node record (registration and each heartbeat: the Put
// refreshes the bucket TTL). n.ID must be the writer's node.
func (w *NodeWriter) PutNode(ctx context.Context, n *model.Node) (uint64, error) {
	if !wanted.OwnsNodeKey(w.nodeID, wanted.NodeKey(n.ID)) {
		return 0, fmt.Errorf("writing node record %s as node %s: %w", n.ID, w.nodeID, wanted.ErrNotOwner)
	}
	rev, err := w.s.putNodeRecord(ctx, n)
	if err != nil {
		return 0, fmt.Errorf("writing node record %s: %w", n.ID, err)
	}
	w.s.countNodeWrite(n)
	return rev, nil
}

// ReadNode reads this node's record back as the bucket holds it
// (node.Reader: a heartbeat whose answer was lost is looked for before it
// is written again), keeping the caller's deadline when it is the longer.
func (w *NodeWriter) ReadNode(ctx context.Context) (*model.Node, error) {
	key := wanted.NodeKey(w.nodeID)
	e, err := w.s.getWithin(ctx, w.s.Nodes, key, w.s.conn.withLongerTimeout)
	if err != nil {
		return nil, fmt.Errorf("reading node %s: %w", w.nodeID, err)
	}
	return wanted.DecodeNode(key, e.Value())
}

// countNodeWrite counts one node record written (Stats.NodeWrites).
func (s *Store) countNodeWrite(n *model.Node) {
	if s.stats == nil {
		return
	}
	s.stats.nodeWrites.Add(1)
	if b, err := json.Marshal(n); err == nil {
		s.stats.nodeBytes.Add(int64(len(b)))
	}
}

// PutNodeTTL writes the node record with a TTL of its own (a JetStream
// per-message TTL, whole seconds, at least 1 s): the record expires ttl
// after this write, or at the bucket's TTL if that comes first, and its
// watchers see the expiry as they see the bucket's (a limit marker). A
// server or bucket that refuses per-message TTLs gets a plain put.
func (w *NodeWriter) PutNodeTTL(ctx context.Context, n *model.Node, ttl time.Duration) (uint64, error) {
	if !wanted.OwnsNodeKey(w.nodeID, wanted.NodeKey(n.ID)) {
		return 0, fmt.Errorf("writing node record %s as node %s: %w", n.ID, w.nodeID, wanted.ErrNotOwner)
	}
	if w.s.Nodes == nil {
		return 0, ErrNoBucket
	}
	b, err := json.Marshal(n)
	if err != nil {
		return 0, err
	}
	if len(b) > wanted.MaxValueSize {
		return 0, fmt.Errorf("writing node record %s: %w: %d bytes", n.ID, wanted.ErrOversize, len(b))
	}
	ttl = ttl.Round(time.Second)
	rctx, cancel := w.s.conn.withLongerTimeout(ctx)
	defer cancel()
	ack, err := w.s.conn.js.Publish(rctx, "$KV."+w.s.names.Nodes+"."+wanted.NodeKey(n.ID), b, jetstream.WithMsgTTL(max(ttl, time.Second)))
	if apiErr := (*jetstream.APIError)(nil); errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeMsgTTLDisabled {
		rev, err := w.s.putNodeRecord(ctx, n) // the bucket cannot: its TTL applies
		if err == nil {
			w.s.countNodeWrite(n)
		}
		return rev, err
	}
	if err != nil {
		return 0, fmt.Errorf("writing node record %s: %w", n.ID, err)
	}
	if w.s.stats != nil {
		w.s.stats.nodeWrites.Add(1)
		w.s.stats.nodeBytes.Add(int64(len(b)))
	}
	return ack.Sequence, nil
}

// errCodeMsgTTLDisabled is JetStream's "per-message TTL is disabled"
// (a stream without AllowMsgTTL; nats.go names no sentinel for it).
const errCodeMsgTTLDisabled jetstream.ErrorCode = 10166

// NodeCeiling reads the nodes bucket's bucket-wide TTL: the longest any
// node record lives, whatever TTL it was written with.
func (s *Store) NodeCeiling(ctx context.Context) (time.Duration, error) {
	if s.Nodes == nil {
		return 0, ErrNoBucket
	}
	rctx, cancel := s.conn.withTimeout(ctx)
	defer cancel()
	st, err := s.Nodes.Status(rctx)
	if err != nil {
		return 0, fmt.Errorf("reading bucket %s: %w", s.names.Nodes, err)
	}
	return st.TTL(), nil
}

// SetNodeCeiling sets the nodes bucket's bucket-wide TTL (node.Liveness
// raises it for a larger fleet and lowers it again). The stream's
// duplicate window is kept within it, as a bucket made with that TTL has.
func (s *Store) SetNodeCeiling(ctx context.Context, ttl time.Duration) error {
	if ttl < time.Second {
		return fmt.Errorf("setting bucket %s's TTL to %s: at least 1s", s.names.Nodes, ttl)
	}
	rctx, cancel := s.conn.withTimeout(ctx)
	defer cancel()
	stream, err := s.conn.js.Stream(rctx, "KV_"+s.names.Nodes)
	if err != nil {
		return fmt.Errorf("reading bucket %s: %w", s.names.Nodes, err)
	}
	cfg := stream.CachedInfo().Config
	cfg.MaxAge = ttl
	if cfg.Duplicates > ttl {
		cfg.Duplicates = ttl
	}
	if _, err := s.conn.js.UpdateStream(rctx, cfg); err != nil {
		return fmt.Errorf("setting bucket %s's TTL to %s: %w", s.names.Nodes, ttl, err)
	}
	return nil
}

// PutAlloc writes one allocation's status. a.NodeID must be the writer's node.
func (w *NodeWriter) PutAlloc(ctx context.Context, a *model.Allocation) (uint64, error) {
	key := wanted.AllocKey(a.NodeID, a.Namespace, a.JobID, a.ID)
	if !wanted.OwnsAllocKey(w.nodeID, key) {
		return 0, fmt.Errorf("writing allocation %s as node %s: %w", key, w.nodeID, wanted.ErrNotOwner)
	}
	rev, err := w.s.put(ctx, w.s.Allocs, key, a)
	if err != nil {
		return 0, fmt.Errorf("writing allocation %s: %w", a.ID, err)
	}
	return rev, nil
}

// DeleteAlloc removes one of this node's allocation keys (garbage
// collection of an allocation this node destroyed).
func (w *NodeWriter) DeleteAlloc(ctx context.Context, namespace, jobID, allocID string) error {
	key := wanted.AllocKey(w.nodeID, namespace, jobID, allocID)
	if w.s.Allocs == nil {
		return ErrNoBucket
	}
	rctx, cancel := w.s.conn.withTimeout(ctx)
	defer cancel()
	if err := w.s.Allocs.Delete(rctx, key); err != nil {
		return fmt.Errorf("deleting allocation %s: %w", key, err)
	}
	return nil
}
