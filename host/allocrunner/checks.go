package allocrunner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/sdk/driver"
)

// EventRestartSignaled is the task event written when a check_restart asks
// for the task's restart (Nomad's name for it).
const EventRestartSignaled = "Restart Signaled"

// checkWarning is a probe result that is a warning rather than critical:
// an http check answered 429 Too Many Requests (as Consul and Nomad read
// it). It fails the check for the allocation's health like any failure;
// only a check_restart with ignore_warnings counts it as passing.
type checkWarning struct{ error }

func (w checkWarning) Unwrap() error { return w.error }

// checkTarget resolves where a check connects: the check's port, else its
// service's port, after interpolation. A port is a label of the group's
// network (the address the node published it on), a number ("8080", on
// loopback) or a "host:port".
func checkTarget(env TaskEnv, svc model.Service, c model.Check) (string, error) {
	port := c.Port
	if port == "" {
		port = svc.Port
	}
	port = env.Replace(port)
	if port == "" {
		return "", fmt.Errorf("check %q has no port", c.Name)
	}
	if p, ok := env.Port(port); ok {
		return p.Addr(), nil
	}
	if _, err := strconv.Atoi(port); err == nil {
		return net.JoinHostPort("127.0.0.1", port), nil
	}
	if _, _, err := net.SplitHostPort(port); err == nil {
		return port, nil
	}
	return "", fmt.Errorf("check %q: port %q is neither a port label of the allocation, a number nor host:port", c.Name, port)
}

// runCheck performs one check with its timeout. nil means passing.
func runCheck(ctx context.Context, env TaskEnv, svc model.Service, c model.Check) error {
	addr, err := checkTarget(env, svc, c)
	if err != nil {
		return err
	}
	timeout := c.Timeout.D()
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch c.Type {
	case model.CheckTCP:
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("tcp check %s: %w", addr, err)
		}
		return conn.Close()
	case model.CheckHTTP:
		path := env.Replace(c.Path)
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			return fmt.Errorf("http check: %w", err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("http check %s: %w", req.URL, err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			return checkWarning{fmt.Errorf("http check %s: status %d (warning)", req.URL, resp.StatusCode)}
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return fmt.Errorf("http check %s: status %d", req.URL, resp.StatusCode)
		}
		return nil
	default:
		return fmt.Errorf("check type %q not supported", c.Type)
	}
}

// restartWatch is check_restart over the results of one check of one task:
// it counts the failing results in a row of the task's current instance
// (the one started at startedAt), leaving out those within grace of that
// start, and says when the limit is reached. It asks once per instance: a
// restarted task is a new instance, whose count starts at zero. It is pure:
// the caller passes the time and the instance.
type restartWatch struct {
	cr       model.CheckRestart
	instance time.Time // StartedAt of the instance counted
	failures int
	asked    bool // a restart of this instance was asked for
}

// observe takes one result of the check (nil: passing) at now, for the
// task instance started at startedAt, and reports whether the task must be
// restarted now.
func (w *restartWatch) observe(result error, now, startedAt time.Time) bool {
	if w.cr.Limit <= 0 {
		return false
	}
	if !startedAt.Equal(w.instance) {
		*w = restartWatch{cr: w.cr, instance: startedAt}
	}
	if w.asked || now.Before(startedAt.Add(w.cr.Grace.D())) {
		return false
	}
	var warning checkWarning
	if result == nil || (w.cr.IgnoreWarnings && errors.As(result, &warning)) {
		w.failures = 0
		return false
	}
	w.failures++
	if w.failures < w.cr.Limit {
		return false
	}
	w.asked = true
	return true
}

// restartForCheck stops task t's instance started at startedAt because its
// check key failed limit times in a row: the task's loop sees the exit like
// any other and applies the group's restart policy (the restart counts
// against its attempts; when they are used up, the allocation fails). An
// instance that is no longer the running one is left alone.
func (r *Runner) restartForCheck(t *model.Task, key string, startedAt time.Time, limit int, last error) {
	r.mu.Lock()
	ts := r.alloc.TaskStates[t.Name]
	current := r.running[t.Name] && ts != nil && ts.StartedAt.Equal(startedAt)
	r.mu.Unlock()
	if !current {
		return
	}
	drv, err := r.cfg.Drivers.Driver(r.ctx, t.Driver)
	if err != nil {
		r.log.Error("restarting a task for its failing check: driver unavailable", "task", t.Name, "check", key, "err", err)
		return
	}
	r.event(t.Name, EventRestartSignaled, fmt.Sprintf("check %s failed %d times in a row (check_restart limit %d): %v", key, limit, limit, last))
	r.kill(drv, t, &driver.TaskHandle{TaskID: r.taskID(t.Name)})
}

// hasScriptCheck reports whether a task's services have a script check.
func hasScriptCheck(t *model.Task) bool {
	for _, s := range t.Services {
		for _, c := range s.Checks {
			if c.Type == model.CheckScript {
				return true
			}
		}
	}
	return false
}

// runScriptCheck runs a script check's command inside its task, through
// the task's driver, within the check's timeout: exit 0 passes, exit 1 is
// a warning (failing for health, passing for a check_restart with
// ignore_warnings), anything else fails; the error carries the command's
// output.
func (r *Runner) runScriptCheck(t *model.Task, env TaskEnv, c model.Check) error {
	if t == nil {
		return fmt.Errorf("script check %q: a script runs inside a task, and a group service's check names none", c.Name)
	}
	timeout := c.Timeout.D()
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(r.ctx, timeout)
	defer cancel()
	drv, err := r.cfg.Drivers.Driver(ctx, t.Driver)
	if err != nil {
		return fmt.Errorf("script check %q: %w", c.Name, err)
	}
	e, ok := drv.(driver.TaskExecer)
	if !ok {
		return fmt.Errorf("script check %q: driver %s cannot run a command inside a task", c.Name, t.Driver)
	}
	command := []string{env.Replace(c.Command)}
	for _, a := range c.Args {
		command = append(command, env.Replace(a))
	}
	res, err := e.ExecTask(ctx, r.taskID(t.Name), command)
	if err != nil {
		return fmt.Errorf("script check %q: %w", c.Name, err)
	}
	out := strings.TrimSpace(string(res.Output))
	switch res.ExitCode {
	case 0:
		return nil
	case 1:
		return checkWarning{fmt.Errorf("script check %q: exit 1 (warning): %s", c.Name, out)}
	}
	return fmt.Errorf("script check %q: exit %d: %s", c.Name, res.ExitCode, out)
}
