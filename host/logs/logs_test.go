package logs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/hivelet/hivelet/host/allocrunner"
	"github.com/hivelet/hivelet/internal/testutil"
)

const (
	prefix  = "hivelet"
	nodeID  = "node-a"
	allocID = "0b6b1c2e-5d8a-4b51-9a8e-3f1b2c4d5e6f"
)

func connect(t *testing.T, s *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// alloc is what the fake resolver knows of the one allocation.
type alloc struct {
	mu       sync.Mutex
	dir      string
	tasks    []string
	terminal bool
	calls    atomic.Int64
	asked    []string
}

func (a *alloc) resolve(id string) (string, []string, bool, bool) {
	a.calls.Add(1)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, id)
	if id != allocID {
		return "", nil, false, false
	}
	return a.dir, a.tasks, a.terminal, true
}

func (a *alloc) setTerminal() {
	a.mu.Lock()
	a.terminal = true
	a.mu.Unlock()
}

// path is the log file of a task, as the agent's runner writes it.
func (a *alloc) path(task string, stderr bool) string {
	o, e := allocrunner.LogPaths(a.dir, task)
	if stderr {
		return e
	}
	return o
}

func (a *alloc) write(t *testing.T, task string, stderr bool, data string) {
	t.Helper()
	p := a.path(task, stderr)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
}

type rig struct {
	nats   *server.Server
	client *nats.Conn
	alloc  *alloc
	srv    *Server
}

