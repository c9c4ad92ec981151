package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hivelet/hivelet/plugins/internal/proc"
	"github.com/hivelet/hivelet/sdk/driver"
)

// proxy is the Driver the manager hands out for one plugin. It routes each
// call to the plugin's current process, waits (within the caller's ctx)
// while the plugin is being relaunched, keeps the set of tasks to recover
// into the next process, and carries streams (wait, fingerprint, stats,
// events) across relaunches.
type proxy struct {
	i *instance
}

var (
	_ driver.Driver       = (*proxy)(nil)
	_ driver.WaitNotifier = (*proxy)(nil)
)

// current returns the connected driver and its generation, waiting for a
// relaunch in progress.
func (p *proxy) current(ctx context.Context) (driver.Driver, uint64, error) {
	i := p.i
	for {
		i.mu.Lock()
		up, drv, gen, changed, lastErr := i.up, i.drv, i.gen, i.changed, i.lastErr
		i.mu.Unlock()
		if up {
			return drv, gen, nil
		}
		select {
		case <-changed:
		case <-i.m.ctx.Done():
			return nil, 0, fmt.Errorf("driver plugin %q: %w", i.p.Name, errClosed)
		case <-ctx.Done():
			if lastErr != nil {
				return nil, 0, fmt.Errorf("driver plugin %q is down (last launch: %v): %w", i.p.Name, lastErr, ctx.Err())
			}
			return nil, 0, fmt.Errorf("driver plugin %q is down: %w", i.p.Name, ctx.Err())
		}
	}
}

// afterLoss waits until a generation newer than gen is up, or, if the
// process of gen turns out to be alive after all, at most a second.
func (p *proxy) afterLoss(ctx context.Context, gen uint64) (driver.Driver, uint64, error) {
	deadline := time.NewTimer(time.Second)
	defer deadline.Stop()
	for {
		p.i.mu.Lock()
		up, g, changed := p.i.up, p.i.gen, p.i.changed
		p.i.mu.Unlock()
		if up && g > gen {
			break
		}
		select {
		case <-changed:
			continue
		case <-deadline.C:
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("driver plugin %q is down: %w", p.i.p.Name, ctx.Err())
		case <-p.i.m.ctx.Done():
			return nil, 0, errClosed
		}
		break
	}
	return p.current(ctx)
}

// lostSince tells a stream that ended because the plugin process of gen
// went away from one the driver ended. A dead process is visible in /proc
// by the time its socket closes; a live one gets 200ms to be found dead
// before the plugin is believed fine.
func (p *proxy) lostSince(ctx context.Context, gen uint64) bool {
	deadline := time.Now().Add(200 * time.Millisecond)
	for {
		p.i.mu.Lock()
		up, g, changed, pid, ticks := p.i.up, p.i.gen, p.i.changed, p.i.pid, p.i.ticks
		p.i.mu.Unlock()
		if !up || g != gen || !proc.Same(pid, ticks) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-changed:
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return false
		}
	}
}

// lostConnection reports an error caused by the plugin process going away
// rather than by the driver.
func lostConnection(err error) bool {
	if err == nil {
		return false
	}
	st, ok := status.FromError(err)
	if !ok {
		var ws interface{ GRPCStatus() *status.Status }
		if errors.As(err, &ws) {
			st, ok = ws.GRPCStatus(), true
		}
	}
	return ok && (st.Code() == codes.Unavailable || st.Code() == codes.Canceled)
}

// call runs fn against the current plugin; an idempotent call that failed
// because the plugin died is retried once against its successor.
func (p *proxy) call(ctx context.Context, idempotent bool, fn func(driver.Driver) error) error {
	return p.callOn(ctx, idempotent, func(d driver.Driver, _ uint64) error { return fn(d) })
}

// callOn is call for a caller that also needs the generation of the
// process fn ran against (a stream or a wait carried across relaunches).
func (p *proxy) callOn(ctx context.Context, idempotent bool, fn func(driver.Driver, uint64) error) error {
	d, gen, err := p.current(ctx)
	if err != nil {
		return err
	}
	err = fn(d, gen)
	if !idempotent || !lostConnection(err) || ctx.Err() != nil {
		return err
	}
	d, gen, err2 := p.afterLoss(ctx, gen)
	if err2 != nil {
		return fmt.Errorf("%w (after: %v)", err2, err)
	}
	return fn(d, gen)
}

