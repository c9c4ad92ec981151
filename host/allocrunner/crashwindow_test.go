package allocrunner

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/state"
	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/sdk/driver"
)

// journalStore is a Store that checks, at every write, what a crash right
// after it would leave on disk. A restore enumerates allocation records and
// reads the handles of each: a task handle stored while its allocation has
// no record is never read back, and its task runs on untracked while the
// node places the allocation again.
type journalStore struct {
	mu       sync.Mutex
	allocs   map[string]*state.AllocRecord
	handles  map[string]*driver.TaskHandle
	orphaned []string // handles written while their allocation had no record
	together int      // handles written in one write with their record
}

func newJournalStore() *journalStore {
	return &journalStore{allocs: map[string]*state.AllocRecord{}, handles: map[string]*driver.TaskHandle{}}
}

func (s *journalStore) PutAlloc(r *state.AllocRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allocs[r.Alloc.ID] = r
	return nil
}

func (s *journalStore) PutHandle(allocID, task string, h *driver.TaskHandle) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.allocs[allocID] == nil {
		s.orphaned = append(s.orphaned, allocID+"/"+task)
	}
	s.handles[allocID+"/"+task] = h
	return nil
}

func (s *journalStore) DeleteHandle(allocID, task string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.handles, allocID+"/"+task)
	return nil
}

// PutAllocAndHandle is the one-transaction write state.Store offers.
func (s *journalStore) PutAllocAndHandle(r *state.AllocRecord, task string, h *driver.TaskHandle) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allocs[r.Alloc.ID] = r
	s.handles[r.Alloc.ID+"/"+task] = h
	s.together++
	return nil
}

func (s *journalStore) report() (orphaned []string, together int, handle *driver.TaskHandle, rec *state.AllocRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.orphaned...), s.together, s.handles["a1/t"], s.allocs["a1"]
}

// A started task's handle is never on disk without a record of its
// allocation. A fast start writes no pending record before it (the slow
// start, which does, is the control).
func TestATaskHandleIsNeverOnDiskWithoutItsAllocationRecord(t *testing.T) {
	// Control: the journal does see a handle written ahead of its record.
	ctl := newJournalStore()
	if err := ctl.PutHandle("x", "t", &driver.TaskHandle{TaskID: "x/t"}); err != nil {
		t.Fatal(err)
	}
	if o, _, _, _ := ctl.report(); len(o) != 1 {
		t.Fatalf("the journal saw %v orphaned handles, want [x/t]", o)
	}

	for _, tc := range []struct {
		name string
		cfg  map[string]any
	}{
		{"fast start", map[string]any{}},
		{"slow start", map[string]any{"start_delay": (2 * pendingWriteDelay).String()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newJournalStore()
			job := &model.Job{ID: "web", Type: model.JobTypeSystem, Version: 1, Groups: []*model.Group{{
				Name: "g", Count: 1,
				Tasks: []*model.Task{{Name: "t", Driver: "fake", Config: tc.cfg, KillTimeout: model.Duration(150 * time.Millisecond)}},
			}}}
			alloc := &model.Allocation{ID: "a1", Name: "web.g[0]", JobID: "web", JobVersion: 1, TaskGroup: "g", NodeID: "n1", DesiredStatus: model.DesiredRun}
			r := New(Config{Alloc: alloc, Job: job, Node: &model.Node{ID: "n1"}, Drivers: newFakeDriver(), Store: st, AllocRoot: t.TempDir()})
			r.Run()
			defer func() {
				if err := r.Stop(context.Background(), "test over"); err != nil {
					t.Error(err)
				}
			}()
			deadline := time.Now().Add(5 * time.Second)
			for r.Alloc().ClientStatus != model.ClientRunning {
				if time.Now().After(deadline) {
					t.Fatalf("the allocation never ran: %s", r.Alloc().ClientStatus)
				}
				time.Sleep(2 * time.Millisecond)
			}
			orphaned, together, h, rec := st.report()
			if len(orphaned) > 0 {
				t.Fatalf("handles %v were stored while their allocation had no record: a crash there leaks the task", orphaned)
			}
			if h == nil {
				t.Fatalf("no handle stored for the running task (%d written with their record)", together)
			}
			if rec == nil || rec.Alloc.ClientStatus != model.ClientRunning || rec.Alloc.TaskStates["t"].State != "running" {
				t.Fatalf("the record written with the handle is %+v, want the allocation running", rec)
			}
		})
	}
}

// An agent that detaches (its restart) while a driver is still starting a
// task, and whose driver then reports the task started, leaves the task's
// handle in the store: the next agent reattaches to it. Dropped, the next
// agent would have no handle and would start the task again under the
// same ID, which a driver refuses while the first runs: the replacement
// fails, and its deployment with it (the likely cause of a CI failure of
// TestAnAgentRestartedMidRolloutKeepsItsPacing, whose restart follows a
// start's call at once).
func TestAStartThatEndsAfterTheRunnerDetachedKeepsItsHandle(t *testing.T) {
	f := newFixture(t, map[string]any{"start_delay": "300ms"}, nil, nil)
	drv := &enteringDriver{fakeDriver: f.drv, entered: make(chan struct{})}
	runAndDetachMidStart(t, f, drv, drv.entered) // the start ends after the detach
	if n := f.drv.startCount("a1/t"); n != 1 {
		t.Fatalf("%d starts, want 1 (the start did not end with the runner's goroutines?)", n)
	}
	reattachesWithOneStart(t, f)
}

