package docker_test

import (
	"context"
	"testing"
	"time"

	docker "github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/runtime/docker/dockertest"
	"github.com/hivelet/hivelet/sdk/driver"
)

// The fault of issue 11 (1): the docker plugin is SIGKILLed while StartTask
// has started the container and not yet returned its handle. The host got
// an error and no handle. Whatever it does next must not leave a container
// nobody tracks: a retried start of the same task adopts the running
// container (not a second one, not a refusal, not a restart), and a stop
// with no handle (the purge of a failed allocation) removes it.
func TestAStartInterruptedByAPluginSIGKILLIsAdoptedOrDestroyed(t *testing.T) {
	c := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	eng := dockertest.NewHoldingEngine(t)
	m, d := pluginDriver(t, ctx, "DOCKER_HOST="+eng.Host())

	// interrupt starts tc and SIGKILLs the plugin while the start is held
	// after the container started; it returns that container's ID once the
	// plugin is back.
	interrupt := func(tc *driver.TaskConfig) string {
		t.Helper()
		eng.Arm()
		errc := make(chan error, 1)
		go func() {
			_, err := d.StartTask(ctx, tc)
			errc <- err
		}()
		var id string
		select {
		case id = <-eng.Held():
		case err := <-errc:
			t.Fatalf("the start returned before it was held: %v", err)
		case <-ctx.Done():
			t.Fatal("the start never reached the held inspect")
		}
		killPlugin(t, m)
		if err := <-errc; err == nil {
			t.Fatal("a start whose plugin was killed returned no error")
		}
		st, err := c.InspectContainer(ctx, id)
		if err != nil || !st.Running {
			t.Fatalf("the interrupted start's container: %+v %v, want it running (the fault)", st, err)
		}
		return id
	}

	// The host retries the start: the running container is adopted.
	tc := task(t, c, "tick", "20")
	orphan := interrupt(tc)
	before, err := c.InspectContainer(ctx, orphan)
	if err != nil {
		t.Fatal(err)
	}
	recoveredAt := time.Now()
	h, err := d.StartTask(ctx, tc)
	if err != nil {
		t.Fatalf("retrying the interrupted start: %v", err)
	}
	t.Logf("interrupted start adopted %v after the retry began", time.Since(recoveredAt))
	if got := containerID(t, h); got != orphan || !h.StartedAt.Equal(before.StartedAt) {
		t.Fatalf("the retry runs container %s started %v; want the interrupted start's %s started %v", short(got), h.StartedAt, short(orphan), before.StartedAt)
	}
	if list, err := c.ListContainers(ctx, map[string]string{docker.LabelAllocID: tc.AllocID}); err != nil || len(list) != 1 {
		t.Fatalf("containers of the task: %+v %v, want exactly one", list, err)
	}
	waitOutput(t, tc.StdoutPath, "tick 5\n") // tracked: its logs are copied
	if err := d.StopTask(ctx, tc.ID, 5*time.Second, ""); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, d, tc.ID, 30*time.Second); r.Err != "" {
		t.Fatalf("the adopted task's exit: %+v", r)
	}
	if err := d.DestroyTask(ctx, tc.ID, true); err != nil {
		t.Fatal(err)
	}

	// The host gives up on the task instead (its allocation is stopped and
	// purged): DestroyTask without a handle removes the container.
	tc2 := task(t, c, "run")
	interrupt(tc2)
	if err := d.DestroyTask(ctx, tc2.ID, true); err != nil {
		t.Fatalf("destroying the interrupted start's task: %v", err)
	}
	if list, err := c.ListContainers(ctx, map[string]string{docker.LabelAllocID: tc2.AllocID}); err != nil || len(list) != 0 {
		t.Fatalf("containers left by the interrupted start after DestroyTask: %+v %v", list, err)
	}
}
