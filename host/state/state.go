// Package state owns the agent's local state store: one bbolt file under the
// state directory holding this node's allocations with their stored intent,
// the driver handles of their tasks, plugin reattach data, and the last good
// declaration of each job the node has converged on.
//
// Invariants:
//   - Every change is written (and fsynced by bbolt) before the call returns
//     (concurrent changes share one transaction: see committer):
//     the store is the node's memory across a restart or a SIGKILL, and what
//     "diverged" is measured against (docs/wanted-state.md).
//   - The file is opened with a lock timeout, so a second agent on the same
//     state directory fails with ErrLocked instead of hanging or corrupting
//     it (TestASecondOpenOfTheSameStoreFailsWithErrLocked).
//   - A truncated or corrupt file fails Open with ErrCorrupt, the path and
//     the reason, before bbolt would panic on it (verify.go,
//     TestATruncatedOrCorruptStoreFailsOpenWithItsPathAndNeverPanics).
//   - A record that cannot be decoded is an error, never silently skipped:
//     a node that cannot enumerate what it runs must fail closed
//     (TestACorruptRecordFailsTheWholeRestore).
//   - An allocation record is stored as the same JSON document whether its
//     job is encoded with it or handed in already encoded (a runner's
//     writes, AllocRecord.JobEncoding): byte for byte, so either agent
//     reads what the other wrote
//     (TestARecordWrittenWithItsJobsEncodingIsTheSameDocument).
//   - The package reads no clock and starts no goroutine.
package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterr "go.etcd.io/bbolt/errors"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/sdk/driver"
)

// ErrLocked is returned by Open when another process holds the store.
var ErrLocked = errors.New("state store is locked by another process (is another agent running on this state directory?)")

// schemaVersion is the layout version written into the meta bucket; Open
// refuses a store written by a newer layout.
const schemaVersion = 1

var (
	bucketMeta    = []byte("meta")
	bucketAllocs  = []byte("allocs")
	bucketHandles = []byte("handles")
	bucketPlugins = []byte("plugins")
	bucketJobs    = []byte("jobs")
	keySchema     = []byte("schema")
)

// FileName is the store's file name inside the state directory.
const FileName = "state.db"

// AllocRecord is one allocation as this node knows it: the allocation (with
// its client status as last reported), the node's stored intent for it, and
// the job version it runs (so a restart reattaches with the spec it was
// started with, whatever the jobs bucket says now).
type AllocRecord struct {
	Alloc *model.Allocation `json:"alloc"`
	// Intent is what this node decided the allocation should be: run or stop.
	Intent model.DesiredStatus `json:"intent"`
	Job    *model.Job          `json:"job"`
	// JobEncoding, when it was made from Job (the same pointer: see
	// Store.EncodeJob), is written as the record's job instead of encoding
	// Job again; the stored document is the same, byte for byte. Any other
	// is ignored. It is not stored: a record read back has none.
	JobEncoding *JobEncoding `json:"-"`
}

// allocRecordHead is AllocRecord's stored members before the job, as
// AllocRecord encodes them (TestAllocRecordHeadIsTheRecordWithoutItsJob).
type allocRecordHead struct {
	Alloc  *model.Allocation   `json:"alloc"`
	Intent model.DesiredStatus `json:"intent"`
}

// encodeAllocRecord encodes r as json.Marshal does, taking the job's
// bytes from r.JobEncoding when it is r.Job's: an allocation runner writes
// its record several times per start, and its job does not change between
// them (TestARecordWrittenWithItsJobsEncodingIsTheSameDocument).
func encodeAllocRecord(r *AllocRecord) ([]byte, error) {
	e := r.JobEncoding
	if e == nil || e.job == nil || e.job != r.Job {
		return json.Marshal(r)
	}
	head, err := json.Marshal(allocRecordHead{Alloc: r.Alloc, Intent: r.Intent})
	if err != nil {
		return nil, err
	}
	const member = `,"job":`
	b := make([]byte, 0, len(head)+len(member)+len(e.data))
	b = append(b, head[:len(head)-1]...) // without its closing brace
	b = append(b, member...)
	b = append(b, e.data...)
	return append(b, '}'), nil
}

