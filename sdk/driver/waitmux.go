package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	driverpb "github.com/hivelet/hivelet/sdk/driver/proto"
)

// The waits of many tasks on one stream (the WaitTasks call). A host
// running a thousand tasks on a plugin held a thousand WaitTask streams
// before, each with a receiving goroutine and gRPC's own per-stream
// context watcher on the host: most of the host's goroutines and a fifth
// of its memory per allocation. Now the client keeps one WaitTasks stream
// per plugin connection with one receiving goroutine, and a wait is a map
// entry and a channel. The Driver interface does not change: a driver
// author implements WaitTask as before, and the SDK's server runs each
// multiplexed wait through it.

// WaitTasks serves the multiplexed waits: each request starts a wait
// through the driver's WaitTask (on the plugin side, a goroutine per wait,
// as WaitTask's stream had), answered as driver.proto says.
func (s *server) WaitTasks(stream driverpb.Driver_WaitTasksServer) error {
	if err := accept(stream); err != nil {
		return err
	}
	ctx := stream.Context()
	type live struct{ cancel context.CancelFunc }
	var (
		sendMu sync.Mutex
		mu     sync.Mutex
		waits  = map[uint64]*live{}
		wg     sync.WaitGroup
	)
	defer func() {
		mu.Lock()
		for _, l := range waits {
			l.cancel()
		}
		mu.Unlock()
		wg.Wait()
	}()
	send := func(ev *driverpb.WaitTasksEvent) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(ev)
	}
	for {
		req, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		id := req.GetWaitId()
		mu.Lock()
		if old := waits[id]; old != nil {
			// Given up, or the ID reused while live: the old wait ends
			// without another event.
			old.cancel()
			delete(waits, id)
		}
		if req.GetCancel() {
			mu.Unlock()
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		l := &live{cancel: cancel}
		waits[id] = l
		mu.Unlock()
		wg.Add(1)
		go func(task string) {
			defer wg.Done()
			s.serveWait(wctx, id, task, send)
			cancel()
			mu.Lock()
			if waits[id] == l {
				delete(waits, id)
			}
			mu.Unlock()
		}(req.GetTaskId())
	}
}

// maxWaitErr bounds an exit's error text on the shared stream: one result
// past the client's message limit would break the waits of every task.
const maxWaitErr = 16 << 10

// serveWait runs one multiplexed wait to its end. A result that cannot be
// sent is followed by ended, so the client's wait ends rather than hangs
// (and the client waits again); when the stream itself is gone, Recv in
// WaitTasks sees it too.
func (s *server) serveWait(ctx context.Context, id uint64, task string, send func(*driverpb.WaitTasksEvent) error) {
	ch, err := s.impl.WaitTask(ctx, task)
	if err != nil {
		st := status.Convert(errToStatus(err))
		_ = send(&driverpb.WaitTasksEvent{WaitId: id, Code: uint32(st.Code()), Message: st.Message()})
		return
	}
	if send(&driverpb.WaitTasksEvent{WaitId: id, Accepted: true}) != nil {
		return
	}
	select {
	case r, ok := <-ch:
		if ctx.Err() != nil {
			return // given up: the client expects nothing more
		}
		if !ok || r == nil {
			_ = send(&driverpb.WaitTasksEvent{WaitId: id, Ended: true})
			return
		}
		pb := exitToPB(r)
		if len(pb.Err) > maxWaitErr {
			cut := maxWaitErr
			for cut > 0 && !utf8.RuneStart(pb.Err[cut]) {
				cut-- // a string field must stay UTF-8
			}
			pb.Err = pb.Err[:cut] + " … (cut)"
		}
		if send(&driverpb.WaitTasksEvent{WaitId: id, Result: pb}) != nil {
			_ = send(&driverpb.WaitTasksEvent{WaitId: id, Ended: true})
		}
	case <-ctx.Done():
	}
}

