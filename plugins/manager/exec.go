package manager

import (
	"context"
	"fmt"

	"github.com/hivelet/hivelet/sdk/driver"
)

var _ driver.TaskExecer = (*proxy)(nil)

// ExecTask runs a command in a task of the plugin's current process. It is
// not retried: the command may have run.
func (p *proxy) ExecTask(ctx context.Context, id string, command []string) (r *driver.ExecResult, err error) {
	err = p.call(ctx, false, func(d driver.Driver) error {
		e, ok := d.(driver.TaskExecer)
		if !ok {
			return fmt.Errorf("running a command in task %s: driver plugin %q: %w", id, p.i.p.Name, driver.ErrNotSupported)
		}
		r, err = e.ExecTask(ctx, id, command)
		return err
	})
	return r, err
}
