package state

import (
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/sdk/driver"
)

func runningRecord(id string) *AllocRecord {
	return &AllocRecord{
		Alloc:  &model.Allocation{ID: id, Name: "web.g[0]", JobID: "web", ClientStatus: model.ClientRunning, DesiredStatus: model.DesiredRun},
		Intent: model.DesiredRun,
		Job:    &model.Job{ID: "web", Type: model.JobTypeSystem, Version: 1},
	}
}

// PutAllocAndHandle stores both records, and a write that fails stores
// neither: no handle without its allocation, no allocation half-written.
func TestAnAllocationAndItsHandleAreWrittenTogetherOrNotAtAll(t *testing.T) {
	s, err := Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := &driver.TaskHandle{Version: 1, TaskID: "a1/web", Driver: "mock"}
	if err := s.PutAllocAndHandle(runningRecord("a1"), "web", h); err != nil {
		t.Fatal(err)
	}
	allocs, err := s.Allocs()
	if err != nil {
		t.Fatal(err)
	}
	handles, err := s.Handles("a1")
	if err != nil {
		t.Fatal(err)
	}
	if len(allocs) != 1 || allocs[0].Alloc.ID != "a1" || handles["web"] == nil || handles["web"].TaskID != "a1/web" {
		t.Fatalf("stored %d allocations and handles %v, want a1 with its handle", len(allocs), handles)
	}

	// A handle key bbolt refuses (too long) fails the write: the
	// allocation record of that write is not stored either.
	long := strings.Repeat("t", 40000)
	if err := s.PutAllocAndHandle(runningRecord("a2"), long, h); err == nil || !strings.Contains(err.Error(), "a2") {
		t.Fatalf("a write with a refused handle key returned %v, want an error naming a2", err)
	}
	allocs, err = s.Allocs()
	if err != nil {
		t.Fatal(err)
	}
	if len(allocs) != 1 {
		t.Fatalf("%d allocations stored after the failed write, want only a1", len(allocs))
	}
	// Control: the same two records written one after the other leave the
	// first on disk when the second fails.
	if err := s.PutAlloc(runningRecord("a3")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutHandle("a3", long, h); err == nil {
		t.Fatal("the refused handle key was stored")
	}
	if allocs, _ = s.Allocs(); len(allocs) != 2 {
		t.Fatalf("%d allocations stored after separate writes, want 2", len(allocs))
	}

	for _, bad := range []struct {
		name string
		r    *AllocRecord
		task string
		h    *driver.TaskHandle
		want string
	}{
		{"no record", nil, "web", h, "without an allocation ID"},
		{"no allocation ID", &AllocRecord{Alloc: &model.Allocation{}}, "web", h, "without an allocation ID"},
		{"no task", runningRecord("a4"), "", h, "a4"},
		{"no handle", runningRecord("a5"), "web", nil, "a5"},
	} {
		if err := s.PutAllocAndHandle(bad.r, bad.task, bad.h); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: got %v, want an error containing %q", bad.name, err, bad.want)
		}
	}
}
