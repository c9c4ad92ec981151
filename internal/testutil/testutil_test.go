package testutil

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hivelet/hivelet/internal/imports"
)

// recordingTB is a testing.TB whose Fatalf records the message instead of
// ending the test, so the helpers' failure paths can be asserted.
type recordingTB struct {
	testing.TB
	mu    sync.Mutex
	fatal string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fatal = fmt.Sprintf(format, args...)
}

func (r *recordingTB) failure() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	r := &recordingTB{TB: t}
	calls := 0
	took := Eventually(r, 5*time.Second, "the third call", func() bool {
		calls++
		return calls == 3
	})
	if msg := r.failure(); msg != "" {
		t.Fatalf("failed: %s", msg)
	}
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3 (it must stop at the first true)", calls)
	}
	if took < 2*pollInterval {
		t.Fatalf("took %s for three checks, want at least two pauses of %s", took, pollInterval)
	}
}

func TestEventuallyFailsNamingWhatItWaitedFor(t *testing.T) {
	r := &recordingTB{TB: t}
	calls := 0
	took := Eventually(r, 50*time.Millisecond, "the impossible", func() bool { calls++; return false })
	msg := r.failure()
	if !strings.Contains(msg, "the impossible") || !strings.Contains(msg, "50ms") {
		t.Fatalf("failure message %q does not name what and how long", msg)
	}
	if took < 50*time.Millisecond || calls < 2 {
		t.Fatalf("gave up after %s and %d checks, want at least 50ms and more than one check", took, calls)
	}
}

// TestEventuallyChecksOnceMoreAfterTheDeadline: a condition that becomes
// true only once the deadline has passed still passes (the control, a
// condition that never holds, fails in the test above).
func TestEventuallyChecksOnceMoreAfterTheDeadline(t *testing.T) {
	const d = 30 * time.Millisecond
	r := &recordingTB{TB: t}
	start := time.Now() // before Eventually's own start
	Eventually(r, d, "the deadline to pass", func() bool { return time.Since(start) >= d })
	if msg := r.failure(); msg != "" {
		t.Fatalf("failed although the condition held at the check after the deadline: %s", msg)
	}
}

// TestEventuallyPausesAsLongAsACostlyConditionTakes: between two calls of a
// 30 ms condition there are at least 30 ms of pause; a cheap condition is
// still paused for at least pollInterval.
func TestEventuallyPausesAsLongAsACostlyConditionTakes(t *testing.T) {
	gaps := func(cost time.Duration) []time.Duration {
		var starts []time.Time
		Eventually(t, 10*time.Second, "the fourth call", func() bool {
			starts = append(starts, time.Now())
			time.Sleep(cost)
			return len(starts) == 4
		})
		var out []time.Duration
		for i := 1; i < len(starts); i++ {
			out = append(out, starts[i].Sub(starts[i-1]))
		}
		return out
	}
	for _, g := range gaps(30 * time.Millisecond) {
		if g < 60*time.Millisecond {
			t.Errorf("costly condition: %s from one call to the next, want at least 30 ms of call and 30 ms of pause", g)
		}
	}
	for _, g := range gaps(0) {
		if g < pollInterval {
			t.Errorf("cheap condition: %s from one call to the next, want at least %s", g, pollInterval)
		}
	}
}

func TestSyncBufferTakesConcurrentWritesWhileRead(t *testing.T) {
	var b SyncBuffer
	const writers, lines = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				fmt.Fprintf(&b, "w%d-%d\n", w, i)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for reading := true; reading; {
		select {
		case <-done:
			reading = false
		default:
			_ = b.String() // reads race with the writes unless both lock
		}
	}
	got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines, want %d", len(got), writers*lines)
	}
	seen := map[string]bool{}
	for _, l := range got {
		if seen[l] {
			t.Fatalf("line %q twice: writes interleaved", l)
		}
		seen[l] = true
	}
	for w := range writers {
		for i := range lines {
			if !seen[fmt.Sprintf("w%d-%d", w, i)] {
				t.Fatalf("line w%d-%d missing", w, i)
			}
		}
	}
}

