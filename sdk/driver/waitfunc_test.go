package driver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hivelet/hivelet/sdk/driver"
)

// embedded hides the client's WaitTaskFunc, as any wrapper that embeds a
// driver.Driver does.
type embedded struct{ driver.Driver }

// WaitFunc takes the function wait of a driver that has one (the plugin
// client) and the channel of one that has only WaitTask (a wrapper, a
// driver in process): either way fn gets the task's own result once, an
// unknown task is refused at once, and a wait whose ctx ends gets nil.
func TestWaitFuncRunsTheFunctionOnceWithTheResultWhicheverWaitTheDriverHas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w := newWaiter(4)
	_, client := newServed(t, sdkServer(t, w))
	if _, ok := client.(driver.WaitNotifier); !ok {
		t.Fatal("the plugin client is not a WaitNotifier")
	}
	for i, d := range []driver.Driver{client, embedded{client}} {
		got := make(chan *driver.ExitResult, 2)
		fn := func(r *driver.ExitResult) { got <- r }
		task := []string{"t0", "t1"}[i]
		if err := driver.WaitFunc(ctx, d, task, fn); err != nil {
			t.Fatal(err)
		}
		w.exit(task, 10+i)
		select {
		case r := <-got:
			if r == nil || r.ExitCode != 10+i {
				t.Fatalf("driver %d: result %+v, want exit code %d", i, r, 10+i)
			}
		case <-ctx.Done():
			t.Fatalf("driver %d: no result", i)
		}
		if err := driver.WaitFunc(ctx, d, "nope", fn); !errors.Is(err, driver.ErrTaskNotFound) {
			t.Fatalf("driver %d: unknown task: %v", i, err)
		}
		wctx, wcancel := context.WithCancel(ctx)
		if err := driver.WaitFunc(wctx, d, []string{"t2", "t3"}[i], fn); err != nil {
			t.Fatal(err)
		}
		wcancel()
		select {
		case r := <-got:
			if r != nil {
				t.Fatalf("driver %d: a wait given up got %+v", i, r)
			}
		case <-ctx.Done():
			t.Fatalf("driver %d: a wait given up never ended", i)
		}
		select {
		case r := <-got:
			t.Fatalf("driver %d: fn ran again with %+v", i, r)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
