package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
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
