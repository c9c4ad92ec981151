package logs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hivelet/hivelet/host/allocrunner"
)

// Resolver tells the server what this node knows of an allocation: its
// directory, its task names, whether it is terminal (its tasks have ended:
// its files will not grow), and whether the node knows it at all.
type Resolver func(allocID string) (allocDir string, tasks []string, terminal bool, ok bool)

// limits are the server's bounds; tests shrink them.
type limits struct {
	maxInFlight int           // requests handled at once
	maxWait     time.Duration // longest long poll
	chunk       int64         // most data in one reply
	poll        time.Duration // how often a long poll looks at the file
}

var defaultLimits = limits{maxInFlight: 32, maxWait: MaxWait, chunk: ChunkLimit, poll: 100 * time.Millisecond}

// Server answers log requests for one node. Stop ends it.
type Server struct {
	nc      *nats.Conn
	nodeID  string
	resolve Resolver
	log     *slog.Logger
	lim     limits
	slots   chan struct{}
	sub     *nats.Subscription

	ctx    context.Context // ended by Stop: long polls answer at once
	cancel context.CancelFunc

	mu      sync.Mutex // guards stopped and wg.Add against Stop's Wait
	stopped bool
	wg      sync.WaitGroup
}

// Serve subscribes to Subject(prefix, nodeID) on nc and answers log
// requests from the files r points at, until Stop.
func Serve(nc *nats.Conn, prefix, nodeID string, r Resolver, log *slog.Logger) (*Server, error) {
	return serve(nc, prefix, nodeID, r, log, defaultLimits)
}

func serve(nc *nats.Conn, prefix, nodeID string, r Resolver, log *slog.Logger, lim limits) (*Server, error) {
	if nc == nil || r == nil {
		return nil, errors.New("logs: Serve needs a NATS connection and a resolver")
	}
	subj, err := Subject(prefix, nodeID)
	if err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	// A reply must fit in a message: base64 takes 4 bytes per 3, and the
	// JSON around the data is small.
	if mp := nc.MaxPayload(); mp > 0 {
		if fit := (mp - 4096) / 4 * 3; fit > 0 && fit < lim.chunk {
			lim.chunk = fit
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{nc: nc, nodeID: nodeID, resolve: r, log: log, lim: lim, slots: make(chan struct{}, lim.maxInFlight), ctx: ctx, cancel: cancel}
	if s.sub, err = subscribe(nc, subj, s.onMsg, log); err != nil {
		cancel()
		return nil, err
	}
	return s, nil
}

// subscribe subscribes h to subj, served from the moment it returns (while
// connected: a flush).
func subscribe(nc *nats.Conn, subj string, h nats.MsgHandler, log *slog.Logger) (*nats.Subscription, error) {
	sub, err := nc.Subscribe(subj, h)
	if err != nil {
		return nil, fmt.Errorf("logs: subscribing to %s: %w", subj, err)
	}
	flushConn(nc, log)
	return sub, nil
}

// flushConn waits until the NATS server has processed what the connection
// sent (a subscription or its end). Disconnected, there is nothing to wait
// for: the reconnect replays the subscriptions that exist then.
func flushConn(nc *nats.Conn, log *slog.Logger) {
	if nc.IsConnected() {
		if err := nc.FlushTimeout(5 * time.Second); err != nil {
			log.Debug("logs: flushing the subscription", "err", err)
		}
	}
}

// Stop unsubscribes, answers the long polls in progress with what they have,
// and returns once no request is being handled. It may be called more than
// once.
func (s *Server) Stop() {
	s.mu.Lock()
	already := s.stopped
	s.stopped = true
	s.mu.Unlock()
	if already {
		return
	}
	unsubscribe(s.nc, s.sub, s.log, "the logs service") // no request is routed here once Stop returns (while connected)
	s.cancel()
	s.wg.Wait()
}

// unsubscribe ends sub (one on nc) and waits until the server has dropped
// it (flushConn). A connection already closed has nothing left to end.
func unsubscribe(nc *nats.Conn, sub *nats.Subscription, log *slog.Logger, what string) {
	if err := sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
		log.Warn("logs: unsubscribing "+what, "err", err)
	}
	flushConn(nc, log)
}

// onMsg runs on the subscription's goroutine: it never blocks, so that a
// slow request cannot hold up the next one.
func (s *Server) onMsg(m *nats.Msg) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		s.respond(m, errReply(CodeStopping, "the agent of node %s is shutting down", s.nodeID))
		return
	}
	select {
	case s.slots <- struct{}{}:
	default:
		s.mu.Unlock()
		s.respond(m, errReply(CodeBusy, "busy: %d log requests in flight on node %s; retry", s.lim.maxInFlight, s.nodeID))
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() { <-s.slots }()
		s.respond(m, s.handle(s.ctx, m.Data))
	}()
}

