package agent

import (
	"context"
	"testing"
	"time"

	"github.com/hivelet/hivelet/sdk/driver"
)

// callbackDriver is a driver with the callback wait (driver.WaitNotifier),
// as the plugin manager's drivers are; a channel wait is a test failure.
type callbackDriver struct {
	driver.Driver
	t     *testing.T
	waits chan func(*driver.ExitResult)
}

func (d *callbackDriver) WaitTaskFunc(_ context.Context, _ string, fn func(*driver.ExitResult)) error {
	d.waits <- fn
	return nil
}

func (d *callbackDriver) WaitTask(context.Context, string) (<-chan *driver.ExitResult, error) {
	d.t.Error("the agent's driver wrapper waited on a channel: the driver's callback wait was hidden")
	return make(chan *driver.ExitResult), nil
}

// The schema cache's wrapper forwards the callback wait, so a running task
// holds no goroutine in the agent (it would, parked on WaitTask's channel,
// if the embedded Driver interface hid WaitTaskFunc).
func TestTheAgentsDriverWrapperKeepsTheCallbackWait(t *testing.T) {
	inner := &callbackDriver{t: t, waits: make(chan func(*driver.ExitResult), 1)}
	d, err := newSchemaCache(oneDriver{inner}, time.Now).Driver(context.Background(), "mock")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.(driver.WaitNotifier); !ok {
		t.Fatalf("%T is not a driver.WaitNotifier", d)
	}
	got := make(chan *driver.ExitResult, 1)
	if err := driver.WaitFunc(context.Background(), d, "t1", func(r *driver.ExitResult) { got <- r }); err != nil {
		t.Fatal(err)
	}
	fn := <-inner.waits
	fn(&driver.ExitResult{ExitCode: 7})
	if r := <-got; r.ExitCode != 7 {
		t.Fatalf("exit passed through as %+v", r)
	}
}
