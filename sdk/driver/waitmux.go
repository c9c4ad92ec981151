package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

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
	send := func(ev *driverpb.WaitTasksEvent) {
		sendMu.Lock()
		defer sendMu.Unlock()
		// A failed send means the stream is gone; Recv below sees it too.
		_ = stream.Send(ev)
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

// serveWait runs one multiplexed wait to its end.
func (s *server) serveWait(ctx context.Context, id uint64, task string, send func(*driverpb.WaitTasksEvent)) {
	ch, err := s.impl.WaitTask(ctx, task)
	if err != nil {
		st := status.Convert(errToStatus(err))
		send(&driverpb.WaitTasksEvent{WaitId: id, Code: uint32(st.Code()), Message: st.Message()})
		return
	}
	send(&driverpb.WaitTasksEvent{WaitId: id, Accepted: true})
	select {
	case r, ok := <-ch:
		if ctx.Err() != nil {
			return // given up: the client expects nothing more
		}
		if !ok || r == nil {
			send(&driverpb.WaitTasksEvent{WaitId: id, Ended: true})
			return
		}
		send(&driverpb.WaitTasksEvent{WaitId: id, Result: exitToPB(r)})
	case <-ctx.Done():
	}
}

// waitMux is the client's half: one WaitTasks stream per plugin
// connection, opened on the first wait and again after it breaks.
// unsupported is set once the plugin answered Unimplemented (an SDK that
// predates the call): every wait then takes its own WaitTask stream.
type waitMux struct {
	mu          sync.Mutex
	st          *muxStream
	unsupported bool
	next        uint64
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

// muxWait is one wait on the stream: ack gets the accept or refusal, out
// the result; out is closed when the wait ends (with or without one).
type muxWait struct {
	task string
	ack  chan error
	out  chan *ExitResult
	acked,
	done bool
	stop func() bool // the ctx watch (context.AfterFunc)
}

// errMuxBroken is what a wait whose stream broke before its answer gets.
var errMuxBroken = status.Error(codes.Unavailable, "the wait stream to the driver plugin broke")

// stream returns the open stream, opening one if there is none; nil with
// unsupported set when the plugin does not have the call.
func (m *waitMux) stream(callerCtx context.Context, rpc driverpb.DriverClient) (*muxStream, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unsupported {
		return nil, nil
	}
	if m.st != nil {
		m.st.mu.Lock()
		broken := m.st.broken
		m.st.mu.Unlock()
		if !broken {
			return m.st, nil
		}
		m.st = nil
	}
	// The stream lives as long as the plugin connection, not as the first
	// caller's context; a wait's own context only gives that wait up.
	// The caller's context bounds only the opening.
	ctx, cancel := context.WithCancel(context.Background())
	opening := context.AfterFunc(callerCtx, cancel)
	st, err := rpc.WaitTasks(ctx)
	if err == nil {
		_, haveFirst, aerr := awaitAccepted[*driverpb.WaitTasksEvent](st)
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
			m.unsupported = true
			return nil, nil
		}
		return nil, err
	}
	ms := &muxStream{stream: st, cancel: cancel, waits: map[uint64]*muxWait{}}
	m.st = ms
	go ms.receive()
	return ms, nil
}

// receive delivers the stream's events to their waits until it breaks,
// then ends every wait still open (their channels close without a value,
// as a broken WaitTask stream's did).
func (s *muxStream) receive() {
	for {
		ev, err := s.stream.Recv()
		if err != nil {
			s.mu.Lock()
			s.broken = true
			waits := s.waits
			s.waits = map[uint64]*muxWait{}
			for _, w := range waits {
				s.finish(w, errMuxBroken)
			}
			s.mu.Unlock()
			s.cancel()
			return
		}
		s.mu.Lock()
		w := s.waits[ev.GetWaitId()]
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
			s.finish(w, status.Error(code, ev.GetMessage()))
		default:
			delete(s.waits, ev.GetWaitId())
			if r := ev.GetResult(); r != nil && !ev.GetEnded() {
				w.out <- exitFromPB(r) // buffered 1: one result per wait
			}
			s.finish(w, nil)
		}
		s.mu.Unlock()
	}
}

// finish ends w (s.mu held): an unanswered wait gets err as its answer,
// and its channel closes.
func (s *muxStream) finish(w *muxWait, err error) {
	if w.done {
		return
	}
	w.done = true
	if w.stop != nil {
		w.stop()
	}
	if !w.acked {
		w.acked = true
		w.ack <- err
	}
	close(w.out)
}

func (s *muxStream) send(req *driverpb.WaitTasksRequest) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.stream.Send(req)
}

// wait opens one wait on the stream and blocks until the plugin accepted
// or refused it (or ctx ended, or the stream broke).
func (m *waitMux) wait(ctx context.Context, s *muxStream, taskID string) (<-chan *ExitResult, error) {
	m.mu.Lock()
	m.next++
	id := m.next
	m.mu.Unlock()
	w := &muxWait{task: taskID, ack: make(chan error, 1), out: make(chan *ExitResult, 1)}
	s.mu.Lock()
	if s.broken {
		s.mu.Unlock()
		return nil, errMuxBroken
	}
	s.waits[id] = w
	// Giving up on ctx costs no goroutine: AfterFunc runs only if ctx ends.
	w.stop = context.AfterFunc(ctx, func() {
		s.mu.Lock()
		_, open := s.waits[id]
		if open {
			delete(s.waits, id)
			s.finish(w, ctx.Err())
		}
		s.mu.Unlock()
		if open {
			_ = s.send(&driverpb.WaitTasksRequest{WaitId: id, Cancel: true})
		}
	})
	s.mu.Unlock()
	if err := s.send(&driverpb.WaitTasksRequest{WaitId: id, TaskId: taskID}); err != nil {
		s.mu.Lock()
		delete(s.waits, id)
		s.finish(w, errMuxBroken)
		s.mu.Unlock()
		return nil, err
	}
	if err := <-w.ack; err != nil {
		return nil, err
	}
	return w.out, nil
}