// JobEncoding is a job with its JSON encoding, for the allocation records
// that carry the job (AllocRecord.JobEncoding). Make one with
// Store.EncodeJob; the job must not be modified afterwards.
type JobEncoding struct {
	job  *model.Job
	data []byte
}

// Job is the job encoded.
func (e *JobEncoding) Job() *model.Job { return e.job }

// jobEncodingsKept is how many of the last jobs encoded Store.EncodeJob
// keeps for its next callers.
const jobEncodingsKept = 8

// jobEncodings are the encodings Store.EncodeJob made last, newest at
// next-1, so that the runners of one job version share one copy of its
// encoding (a node may run a thousand allocations of one job).
type jobEncodings struct {
	mu   sync.Mutex
	last [jobEncodingsKept]*JobEncoding
	next int
}

// EncodeJob encodes j for the allocation records that carry it
// (AllocRecord.JobEncoding), or returns the encoding it made for j
// (the same pointer) if that is one of the last few it made: callers of
// one job share one encoding, and callers of equal jobs one copy of its
// bytes. j must not be modified afterwards: the records would store it as
// it was.
func (s *Store) EncodeJob(j *model.Job) (*JobEncoding, error) {
	if j == nil {
		return nil, errors.New("encoding a job: no job")
	}
	c := &s.jobs
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.last {
		if e != nil && e.job == j {
			return e, nil
		}
	}
	b, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("encoding job %s: %w", j.ID, err)
	}
	for _, o := range c.last {
		if o != nil && bytes.Equal(o.data, b) {
			// An equal job: the restored allocations of a job each hold
			// their own copy of it (decoded from their records), and
			// share one copy of its bytes.
			b = o.data
			break
		}
	}
	e := &JobEncoding{job: j, data: b}
	c.last[c.next] = e
	c.next = (c.next + 1) % len(c.last)
	return e, nil
}

// JobRecord is the last good declaration of a job: decoded and accepted, with
// the KV revision it came from.
type JobRecord struct {
	Job      *model.Job `json:"job"`
	Revision uint64     `json:"revision"`
}

// Store is the bbolt-backed state store. Its methods are safe for concurrent
// use; concurrent writes share transactions (see committer).
type Store struct {
	db      *bolt.DB
	commits committer
	fresh   bool
	health  writeHealth
	jobs    jobEncodings
}

// Fresh reports whether this Open created the store: its file did not
// exist or was empty. A fresh store on a node that ran allocations is a
// lost store, not a new node (see LostState).
func (s *Store) Fresh() bool { return s.fresh }

// Open opens (creating if needed) the store in dir, waiting at most timeout
// for the file lock. dir is created with mode 0700.
func Open(dir string, timeout time.Duration) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating state directory %s: %w", dir, err)
	}
	if timeout <= 0 {
		timeout = time.Second
	}
	path := filepath.Join(dir, FileName)
	fi, err := os.Stat(path)
	fresh := errors.Is(err, os.ErrNotExist) || (err == nil && fi.Size() == 0)
	if err == nil && !fresh {
		if err := verify(path, fi.Size(), timeout); err != nil {
			return nil, err
		}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout})
	if err != nil {
		if errors.Is(err, bolterr.ErrTimeout) {
			return nil, fmt.Errorf("opening %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("opening state store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketAllocs, bucketHandles, bucketPlugins, bucketJobs} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keySchema); v != nil {
			var got int
			if err := json.Unmarshal(v, &got); err != nil {
				return fmt.Errorf("reading schema version: %w", err)
			}
			if got > schemaVersion {
				return fmt.Errorf("store written by schema version %d, this agent knows %d", got, schemaVersion)
			}
		}
		v, _ := json.Marshal(schemaVersion)
		return meta.Put(keySchema, v)
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("initialising state store %s: %w", path, err)
	}
	return &Store{db: db, fresh: fresh}, nil
}

