package driver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/metadata"

	driverpb "github.com/hivelet/hivelet/sdk/driver/proto"
)

var errNoHandle = errors.New("no task handle")

// acceptedHeader is the header the server sends on a server stream
// (WaitTask, Fingerprint, TaskStats, TaskEvents) once the driver accepted
// the call, so the client can tell a refusal (an error status with no
// header) from a stream that simply has nothing to send yet. The name dates
// from when only WaitTask sent it; it is part of protocol version 1.
const acceptedHeader = "hivelet-wait-accepted"

// serverStream is the client half of a server-streaming RPC.
type serverStream[M any] interface {
	Header() (metadata.MD, error)
	Recv() (M, error)
}

// awaitAccepted blocks until the server accepted a freshly opened stream or
// refused it, and returns the refusal. A plugin built before a stream sent
// the header (only WaitTask always did) sends its headers with its first
// message instead: that message is returned as first, for the caller to
// deliver, so such a plugin keeps working (its call returns at its first
// message rather than at once, bounded by the call's ctx).
func awaitAccepted[M any](st serverStream[M]) (first M, haveFirst bool, err error) {
	md, err := st.Header()
	if err != nil || len(md.Get(acceptedHeader)) > 0 {
		return first, false, err
	}
	// No accept header: either the server refused the call (trailers only,
	// and Recv returns its status) or it predates the header.
	first, err = st.Recv()
	if err != nil {
		return first, false, err
	}
	return first, true, nil
}

// client is the host's half: a Driver that calls a plugin over gRPC.
type client struct {
	rpc driverpb.DriverClient
	mux waitMux
}

var (
	_ Driver       = (*client)(nil)
	_ WaitNotifier = (*client)(nil)
)

func (c *client) Info(ctx context.Context) (PluginInfo, error) {
	r, err := c.rpc.Info(ctx, &driverpb.InfoRequest{})
	if err != nil {
		return PluginInfo{}, errFromStatus("getting driver info", err)
	}
	return PluginInfo{Name: r.GetName(), Version: r.GetVersion()}, nil
}

func (c *client) Capabilities(ctx context.Context) (Capabilities, error) {
	r, err := c.rpc.Capabilities(ctx, &driverpb.CapabilitiesRequest{})
	if err != nil {
		return Capabilities{}, errFromStatus("getting driver capabilities", err)
	}
	return Capabilities{SendSignals: r.GetSendSignals(), Exec: r.GetExec(), FSIsolation: r.GetFsIsolation(), Mounts: r.GetMounts()}, nil
}

func (c *client) ConfigSchema(ctx context.Context) (*Schema, error) {
	r, err := c.rpc.ConfigSchema(ctx, &driverpb.ConfigSchemaRequest{})
	if err != nil {
		return nil, errFromStatus("getting driver config schema", err)
	}
	return schemaFromPB(r.GetSchema()), nil
}

