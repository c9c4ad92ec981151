package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
	dockerdrv "github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/runtime/docker/dockertest"
)

func interruptJobHCL(id, image string, attempts int) string {
	return fmt.Sprintf(`job %q {
  type = "system"
  update {
    min_healthy_time = "300ms"
    healthy_deadline = "60s"
  }
  group "g" {
    restart {
      attempts = %d
      interval = "5m"
      delay    = "200ms"
      mode     = "fail"
    }
    task "app" {
      driver = "docker"
      config {
        image = %q
        args  = ["run"]
      }
    }
  }
}
`, id, attempts, image)
}

// The fault of issue 11 (1), end to end through the agent: the docker
// plugin is SIGKILLed inside StartTask, after the container started and
// before the handle came back (the engine proxy holds that moment). The
// allocation's retry adopts the running container (same container, not
// restarted, one container), and `job stop -purge` leaves none. With no
// retry left, the runner gives up and destroys what the lost start left,
// purge or not.
func TestEndToEndAPluginKilledInsideStartLeavesNoUntrackedContainer(t *testing.T) {
	hiveletBinary(t)
	env := dockertest.NewEnv("e2e-interrupt", dockertest.Program)
	defer env.Close()
	client := env.Client(t)
	eng := dockertest.NewHoldingEngine(t)
	retried, gaveUp := "int-retry-"+env.RunID, "int-fail-"+env.RunID
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, j := range []string{retried, gaveUp} {
			_ = dockertest.RemoveContainers(ctx, client, map[string]string{dockerdrv.LabelJob: j})
		}
	})
	containers := func(job string) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		list, err := client.ListContainers(ctx, map[string]string{dockerdrv.LabelJob: job})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range list {
			out = append(out, c.ID+" "+c.State)
		}
		return out
	}
	p := newAgent(t, "")
	p.env = []string{"DOCKER_HOST=" + eng.Host()}
	p.start()
	dir := t.TempDir()

	// interrupt runs the job, SIGKILLs the docker plugin while its start is
	// held after the container started, and returns that container.
	interrupt := func(job string, attempts int) string {
		t.Helper()
		eng.Arm()
		if code, out := p.cli("job", "run", "-detach", e2eFile(t, dir, job+".hcl", interruptJobHCL(job, env.Tag, attempts))); code != 0 {
			t.Fatalf("job run %s: exit %d\n%s", job, code, out)
		}
		var id string
		select {
		case id = <-eng.Held():
		case <-time.After(60 * time.Second):
			t.Fatal("the start never reached the held inspect")
		}
		pid := p.pluginPIDs()[dockerdrv.Name]
		if pid <= 0 {
			t.Fatal("no docker plugin PID")
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		return id
	}

	orphan := interrupt(retried, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	before, err := client.InspectContainer(ctx, orphan)
	cancel()
	if err != nil || !before.Running {
		t.Fatalf("the interrupted start's container: %+v %v, want running", before, err)
	}
	killedAt := time.Now()
	var alloc *model.Allocation
	testutil.Eventually(t, 60*time.Second, "the allocation running again", func() bool {
		l := liveOf(p.allocs(), retried)
		if len(l) != 1 || l[0].ClientStatus != model.ClientRunning {
			return false
		}
		alloc = l[0]
		return true
	})
	t.Logf("allocation running %v after the plugin's SIGKILL; task restarts counted: %d", time.Since(killedAt).Round(time.Millisecond), alloc.TaskStates["app"].Restarts)
	if got := containers(retried); len(got) != 1 || got[0] != orphan+" running" {
		t.Fatalf("containers of the job: %v; want only the interrupted start's %s, running", got, orphan[:12])
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	after, err := client.InspectContainer(ctx, orphan)
	cancel()
	if err != nil || !after.StartedAt.Equal(before.StartedAt) {
		t.Fatalf("the adopted container restarted: started %v, then %v (%v)", before.StartedAt, after.StartedAt, err)
	}
	if code, out := p.cli("job", "stop", "-purge", retried); code != 0 {
		t.Fatalf("job stop -purge: exit %d\n%s", code, out)
	}
	testutil.Eventually(t, 30*time.Second, "no container left after the purge", func() bool { return len(containers(retried)) == 0 })

	// No retry left: the allocation fails, and what the lost start left is
	// destroyed with it.
	interrupt(gaveUp, 0)
	testutil.Eventually(t, 60*time.Second, "the allocation failed", func() bool {
		for _, a := range p.allocs() {
			if a.JobID == gaveUp && a.ClientStatus == model.ClientFailed {
				return true
			}
		}
		return false
	})
	testutil.Eventually(t, 30*time.Second, "no container left by the failed allocation", func() bool { return len(containers(gaveUp)) == 0 })
	if code, out := p.cli("job", "stop", "-purge", gaveUp); code != 0 || strings.Contains(out, "error") {
		t.Fatalf("job stop -purge of the failed job: exit %d\n%s", code, out)
	}
}
