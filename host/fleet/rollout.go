package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// The rollout bucket's update slots and the job_versions bucket
// (docs/rollout.md, "Keys"). A slot is taken by create-if-absent with a
// per-key TTL, released or reclaimed by a delete at the revision the
// deleter read: a slot that changed hands since is never deleted.

// ErrSlotTaken is returned by TakeSlot when the key is held by someone
// else: wait for the next change.
var ErrSlotTaken = errors.New("update slot already taken")

func (s *Store) countOp() {
	if s.stats != nil {
		s.stats.rolloutOps.Add(1)
	}
}

// TakeSlot creates the slot under key if absent, with ttl. An ambiguous
// answer (a timeout) is settled by reading the key back and recognising
// the slot's nonce. It returns the slot's revision.
func (s *Store) TakeSlot(ctx context.Context, key string, sl model.Slot, ttl time.Duration) (uint64, error) {
	if s.Rollout == nil {
		return 0, ErrNoBucket
	}
	if want := wanted.SlotKey(sl.Namespace, sl.JobID, sl.Group, sl.Index); want != key {
		return 0, fmt.Errorf("taking slot: key %q, the slot belongs under %q", key, want)
	}
	b, err := json.Marshal(sl)
	if err != nil {
		return 0, err
	}
	rctx, cancel := s.conn.withTimeout(ctx)
	s.countOp()
	rev, err := s.Rollout.Create(rctx, key, b, jetstream.KeyTTL(ttl))
	cancel()
	if err == nil {
		return rev, nil
	}
	// What the key holds now, read with a deadline of its own: the
	// caller's may have run out with the Create's (a loaded server).
	stored := func() (*model.Slot, uint64, error) {
		gctx, gcancel := s.conn.withTimeout(context.WithoutCancel(ctx))
		defer gcancel()
		return s.GetSlot(gctx, key)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		// This node's own take of the same replacement, made by an
		// earlier attempt whose answer was lost (a timeout): it is
		// this node's slot, and refusing it would leave it held with
		// nobody acting on it until its TTL ran out.
		if got, grev, gerr := stored(); gerr == nil && sameTake(got, &sl) {
			s.stats.slotAdopted.Add(1)
			return grev, nil
		}
		s.stats.slotConflicts.Add(1)
		return 0, fmt.Errorf("taking slot %s: %w", key, ErrSlotTaken)
	}
	// Ambiguous: did it land?
	s.stats.slotAmbiguous.Add(1)
	if got, grev, gerr := stored(); gerr == nil && (got.Nonce == sl.Nonce || sameTake(got, &sl)) {
		return grev, nil
	}
	return 0, fmt.Errorf("taking slot %s: %w", key, err)
}

// sameTake reports whether stored slot a is a take of the same replacement
// by the same boot of the same holder as b (whatever its nonce: the
// decision that made it may be an earlier one).
func sameTake(a, b *model.Slot) bool {
	return a.Holder == b.Holder && a.BootID == b.BootID && b.BootID != "" && a.OldAlloc == b.OldAlloc && a.NewAlloc == b.NewAlloc &&
		a.DeploymentID == b.DeploymentID && a.Group == b.Group && a.Index == b.Index
}

// GetSlot reads one slot.
func (s *Store) GetSlot(ctx context.Context, key string) (*model.Slot, uint64, error) {
	s.countOp()
	e, err := s.get(ctx, s.Rollout, key)
	if err != nil {
		return nil, 0, fmt.Errorf("reading slot %s: %w", key, err)
	}
	sl, err := wanted.DecodeSlot(key, e.Value())
	if err != nil {
		return nil, e.Revision(), err
	}
	return sl, e.Revision(), nil
}

// ReleaseSlot deletes the slot under key if it is still at rev (release by
// the holder, or reclaim by the steward). A slot that moved on since (taken
// again, already released, expired) is left alone and reported as nil: the
// release it asked for has happened, or is someone else's to make.
func (s *Store) ReleaseSlot(ctx context.Context, key string, rev uint64) error {
	if s.Rollout == nil {
		return ErrNoBucket
	}
	rctx, cancel := s.conn.withTimeout(ctx)
	defer cancel()
	s.countOp()
	err := s.Rollout.Delete(rctx, key, jetstream.LastRevision(rev))
	if err == nil || errors.Is(err, jetstream.ErrKeyRevisionMismatch) || isWrongLastSeq(err) {
		return nil
	}
	return fmt.Errorf("releasing slot %s: %w", key, err)
}