func (s *Server) respond(m *nats.Msg, r *Reply) {
	b, err := json.Marshal(r)
	if err == nil {
		err = m.Respond(b)
	}
	if err != nil {
		s.log.Warn("logs: replying", "err", err)
	}
}

func errReply(code, format string, a ...any) *Reply {
	return &Reply{Code: code, Error: fmt.Sprintf(format, a...)}
}

// handle serves one request: a read, and while there is nothing new and
// the allocation runs, more reads until the wait is over.
func (s *Server) handle(ctx context.Context, data []byte) *Reply {
	var req Request
	if err := json.Unmarshal(data, &req); err != nil {
		return errReply(CodeBadRequest, "decoding the log request: %v", err)
	}
	if err := req.Check(); err != nil {
		return errReply(CodeBadRequest, "log request: %v", err)
	}
	chunk := s.lim.chunk
	if req.Max > 0 && req.Max < chunk {
		chunk = req.Max
	}
	wait := s.lim.maxWait
	if req.WaitMS < wait.Milliseconds() {
		wait = time.Duration(req.WaitMS) * time.Millisecond
	}
	deadline := time.Now().Add(wait)
	var tick *time.Timer
	for {
		dir, tasks, terminal, ok := s.resolve(req.AllocID)
		if !ok {
			return errReply(CodeUnknownAlloc, "node %s has no allocation %s", s.nodeID, req.AllocID)
		}
		if !slices.Contains(tasks, req.Task) {
			sorted := slices.Sorted(slices.Values(tasks))
			return errReply(CodeUnknownTask, "allocation %s has no task %q (its tasks: %s)", req.AllocID, req.Task, strings.Join(sorted, ", "))
		}
		stdout, stderr := allocrunner.LogPaths(dir, req.Task)
		path := stdout
		if req.Stderr {
			path = stderr
		}
		rep, err := readChunk(dir, path, req, chunk)
		if err != nil {
			s.log.Warn("logs: reading a task's log", "alloc_id", req.AllocID, "task", req.Task, "err", err)
			return errReply(CodeUnreadable, "reading the log of task %q of allocation %s: %v", req.Task, req.AllocID, err)
		}
		// terminal was read before the file: everything the tasks wrote is
		// in what this read saw.
		rep.Done = terminal && rep.Offset >= rep.Size
		if len(rep.Data) > 0 || rep.Reset || terminal || !time.Now().Before(deadline) {
			return rep
		}
		if tick == nil {
			tick = time.NewTimer(s.lim.poll)
			defer tick.Stop()
		} else {
			tick.Reset(s.lim.poll)
		}
		select {
		case <-ctx.Done():
			return rep
		case <-tick.C:
		}
		// Later reads continue where this one ended, in the same file.
		req.Offset, req.FileID = rep.Offset, rep.FileID
	}
}

// readChunk reads up to chunk bytes of the file at path (inside dir) from
// the request's offset. The file is opened through an os.Root at dir, so
// no symlink leads out of the allocation, and only a regular file is read.
func readChunk(dir, path string, req Request, chunk int64) (*Reply, error) {
	rel, err := filepath.Rel(dir, path)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("log path %s is not inside the allocation directory %s", path, dir)
	}
	var (
		size int64
		id   string
		f    *os.File
	)
	root, err := os.OpenRoot(dir)
	if err == nil {
		defer root.Close()
		f, err = root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Nothing written yet: an empty file.
	case err != nil:
		return nil, err
	default:
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file (%s)", rel, st.Mode().Type())
		}
		size, id = st.Size(), fileID(st)
	}
	rep := &Reply{Size: size, FileID: id}
	off := req.Offset
	switch {
	case off < 0:
		off = max(size+off, 0) // a tail
	case off > size || (req.FileID != "" && req.FileID != id):
		rep.Reset, off = true, 0
	}
	rep.Offset = off
	if n := min(chunk, size-off); n > 0 && f != nil {
		buf := make([]byte, n)
		k, err := f.ReadAt(buf, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		rep.Data, rep.Offset = buf[:k], off+int64(k)
	}
	return rep, nil
}

// fileID is a file's device and inode: a rotated file is another one.
func fileID(st fs.FileInfo) string {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%x:%x", sys.Dev, sys.Ino)
	}
	return ""
}
