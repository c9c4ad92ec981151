package builtin

import (
	"context"
	"fmt"

	"github.com/hivelet/hivelet/plugins/exec"
	"github.com/hivelet/hivelet/sdk/driver"
)

// RawExec is the name Nomad gives a driver that runs a task as a plain
// process of the agent's user, without isolation. hivelet's exec driver is
// exactly that, so raw_exec is the exec driver under this name. Like
// Nomad's, it is off unless the agent's configuration enables it
// (raw_exec { enabled = true }): Names leaves it out, EnabledNames adds it.
const RawExec = "raw_exec"

// rawExec is the exec driver answering to raw_exec: its handles say
// raw_exec (so the host routes a recovery back here), and are given to the
// exec driver under its own name.
type rawExec struct{ driver.Driver }

// A raw_exec task that names no user runs as the agent's user, root
// included: enabling raw_exec is that choice.
func newRawExec() (driver.Driver, error) {
	return rawExec{exec.NewWithOptions(exec.Options{AgentUser: true, AllowRoot: true})}, nil
}

func (r rawExec) Info(ctx context.Context) (driver.PluginInfo, error) {
	info, err := r.Driver.Info(ctx)
	info.Name = RawExec
	return info, err
}

func (r rawExec) StartTask(ctx context.Context, cfg *driver.TaskConfig) (*driver.TaskHandle, error) {
	h, err := r.Driver.StartTask(ctx, cfg)
	if h != nil {
		c := *h
		c.Driver = RawExec
		h = &c
	}
	return h, err
}

func (r rawExec) RecoverTask(ctx context.Context, h *driver.TaskHandle) error {
	if h == nil || h.Driver != RawExec {
		return fmt.Errorf("recovering a raw_exec task from a handle of driver %q: %w", handleDriver(h), driver.ErrTaskNotFound)
	}
	c := *h
	c.Driver = exec.Name
	return r.Driver.RecoverTask(ctx, &c)
}

func handleDriver(h *driver.TaskHandle) string {
	if h == nil {
		return ""
	}
	return h.Driver
}