func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// PutJobVersion records a job version as submitted (create-if-absent:
// versions are immutable). An existing key is not an error.
func (s *Store) PutJobVersion(ctx context.Context, j *model.Job) error {
	if s.JobVersions == nil {
		return ErrNoBucket
	}
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	rctx, cancel := s.conn.withTimeout(ctx)
	defer cancel()
	_, err = s.JobVersions.Create(rctx, wanted.JobVersionKey(j.Namespace, j.ID, j.Version), b)
	if err == nil || errors.Is(err, jetstream.ErrKeyExists) {
		return nil
	}
	return fmt.Errorf("recording version %d of job %s: %w", j.Version, j.ID, err)
}

// GetJobVersion reads one recorded version of a job; ErrNotFound when it
// was never recorded. Versions written before the bucket existed are
// looked up in the jobs bucket's history instead.
func (s *Store) GetJobVersion(ctx context.Context, namespace, jobID string, version uint64) (*model.Job, error) {
	if s.JobVersions != nil {
		key := wanted.JobVersionKey(namespace, jobID, version)
		e, err := s.get(ctx, s.JobVersions, key)
		if err == nil {
			j, derr := wanted.DecodeJobVersion(key, e.Value())
			if derr != nil {
				return nil, fmt.Errorf("reading version %d of job %s: %w", version, jobID, derr)
			}
			return j, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	if s.Jobs == nil {
		return nil, ErrNoBucket
	}
	rctx, cancel := s.conn.withTimeout(ctx)
	defer cancel()
	hist, err := s.Jobs.History(rctx, wanted.JobKey(namespace, jobID))
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("reading the history of job %s: %w", jobID, err)
	}
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Operation() != jetstream.KeyValuePut {
			continue
		}
		if j, derr := wanted.DecodeJob(wanted.JobKey(namespace, jobID), hist[i].Value()); derr == nil && j.Version == version {
			return j, nil
		}
	}
	return nil, ErrNotFound
}

// UpdateJob writes j over the job key only if it is still at rev (a
// revert: the human's newer version wins the race). The version is
// recorded in job_versions too. A lost race wraps ErrLostRace.
func (s *Store) UpdateJob(ctx context.Context, j *model.Job, rev uint64) (uint64, error) {
	if s.Jobs == nil {
		return 0, ErrNoBucket
	}
	b, err := json.Marshal(j)
	if err != nil {
		return 0, err
	}
	rctx, cancel := s.conn.withTimeout(ctx)
	nrev, err := s.Jobs.Update(rctx, wanted.JobKey(j.Namespace, j.ID), b, rev)
	cancel()
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || isWrongLastSeq(err) {
		return 0, fmt.Errorf("writing job %s at revision %d: %w", j.ID, rev, ErrLostRace)
	}
	if err != nil {
		return 0, fmt.Errorf("writing job %s: %w", j.ID, err)
	}
	if perr := s.PutJobVersion(ctx, j); perr != nil {
		return nrev, perr
	}
	return nrev, nil
}

// ServerNow reads the NATS server's clock: it writes a throw-away key
// (TTL one minute) to the rollout bucket and returns the server timestamp
// of that write. The CLI stamps its record changes (pause, resume,
// promote) with it, so every time compared across machines is the
// server's (docs/rollout.md, I6). The write is read back from the stream
// leader by its sequence: a direct get may be answered by a replica that
// has not stored it yet (seen in CI right after a cluster restart).
func (s *Store) ServerNow(ctx context.Context) (time.Time, error) {
	if s.Rollout == nil {
		return time.Time{}, ErrNoBucket
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return time.Time{}, err
	}
	key := "clock." + hex.EncodeToString(b[:])
	rctx, cancel := s.conn.withTimeout(ctx)
	defer cancel()
	rev, err := s.Rollout.Create(rctx, key, []byte("{}"), jetstream.KeyTTL(time.Minute))
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the server clock: %w", err)
	}
	m, err := s.leaderGet(rctx, s.names.Rollout, map[string]any{"seq": rev})
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the server clock: %w", err)
	}
	if m == nil {
		return time.Time{}, fmt.Errorf("reading the server clock: the stream leader has no message %d", rev)
	}
	return m.Time, nil
}