// Close releases the file and its lock.
func (s *Store) Close() error { return s.db.Close() }

// Path is the store's file.
func (s *Store) Path() string { return s.db.Path() }

// putOne encodes v outside any transaction (encoding is the caller's work,
// not the shared commit's) and writes it under key.
func (s *Store) putOne(bucket []byte, key string, v any) error {
	b, err := json.Marshal(v)
	return s.putEncoded(bucket, key, b, err)
}

// putEncoded writes b, the encoding of a value, under key; err is its
// encoder's.
func (s *Store) putEncoded(bucket []byte, key string, b []byte, err error) error {
	if err != nil {
		return fmt.Errorf("encoding %s/%s: %w", bucket, key, err)
	}
	return s.update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte(key), b) })
}

// PutAlloc writes one allocation record.
func (s *Store) PutAlloc(r *AllocRecord) error {
	if r == nil || r.Alloc == nil || r.Alloc.ID == "" {
		return errors.New("putting allocation: record without an allocation ID")
	}
	b, err := encodeAllocRecord(r)
	if err = s.putEncoded(bucketAllocs, r.Alloc.ID, b, err); err != nil {
		return fmt.Errorf("storing allocation %s: %w", r.Alloc.ID, err)
	}
	return nil
}

// DeleteAlloc removes an allocation and all of its task handles.
func (s *Store) DeleteAlloc(id string) error {
	err := s.update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketAllocs).Delete([]byte(id)); err != nil {
			return err
		}
		c := tx.Bucket(bucketHandles).Cursor()
		prefix := []byte(id + "/")
		var keys [][]byte
		for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			if err := tx.Bucket(bucketHandles).Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deleting allocation %s: %w", id, err)
	}
	return nil
}

func hasPrefix(b, p []byte) bool { return len(b) >= len(p) && string(b[:len(p)]) == string(p) }

// Alloc reads one allocation record; ok is false when there is none.
func (s *Store) Alloc(id string) (r *AllocRecord, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketAllocs).Get([]byte(id))
		if v == nil {
			return nil
		}
		r = new(AllocRecord)
		ok = true
		return json.Unmarshal(v, r)
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading allocation %s: %w", id, err)
	}
	return r, ok, nil
}

// Allocs reads every allocation record, sorted by allocation ID. One record
// that cannot be decoded fails the whole call: the caller must fail closed.
func (s *Store) Allocs() ([]*AllocRecord, error) {
	var out []*AllocRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAllocs).ForEach(func(k, v []byte) error {
			r := new(AllocRecord)
			if err := json.Unmarshal(v, r); err != nil {
				return fmt.Errorf("decoding allocation %s: %w", k, err)
			}
			if r.Alloc == nil {
				return fmt.Errorf("decoding allocation %s: record has no allocation", k)
			}
			if err := checkAllocRecord(string(k), r); err != nil {
				return fmt.Errorf("decoding allocation %s: %w", k, err)
			}
			out = append(out, r)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading allocations: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Alloc.ID < out[j].Alloc.ID })
	return out, nil
}

// checkAllocRecord refuses a record PutAlloc would not have written: one
// stored under another allocation's ID (two records would restore as one),
// with a null task state (the runner dereferences each), or one that would
// not read back once written again.
func checkAllocRecord(key string, r *AllocRecord) error {
	if r.Alloc.ID != key {
		return fmt.Errorf("record holds allocation %q", r.Alloc.ID)
	}
	for name, ts := range r.Alloc.TaskStates {
		if ts == nil {
			return fmt.Errorf("task_states.%s: null", name)
		}
	}
	return readsBack(r, new(AllocRecord))
}

