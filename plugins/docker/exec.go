package docker

import (
	"context"
	"fmt"

	"github.com/hivelet/hivelet/sdk/driver"
)

var _ driver.TaskExecer = (*Driver)(nil)

// ExecTask runs command in the task's container (docker exec), as the
// container's user, for the host's script checks.
func (d *Driver) ExecTask(ctx context.Context, taskID string, command []string) (*driver.ExecResult, error) {
	t, err := d.tasks.Get(taskID)
	if err != nil {
		return nil, err
	}
	code, out, err := d.engine.Exec(ctx, t.containerID, command, driver.MaxExecOutput)
	if err != nil {
		return nil, fmt.Errorf("running %q in task %s: %w", command[0], taskID, err)
	}
	return &driver.ExecResult{ExitCode: code, Output: out}, nil
}
