package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hivelet/hivelet/host/allocrunner"
	"github.com/hivelet/hivelet/sdk/driver"
)

// schemaTTL is how long a driver's config schema is reused before it is
// asked again (a relaunched plugin binary may bring a new one).
const schemaTTL = 30 * time.Second

// schemaCache wraps the plugin manager so that validating a task's config
// does not cost a plugin RPC per start: ConfigSchema answers from a cache.
type schemaCache struct {
	inner allocrunner.Drivers
	now   func() time.Time

	mu      sync.Mutex
	schemas map[string]cachedSchema
}

type cachedSchema struct {
	s  *driver.Schema
	at time.Time
}

func newSchemaCache(inner allocrunner.Drivers, now func() time.Time) *schemaCache {
	return &schemaCache{inner: inner, now: now, schemas: map[string]cachedSchema{}}
}

func (c *schemaCache) Driver(ctx context.Context, name string) (driver.Driver, error) {
	d, err := c.inner.Driver(ctx, name)
	if err != nil {
		return nil, err
	}
	return &schemaCachedDriver{Driver: d, name: name, c: c}, nil
}

type schemaCachedDriver struct {
	driver.Driver
	name string
	c    *schemaCache
}

func (d *schemaCachedDriver) ConfigSchema(ctx context.Context) (*driver.Schema, error) {
	d.c.mu.Lock()
	cs, ok := d.c.schemas[d.name]
	d.c.mu.Unlock()
	if ok && d.c.now().Sub(cs.at) < schemaTTL {
		return cs.s, nil
	}
	s, err := d.Driver.ConfigSchema(ctx)
	if err != nil {
		return nil, err
	}
	d.c.mu.Lock()
	d.c.schemas[d.name] = cachedSchema{s: s, at: d.c.now()}
	d.c.mu.Unlock()
	return s, nil
}

// WaitTaskFunc passes the wait to the driver's callback form when it has
// one (driver.WaitNotifier), which the embedded Driver alone would hide:
// without it every running task would hold a goroutine here.
func (d *schemaCachedDriver) WaitTaskFunc(ctx context.Context, taskID string, fn func(*driver.ExitResult)) error {
	return driver.WaitFunc(ctx, d.Driver, taskID, fn)
}

// ExecTask passes a script check's command to the driver when it can run
// one (driver.TaskExecer), which the embedded Driver alone would hide.
func (d *schemaCachedDriver) ExecTask(ctx context.Context, taskID string, command []string) (*driver.ExecResult, error) {
	e, ok := d.Driver.(driver.TaskExecer)
	if !ok {
		return nil, fmt.Errorf("running a command in task %s: driver %s: %w", taskID, d.name, driver.ErrNotSupported)
	}
	return e.ExecTask(ctx, taskID, command)
}
