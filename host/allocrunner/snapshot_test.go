package allocrunner

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// TestAPersistedAllocationIsSharedUntilItChanges: a runner that runs on
// unchanged holds one copy of its allocation, the one it persisted and
// reported (it held that and its own working copy before); a change goes
// to a copy of its own, so what was persisted, and handed out by Snapshot
// and OnUpdate, never changes under its readers.
func TestAPersistedAllocationIsSharedUntilItChanges(t *testing.T) {
	f := newFixture(t, map[string]any{}, nil, fastUpdate(10*time.Millisecond, 5*time.Second))
	r := f.runner(nil)
	r.Run()
	defer stopRunner(t, r)
	testutil.Eventually(t, 5*time.Second, "running and healthy", func() bool {
		a := r.Alloc()
		return a.ClientStatus == model.ClientRunning && a.DeploymentStatus != nil && a.DeploymentStatus.Healthy != nil
	})
	// The health verdict's write may still be on its way when it is seen:
	// the runner is unchanged once its last change was persisted, and
	// from then on it must hold that one copy.
	var snap *model.Allocation
	testutil.Eventually(t, 5*time.Second, "the runner's allocation the one it persisted (it holds a copy besides it)", func() bool {
		snap = r.Snapshot()
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.alloc == snap
	})
	before, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	// Changes: an event (not persisted), a reconnect (persisted).
	r.event("t", "Test Event", "a change")
	if !r.RecordReconnect(time.Unix(1000, 0), time.Unix(1001, 0), "back") {
		t.Fatal("reconnect not recorded")
	}
	after, _ := json.Marshal(snap)
	if string(before) != string(after) {
		t.Fatalf("a change modified the persisted allocation:\nbefore %s\nafter  %s", before, after)
	}
	now := r.Snapshot()
	if now == snap {
		t.Fatal("the change persisted no new snapshot")
	}
	if n := len(now.TaskStates["t"].Events); n == 0 || now.TaskStates["t"].Events[n-1].Type != "Test Event" || now.ClientDescription != "back" {
		t.Fatalf("the new snapshot misses the changes: %+v, %q", now.TaskStates["t"].Events, now.ClientDescription)
	}
	f.store.mu.Lock()
	got := f.store.allocs["a1"].Alloc
	f.store.mu.Unlock()
	if got != now {
		t.Fatal("the store got another value than the snapshot")
	}
}
