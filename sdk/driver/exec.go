package driver

import (
	"context"
	"fmt"

	driverpb "github.com/hivelet/hivelet/sdk/driver/proto"
)

// MaxExecOutput bounds the output an ExecTask returns: what a script
// check's result records of the command's output.
const MaxExecOutput = 4096

// TaskExecer is what a driver implements, besides Driver, to run a command
// inside a running task: the host runs script checks (a service check of
// type "script") through it. It is optional, so a driver written before it
// still builds; such a driver answers ErrNotSupported, and so should one
// that cannot (a driver that implements it says so in Capabilities.Exec).
// ctx's deadline is the command's timeout: when it passes the driver
// returns ctx's error.
type TaskExecer interface {
	ExecTask(ctx context.Context, taskID string, command []string) (*ExecResult, error)
}

// ExecResult is how a command run in a task ended.
type ExecResult struct {
	ExitCode int
	// Output is stdout and stderr, interleaved, at most MaxExecOutput
	// bytes.
	Output []byte
}

// ExecTask runs command in the task through the plugin.
func (c *client) ExecTask(ctx context.Context, taskID string, command []string) (*ExecResult, error) {
	r, err := c.rpc.ExecTask(ctx, &driverpb.ExecTaskRequest{TaskId: taskID, Command: command})
	if err != nil {
		return nil, errFromStatus(fmt.Sprintf("running a command in task %s", taskID), err)
	}
	return &ExecResult{ExitCode: int(r.GetExitCode()), Output: r.GetOutput()}, nil
}

// ExecTask serves the driver's TaskExecer, or Unimplemented for a driver
// without one.
func (s *server) ExecTask(ctx context.Context, req *driverpb.ExecTaskRequest) (*driverpb.ExecTaskResponse, error) {
	e, ok := s.impl.(TaskExecer)
	if !ok {
		return nil, errToStatus(fmt.Errorf("running a command in task %s: %w", req.GetTaskId(), ErrNotSupported))
	}
	if len(req.GetCommand()) == 0 {
		return nil, errToStatus(fmt.Errorf("running a command in task %s: no command", req.GetTaskId()))
	}
	r, err := e.ExecTask(ctx, req.GetTaskId(), req.GetCommand())
	if err != nil {
		return nil, errToStatus(err)
	}
	out := r.Output
	if len(out) > MaxExecOutput {
		out = out[:MaxExecOutput]
	}
	return &driverpb.ExecTaskResponse{ExitCode: int64(r.ExitCode), Output: out}, nil
}
