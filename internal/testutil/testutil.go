package testutil

import (
	"bytes"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// pollInterval is Eventually's shortest pause between two checks.
const pollInterval = 10 * time.Millisecond

// Eventually calls cond until it returns true and returns how long that
// took. It fails the test, naming what it waited for, if cond is still false
// once d has passed. Between two checks it pauses 10 ms, or as long as the
// last call of cond took if that was longer, so a costly condition (a
// subprocess, an HTTP round trip) takes at most about half of the time.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(d)
	for {
		// Read the clock before cond: the last check is made after the
		// deadline has passed, never only before it.
		late := !time.Now().Before(deadline)
		began := time.Now()
		if cond() {
			return time.Since(start)
		}
		if late {
			t.Fatalf("timed out after %s waiting for %s", d, what)
			return time.Since(start)
		}
		time.Sleep(max(pollInterval, time.Since(began)))
	}
}

// SyncBuffer is a bytes.Buffer that many goroutines may write to while the
// test reads it (a log sink, a command's output). The zero value is empty
// and ready to use; it must not be copied after first use.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to the buffer.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns a copy of everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// StartNATS starts an in-process nats-server listening on 127.0.0.1 at a
// port of its own choosing (s.ClientURL() says which), without signal
// handlers or logging, waits until it accepts connections and shuts it down
// at the test's cleanup. opts nil is a bare server: no JetStream, no
// authentication, no TLS. Otherwise the caller's options are kept (auth,
// TLS, JetStream with a StoreDir); StartNATS sets Host, Port, NoSigs and
// NoLog itself, so opts must leave Host, Port and DontListen unset.
func StartNATS(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	if opts == nil {
		opts = &server.Options{}
	}
	if opts.Host != "" || opts.Port != 0 || opts.DontListen {
		t.Fatalf("testutil.StartNATS: opts sets Host %q, Port %d, DontListen %v: leave them unset, the server always listens on 127.0.0.1 at a random port",
			opts.Host, opts.Port, opts.DontListen)
		return nil
	}
	opts.Host, opts.Port, opts.NoSigs, opts.NoLog = "127.0.0.1", -1, true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("testutil.StartNATS: %v", err)
		return nil
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatalf("testutil.StartNATS: the server did not accept connections within 10s")
		return nil
	}
	return s
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago (the
// kernel chose it for a listener that is closed again). Another process may
// take it before the caller does; tests use it for a daemon that must be
// told its port up front.
func FreePort(t testing.TB) int {
	t.Helper()
	// The kernel may hand the same free port out twice in a row once the
	// listener is closed: a test asking for several ports (one agent's
	// API, another's NATS) would then give two servers one port. A port
	// is handed out once per test process.
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testutil.FreePort: %v", err)
			return 0
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		handedMu.Lock()
		dup := handed[port]
		handed[port] = true
		handedMu.Unlock()
		if !dup {
			return port
		}
	}
	t.Fatal("testutil.FreePort: no port not handed out before in 50 tries")
	return 0
}

// handed are the ports FreePort returned in this process.
var (
	handedMu sync.Mutex
	handed   = map[int]bool{}
)

// ShortTempDir creates a directory directly under os.TempDir() whose name
// starts with prefix, and removes it at the test's cleanup. It exists for
// Unix sockets: their paths are limited to 107 bytes, and t.TempDir()'s
// names (the test's full name plus a counter) are often longer than that
// leaves room for.
func ShortTempDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatalf("testutil.ShortTempDir: %v", err)
		return ""
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