// waitMux is the client's half: one WaitTasks stream per plugin
// connection, opened on the first wait and again after it breaks.
// unsupported is set once the plugin answered Unimplemented (an SDK that
// predates the call): every wait then takes its own WaitTask stream. No
// lock is held across the network: while one caller opens the stream, the
// others wait for it within their own contexts (opening).
type waitMux struct {
	mu          sync.Mutex
	st          *muxStream
	opening     chan struct{} // closed when the opening under way ends
	unsupported bool
	next        atomic.Uint64
}

// muxStream is one open WaitTasks stream and its waits.
type muxStream struct {
	stream driverpb.Driver_WaitTasksClient
	cancel context.CancelFunc
	sendMu sync.Mutex

	mu     sync.Mutex
	waits  map[uint64]*muxWait
	broken bool
}

// muxWait is one wait on the stream: ack gets the accept or refusal; fn
// runs once for an accepted wait when it ends, with the result or nil.
type muxWait struct {
	ack   chan error
	fn    func(*ExitResult)
	acked bool
	done  bool
	stop  func() bool // the ctx watch (context.AfterFunc)
}

// errMuxBroken is what a wait whose stream broke before its answer gets.
var errMuxBroken = status.Error(codes.Unavailable, "the wait stream to the driver plugin broke")

// stream returns the open stream, opening one if there is none; nil with
// unsupported set when the plugin does not have the call. callerCtx bounds
// this caller's wait, including behind another caller's opening.
func (m *waitMux) stream(callerCtx context.Context, rpc driverpb.DriverClient) (*muxStream, error) {
	for {
		m.mu.Lock()
		if m.unsupported {
			m.mu.Unlock()
			return nil, nil
		}
		if st := m.st; st != nil && !st.isBroken() {
			m.mu.Unlock()
			return st, nil
		}
		if opening := m.opening; opening != nil {
			m.mu.Unlock()
			select {
			case <-opening:
				continue // opened, unsupported, or failed: look again (a failure is tried again)
			case <-callerCtx.Done():
				return nil, callerCtx.Err()
			}
		}
		opening := make(chan struct{})
		m.st, m.opening = nil, opening
		m.mu.Unlock()

		st, unsupported, err := openMux(callerCtx, rpc)
		m.mu.Lock()
		m.st, m.unsupported, m.opening = st, unsupported, nil
		close(opening)
		m.mu.Unlock()
		if st != nil {
			go st.receive()
		}
		return st, err
	}
}

// openMux opens a WaitTasks stream and waits for the plugin to accept it.
// The stream lives as long as the plugin connection, not as the caller's
// context, which bounds only the opening; a wait's own context gives only
// that wait up.
func openMux(callerCtx context.Context, rpc driverpb.DriverClient) (st *muxStream, unsupported bool, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	opening := context.AfterFunc(callerCtx, cancel)
	stream, err := rpc.WaitTasks(ctx)
	if err == nil {
		_, haveFirst, aerr := awaitAccepted[*driverpb.WaitTasksEvent](stream)
		if aerr == nil && haveFirst {
			aerr = fmt.Errorf("the driver sent a wait event before accepting the stream")
		}
		err = aerr
	}
	if !opening() && err == nil {
		err = callerCtx.Err() // the caller gave up while it opened: ctx is cancelled
	}
	if err != nil {
		cancel()
		if status.Code(err) == codes.Unimplemented {
			return nil, true, nil
		}
		return nil, false, err
	}
	return &muxStream{stream: stream, cancel: cancel, waits: map[uint64]*muxWait{}}, false, nil
}

func (s *muxStream) isBroken() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broken
}