// openStream turns a server stream that has just been opened (st, with the
// error of opening it) into a channel: it waits for the server to accept or
// refuse the call (a refusal is returned, as what failed), then forwards
// each message until the stream or ctx ends, and closes the channel.
func openStream[M any, T any](ctx context.Context, st serverStream[M], err error, what string, conv func(M) T) (<-chan T, error) {
	var first M
	var haveFirst bool
	if err == nil {
		first, haveFirst, err = awaitAccepted(st)
	}
	if err != nil {
		return nil, errFromStatus(what, err)
	}
	ch := make(chan T)
	go func() {
		defer close(ch)
		for {
			m := first
			if !haveFirst {
				var rerr error
				if m, rerr = st.Recv(); rerr != nil {
					return
				}
			}
			haveFirst = false
			select {
			case ch <- conv(m):
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

func (c *client) Fingerprint(ctx context.Context) (<-chan *Fingerprint, error) {
	st, err := c.rpc.Fingerprint(ctx, &driverpb.FingerprintRequest{})
	return openStream(ctx, st, err, "fingerprinting driver", func(m *driverpb.FingerprintResponse) *Fingerprint {
		return &Fingerprint{Healthy: m.GetHealthy(), Description: m.GetDescription(), Attributes: m.GetAttributes()}
	})
}

func (c *client) StartTask(ctx context.Context, cfg *TaskConfig) (*TaskHandle, error) {
	pb, err := taskConfigToPB(cfg)
	if err != nil {
		return nil, err
	}
	r, err := c.rpc.StartTask(ctx, &driverpb.StartTaskRequest{Task: pb})
	if err != nil {
		return nil, errFromStatus(fmt.Sprintf("starting task %s", cfg.ID), err)
	}
	h := handleFromPB(r.GetHandle())
	if h == nil {
		return nil, fmt.Errorf("starting task %s: the driver returned no handle", cfg.ID)
	}
	return h, nil
}

func (c *client) RecoverTask(ctx context.Context, h *TaskHandle) error {
	if h == nil {
		return errNoHandle
	}
	_, err := c.rpc.RecoverTask(ctx, &driverpb.RecoverTaskRequest{Handle: handleToPB(h)})
	return errFromStatus(fmt.Sprintf("recovering task %s", h.TaskID), err)
}

// WaitTask opens the wait at once, so a task the driver does not know is
// reported here (ErrTaskNotFound), not as a closed channel. The channel is
// closed without a value when the wait breaks before the task exits (ctx
// ended, plugin gone): the caller may call WaitTask again.
func (c *client) WaitTask(ctx context.Context, taskID string) (<-chan *ExitResult, error) {
	ch := make(chan *ExitResult, 1)
	err := c.WaitTaskFunc(ctx, taskID, func(r *ExitResult) {
		if r != nil {
			ch <- r
		}
		close(ch)
	})
	if err != nil {
		return nil, err
	}
	return ch, nil
}

// WaitTaskFunc is WaitTask with a function for the end (WaitNotifier). The
// wait rides the connection's one WaitTasks stream (waitmux.go); a plugin
// without that call gets a WaitTask stream per task, as before.
func (c *client) WaitTaskFunc(ctx context.Context, taskID string, fn func(*ExitResult)) error {
	what := fmt.Sprintf("waiting for task %s", taskID)
	ms, err := c.mux.stream(ctx, c.rpc)
	if err != nil {
		return errFromStatus(what, err)
	}
	if ms != nil {
		if err := c.mux.wait(ctx, ms, taskID, fn); err != nil {
			return errFromStatus(what, err)
		}
		return nil
	}
	ch, err := c.waitOne(ctx, taskID)
	if err != nil {
		return err
	}
	go func() { fn(<-ch) }()
	return nil
}

// waitOne is the wait of a plugin whose SDK predates WaitTasks: a stream
// of its own.
func (c *client) waitOne(ctx context.Context, taskID string) (<-chan *ExitResult, error) {
	st, err := c.rpc.WaitTask(ctx, &driverpb.WaitTaskRequest{TaskId: taskID})
	if err != nil {
		return nil, errFromStatus(fmt.Sprintf("waiting for task %s", taskID), err)
	}
	// An unknown task is an error here rather than a silently closed channel.
	_, haveFirst, err := awaitAccepted(st)
	if err == nil && haveFirst {
		err = fmt.Errorf("the driver sent a result without accepting the wait")
	}
	if err != nil {
		return nil, errFromStatus(fmt.Sprintf("waiting for task %s", taskID), err)
	}
	ch := make(chan *ExitResult, 1)
	go func() {
		defer close(ch)
		r, err := st.Recv()
		if err != nil {
			return
		}
		ch <- exitFromPB(r)
	}()
	return ch, nil
}

func (c *client) StopTask(ctx context.Context, taskID string, timeout time.Duration, signal string) error {
	_, err := c.rpc.StopTask(ctx, &driverpb.StopTaskRequest{TaskId: taskID, Timeout: durToPB(timeout), Signal: signal})
	return errFromStatus(fmt.Sprintf("stopping task %s", taskID), err)
}

func (c *client) DestroyTask(ctx context.Context, taskID string, force bool) error {
	_, err := c.rpc.DestroyTask(ctx, &driverpb.DestroyTaskRequest{TaskId: taskID, Force: force})
	return errFromStatus(fmt.Sprintf("destroying task %s", taskID), err)
}

func (c *client) InspectTask(ctx context.Context, taskID string) (*TaskStatus, error) {
	r, err := c.rpc.InspectTask(ctx, &driverpb.InspectTaskRequest{TaskId: taskID})
	if err != nil {
		return nil, errFromStatus(fmt.Sprintf("inspecting task %s", taskID), err)
	}
	return statusFromPB(r), nil
}

func (c *client) TaskStats(ctx context.Context, taskID string, interval time.Duration) (<-chan *TaskResourceUsage, error) {
	st, err := c.rpc.TaskStats(ctx, &driverpb.TaskStatsRequest{TaskId: taskID, Interval: durToPB(interval)})
	return openStream(ctx, st, err, fmt.Sprintf("streaming stats of task %s", taskID), func(m *driverpb.TaskResourceUsage) *TaskResourceUsage {
		return &TaskResourceUsage{Timestamp: tsFromPB(m.GetTimestamp()), CPUPercent: m.GetCpuPercent(), MemoryBytes: m.GetMemoryBytes()}
	})
}

func (c *client) TaskEvents(ctx context.Context) (<-chan *TaskEvent, error) {
	st, err := c.rpc.TaskEvents(ctx, &driverpb.TaskEventsRequest{})
	return openStream(ctx, st, err, "streaming task events", eventFromPB)
}

func (c *client) SignalTask(ctx context.Context, taskID string, signal string) error {
	_, err := c.rpc.SignalTask(ctx, &driverpb.SignalTaskRequest{TaskId: taskID, Signal: signal})
	return errFromStatus(fmt.Sprintf("signalling task %s", taskID), err)
}