// runAndDetachMidStart runs a runner for f's allocation on drv and detaches
// it (the agent stops) once entered closes: the driver is starting the
// task. It returns how long Detach took.
func runAndDetachMidStart(t *testing.T, f *fixture, drv Drivers, entered <-chan struct{}) time.Duration {
	t.Helper()
	r := New(Config{Alloc: f.alloc, Job: f.job, Node: &model.Node{ID: "n1", Name: "node-1", Datacenter: "dc1"},
		Drivers: drv, Validate: validate, Store: f.store, AllocRoot: f.root})
	r.Run()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the driver was never asked to start the task")
	}
	t0 := time.Now()
	r.Detach()
	return time.Since(t0)
}

// reattachesWithOneStart checks that the task's handle and its allocation's
// record are in the store after a detach, and that the next runner
// reattaches to the task instead of starting it again.
func reattachesWithOneStart(t *testing.T, f *fixture) {
	t.Helper()
	f.store.mu.Lock()
	h, rec := f.store.handles["a1/t"], f.store.allocs["a1"]
	f.store.mu.Unlock()
	if h == nil || rec == nil {
		t.Fatalf("the started task's handle (%v) or its allocation's record (%v) is not in the store: the next agent cannot reattach", h, rec)
	}
	f.alloc = rec.Alloc
	r2 := f.runner(map[string]*driver.TaskHandle{"t": h})
	r2.Run()
	testutil.Eventually(t, 3*time.Second, "reattached", func() bool {
		return f.drv.recoverCount("a1/t") == 1 && r2.Alloc().ClientStatus == model.ClientRunning
	})
	if n := f.drv.startCount("a1/t"); n != 1 {
		t.Fatalf("%d starts after the restart, want 1 (reattached)", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r2.Stop(ctx, "test over"); err != nil {
		t.Fatal(err)
	}
}

// enteringDriver is the fake driver, closing entered when the runner
// first calls StartTask.
type enteringDriver struct {
	*fakeDriver
	entered chan struct{}
	once    sync.Once
}

func (d *enteringDriver) Driver(ctx context.Context, name string) (driver.Driver, error) {
	if _, err := d.fakeDriver.Driver(ctx, name); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *enteringDriver) StartTask(ctx context.Context, cfg *driver.TaskConfig) (*driver.TaskHandle, error) {
	d.once.Do(func() { close(d.entered) })
	return d.fakeDriver.StartTask(ctx, cfg)
}

// rpcLikeDriver answers StartTask as a plugin's client does: a call whose
// context ends returns the context's error at once, while the driver
// behind it goes on and may start the task.
type rpcLikeDriver struct {
	enteringDriver
}

func (d *rpcLikeDriver) Driver(ctx context.Context, name string) (driver.Driver, error) {
	if _, err := d.fakeDriver.Driver(ctx, name); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *rpcLikeDriver) StartTask(ctx context.Context, cfg *driver.TaskConfig) (*driver.TaskHandle, error) {
	type answer struct {
		h   *driver.TaskHandle
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		h, err := d.enteringDriver.StartTask(context.WithoutCancel(ctx), cfg)
		ch <- answer{h, err}
	}()
	select {
	case a := <-ch:
		return a.h, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestADetachDoesNotCutAStartInFlightShort: the agent stops (Detach) while
// a plugin is starting a task. The call is not cancelled (startContext),
// so the handle the driver returns is stored and the next agent reattaches
// instead of starting the task a second time; cancelled, the call would
// have returned an error while the plugin started the task anyway.
func TestADetachDoesNotCutAStartInFlightShort(t *testing.T) {
	f := newFixture(t, map[string]any{"start_delay": "300ms"}, nil, nil)
	drv := &rpcLikeDriver{enteringDriver{fakeDriver: f.drv, entered: make(chan struct{})}}
	runAndDetachMidStart(t, f, drv, drv.entered)
	reattachesWithOneStart(t, f)
}

// TestADetachWaitsForAStartOnlyItsGrace: a start slower than
// detachStartGrace is cut short there, so the agent's stop is not held
// by it for longer.
func TestADetachWaitsForAStartOnlyItsGrace(t *testing.T) {
	defer func(g time.Duration) { detachStartGrace = g }(detachStartGrace)
	detachStartGrace = 100 * time.Millisecond
	f := newFixture(t, map[string]any{"start_delay": "3s"}, nil, nil)
	drv := &rpcLikeDriver{enteringDriver{fakeDriver: f.drv, entered: make(chan struct{})}}
	d := runAndDetachMidStart(t, f, drv, drv.entered)
	if d < detachStartGrace || d > 2*time.Second {
		t.Fatalf("Detach took %v with a 3 s start in flight; want the grace (%v), not the whole start", d, detachStartGrace)
	}
}