func (p *proxy) Info(ctx context.Context) (info driver.PluginInfo, err error) {
	err = p.call(ctx, true, func(d driver.Driver) error { info, err = d.Info(ctx); return err })
	return info, err
}

// Capabilities is asked of each plugin process once (instance.caps).
func (p *proxy) Capabilities(ctx context.Context) (c driver.Capabilities, err error) {
	err = p.callOn(ctx, true, func(d driver.Driver, gen uint64) error {
		c, err = askOnce(p.i, &p.i.caps, gen, func() (driver.Capabilities, error) { return d.Capabilities(ctx) })
		return err
	})
	return c, err
}

// ConfigSchema is asked of each plugin process once (instance.schema); the
// Schema returned is shared and must not be modified.
func (p *proxy) ConfigSchema(ctx context.Context) (s *driver.Schema, err error) {
	err = p.callOn(ctx, true, func(d driver.Driver, gen uint64) error {
		s, err = askOnce(p.i, &p.i.schema, gen, func() (*driver.Schema, error) { return d.ConfigSchema(ctx) })
		return err
	})
	return s, err
}

// askOnce returns what k holds for generation gen, or asks and keeps the
// answer; an answer of an older generation than the one kept is not kept.
func askOnce[T any](i *instance, k *perProcess[T], gen uint64, ask func() (T, error)) (T, error) {
	i.mu.Lock()
	if k.gen == gen {
		v := k.v
		i.mu.Unlock()
		return v, nil
	}
	i.mu.Unlock()
	v, err := ask()
	if err == nil {
		i.mu.Lock()
		if gen > k.gen {
			k.v, k.gen = v, gen
		}
		i.mu.Unlock()
	}
	return v, err
}

