package driver

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	driverpb "github.com/hivelet/hivelet/sdk/driver/proto"
)

// deadStream is a WaitTasks stream the transport has already torn down,
// seen in the instant before receive marks it broken: gRPC's SendMsg
// answers io.EOF.
type deadStream struct {
	grpc.ClientStream
	recv chan struct{}
}

func (d *deadStream) Send(*driverpb.WaitTasksRequest) error { return io.EOF }
func (d *deadStream) Recv() (*driverpb.WaitTasksEvent, error) {
	<-d.recv
	return nil, status.Error(codes.Unavailable, "gone")
}

// A wait whose request cannot be sent is refused as Unavailable, the code
// of a plugin gone, so the plugin manager waits for the relaunch and tries
// again, as it did for a WaitTask stream (found in review: it was io.EOF).
func TestAWaitOnAStreamThatCannotSendIsUnavailable(t *testing.T) {
	ds := &deadStream{recv: make(chan struct{})}
	defer close(ds.recv)
	c := &client{}
	c.mux.st = &muxStream{stream: ds, cancel: func() {}, waits: map[uint64]*muxWait{}}
	go c.mux.st.receive()
	err := c.WaitTaskFunc(context.Background(), "t", func(*ExitResult) { t.Error("fn ran for a refused wait") })
	if code := status.Code(err); err == nil || code != codes.Unavailable {
		t.Fatalf("a wait on a dead stream: %v (code %v), want Unavailable", err, code)
	}
}

// acceptingStream accepts each wait at once, before the caller's goroutine
// is scheduled again.
type acceptingStream struct {
	grpc.ClientStream
	ev    chan *driverpb.WaitTasksEvent
	asked int
}

func (a *acceptingStream) Send(r *driverpb.WaitTasksRequest) error {
	if !r.GetCancel() {
		a.asked++
		a.ev <- &driverpb.WaitTasksEvent{WaitId: r.GetWaitId(), Accepted: true}
		time.Sleep(20 * time.Millisecond) // the sender is descheduled
	}
	return nil
}
func (a *acceptingStream) Recv() (*driverpb.WaitTasksEvent, error) { return <-a.ev, nil }

// A wait asked with an ended context is refused with its error and never
// reaches the plugin (found in review: an accept that won the race against
// the context's watch made it a success with a closed channel).
func TestAWaitWithAnEndedContextIsRefusedWithoutAskingThePlugin(t *testing.T) {
	as := &acceptingStream{ev: make(chan *driverpb.WaitTasksEvent, 4)}
	c := &client{}
	c.mux.st = &muxStream{stream: as, cancel: func() {}, waits: map[uint64]*muxWait{}}
	go c.mux.st.receive()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.WaitTask(ctx, "t"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a wait with an ended context: %v, want context.Canceled", err)
	}
	if as.asked != 0 {
		t.Fatalf("the plugin was asked %d times", as.asked)
	}
}