// receive delivers the stream's events to their waits until it breaks,
// then ends every wait still open (each gets nil, as a broken WaitTask
// stream's channel closed without a value). The waits' functions run
// outside the lock but on this goroutine, the stream's only receiver: a
// function must neither block nor wait again on this stream synchronously
// (the answer it would wait for comes through here). The proxy's opens
// its next wait from a goroutine of its own.
func (s *muxStream) receive() {
	for {
		ev, err := s.stream.Recv()
		if err != nil {
			s.mu.Lock()
			s.broken = true
			var ends []func()
			for _, w := range s.waits {
				ends = append(ends, s.end(w, errMuxBroken, nil))
			}
			s.waits = map[uint64]*muxWait{}
			s.mu.Unlock()
			s.cancel()
			for _, f := range ends {
				f()
			}
			return
		}
		s.mu.Lock()
		w := s.waits[ev.GetWaitId()]
		end := func() {}
		switch {
		case w == nil:
			// Given up already, or an ID this client never sent.
		case !w.acked:
			if ev.GetAccepted() {
				w.acked = true
				w.ack <- nil
				break
			}
			code := codes.Code(ev.GetCode())
			if code == codes.OK {
				code = codes.Unknown
			}
			delete(s.waits, ev.GetWaitId())
			end = s.end(w, status.Error(code, ev.GetMessage()), nil)
		default:
			delete(s.waits, ev.GetWaitId())
			var res *ExitResult
			if r := ev.GetResult(); r != nil && !ev.GetEnded() {
				res = exitFromPB(r)
			}
			end = s.end(w, nil, res)
		}
		s.mu.Unlock()
		end()
	}
}

// end ends w (s.mu held) and returns what to run once s.mu is released. A
// wait not accepted yet gets ackErr as its answer (its fn never runs); an
// accepted one has its fn run with res.
func (s *muxStream) end(w *muxWait, ackErr error, res *ExitResult) func() {
	if w.done {
		return func() {}
	}
	w.done = true
	if w.stop != nil {
		w.stop()
	}
	if !w.acked {
		w.acked = true
		w.ack <- ackErr
		return func() {}
	}
	return func() { w.fn(res) }
}

// abandon ends wait id (w) on the client's side, if it is still open:
// ackErr is its answer if it has none yet. It reports whether the wait was
// open (the plugin may still hold it).
func (s *muxStream) abandon(id uint64, w *muxWait, ackErr error) bool {
	s.mu.Lock()
	_, open := s.waits[id]
	end := func() {}
	if open {
		delete(s.waits, id)
		end = s.end(w, ackErr, nil)
	}
	s.mu.Unlock()
	end()
	return open
}

func (s *muxStream) send(req *driverpb.WaitTasksRequest) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.stream.Send(req)
}

// wait opens one wait on the stream and blocks until the plugin accepted
// or refused it (or ctx ended, or the stream broke); fn then runs once,
// when the accepted wait ends.
func (m *waitMux) wait(ctx context.Context, s *muxStream, taskID string, fn func(*ExitResult)) error {
	if err := ctx.Err(); err != nil {
		return err // as a call with an ended context did: the plugin is not asked
	}
	id := m.next.Add(1)
	w := &muxWait{ack: make(chan error, 1), fn: fn}
	s.mu.Lock()
	if s.broken {
		s.mu.Unlock()
		return errMuxBroken
	}
	s.waits[id] = w
	s.mu.Unlock()
	if err := s.send(&driverpb.WaitTasksRequest{WaitId: id, TaskId: taskID}); err != nil {
		// The stream is gone (gRPC says io.EOF): that is the plugin going
		// away, as a broken stream is, so callers retry after a relaunch.
		s.abandon(id, w, errMuxBroken)
		return errMuxBroken
	}
	// Giving up on ctx costs no goroutine: AfterFunc runs only if ctx ends.
	// It is set after the request went out, so that its cancel follows the
	// request on the stream (a cancel first would find nothing to cancel
	// and leave the plugin's wait running); a wait that ended meanwhile
	// needs none. The wait ends before the cancel is sent, so a send held
	// up by a wedged plugin does not hold up the caller.
	s.mu.Lock()
	if !w.done {
		w.stop = context.AfterFunc(ctx, func() {
			if s.abandon(id, w, ctx.Err()) {
				_ = s.send(&driverpb.WaitTasksRequest{WaitId: id, Cancel: true})
			}
		})
	}
	s.mu.Unlock()
	return <-w.ack
}