// StartTask is never retried: a start whose answer was lost may have
// started the task, and starting it again would run it twice.
func (p *proxy) StartTask(ctx context.Context, cfg *driver.TaskConfig) (*driver.TaskHandle, error) {
	d, gen, err := p.current(ctx)
	if err != nil {
		return nil, err
	}
	h, err := d.StartTask(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p.tracked(ctx, h, gen)
	return h, nil
}

func (p *proxy) RecoverTask(ctx context.Context, h *driver.TaskHandle) error {
	d, gen, err := p.current(ctx)
	if err != nil {
		return err
	}
	err = d.RecoverTask(ctx, h)
	if lostConnection(err) && ctx.Err() == nil {
		if d, gen, err = p.afterLoss(ctx, gen); err == nil {
			err = d.RecoverTask(ctx, h)
		}
	}
	if err != nil {
		return err
	}
	p.tracked(ctx, h, gen)
	return nil
}

// tracked records a task started or recovered on the plugin process of
// gen, and recovers it into a newer process that came up meanwhile.
func (p *proxy) tracked(ctx context.Context, h *driver.TaskHandle, gen uint64) {
	if !p.i.track(h, gen) {
		return
	}
	if err := p.call(ctx, true, func(d driver.Driver) error { return d.RecoverTask(ctx, h) }); err != nil {
		p.i.log.Error("recovering a task started as its plugin restarted", "task_id", h.TaskID, "err", err)
	}
}

func (p *proxy) StopTask(ctx context.Context, id string, timeout time.Duration, sig string) error {
	return p.call(ctx, true, func(d driver.Driver) error { return d.StopTask(ctx, id, timeout, sig) })
}

func (p *proxy) DestroyTask(ctx context.Context, id string, force bool) error {
	err := p.call(ctx, true, func(d driver.Driver) error { return d.DestroyTask(ctx, id, force) })
	if err == nil || errors.Is(err, driver.ErrTaskNotFound) {
		p.i.forget(id)
	}
	return err
}

func (p *proxy) InspectTask(ctx context.Context, id string) (s *driver.TaskStatus, err error) {
	err = p.call(ctx, true, func(d driver.Driver) error { s, err = d.InspectTask(ctx, id); return err })
	return s, err
}

// SignalTask is not retried: a signal may have been delivered.
func (p *proxy) SignalTask(ctx context.Context, id string, sig string) error {
	return p.call(ctx, false, func(d driver.Driver) error { return d.SignalTask(ctx, id, sig) })
}

// follow carries a stream across plugin relaunches: when the plugin's
// stream closes while ctx is live, lost (if set) is sent, and the stream is
// opened again on the next process.
func follow[T any](ctx context.Context, p *proxy, open func(context.Context, driver.Driver) (<-chan T, error), lost func() (T, bool)) (<-chan T, error) {
	var inner <-chan T
	var gen uint64
	err := p.callOn(ctx, true, func(d driver.Driver, g uint64) (err error) {
		gen = g
		inner, err = open(ctx, d)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make(chan T, 1)
	go func() {
		defer close(out)
		for {
			for v := range inner {
				select {
				case out <- v:
				case <-ctx.Done():
					return
				}
			}
			if ctx.Err() != nil || p.i.m.ctx.Err() != nil || !p.lostSince(ctx, gen) {
				return
			}
			if lost != nil {
				if v, ok := lost(); ok {
					select {
					case out <- v:
					case <-ctx.Done():
						return
					}
				}
			}
			var d driver.Driver
			if d, gen, err = p.afterLoss(ctx, gen); err != nil {
				return
			}
			if inner, err = open(ctx, d); err != nil {
				// ErrTaskNotFound included: the caller's next call reports it.
				return
			}
		}
	}()
	return out, nil
}

func (p *proxy) Fingerprint(ctx context.Context) (<-chan *driver.Fingerprint, error) {
	return follow(ctx, p, func(ctx context.Context, d driver.Driver) (<-chan *driver.Fingerprint, error) {
		return d.Fingerprint(ctx)
	}, func() (*driver.Fingerprint, bool) {
		return &driver.Fingerprint{Healthy: false, Description: "driver plugin restarting"}, true
	})
}

// WaitTask carries a wait across plugin relaunches, as follow does a
// stream, without a goroutine per wait (WaitTaskFunc).
func (p *proxy) WaitTask(ctx context.Context, id string) (<-chan *driver.ExitResult, error) {
	out := make(chan *driver.ExitResult, 1)
	err := p.WaitTaskFunc(ctx, id, func(r *driver.ExitResult) {
		if r != nil {
			out <- r // buffered: the only value
		}
		close(out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// WaitTaskFunc is the proxy's driver.WaitNotifier: the plugin client runs
// a function when the wait ends, and only a wait that broke takes a
// goroutine, to see whether the plugin went away and open it again on the
// next process. fn runs once: with the task's result, or nil when the wait
// broke and could not be opened again (ctx ended, the driver ended the
// wait, the task is not in the next process: the caller's next call says
// why).
func (p *proxy) WaitTaskFunc(ctx context.Context, id string, fn func(*driver.ExitResult)) error {
	return p.callOn(ctx, true, func(d driver.Driver, gen uint64) error { return p.waitOn(ctx, d, gen, id, fn) })
}

// waitOn opens the wait for task id on d, the process of gen (see
// WaitTaskFunc).
func (p *proxy) waitOn(ctx context.Context, d driver.Driver, gen uint64, id string, fn func(*driver.ExitResult)) error {
	return driver.WaitFunc(ctx, d, id, func(r *driver.ExitResult) {
		if r != nil {
			fn(r)
			return
		}
		go func() {
			if ctx.Err() != nil || p.i.m.ctx.Err() != nil || !p.lostSince(ctx, gen) {
				fn(nil)
				return
			}
			d, gen, err := p.afterLoss(ctx, gen)
			if err == nil {
				err = p.waitOn(ctx, d, gen, id, fn)
			}
			if err != nil {
				fn(nil)
			}
		}()
	})
}

func (p *proxy) TaskStats(ctx context.Context, id string, interval time.Duration) (<-chan *driver.TaskResourceUsage, error) {
	return follow(ctx, p, func(ctx context.Context, d driver.Driver) (<-chan *driver.TaskResourceUsage, error) {
		return d.TaskStats(ctx, id, interval)
	}, nil)
}

func (p *proxy) TaskEvents(ctx context.Context) (<-chan *driver.TaskEvent, error) {
	return follow(ctx, p, func(ctx context.Context, d driver.Driver) (<-chan *driver.TaskEvent, error) {
		return d.TaskEvents(ctx)
	}, nil)
}