func TestStartNATSIsABareLoopbackServerStoppedAtCleanup(t *testing.T) {
	var s *server.Server
	t.Run("in use", func(t *testing.T) {
		s = StartNATS(t, nil)
		u, err := url.Parse(s.ClientURL())
		if err != nil || u.Hostname() != "127.0.0.1" {
			t.Fatalf("client URL %q (%v), want one on 127.0.0.1", s.ClientURL(), err)
		}
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		sub, err := nc.SubscribeSync("x")
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Publish("x", []byte("hi")); err != nil {
			t.Fatal(err)
		}
		if m, err := sub.NextMsg(5 * time.Second); err != nil || string(m.Data) != "hi" {
			t.Fatalf("round trip: %v, %v", m, err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := js.AccountInfo(ctx); !errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
			t.Fatalf("JetStream account info: %v, want JetStream not enabled", err)
		}
		if !s.Running() {
			t.Fatal("not running during the test")
		}
	})
	if s == nil || s.Running() {
		t.Fatal("the server still runs after its test's cleanup")
	}
}

func TestStartNATSKeepsTheCallersOptions(t *testing.T) {
	s := StartNATS(t, &server.Options{Authorization: "secret", JetStream: true, StoreDir: t.TempDir()})
	// Control: the token is required.
	if nc, err := nats.Connect(s.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("connected without the token")
	}
	nc, err := nats.Connect(s.ClientURL(), nats.Token("secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("JetStream asked for but: %v", err)
	}
}

func TestStartNATSRefusesAnAddressOfTheCallers(t *testing.T) {
	for _, opts := range []*server.Options{{Port: 4222}, {Host: "0.0.0.0"}, {DontListen: true}} {
		r := &recordingTB{TB: t}
		if s := StartNATS(r, opts); s != nil {
			t.Errorf("%+v: started a server", opts)
		}
		if msg := r.failure(); !strings.Contains(msg, "testutil.StartNATS") || !strings.Contains(msg, "leave them unset") {
			t.Errorf("failure message %q does not say what is wrong", msg)
		}
	}
}

func TestFreePortCanBeListenedOn(t *testing.T) {
	p := FreePort(t)
	if p <= 0 {
		t.Fatalf("port %d", p)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		t.Fatalf("the free port %d: %v", p, err)
	}
	l.Close()
}

func TestShortTempDirIsShortAndRemovedAtCleanup(t *testing.T) {
	var dir string
	t.Run("a long test name that would make t.TempDir too long for a socket path", func(t *testing.T) {
		dir = ShortTempDir(t, "hvx")
		if filepath.Dir(dir) != filepath.Clean(os.TempDir()) || !strings.HasPrefix(filepath.Base(dir), "hvx") {
			t.Fatalf("%s: want a directory hvx* directly under %s", dir, os.TempDir())
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Fatalf("%s: %v", dir, err)
		}
		// Control: t.TempDir for this test is longer.
		if long := t.TempDir(); len(long) <= len(dir) {
			t.Fatalf("t.TempDir %s is no longer than %s", long, dir)
		}
	})
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s after its test's cleanup: %v, want it removed", dir, err)
	}
}

// TestNoProductionPackageImportsTestutil: testutil is internal, so only the
// module's own packages can import it; none of them may outside its tests.
// The control is that the listing does show it among some package's test
// imports (the fields read are the right ones).
func TestNoProductionPackageImportsTestutil(t *testing.T) {
	const self = "github.com/hivelet/hivelet/internal/testutil"
	pkgs, err := imports.List("github.com/hivelet/hivelet/...")
	if err != nil {
		t.Fatal(err)
	}
	testUsers := 0
	for _, p := range pkgs {
		if len(p.ImportsUnder(self)) > 0 {
			t.Errorf("%s imports %s outside its _test.go files", p.ImportPath, self)
		}
		if slices.Contains(p.TestImports, self) {
			testUsers++
		}
	}
	if testUsers == 0 {
		t.Fatalf("no package's tests import %s: the check reads the wrong fields", self)
	}
}
