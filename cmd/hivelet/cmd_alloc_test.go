package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hivelet/hivelet/host/allocrunner"
	"github.com/hivelet/hivelet/host/logs"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// signalWriter collects what it is written and closes wants[text] once
// all it has been written is text, so a test waits on output, not on time.
type signalWriter struct {
	mu    sync.Mutex
	b     strings.Builder
	wants map[string]chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if ch, ok := w.wants[w.b.String()]; ok {
		close(ch)
		delete(w.wants, w.b.String())
	}
	return len(p), nil
}

func TestAFollowedLocalLogWaitsForItsFileAndItsGrowthUntilCancelled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "web.stdout.0")
	first, second := make(chan struct{}), make(chan struct{})
	out := &signalWriter{wants: map[string]chan struct{}{"one\n": first, "one\ntwo\n": second}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- printLog(ctx, out, path, true, 0) }()

	// The file does not exist yet: following waits for it to appear.
	if err := os.WriteFile(path, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	<-first
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("two\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	<-second
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("a cancelled follow returned %v, want nil", err)
	}

	// Control: without -f, the same file is printed once and the call returns.
	once := &signalWriter{}
	if err := printLog(context.Background(), once, path, false, 0); err != nil || once.b.String() != "one\ntwo\n" {
		t.Fatalf("printLog without follow: %v, %q", err, once.b.String())
	}
}

// alloc status prints a task's whole history: the allocations bucket
// carries the telling and last events only, and the rest is asked of the
// node's agent; an agent that does not answer leaves the bucket's copy
// printed, with a note saying what is missing and why.
func TestAllocStatusAsksTheNodeForTheEventsTheBucketLeavesOut(t *testing.T) {
	srv := testutil.StartNATS(t, nil)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const prefix, nodeID = "cli", "node-1"
	var events []model.TaskEvent
	for i, typ := range []string{allocrunner.EventReceived, allocrunner.EventStarted, allocrunner.EventTerminated, allocrunner.EventRestarting, allocrunner.EventStarted} {
		events = append(events, model.TaskEvent{Type: typ, Message: fmt.Sprintf("event %d", i), Time: time.Unix(int64(1000+i), 0).UTC()})
	}
	full := &model.Allocation{ID: "0b6b1c2e-5d8a-4b51-9a8e-3f1b2c4d5e6f", NodeID: nodeID, JobID: "web", DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning,
		TaskStates: map[string]*model.TaskState{"t": {State: "running", Events: events}}}
	wire := allocrunner.ForWire(full)
	if wire.TaskStates["t"].MoreEvents == 0 {
		t.Fatal("the bucket's copy leaves nothing out: the test proves nothing")
	}
	ds, err := logs.ServeDetails(nc, prefix, nodeID, func(id string) (*model.Allocation, bool) { return full, id == full.ID }, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, note := withDetails(context.Background(), nc, prefix, wire, 0)
	var out strings.Builder
	printAlloc(&out, got)
	if note != "" || len(got.TaskStates["t"].Events) != len(events) || !strings.Contains(out.String(), "event 0") || strings.Contains(out.String(), "not shown") {
		t.Fatalf("with the agent answering: note %q, output:\n%s", note, out.String())
	}
	ds.Stop()
	got, note = withDetails(context.Background(), nc, prefix, wire, 0)
	out.Reset()
	printAlloc(&out, got)
	if !strings.Contains(note, "3 earlier task events are held by the agent of node node-1") || !strings.Contains(note, "did not answer") ||
		!strings.Contains(out.String(), "(3 earlier events not shown)") || !strings.Contains(out.String(), "event 4") {
		t.Fatalf("with no agent: note %q, output:\n%s", note, out.String())
	}
	// A copy that leaves nothing out asks nobody.
	small := &model.Allocation{ID: full.ID, NodeID: nodeID, TaskStates: map[string]*model.TaskState{"t": {State: "running", Events: events[:1]}}}
	if got, note := withDetails(context.Background(), nc, prefix, small, 0); got != small || note != "" {
		t.Fatalf("a whole copy: %p %q", got, note)
	}
}
