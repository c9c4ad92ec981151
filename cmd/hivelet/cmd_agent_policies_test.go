package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
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