// newRig starts NATS, a server for nodeID over an allocation with tasks
// "web" and "side", and a client connection of its own.
func newRig(t *testing.T, lim limits) *rig {
	t.Helper()
	s := testutil.StartNATS(t, nil)
	a := &alloc{dir: filepath.Join(t.TempDir(), allocID), tasks: []string{"web", "side"}}
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := serve(connect(t, s), prefix, nodeID, a.resolve, slog.New(slog.NewTextHandler(io.Discard, nil)), lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return &rig{nats: s, client: connect(t, s), alloc: a, srv: srv}
}

func (r *rig) fetch(t *testing.T, req Request) (*Reply, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return Fetch(ctx, r.client, prefix, nodeID, req)
}

func (r *rig) mustFetch(t *testing.T, req Request) *Reply {
	t.Helper()
	rep, err := r.fetch(t, req)
	if err != nil {
		t.Fatalf("fetch %+v: %v", req, err)
	}
	return rep
}

func TestAFullReadAnOffsetAndATail(t *testing.T) {
	r := newRig(t, defaultLimits)
	r.alloc.write(t, "web", false, "hello world\n")
	r.alloc.write(t, "web", true, "oops\n")

	rep := r.mustFetch(t, Request{AllocID: allocID, Task: "web"})
	if string(rep.Data) != "hello world\n" || rep.Offset != 12 || rep.Size != 12 || rep.Reset || rep.Done || rep.FileID == "" {
		t.Fatalf("full read: %+v", rep)
	}
	if rep := r.mustFetch(t, Request{AllocID: allocID, Task: "web", Offset: 6}); string(rep.Data) != "world\n" || rep.Offset != 12 {
		t.Fatalf("offset 6: %+v", rep)
	}
	if rep := r.mustFetch(t, Request{AllocID: allocID, Task: "web", Offset: -6}); string(rep.Data) != "world\n" || rep.Offset != 12 || rep.Reset {
		t.Fatalf("tail 6: %+v", rep)
	}
	if rep := r.mustFetch(t, Request{AllocID: allocID, Task: "web", Offset: -1000}); string(rep.Data) != "hello world\n" || rep.Reset {
		t.Fatalf("a tail longer than the file: %+v", rep)
	}
	if rep := r.mustFetch(t, Request{AllocID: allocID, Task: "web", Offset: 12}); len(rep.Data) != 0 || rep.Offset != 12 || rep.Reset {
		t.Fatalf("at the end: %+v", rep)
	}
	if rep := r.mustFetch(t, Request{AllocID: allocID, Task: "web", Max: 5}); string(rep.Data) != "hello" || rep.Offset != 5 {
		t.Fatalf("max 5: %+v", rep)
	}
	// Control: stderr is the other file.
	if rep := r.mustFetch(t, Request{AllocID: allocID, Task: "web", Stderr: true}); string(rep.Data) != "oops\n" {
		t.Fatalf("stderr: %+v", rep)
	}

	// Copy, without follow, prints the same; with a tail, its end.
	var out bytes.Buffer
	if err := Copy(context.Background(), r.client, prefix, nodeID, Request{AllocID: allocID, Task: "web", Offset: -6}, &out, CopyOptions{}); err != nil || out.String() != "world\n" {
		t.Fatalf("copy of a tail: %q, %v", out.String(), err)
	}
}

func TestAMissingFileIsEmptyDataNotAnError(t *testing.T) {
	r := newRig(t, defaultLimits)
	rep := r.mustFetch(t, Request{AllocID: allocID, Task: "side"})
	if len(rep.Data) != 0 || rep.Size != 0 || rep.Offset != 0 || rep.Done || rep.FileID != "" {
		t.Fatalf("missing file of a running allocation: %+v", rep)
	}
	var out bytes.Buffer
	if err := Copy(context.Background(), r.client, prefix, nodeID, Request{AllocID: allocID, Task: "side"}, &out, CopyOptions{}); err != nil || out.Len() != 0 {
		t.Fatalf("copy of a missing file: %q, %v", out.String(), err)
	}
	// Terminal: nothing more will come.
	r.alloc.setTerminal()
	if rep := r.mustFetch(t, Request{AllocID: allocID, Task: "side", WaitMS: 5000}); !rep.Done || len(rep.Data) != 0 {
		t.Fatalf("missing file of a terminal allocation: %+v", rep)
	}
}

func TestAFileBiggerThanTheChunkLimitComesInChunks(t *testing.T) {
	r := newRig(t, defaultLimits)
	var want strings.Builder
	for i := 0; want.Len() < ChunkLimit*2+1000; i++ {
		want.WriteString(strings.Repeat(string(rune('a'+i%26)), 99) + "\n")
	}
	r.alloc.write(t, "web", false, want.String())

	rep := r.mustFetch(t, Request{AllocID: allocID, Task: "web"})
	if len(rep.Data) != ChunkLimit || rep.Offset != ChunkLimit || rep.Size != int64(want.Len()) {
		t.Fatalf("first chunk: %d bytes, offset %d, size %d (file %d)", len(rep.Data), rep.Offset, rep.Size, want.Len())
	}
	// A bigger max is clamped to the limit.
	if rep := r.mustFetch(t, Request{AllocID: allocID, Task: "web", Max: 10 * ChunkLimit}); len(rep.Data) != ChunkLimit {
		t.Fatalf("max above the limit: %d bytes", len(rep.Data))
	}
	var out bytes.Buffer
	if err := Copy(context.Background(), r.client, prefix, nodeID, Request{AllocID: allocID, Task: "web"}, &out, CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	if out.String() != want.String() {
		t.Fatalf("copy: %d bytes, want %d (equal prefix: %v)", out.Len(), want.Len(), strings.HasPrefix(want.String(), out.String()))
	}
}

func TestAServerWithASmallMaxPayloadSendsSmallerChunks(t *testing.T) {
	s := testutil.StartNATS(t, &server.Options{MaxPayload: 64 << 10})
	a := &alloc{dir: filepath.Join(t.TempDir(), allocID), tasks: []string{"web"}}
	big := strings.Repeat("0123456789abcdef", 20<<10) // 320 KiB
	a.write(t, "web", false, big)
	srv, err := Serve(connect(t, s), prefix, nodeID, a.resolve, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	client := connect(t, s)
	rep, err := Fetch(context.Background(), client, prefix, nodeID, Request{AllocID: allocID, Task: "web"})
	if err != nil {
		t.Fatal(err) // a 256 KiB chunk would not fit: maximum payload exceeded
	}
	if len(rep.Data) == 0 || len(rep.Data) >= 64<<10 {
		t.Fatalf("chunk of %d bytes under a 64 KiB max_payload", len(rep.Data))
	}
	var out bytes.Buffer
	if err := Copy(context.Background(), client, prefix, nodeID, Request{AllocID: allocID, Task: "web"}, &out, CopyOptions{}); err != nil || out.String() != big {
		t.Fatalf("copy: %d bytes of %d, %v", out.Len(), len(big), err)
	}
}

func TestALongPollReturnsEarlyWhenDataArrives(t *testing.T) {
	r := newRig(t, defaultLimits)
	r.alloc.write(t, "web", false, "one\n")

	// A wait beyond the cap (even one that would overflow a Duration) is
	// the cap, not a negative wait.
	lim := defaultLimits
	lim.maxWait = 700 * time.Millisecond
	capped := newRig(t, lim)
	capped.alloc.write(t, "web", false, "one\n")
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	rep, err := Fetch(ctx, capped.client, prefix, nodeID, Request{AllocID: allocID, Task: "web", Offset: 4, WaitMS: 1 << 62})
	cancel()
	if d := time.Since(start); err != nil || len(rep.Data) != 0 || d < 650*time.Millisecond || d > 3*time.Second {
		t.Fatalf("capped poll: %+v %v after %s", rep, err, d)
	}

	// Control: with nothing appended, the poll waits its time out.
	start = time.Now()
	rep = r.mustFetch(t, Request{AllocID: allocID, Task: "web", Offset: 4, WaitMS: 600})
	if d := time.Since(start); len(rep.Data) != 0 || d < 550*time.Millisecond {
		t.Fatalf("idle poll: %+v after %s", rep, d)
	}

	// An append wakes a poll that is waiting: the append is made only once
	// the server has read the file, found nothing and read it again (two
	// more resolver calls), and the reply must then come well before the
	// poll's 8 s are up.
	type result struct {
		rep *Reply
		err error
	}
	res := make(chan result, 1)
	before := r.alloc.calls.Load()
	go func() {
		rep, err := r.fetch(t, Request{AllocID: allocID, Task: "web", Offset: 4, WaitMS: 8000})
		res <- result{rep, err}
	}()
	testutil.Eventually(t, 5*time.Second, "the request to be waiting in its long poll", func() bool { return r.alloc.calls.Load() >= before+2 })
	r.alloc.write(t, "web", false, "two\n")
	appended := time.Now()
	got := <-res
	if got.err != nil || string(got.rep.Data) != "two\n" || got.rep.Offset != 8 {
		t.Fatalf("poll: %+v %v", got.rep, got.err)
	}
	if d := time.Since(appended); d > 3*time.Second {
		t.Fatalf("the poll returned %s after the append: want soon after it, not at its time out", d)
	}
}

func TestFollowSeesAppendedDataAndEndsWhenTheAllocationIsDone(t *testing.T) {
	r := newRig(t, defaultLimits)
	r.alloc.write(t, "web", false, "a\n")
	var out testutil.SyncBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- Copy(context.Background(), r.client, prefix, nodeID, Request{AllocID: allocID, Task: "web"}, &out, CopyOptions{Follow: true})
	}()
	testutil.Eventually(t, 5*time.Second, "the first line", func() bool { return out.String() == "a\n" })
	r.alloc.write(t, "web", false, "b\n")
	testutil.Eventually(t, 5*time.Second, "the appended line", func() bool { return out.String() == "a\nb\n" })
	select {
	case err := <-errc:
		t.Fatalf("follow ended while the allocation runs: %v", err)
	default:
	}
	r.alloc.write(t, "web", false, "c\n")
	r.alloc.setTerminal()
	select {
	case err := <-errc:
		if err != nil || out.String() != "a\nb\nc\n" {
			t.Fatalf("follow ended with %v, printed %q", err, out.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follow did not end when the allocation became terminal")
	}
}

func TestFollowEndsWithoutErrorWhenItsContextEnds(t *testing.T) {
	r := newRig(t, defaultLimits)
	r.alloc.write(t, "web", false, "a\n")
	ctx, cancel := context.WithCancel(context.Background())
	var out testutil.SyncBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- Copy(ctx, r.client, prefix, nodeID, Request{AllocID: allocID, Task: "web"}, &out, CopyOptions{Follow: true})
	}()
	testutil.Eventually(t, 5*time.Second, "the first line", func() bool { return out.String() == "a\n" })
	// The follow is in a long poll once the server has looked at the file
	// twice more with nothing new.
	seen := r.alloc.calls.Load()
	testutil.Eventually(t, 5*time.Second, "the follow to be waiting in a long poll", func() bool { return r.alloc.calls.Load() >= seen+2 })
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("interrupted follow: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("follow did not end with its context")
	}
}

func TestARotatedOrTruncatedFileIsAReset(t *testing.T) {
	r := newRig(t, defaultLimits)
	r.alloc.write(t, "web", false, "0123456789\n")
	first := r.mustFetch(t, Request{AllocID: allocID, Task: "web"})

	// Truncated below the offset: a reset even without the file's identity.
	if err := os.Truncate(r.alloc.path("web", false), 0); err != nil {
		t.Fatal(err)
	}
	r.alloc.write(t, "web", false, "new\n")
	rep := r.mustFetch(t, Request{AllocID: allocID, Task: "web", Offset: first.Offset})
	if !rep.Reset || string(rep.Data) != "new\n" || rep.Offset != 4 {
		t.Fatalf("after truncation: %+v", rep)
	}

	// Rotated (renamed away, a new file written past the old offset):
	// detected by the file's identity.
	p := r.alloc.path("web", false)
	before := r.mustFetch(t, Request{AllocID: allocID, Task: "web"})
	if err := os.Rename(p, p+".1"); err != nil {
		t.Fatal(err)
	}
	const newer = "a longer line in the new file\n"
	r.alloc.write(t, "web", false, newer)
	rep = r.mustFetch(t, Request{AllocID: allocID, Task: "web", Offset: before.Offset, FileID: before.FileID})
	if !rep.Reset || string(rep.Data) != newer || rep.FileID == before.FileID {
		t.Fatalf("after rotation, with the file ID: %+v", rep)
	}
	// Control: the same request without the identity cannot tell.
	rep = r.mustFetch(t, Request{AllocID: allocID, Task: "web", Offset: before.Offset})
	if rep.Reset || string(rep.Data) != newer[before.Offset:] {
		t.Fatalf("after rotation, without the file ID: %+v", rep)
	}

	// Copy with follow prints a notice and continues from the new start.
	var out, notices testutil.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- Copy(ctx, r.client, prefix, nodeID, Request{AllocID: allocID, Task: "web"}, &out, CopyOptions{Follow: true, Notices: &notices})
	}()
	testutil.Eventually(t, 5*time.Second, "the current file", func() bool { return strings.HasSuffix(out.String(), "new file\n") })
	if err := os.Rename(p, p+".2"); err != nil {
		t.Fatal(err)
	}
	r.alloc.write(t, "web", false, "rotated again, and longer than before\n")
	testutil.Eventually(t, 5*time.Second, "the rotated file", func() bool {
		return strings.HasSuffix(out.String(), "new file\nrotated again, and longer than before\n")
	})
	if !strings.Contains(notices.String(), "rotated or truncated") {
		t.Fatalf("notices: %q", notices.String())
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestAnUnknownAllocationOrTaskIsAnErrorReply(t *testing.T) {
	r := newRig(t, defaultLimits)
	r.alloc.write(t, "web", false, "x\n")
	_, err := r.fetch(t, Request{AllocID: "11111111-2222-3333-4444-555555555555", Task: "web"})
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != CodeUnknownAlloc || !strings.Contains(err.Error(), "node node-a has no allocation 11111111") {
		t.Fatalf("unknown allocation: %v", err)
	}
	_, err = r.fetch(t, Request{AllocID: allocID, Task: "db"})
	if !errors.As(err, &re) || re.Code != CodeUnknownTask || !strings.Contains(err.Error(), `no task "db" (its tasks: side, web)`) {
		t.Fatalf("unknown task: %v", err)
	}
	// Copy returns the same error.
	err = Copy(context.Background(), r.client, prefix, nodeID, Request{AllocID: allocID, Task: "db"}, io.Discard, CopyOptions{Follow: true})
	if !errors.As(err, &re) || re.Code != CodeUnknownTask {
		t.Fatalf("copy of an unknown task: %v", err)
	}
	// Control: the known task is served.
	if rep := r.mustFetch(t, Request{AllocID: allocID, Task: "web"}); string(rep.Data) != "x\n" {
		t.Fatalf("known task: %+v", rep)
	}
}

// raw sends a request without the client's own checks.
func (r *rig) raw(t *testing.T, body []byte) *Reply {
	t.Helper()
	m, err := r.client.Request(prefix+".logs."+nodeID, body, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var rep Reply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		t.Fatal(err)
	}
	return &rep
}

func TestPathTraversalIsRefused(t *testing.T) {
	r := newRig(t, defaultLimits)
	// A file the traversals would reach, outside the allocation directory.
	secret := filepath.Join(filepath.Dir(r.alloc.dir), "x.stdout")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.alloc.write(t, "web", false, "fine\n")
	cases := []Request{
		{AllocID: allocID, Task: "../x"},
		{AllocID: allocID, Task: "../../../../x"},
		{AllocID: allocID, Task: "web/../../x"},
		{AllocID: allocID, Task: ".."},
		{AllocID: allocID, Task: "/etc/passwd"},
		{AllocID: "../x", Task: "web"},
		{AllocID: allocID + "/../x", Task: "web"},
		{AllocID: "", Task: "web"},
	}
	for _, c := range cases {
		before := r.alloc.calls.Load()
		body, _ := json.Marshal(c)
		rep := r.raw(t, body)
		if rep.Code != CodeBadRequest || len(rep.Data) != 0 || strings.Contains(rep.Error, "secret") {
			t.Errorf("%+v: %+v", c, rep)
		}
		if n := r.alloc.calls.Load() - before; n != 0 {
			t.Errorf("%+v reached the resolver", c)
		}
		// The client refuses it before sending.
		if _, err := r.fetch(t, c); err == nil || !strings.Contains(err.Error(), "log request:") {
			t.Errorf("client sent %+v: %v", c, err)
		}
	}
	// Even a resolver that lists a task with such a name does not lead out.
	r.alloc.mu.Lock()
	r.alloc.tasks = append(r.alloc.tasks, "../x")
	r.alloc.mu.Unlock()
	if rep := r.raw(t, []byte(`{"alloc_id":"`+allocID+`","task":"../x"}`)); rep.Code != CodeBadRequest || len(rep.Data) != 0 {
		t.Fatalf("a listed traversal: %+v", rep)
	}
	// Malformed JSON is a clear error too.
	if rep := r.raw(t, []byte(`{"alloc_id": 7}`)); rep.Code != CodeBadRequest || !strings.Contains(rep.Error, "decoding the log request") {
		t.Fatalf("malformed: %+v", rep)
	}
	if rep := r.raw(t, []byte(`{"alloc_id":"`+allocID+`","task":"web","max":-1}`)); rep.Code != CodeBadRequest || !strings.Contains(rep.Error, "max is -1") {
		t.Fatalf("negative max: %+v", rep)
	}
	// Control: the same channel serves a valid request.
	if rep := r.raw(t, []byte(`{"alloc_id":"`+allocID+`","task":"web"}`)); rep.Error != "" || string(rep.Data) != "fine\n" {
		t.Fatalf("valid request: %+v", rep)
	}
}

func TestASymlinkOutOfTheAllocationIsNotFollowed(t *testing.T) {
	r := newRig(t, defaultLimits)
	outside := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	logsDir := filepath.Dir(r.alloc.path("web", false))
	if err := os.MkdirAll(logsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, r.alloc.path("web", false)); err != nil {
		t.Fatal(err)
	}
	_, err := r.fetch(t, Request{AllocID: allocID, Task: "web"})
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != CodeUnreadable || strings.Contains(err.Error(), "secret") {
		t.Fatalf("symlink out of the allocation: %v", err)
	}
	// A FIFO is refused at once, not waited on.
	if err := syscall.Mkfifo(r.alloc.path("web", true), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = r.fetch(t, Request{AllocID: allocID, Task: "web", Stderr: true})
	if !errors.As(err, &re) || re.Code != CodeUnreadable || !strings.Contains(err.Error(), "not a regular file") || time.Since(start) > 3*time.Second {
		t.Fatalf("FIFO: %v after %s", err, time.Since(start))
	}
	// Control: a (relative) symlink that stays inside the allocation is read.
	if err := os.WriteFile(filepath.Join(r.alloc.dir, "alloc", "inside.txt"), []byte("inside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../inside.txt", r.alloc.path("side", false)); err != nil {
		t.Fatal(err)
	}
	if rep := r.mustFetch(t, Request{AllocID: allocID, Task: "side"}); string(rep.Data) != "inside\n" {
		t.Fatalf("symlink inside: %+v", rep)
	}
}

func TestNoAgentIsAClearError(t *testing.T) {
	r := newRig(t, defaultLimits)
	r.alloc.write(t, "web", false, "x\n")
	_, err := Fetch(context.Background(), r.client, prefix, "node-b", Request{AllocID: allocID, Task: "web"})
	var na *NoAgentError
	if !errors.As(err, &na) || !errors.Is(err, nats.ErrNoResponders) || err.Error() != "the agent of node node-b did not answer (is it running?)" {
		t.Fatalf("no agent: %v", err)
	}
	// Copy, even with follow, fails at once when the agent never answered.
	start := time.Now()
	err = Copy(context.Background(), r.client, prefix, "node-b", Request{AllocID: allocID, Task: "web"}, io.Discard, CopyOptions{Follow: true})
	if !errors.As(err, &na) || time.Since(start) > 3*time.Second {
		t.Fatalf("copy with no agent: %v after %s", err, time.Since(start))
	}
	// Another prefix is another subject.
	if _, err := Fetch(context.Background(), r.client, "other", nodeID, Request{AllocID: allocID, Task: "web"}); !errors.As(err, &na) {
		t.Fatalf("other prefix: %v", err)
	}
	// Control: node-a answers; after Stop, it does not.
	if rep := r.mustFetch(t, Request{AllocID: allocID, Task: "web"}); string(rep.Data) != "x\n" {
		t.Fatalf("node-a: %+v", rep)
	}
	r.srv.Stop()
	if _, err := r.fetch(t, Request{AllocID: allocID, Task: "web"}); !errors.As(err, &na) {
		t.Fatalf("after Stop: %v", err)
	}
	// Names that cannot be a subject token are refused before sending.
	if _, err := Fetch(context.Background(), r.client, prefix, "node.a", Request{AllocID: allocID, Task: "web"}); err == nil || !strings.Contains(err.Error(), `node ID "node.a"`) {
		t.Fatalf("node ID with a dot: %v", err)
	}
	if _, err := Serve(r.client, "hive.let", nodeID, r.alloc.resolve, nil); err == nil || !strings.Contains(err.Error(), `bucket prefix "hive.let"`) {
		t.Fatalf("prefix with a dot: %v", err)
	}
}

func TestFollowRidesOutAnAgentRestart(t *testing.T) {
	r := newRig(t, defaultLimits)
	r.alloc.write(t, "web", false, "before\n")
	var out, notices testutil.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- Copy(ctx, r.client, prefix, nodeID, Request{AllocID: allocID, Task: "web"}, &out, CopyOptions{Follow: true, Notices: &notices})
	}()
	testutil.Eventually(t, 5*time.Second, "the first line", func() bool { return out.String() == "before\n" })
	r.srv.Stop()
	r.alloc.write(t, "web", false, "during\n")
	// At worst the notice waits for a long poll sent as the server
	// unsubscribed, which nobody answers: MaxWait and the client's timeout
	// (15 s; seen over 5 s once under the suite's load).
	testutil.Eventually(t, MaxWait+DefaultTimeout+5*time.Second, "the outage notice", func() bool { return strings.Contains(notices.String(), "did not answer") })
	srv, err := Serve(connect(t, r.nats), prefix, nodeID, r.alloc.resolve, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	r.alloc.write(t, "web", false, "after\n")
	testutil.Eventually(t, 10*time.Second, "the lines written while away and after", func() bool { return out.String() == "before\nduring\nafter\n" })
	if !strings.Contains(notices.String(), "answers again") {
		t.Fatalf("notices: %q", notices.String())
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestALongPollDoesNotBlockOtherRequests(t *testing.T) {
	r := newRig(t, defaultLimits)
	r.alloc.write(t, "web", false, "x\n")
	polled := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		_, _ = r.fetch(t, Request{AllocID: allocID, Task: "web", Offset: 2, WaitMS: 3000})
		polled <- time.Since(start)
	}()
	testutil.Eventually(t, 5*time.Second, "the long poll in flight", func() bool { return len(r.srv.slots) == 1 })
	start := time.Now()
	if rep := r.mustFetch(t, Request{AllocID: allocID, Task: "web"}); string(rep.Data) != "x\n" {
		t.Fatalf("second request: %+v", rep)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a request behind a long poll took %s", d)
	}
	// Control: the long poll did wait.
	if d := <-polled; d < 2500*time.Millisecond {
		t.Fatalf("the long poll returned after %s, want its 3 s", d)
	}
}

func TestOverTheBoundARequestIsToldBusy(t *testing.T) {
	lim := defaultLimits
	lim.maxInFlight = 2
	r := newRig(t, lim)
	r.alloc.write(t, "web", false, "x\n")
	type result struct {
		rep *Reply
		err error
		d   time.Duration
	}
	polls := make(chan result, 2)
	for range 2 {
		go func() {
			start := time.Now()
			rep, err := r.fetch(t, Request{AllocID: allocID, Task: "web", Offset: 2, WaitMS: 8000})
			polls <- result{rep, err, time.Since(start)}
		}()
	}
	testutil.Eventually(t, 5*time.Second, "two long polls in flight", func() bool { return len(r.srv.slots) == 2 })
	start := time.Now()
	_, err := r.fetch(t, Request{AllocID: allocID, Task: "web"})
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != CodeBusy || !strings.Contains(err.Error(), "busy: 2 log requests in flight on node node-a") {
		t.Fatalf("third request: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("busy took %s: it must not queue", d)
	}
	// Data arriving ends both polls; then a request is served again.
	r.alloc.write(t, "web", false, "y\n")
	for range 2 {
		res := <-polls
		if res.err != nil || string(res.rep.Data) != "y\n" || res.d > 5*time.Second {
			t.Fatalf("long poll: %+v", res)
		}
	}
	testutil.Eventually(t, 5*time.Second, "the slots free", func() bool { return len(r.srv.slots) == 0 })
	if rep := r.mustFetch(t, Request{AllocID: allocID, Task: "web"}); string(rep.Data) != "x\ny\n" {
		t.Fatalf("after the polls: %+v", rep)
	}
}

func TestStopAnswersLongPollsAtOnce(t *testing.T) {
	r := newRig(t, defaultLimits)
	r.alloc.write(t, "web", false, "x\n")
	type result struct {
		rep *Reply
		err error
	}
	res := make(chan result, 1)
	go func() {
		rep, err := r.fetch(t, Request{AllocID: allocID, Task: "web", Offset: 2, WaitMS: 9000})
		res <- result{rep, err}
	}()
	testutil.Eventually(t, 5*time.Second, "the long poll in flight", func() bool { return len(r.srv.slots) == 1 })
	start := time.Now()
	r.srv.Stop()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Stop took %s", d)
	}
	select {
	case got := <-res:
		if got.err != nil || len(got.rep.Data) != 0 || got.rep.Offset != 2 || got.rep.Done {
			t.Fatalf("poll answered by Stop: %+v %v", got.rep, got.err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the long poll was not answered at Stop")
	}
}
