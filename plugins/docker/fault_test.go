package docker_test

// The docker driver's cells of issue 11's fault suite for the plugin
// process SIGKILLed during stop and during wait (the start is
// interrupt_test.go), with the driver out of process as the agent runs it.

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	docker "github.com/hivelet/hivelet/plugins/docker"
	engine "github.com/hivelet/hivelet/runtime/docker"
	"github.com/hivelet/hivelet/sdk/driver"
)

// lines counts the lines of the file at path equal to line.
func lines(path, line string) int {
	n := 0
	for _, l := range strings.Split(readIfAny(path), "\n") {
		if l == line {
			n++
		}
	}
	return n
}

func readIfAny(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// onlyContainer returns the one container of the task's allocation, failing
// the test if there is not exactly one.
func onlyContainer(t *testing.T, ctx context.Context, c *engine.Client, tc *driver.TaskConfig) engine.ContainerState {
	t.Helper()
	list, err := c.ListContainers(ctx, map[string]string{docker.LabelAllocID: tc.AllocID})
	if err != nil || len(list) != 1 {
		t.Fatalf("containers of the task: %+v %v, want exactly one", list, err)
	}
	st, err := c.InspectContainer(ctx, list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// The plugin SIGKILLed while StopTask waits for a container that takes ~3 s
// to exit after SIGTERM (kill timeout 20 s). The engine goes on stopping
// it; the manager retries the stop on the relaunched plugin, which has
// recovered the task. The stop returns, the container exited by itself
// (its SIGTERM handler ran to the end once, exit code 5 as it chose, not
// the kill timeout's 137), it was never started again, the wait opened
// before the SIGKILL sees that exit, and DestroyTask leaves no container.
func TestAStopInterruptedByAPluginSIGKILLStillEndsTheTaskOnce(t *testing.T) {
	c := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, d := pluginDriver(t, ctx)
	tc := task(t, c, "slow", "3000", "5")
	start(t, d, tc)
	waitOutput(t, tc.StdoutPath, "ready\n")
	before := onlyContainer(t, ctx, c, tc)
	waitCh, err := d.WaitTask(ctx, tc.ID)
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	at := time.Now()
	go func() { stopped <- d.StopTask(ctx, tc.ID, 20*time.Second, "") }()
	waitOutput(t, tc.StdoutPath, "term\n")
	killedAt := time.Now()
	killPlugin(t, m)
	relaunch := time.Since(killedAt)
	if err := <-stopped; err != nil {
		t.Fatalf("StopTask across the plugin's SIGKILL: %v", err)
	}
	took := time.Since(at)
	t.Logf("stop completed %v after it began (plugin relaunched in %v)", took.Round(time.Millisecond), relaunch.Round(time.Millisecond))
	if took > 15*time.Second {
		t.Fatalf("the stop took %v: the kill timeout, not the task's own exit", took)
	}
	select {
	case r, ok := <-waitCh:
		if !ok || r == nil || r.ExitCode != 5 {
			t.Fatalf("exit seen by the wait opened before the SIGKILL: %+v %v, want exit code 5", r, ok)
		}
	case <-ctx.Done():
		t.Fatal("no exit reached the wait opened before the SIGKILL")
	}
	waitOutput(t, tc.StdoutPath, "bye\n")
	if n, m := lines(tc.StdoutPath, "ready"), lines(tc.StdoutPath, "bye"); n != 1 || m != 1 {
		t.Fatalf("the container started %d times and finished its exit %d times, want once each", n, m)
	}
	after := onlyContainer(t, ctx, c, tc)
	if after.ID != before.ID || !after.StartedAt.Equal(before.StartedAt) || after.Running || after.ExitCode != 5 {
		t.Fatalf("container after the stop %+v; before %+v: want the same one, exited 5", after, before)
	}
	if err := d.DestroyTask(ctx, tc.ID, false); err != nil {
		t.Fatal(err)
	}
	if list, err := c.ListContainers(ctx, map[string]string{docker.LabelAllocID: tc.AllocID}); err != nil || len(list) != 0 {
		t.Fatalf("containers left after DestroyTask: %+v %v", list, err)
	}
}

// The plugin SIGKILLed while the host waits on a running container; the
// container then exits by itself with code 7 (SIGUSR1 sent straight to the
// engine, not through the driver). The relaunched plugin reattached to the
// same container (same ID and StartedAt, one container, not started
// again), and the wait opened before the SIGKILL reports the real exit
// code.
func TestAWaitAcrossAPluginSIGKILLSeesTheSameContainersRealExit(t *testing.T) {
	c := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, d := pluginDriver(t, ctx)
	tc := task(t, c, "run", "-exit", "SIGUSR1", "-code", "7")
	start(t, d, tc)
	waitOutput(t, tc.StdoutPath, "ready\n")
	before := onlyContainer(t, ctx, c, tc)
	waitCh, err := d.WaitTask(ctx, tc.ID)
	if err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	killPlugin(t, m)
	st, err := d.InspectTask(ctx, tc.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plugin relaunched and the task recovered %v after the SIGKILL", time.Since(killedAt).Round(time.Millisecond))
	if st.Attributes["container_id"] != before.ID || !st.StartedAt.Equal(before.StartedAt) || st.State != driver.TaskStateRunning {
		t.Fatalf("after the relaunch %+v; before the container was %s started %v", st, before.ID, before.StartedAt)
	}
	select {
	case r, ok := <-waitCh:
		t.Fatalf("the wait ended across the SIGKILL: %+v %v", r, ok)
	default:
	}
	exitAt := time.Now()
	if err := c.KillContainer(ctx, before.ID, "SIGUSR1"); err != nil {
		t.Fatal(err)
	}
	select {
	case r, ok := <-waitCh:
		if !ok || r == nil || r.ExitCode != 7 || r.Err != "" {
			t.Fatalf("exit seen by the wait opened before the SIGKILL: %+v %v, want exit code 7", r, ok)
		}
		t.Logf("the real exit (7) seen %v after the container was told to exit", time.Since(exitAt).Round(time.Millisecond))
	case <-ctx.Done():
		t.Fatal("no exit reached the wait opened before the SIGKILL")
	}
	testutil.Eventually(t, 10*time.Second, "the log copied to the end", func() bool { return lines(tc.StdoutPath, "got user defined signal 1") == 1 })
	if n := lines(tc.StdoutPath, "ready"); n != 1 {
		t.Fatalf("the container started %d times, want once", n)
	}
	if after := onlyContainer(t, ctx, c, tc); after.ID != before.ID || !after.StartedAt.Equal(before.StartedAt) {
		t.Fatalf("container after the exit %+v, want %s started %v", after, before.ID, before.StartedAt)
	}
	if err := d.DestroyTask(ctx, tc.ID, false); err != nil {
		t.Fatal(err)
	}
}