// readsBack checks that a record read from the store can be written back
// (as the agent does on its next change) and read again. A record that
// leaves out a field the encoder always writes, such as an enum (its ""
// decodes as none of its values), would otherwise be acted on now and fail
// the next restore instead.
func readsBack[T any](r, into *T) error {
	b, err := json.Marshal(r)
	if err == nil {
		err = json.Unmarshal(b, into)
	}
	if err != nil {
		return fmt.Errorf("the record would not read back once written again: %w", err)
	}
	return nil
}

func handleKey(allocID, task string) string { return allocID + "/" + task }

// PutHandle writes the driver handle of one task.
func (s *Store) PutHandle(allocID, task string, h *driver.TaskHandle) error {
	if err := s.putOne(bucketHandles, handleKey(allocID, task), h); err != nil {
		return fmt.Errorf("storing handle of %s/%s: %w", allocID, task, err)
	}
	return nil
}

// PutAllocAndHandle writes an allocation record and the handle of one of its
// tasks in one transaction. A restore reads the handles of the allocations
// it finds: a handle stored without its allocation's record would never be
// read back, and its task would run on untracked. Written together, a crash
// leaves both or neither.
func (s *Store) PutAllocAndHandle(r *AllocRecord, task string, h *driver.TaskHandle) error {
	if r == nil || r.Alloc == nil || r.Alloc.ID == "" {
		return errors.New("putting allocation and handle: record without an allocation ID")
	}
	if task == "" || h == nil {
		return fmt.Errorf("putting allocation %s and handle: no task name or no handle", r.Alloc.ID)
	}
	rb, err := encodeAllocRecord(r)
	if err != nil {
		return fmt.Errorf("encoding allocation %s: %w", r.Alloc.ID, err)
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encoding handle of %s/%s: %w", r.Alloc.ID, task, err)
	}
	err = s.update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketAllocs).Put([]byte(r.Alloc.ID), rb); err != nil {
			return err
		}
		return tx.Bucket(bucketHandles).Put([]byte(handleKey(r.Alloc.ID, task)), hb)
	})
	if err != nil {
		return fmt.Errorf("storing allocation %s with the handle of task %s: %w", r.Alloc.ID, task, err)
	}
	return nil
}

// DeleteHandle removes the handle of one task.
func (s *Store) DeleteHandle(allocID, task string) error {
	if err := s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketHandles).Delete([]byte(handleKey(allocID, task)))
	}); err != nil {
		return fmt.Errorf("deleting handle of %s/%s: %w", allocID, task, err)
	}
	return nil
}

// Handles reads the task handles of one allocation, by task name.
func (s *Store) Handles(allocID string) (map[string]*driver.TaskHandle, error) {
	out := map[string]*driver.TaskHandle{}
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketHandles).Cursor()
		prefix := []byte(allocID + "/")
		for k, v := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
			h := new(driver.TaskHandle)
			if err := json.Unmarshal(v, h); err != nil {
				return fmt.Errorf("decoding handle %s: %w", k, err)
			}
			out[string(k[len(prefix):])] = h
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading handles of %s: %w", allocID, err)
	}
	return out, nil
}

// PutPluginReattach stores a plugin's reattach data (opaque to the store).
func (s *Store) PutPluginReattach(name string, data []byte) error {
	if err := s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPlugins).Put([]byte(name), data)
	}); err != nil {
		return fmt.Errorf("storing reattach data of plugin %s: %w", name, err)
	}
	return nil
}

// DeletePluginReattach forgets a plugin's reattach data.
func (s *Store) DeletePluginReattach(name string) error {
	if err := s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPlugins).Delete([]byte(name))
	}); err != nil {
		return fmt.Errorf("deleting reattach data of plugin %s: %w", name, err)
	}
	return nil
}

