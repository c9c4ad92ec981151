package allocrunner

import (
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/state"
	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/sdk/driver"
)

// recordingStore is the state store, keeping every record it is handed.
type recordingStore struct {
	*state.Store
	mu   sync.Mutex
	recs []*state.AllocRecord
}

func (s *recordingStore) keep(r *state.AllocRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, r)
}

func (s *recordingStore) PutAlloc(r *state.AllocRecord) error {
	s.keep(r)
	return s.Store.PutAlloc(r)
}

func (s *recordingStore) PutAllocAndHandle(r *state.AllocRecord, task string, h *driver.TaskHandle) error {
	s.keep(r)
	return s.Store.PutAllocAndHandle(r, task, h)
}

func (s *recordingStore) records() []*state.AllocRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*state.AllocRecord(nil), s.recs...)
}

// A runner hands the store its job's encoding with each record, so an
// unchanged job is not encoded again by every write; an in-place update
// (a new job) is written with the new job, and with the new job's
// encoding: the runner's encoding follows its job, it is not merely
// bypassed by the store's check. What the store holds is the record the
// runner handed it, as its whole encoding would have stored it.
func TestAnInPlaceUpdateIsPersistedWithTheNewJob(t *testing.T) {
	f := newFixture(t, map[string]any{}, nil, fastUpdate(10*time.Millisecond, 5*time.Second))
	st, err := state.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	store := &recordingStore{Store: st}
	r := New(Config{Alloc: f.alloc, Job: f.job, Node: &model.Node{ID: "n1", Name: "node-1", Datacenter: "dc1"},
		Drivers: f.drv, Validate: validate, Store: store, AllocRoot: f.root})
	r.Run()
	defer stopRunner(t, r)
	testutil.Eventually(t, 5*time.Second, "running and healthy", func() bool {
		return r.Snapshot().DeploymentStatus.IsHealthy()
	})

	// stored checks, with no write under way, that every record the
	// runner handed the store came with its own job's encoding, and that
	// the store holds the last one, whose job is job.
	stored := func(job *model.Job) {
		t.Helper()
		r.persistMu.Lock()
		defer r.persistMu.Unlock()
		recs := store.records()
		for i, rec := range recs {
			if rec.JobEncoding == nil || rec.JobEncoding.Job() != rec.Job {
				t.Fatalf("write %d of %d (job version %d) was not handed its job's encoding", i+1, len(recs), rec.Job.Version)
			}
		}
		last := recs[len(recs)-1]
		if last.Job != job {
			t.Fatalf("the last write's job is version %d, the runner's %d", last.Job.Version, job.Version)
		}
		got, ok, err := st.Alloc("a1")
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		whole, err := json.Marshal(last) // as the store wrote it before it took the job's encoding
		if err != nil {
			t.Fatal(err)
		}
		var want state.AllocRecord
		if err := json.Unmarshal(whole, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, &want) {
			t.Fatalf("stored %+v\nwant %+v", got, &want)
		}
		if got.Job.Version != job.Version || !reflect.DeepEqual(got.Job.Meta, job.Meta) {
			t.Fatalf("stored job version %d meta %v, want version %d meta %v", got.Job.Version, got.Job.Meta, job.Version, job.Meta)
		}
	}
	stored(f.job)
	if n := len(store.records()); n < 2 {
		t.Fatalf("%d writes before the update, want running and healthy at least", n)
	}

	job2 := *f.job
	job2.Version = 2
	job2.Meta = map[string]string{"changed": "in place"}
	a2 := r.Alloc()
	a2.JobVersion = 2
	r.UpdateInPlace(a2, &job2)
	if r.Job() != &job2 {
		t.Fatal("the runner does not run the new job")
	}
	stored(&job2)
}
