package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/policies"
)

// A module whose initialisation runs past the load deadline (a busy
// machine at boot) is loaded again later, with a growing wait, and the
// native default decides meanwhile; the job naming it is not held. Once a
// load fits, the engine answers for it. Control: after maxLoadTries such
// loads the module is taken as refused, as a module that traps is at once.
func TestAPolicyLoadPastItsDeadlineIsRetried(t *testing.T) {
	t.Parallel() // compiles one built-in module twice; its engines and files are its own
	ctx := context.Background()
	pol := &lazyPolicies{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	noStore := func(string) *policies.Store { return nil } // built-ins are never fetched
	busy := policies.Options{CacheDir: testutil.WazeroCacheDir(t), LoadDeadline: time.Nanosecond}
	l := newPolicyLoader(pol, busy, noStore, t.TempDir(), nil, false, log)
	ref := &model.PolicyRef{Name: "builtin:percent"}
	job := &model.Job{ID: "web", Update: &model.UpdateStrategy{CanaryPolicy: ref}}
	k := refKey(ref)
	closeEngine := func() {
		if l.eng != nil {
			l.eng.Close(ctx)
			l.eng = nil
		}
	}
	t.Cleanup(closeEngine)

	// retryIn checks that the next try is wait after the failure, which
	// came between before and now.
	retryIn := func(before time.Time, wait time.Duration) {
		t.Helper()
		if at := l.retryAt[k]; at.Before(before.Add(wait)) || at.After(time.Now().Add(wait)) {
			t.Fatalf("next try at %v after the sync began, want %v after the failure", at.Sub(before), wait)
		}
	}
	before := time.Now()
	l.sync(ctx, []*model.PolicyRef{ref})
	if l.done[k] || l.loadTries[k] != 1 {
		t.Fatalf("a load stopped at its deadline: done %v, tries %d; want a retry", l.done[k], l.loadTries[k])
	}
	retryIn(before, 5*time.Second)
	if held, why := pol.Pending(job); held {
		t.Fatalf("the job is held while its module is retried: %s", why)
	}
	if pol.engineFor(ref) != nil {
		t.Fatal("the engine answers for a module it did not load")
	}
	// Not before its time: a sync now tries nothing.
	l.sync(ctx, []*model.PolicyRef{ref})
	if l.loadTries[k] != 1 {
		t.Fatalf("retried before the wait: %d tries", l.loadTries[k])
	}
	// The wait doubles.
	l.retryAt[k] = time.Time{}
	before = time.Now()
	l.sync(ctx, []*model.PolicyRef{ref})
	if l.loadTries[k] != 2 {
		t.Fatalf("second failure: %d tries", l.loadTries[k])
	}
	retryIn(before, 10*time.Second)

	// The machine is quieter: the next load fits its deadline.
	closeEngine()
	l.opts.LoadDeadline = time.Minute
	l.retryAt[k] = time.Time{}
	l.sync(ctx, []*model.PolicyRef{ref})
	if !l.done[k] || pol.engineFor(ref) == nil {
		t.Fatalf("the retry did not load the module: done %v, tries %d", l.done[k], l.loadTries[k])
	}
	if _, left := l.loadTries[k]; left {
		t.Fatal("the tries of a loaded module are kept")
	}

	// Control: past maxLoadTries the module is refused for good.
	closeEngine()
	pol.set(nil)
	l.opts.LoadDeadline = time.Nanosecond
	delete(l.done, k)
	l.retryAt[k] = time.Time{}
	l.loadTries[k] = maxLoadTries
	l.sync(ctx, []*model.PolicyRef{ref})
	if !l.done[k] {
		t.Fatalf("a load past its deadline after %d tries is retried again", maxLoadTries)
	}
}

// The loader reads the jobs again only when they changed: woken by
// allocation writes (most of what an agent hears) it reads nothing; a job
// written (the control) is read at once. Its 5 s retry tick may add a read
// while the allocations are written: at most one per tick is allowed.
func TestThePolicyLoaderReadsTheJobsOnlyWhenTheyChanged(t *testing.T) {
	_, st, src := fleetFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	noStore := func(string) *policies.Store { return nil }
	l := newPolicyLoader(&lazyPolicies{}, policies.Options{}, noStore, t.TempDir(), nil, true, log)
	done := make(chan struct{})
	go func() { defer close(done); l.run(ctx, src) }()
	defer func() { cancel(); <-done }()
	job := func(id string) *model.Job {
		return &model.Job{ID: id, Update: &model.UpdateStrategy{CanaryPolicy: &model.PolicyRef{Name: "builtin:percent"}},
			Groups: []*model.Group{{Name: "g", Count: 1, Tasks: []*model.Task{{Name: "t", Driver: "mock"}}}}}
	}
	if _, err := st.PutJob(ctx, job("web")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the job in view and read", func() bool {
		_, ok := src.View().Jobs.Get(wanted.JobKey("", "web"))
		return ok && l.reads.Load() >= 1
	})
	// Let a read that the job's put woke end first.
	testutil.Eventually(t, 10*time.Second, "the loader idle", func() bool {
		r := l.reads.Load()
		time.Sleep(50 * time.Millisecond)
		return l.reads.Load() == r
	})
	began, readsBefore, skippedBefore := time.Now(), l.reads.Load(), l.skipped.Load()
	w := st.ForNode(src.View().NodeList()[0].ID)
	const writes = 20
	for i := range writes {
		a := &model.Allocation{ID: fmt.Sprintf("0b6b1c2e-5d8a-4b51-9a8e-3f1b2c4d5e%02d", i), Name: model.AllocName("web", "g", 0),
			NodeID: w.NodeID(), JobID: "web", TaskGroup: "g", DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning}
		if _, err := w.PutAlloc(ctx, a); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 10*time.Second, "the allocation in view", func() bool { return src.View().Allocs.Len() == i+1 })
	}
	testutil.Eventually(t, 10*time.Second, "the loader woken by the allocations", func() bool { return l.skipped.Load() > skippedBefore })
	ticks := uint64(time.Since(began)/(5*time.Second)) + 1
	if got := l.reads.Load() - readsBefore; got > ticks {
		t.Fatalf("%d allocation writes made %d reads of the jobs (%d skipped); want at most %d (the retry tick's)",
			writes, got, l.skipped.Load()-skippedBefore, ticks)
	}
	t.Logf("%d allocation writes: %d wakes skipped, %d reads", writes, l.skipped.Load()-skippedBefore, l.reads.Load()-readsBefore)
	// Control: a job written is read.
	readsBefore = l.reads.Load()
	if _, err := st.PutJob(ctx, job("api")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the new job read", func() bool { return l.reads.Load() > readsBefore })
}