// VerdictTTL bounds how long a loss verdict of a node that never returns
// is kept.
const VerdictTTL = 24 * time.Hour

// CreateVerdict writes the verdict on one loss of a node, once (T13): a
// verdict that exists already is not an error (another loss steward, or a
// deputy, wrote it).
func (s *Store) CreateVerdict(ctx context.Context, key string, v model.LossVerdict) error {
	if s.Rollout == nil {
		return ErrNoBucket
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	rctx, cancel := s.conn.withTimeout(ctx)
	defer cancel()
	s.countOp()
	if _, err := s.Rollout.Create(rctx, key, b, jetstream.KeyTTL(VerdictTTL)); err != nil &&
		!errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return fmt.Errorf("writing loss verdict %s: %w", key, err)
	}
	return nil
}

// DeleteVerdict removes a node's loss verdict (T14: the node is back), at
// the revision read.
func (s *Store) DeleteVerdict(ctx context.Context, key string, rev uint64) error {
	return s.ReleaseSlot(ctx, key, rev)
}

// GetDeploymentFromLeader reads a deployment record through the stream's
// leader (a non-direct message get), not from whichever replica answers a
// direct get first: T5's re-read after a slot take must see a pause or a
// cancel that the leader has already stored. ErrNotFound when absent.
func (s *Store) GetDeploymentFromLeader(ctx context.Context, namespace, jobID string, version uint64) (*model.Deployment, error) {
	if s.Deployments == nil {
		return nil, ErrNoBucket
	}
	key := wanted.DeploymentKey(namespace, jobID, version)
	rctx, cancel := s.conn.withTimeout(ctx)
	defer cancel()
	s.countOp()
	m, err := s.leaderGet(rctx, s.names.Deployments, map[string]any{"last_by_subj": "$KV." + s.names.Deployments + "." + key})
	if err != nil {
		return nil, fmt.Errorf("reading deployment %s from the stream leader: %w", key, err)
	}
	if m == nil {
		return nil, ErrNotFound
	}
	if h := string(m.Hdrs); strings.Contains(h, "KV-Operation: DEL") || strings.Contains(h, "KV-Operation: PURGE") {
		return nil, ErrNotFound
	}
	return wanted.DecodeDeployment(key, m.Data)
}

// leaderMsg is a stream message as the stream leader's message get
// returns it.
type leaderMsg struct {
	Seq  uint64    `json:"seq"`
	Data []byte    `json:"data"`
	Hdrs []byte    `json:"hdrs"`
	Time time.Time `json:"time"`
}

// leaderGet asks the leader of a bucket's stream for one message (a
// non-direct get, so never a lagging replica's answer); req is the get's
// body ("seq" or "last_by_subj"). A message that is not there is (nil,
// nil).
func (s *Store) leaderGet(ctx context.Context, bucket string, req map[string]any) (*leaderMsg, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	msg, err := s.conn.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+bucket, body)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Message *leaderMsg `json:"message"`
		Error   *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, err
	}
	if resp.Error != nil {
		if resp.Error.Code == 404 {
			return nil, nil
		}
		return nil, errors.New(resp.Error.Description)
	}
	if resp.Message == nil {
		return nil, errors.New("empty answer")
	}
	return resp.Message, nil
}

// PutSummary writes a job's rollout summary (one writer at a time: the
// deployment's steward, or an overdue deputy; a derived value, so a plain
// put: the newest derivation wins).
func (s *Store) PutSummary(ctx context.Context, sum *model.RolloutSummary) error {
	if s.Rollout == nil {
		return ErrNoBucket
	}
	b, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	rctx, cancel := s.conn.withTimeout(ctx)
	defer cancel()
	s.countOp()
	if _, err := s.Rollout.Put(rctx, wanted.SummaryKey(sum.Namespace, sum.JobID), b); err != nil {
		return fmt.Errorf("writing rollout summary of %s: %w", wanted.JobKey(sum.Namespace, sum.JobID), err)
	}
	return nil
}
