package fleet

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// fakeWatch is a KeyWatcher whose entries the test sends.
type fakeWatch struct {
	ch      chan jetstream.KeyValueEntry
	stopped atomic.Bool
}

func (w *fakeWatch) Updates() <-chan jetstream.KeyValueEntry { return w.ch }
func (w *fakeWatch) Stop() error                             { w.stopped.Store(true); return nil }

// TestAPullReplacesASilentWatch: the first watch delivers one entry and
// then nothing (its pull request lost in a leader election); the pull
// stops it after the silence allowed and reads everything from a second
// watch, without the first watch's partial entry twice.
func TestAPullReplacesASilentWatch(t *testing.T) {
	entry := func(key string, rev uint64) jetstream.KeyValueEntry {
		return &kvEntry{bucket: "b", key: key, value: []byte(key), revision: rev, op: jetstream.KeyValuePut}
	}
	silent := &fakeWatch{ch: make(chan jetstream.KeyValueEntry, 4)}
	silent.ch <- entry("a", 1)
	good := &fakeWatch{ch: make(chan jetstream.KeyValueEntry, 4)}
	good.ch <- entry("a", 1)
	good.ch <- entry("b", 2)
	good.ch <- nil
	watches := []*fakeWatch{silent, good}
	starts := 0
	start := func(context.Context) (jetstream.KeyWatcher, func(), error) {
		w := watches[starts]
		starts++
		return w, func() { _ = w.Stop() }, nil
	}
	const silence = 100 * time.Millisecond
	began := time.Now()
	got, err := pullEntries(context.Background(), silence, pullAttempts, start)
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	if took := time.Since(began); took < silence {
		t.Errorf("pull answered in %s, before the first watch's silence (%s) was over", took, silence)
	}
	if starts != 2 {
		t.Errorf("%d watches started, want 2", starts)
	}
	if !silent.stopped.Load() || !good.stopped.Load() {
		t.Errorf("watches stopped: silent %v, second %v; want both", silent.stopped.Load(), good.stopped.Load())
	}
	if len(got) != 2 || got[0].Key != "a" || got[1].Key != "b" {
		t.Fatalf("entries %+v, want a then b once each", got)
	}
}

// TestAPullGivesUpAfterItsAttempts: watches that all stay silent fail the
// pull after pullAttempts of them, saying so; a watch that cannot be
// created is retried the same way, and a cancelled context ends the pull
// at once.
func TestAPullGivesUpAfterItsAttempts(t *testing.T) {
	const silence = 50 * time.Millisecond
	starts := 0
	silentStart := func(context.Context) (jetstream.KeyWatcher, func(), error) {
		starts++
		w := &fakeWatch{ch: make(chan jetstream.KeyValueEntry)}
		return w, func() { _ = w.Stop() }, nil
	}
	began := time.Now()
	_, err := pullEntries(context.Background(), silence, pullAttempts, silentStart)
	if !errors.Is(err, errPullSilent) || !strings.Contains(err.Error(), "no entry within 50ms (3 watches)") {
		t.Fatalf("err %v, want the silence after 3 watches", err)
	}
	if starts != pullAttempts {
		t.Errorf("%d watches started, want %d", starts, pullAttempts)
	}
	if took := time.Since(began); took < pullAttempts*silence {
		t.Errorf("gave up after %s, before %d silences", took, pullAttempts)
	}

	starts = 0
	broken := errors.New("creating watcher: no answer within 50ms")
	_, err = pullEntries(context.Background(), silence, pullAttempts, func(context.Context) (jetstream.KeyWatcher, func(), error) {
		starts++
		return nil, nil, broken
	})
	if !errors.Is(err, broken) || starts != pullAttempts {
		t.Fatalf("err %v after %d starts, want %v after %d", err, starts, broken, pullAttempts)
	}

	ctx, cancel := context.WithCancel(context.Background())
	starts = 0
	time.AfterFunc(10*time.Millisecond, cancel)
	_, err = pullEntries(ctx, time.Minute, pullAttempts, silentStart)
	if !errors.Is(err, context.Canceled) || starts != 1 {
		t.Fatalf("err %v after %d starts, want context.Canceled after 1", err, starts)
	}
}
