package docker_test

import (
	"context"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	docker "github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/plugins/manager"
	"github.com/hivelet/hivelet/sdk/driver"
)

// servePluginIfAsked makes the test binary serve the docker driver when the
// plugin manager re-executes it as `<binary> plugin serve docker`, as it
// re-executes the hivelet binary in production.
func servePluginIfAsked() bool {
	if len(os.Args) < 4 || os.Args[1] != "plugin" || os.Args[2] != "serve" || os.Args[3] != docker.Name {
		return false
	}
	d, err := docker.New(docker.Config{})
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	driver.Serve(d)
	return true
}

// pluginDriver launches the docker driver out of process, as the agent
// does, with env added to the plugin's environment; the plugin is killed
// at the end of the test.
func pluginDriver(t *testing.T, ctx context.Context, env ...string) (*manager.Manager, driver.Driver) {
	t.Helper()
	m, err := manager.New(manager.Config{
		SelfExe:    os.Args[0],
		Builtins:   []string{docker.Name},
		StateDir:   testutil.ShortTempDir(t, "hvd"), // Unix socket paths are limited to 107 bytes
		MinBackoff: 10 * time.Millisecond,
		Env:        map[string][]string{docker.Name: env},
		Logger:     slog.New(slog.NewTextHandler(testLog{t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Kill() })
	d, err := m.Driver(ctx, docker.Name)
	if err != nil {
		t.Fatal(err)
	}
	return m, d
}

// killPlugin SIGKILLs the docker plugin and waits until the manager has
// relaunched it (a new PID), within 20 seconds.
func killPlugin(t *testing.T, m *manager.Manager) {
	t.Helper()
	old, up := m.PID(docker.Name)
	if !up {
		t.Fatal("the plugin is not running")
	}
	killedAt := time.Now()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for {
		if pid, up := m.PID(docker.Name); up && pid != old {
			return
		}
		if time.Since(killedAt) > 20*time.Second {
			t.Fatal("the plugin was not relaunched")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestATaskSurvivesAPluginSIGKILLWithoutRestartingTheContainer(t *testing.T) {
	c := env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, d := pluginDriver(t, ctx)
	tc := task(t, c, "tick", "20")
	start(t, d, tc)
	before, err := d.InspectTask(ctx, tc.ID)
	if err != nil {
		t.Fatal(err)
	}
	waitCh, err := d.WaitTask(ctx, tc.ID)
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, tc.StdoutPath, "tick 5\n")

	killedAt := time.Now()
	killPlugin(t, m)
	after, err := d.InspectTask(ctx, tc.ID)
	if err != nil {
		t.Fatalf("after the plugin restart: %v", err)
	}
	t.Logf("plugin relaunched and the task recovered %v after SIGKILL", time.Since(killedAt))
	if after.Attributes["container_id"] != before.Attributes["container_id"] || !after.StartedAt.Equal(before.StartedAt) || after.State != driver.TaskStateRunning {
		t.Fatalf("after the plugin restart %+v, before %+v: not the same running container", after, before)
	}
	if list, err := c.ListContainers(ctx, map[string]string{docker.LabelAllocID: tc.AllocID}); err != nil || len(list) != 1 {
		t.Fatalf("containers of the task after the restart: %+v %v, want exactly one", list, err)
	}
	select {
	case r, ok := <-waitCh:
		t.Fatalf("the wait ended across the restart: %+v %v", r, ok)
	default:
	}
	waitOutput(t, tc.StdoutPath, "tick 40\n")
	if err := d.StopTask(ctx, tc.ID, 5*time.Second, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case r, ok := <-waitCh:
		if !ok || r.ExitCode != 0 || r.Err != "" {
			t.Fatalf("exit seen by the wait opened before the crash: %+v %v", r, ok)
		}
	case <-ctx.Done():
		t.Fatal("no exit delivered to the wait opened before the crash")
	}
	checkTicks(t, tc.StdoutPath, 20)
}