// PluginReattach reads a plugin's reattach data; ok is false when there is none.
func (s *Store) PluginReattach(name string) (data []byte, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketPlugins).Get([]byte(name)); v != nil {
			data, ok = append([]byte(nil), v...), true
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading reattach data of plugin %s: %w", name, err)
	}
	return data, ok, nil
}

// jobKey is the key of a job's record: its namespace and ID (wanted.JobKey).
// Records of an older layout were keyed by the job ID alone; they are still
// read, and replaced on the job's next write.
func jobKey(j *model.Job) string { return wanted.JobKey(j.Namespace, j.ID) }

// PutJob stores the last good declaration of a job.
func (s *Store) PutJob(r *JobRecord) error { return s.PutJobs([]*JobRecord{r}) }

// PutJobs stores several last good declarations in one transaction (one
// fsync for a burst).
func (s *Store) PutJobs(rs []*JobRecord) error {
	for _, r := range rs {
		if r == nil || r.Job == nil || r.Job.ID == "" {
			return errors.New("putting jobs: record without a job ID")
		}
	}
	if len(rs) == 0 {
		return nil
	}
	enc := make([][]byte, len(rs))
	for i, r := range rs {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encoding job %s: %w", r.Job.ID, err)
		}
		enc[i] = b
	}
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJobs)
		for i, r := range rs {
			if err := b.Put([]byte(jobKey(r.Job)), enc[i]); err != nil {
				return fmt.Errorf("job %s: %w", r.Job.ID, err)
			}
			if err := deleteLegacyJob(b, r.Job); err != nil {
				return fmt.Errorf("job %s: %w", r.Job.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storing %d jobs: %w", len(rs), err)
	}
	return nil
}

// deleteLegacyJob removes the record an older layout kept under the job ID
// alone, if it is this job's.
func deleteLegacyJob(b *bolt.Bucket, j *model.Job) error {
	v := b.Get([]byte(j.ID))
	if v == nil || j.ID == jobKey(j) {
		return nil
	}
	var old JobRecord
	if json.Unmarshal(v, &old) == nil && old.Job != nil && jobKey(old.Job) != jobKey(j) {
		return nil // another namespace's job that happens to sit there
	}
	return b.Delete([]byte(j.ID))
}

// Jobs reads every stored last-good job declaration, by job key
// (namespace and ID). Where an older layout's record and a newer one hold
// the same job, the one with the higher revision is returned.
func (s *Store) Jobs() (map[string]*JobRecord, error) {
	out := map[string]*JobRecord{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
			r := new(JobRecord)
			if err := json.Unmarshal(v, r); err != nil {
				return fmt.Errorf("decoding job %s: %w", k, err)
			}
			if r.Job == nil || r.Job.ID == "" {
				return fmt.Errorf("decoding job %s: record has no job", k)
			}
			if err := readsBack(r, new(JobRecord)); err != nil {
				return fmt.Errorf("decoding job %s: %w", k, err)
			}
			key := jobKey(r.Job)
			if prev, ok := out[key]; !ok || r.Revision > prev.Revision {
				out[key] = r
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading jobs: %w", err)
	}
	return out, nil
}

// DeleteJob forgets a job's last good declaration (after a purge the node
// acted on).
func (s *Store) DeleteJob(namespace, id string) error {
	j := &model.Job{Namespace: namespace, ID: id}
	if err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJobs)
		if err := b.Delete([]byte(jobKey(j))); err != nil {
			return err
		}
		return deleteLegacyJob(b, j)
	}); err != nil {
		return fmt.Errorf("deleting job %s: %w", id, err)
	}
	return nil
}

// Check reads the store's layout: an error means the store cannot be read
// and the caller must fail closed.
func (s *Store) Check() error {
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketAllocs, bucketHandles, bucketPlugins, bucketJobs} {
			if tx.Bucket(b) == nil {
				return fmt.Errorf("bucket %s missing", b)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("checking state store: %w", err)
	}
	return nil
}
