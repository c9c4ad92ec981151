package main

// Issue 11's fault suite through the agent, for the drivers: a plugin
// SIGKILLed while it stops a task (exec and docker), and the Docker
// engine restarted under a running docker task, with and without
// live-restore (against a private dockerd, never the machine's engine).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
	dockerdrv "github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/runtime/docker"
	"github.com/hivelet/hivelet/runtime/docker/dockertest"
)

// slowStopJobHCL is a system job of one task that takes ~2-3 s to exit
// after its kill signal, with a 20 s kill timeout and no restart.
func slowStopJobHCL(id, driverName, config string) string {
	return fmt.Sprintf(`job %q {
  type = "system"
  update {
    min_healthy_time = "200ms"
    healthy_deadline = "60s"
  }
  group "g" {
    restart {
      attempts = 0
      interval = "5m"
      delay    = "200ms"
      mode     = "fail"
    }
    task "app" {
      driver = %q
      config {
%s
      }
      kill_timeout = "20s"
    }
  }
}
`, id, driverName, config)
}

// allocOf returns the only allocation of job (terminal or not).
func (p *agentProc) allocOf(job string) *model.Allocation {
	var found *model.Allocation
	for _, a := range p.allocs() {
		if a.JobID == job {
			if found != nil {
				p.t.Fatalf("job %s has more than one allocation: %s and %s", job, found.ID, a.ID)
			}
			found = a
		}
	}
	return found
}

func countLines(path, line string) int {
	b, _ := os.ReadFile(path)
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if l == line {
			n++
		}
	}
	return n
}

// stopWithPluginKilled stops job, SIGKILLs the driver's plugin once the
// task says (in file, a line "term") that its kill signal arrived, and
// waits for the allocation to be terminal. It returns the allocation and
// how long the stop took.
func (p *agentProc) stopWithPluginKilled(job, driverName, file string) (*model.Allocation, time.Duration) {
	p.t.Helper()
	stopped := make(chan string, 1)
	at := time.Now()
	go func() {
		code, out := p.cli("job", "stop", job)
		stopped <- fmt.Sprintf("exit %d: %s", code, out)
	}()
	testutil.Eventually(p.t, 30*time.Second, "the task's kill signal trapped", func() bool { return countLines(file, "term") == 1 })
	pid := p.pluginPIDs()[driverName]
	if pid <= 0 {
		p.t.Fatalf("no %s plugin PID", driverName)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		p.t.Fatal(err)
	}
	var a *model.Allocation
	testutil.Eventually(p.t, 45*time.Second, "the allocation terminal", func() bool {
		a = p.allocOf(job)
		return a != nil && a.ClientStatus.Terminal()
	})
	took := time.Since(at)
	select {
	case out := <-stopped:
		p.t.Logf("job stop: %s", strings.TrimSpace(out))
	case <-time.After(30 * time.Second):
		p.t.Fatal("job stop did not return")
	}
	if npid := p.pluginPIDs()[driverName]; npid <= 0 || npid == pid {
		p.t.Fatalf("the %s plugin was not relaunched (pid %d, killed %d)", driverName, npid, pid)
	}
	return a, took
}

// The exec plugin SIGKILLed while the agent stops an exec task that traps
// SIGTERM and takes 2 s to exit: the allocation ends complete (not failed,
// not lost), the task ran once and its trap ran to the end once (its own
// exit, not the 20 s kill timeout), and no process of it is left.
func TestEndToEndAnExecPluginKilledDuringAStopStillStopsTheTaskOnce(t *testing.T) {
	// Parallel: an agent of its own (embedded NATS, ports, directories)
	// and its exec task; the plugin it kills is its agent's.
	t.Parallel()
	p := newAgent(t, "")
	p.start()
	dir := t.TempDir()
	const job = "fault-exec-stop"
	// The trap is set before the PID is written: once the test sees the PID,
	// a SIGTERM runs the trap (it cannot kill the shell before it is set).
	script := `trap 'trap "" TERM; echo term >> ${NOMAD_ALLOC_DIR}/mark; sleep 2; echo bye >> ${NOMAD_ALLOC_DIR}/mark; exit 0' TERM; echo $$ >> ${NOMAD_ALLOC_DIR}/pids; while :; do sleep 0.05; done`
	cfg := fmt.Sprintf("        command = \"/bin/sh\"\n        args    = [\"-c\", %q]", script)
	if code, out := p.cli("job", "run", e2eFile(t, dir, "j.hcl", slowStopJobHCL(job, "exec", cfg))); code != 0 {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	a := p.allocOf(job)
	allocDir := filepath.Join(p.dir, "state", "alloc", a.ID) // NOMAD_ALLOC_DIR
	var pid int
	testutil.Eventually(t, 10*time.Second, "the task's pid", func() bool {
		pids := readPIDs(t, filepath.Join(allocDir, "pids"))
		if len(pids) == 1 {
			pid = pids[0]
		}
		return pid > 0
	})
	p.owned[pid] = true

	a, took := p.stopWithPluginKilled(job, "exec", filepath.Join(allocDir, "mark"))
	t.Logf("allocation %s after %v; task events: %s", a.ClientStatus, took.Round(time.Millisecond), eventTypes(a, "app"))
	if a.ClientStatus != model.ClientComplete {
		t.Fatalf("allocation %s after the stop, want complete", a.ClientStatus)
	}
	if took > 15*time.Second {
		t.Fatalf("the stop took %v: the kill timeout, not the task's own exit", took)
	}
	if n, b := len(readPIDs(t, filepath.Join(allocDir, "pids"))), countLines(filepath.Join(allocDir, "mark"), "bye"); n != 1 || b != 1 {
		t.Fatalf("the task started %d times and finished its trap %d times, want once each", n, b)
	}
	if alive(pid) && !zombie(pid) {
		t.Fatalf("the task's process %d is still running", pid)
	}
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && strings.HasPrefix(string(b[i+1:]), " Z")
}

func eventTypes(a *model.Allocation, task string) string {
	ts, ok := a.TaskStates[task]
	if !ok {
		return ""
	}
	var out []string
	for _, e := range ts.Events {
		if e.Type == "Driver Failure" {
			out = append(out, e.Type+" ("+e.Message+")")
			continue
		}
		out = append(out, e.Type)
	}
	return strings.Join(out, ", ")
}

// The docker plugin SIGKILLed while the agent stops a docker task that
// takes 3 s to exit after SIGTERM: the allocation ends complete, the
// container ran once and exited by itself, and it is removed (no
// container of the job is left).
func TestEndToEndADockerPluginKilledDuringAStopStillStopsTheTaskOnce(t *testing.T) {
	hiveletBinary(t)
	env := dockertest.NewEnv("e2e-fault-stop", dockertest.Program)
	defer env.Close()
	client := env.Client(t)
	const job = "fault-docker-stop"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = dockertest.RemoveContainers(ctx, client, map[string]string{dockerdrv.LabelJob: job})
	})
	p := newAgent(t, "")
	p.start()
	dir := t.TempDir()
	cfg := fmt.Sprintf("        image = %q\n        args  = [\"slow\", \"3000\", \"0\"]", env.Tag)
	if code, out := p.cli("job", "run", e2eFile(t, dir, "j.hcl", slowStopJobHCL(job, "docker", cfg))); code != 0 {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	a := p.allocOf(job)
	stdout := filepath.Join(p.dir, "state", "alloc", a.ID, "alloc", "logs", "app.stdout")
	testutil.Eventually(t, 20*time.Second, "the container ready", func() bool { return countLines(stdout, "ready") == 1 })

	a, took := p.stopWithPluginKilled(job, "docker", stdout)
	t.Logf("allocation %s after %v; task events: %s", a.ClientStatus, took.Round(time.Millisecond), eventTypes(a, "app"))
	if a.ClientStatus != model.ClientComplete {
		t.Fatalf("allocation %s after the stop, want complete", a.ClientStatus)
	}
	if took > 15*time.Second {
		t.Fatalf("the stop took %v: the kill timeout, not the task's own exit", took)
	}
	testutil.Eventually(t, 20*time.Second, "no container of the job left", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		list, err := client.ListContainers(ctx, map[string]string{dockerdrv.LabelJob: job})
		return err == nil && len(list) == 0
	})
	if r, b := countLines(stdout, "ready"), countLines(stdout, "bye"); r != 1 || b != 1 {
		t.Fatalf("the container started %d times and finished its exit %d times, want once each", r, b)
	}
}

func engineRestartJobHCL(id, image string) string {
	return fmt.Sprintf(`job %q {
  type = "system"
  update {
    min_healthy_time = "200ms"
    healthy_deadline = "60s"
  }
  group "g" {
    restart {
      attempts = 3
      interval = "5m"
      delay    = "200ms"
      mode     = "fail"
    }
    task "app" {
      driver = "docker"
      config {
        image = %q
        args  = ["run", "-code", "3"]
      }
      kill_timeout = "5s"
    }
  }
}
`, id, image)
}

// engineRestart runs a docker job on an agent whose driver uses a private
// engine (with liveRestore or not), restarts that engine, and hands the
// check what it needs.
func engineRestart(t *testing.T, liveRestore bool, check func(p *agentProc, c *docker.Client, before docker.ContainerSummary, job string, restartedAt time.Time)) {
	hiveletBinary(t)
	env := dockertest.NewEnv("e2e-engine", dockertest.Program)
	defer env.Close()
	env.Client(t)
	e := dockertest.StartPrivateEngine(t, liveRestore, env.Tag, env.Binary(t))
	p := newAgent(t, "")
	p.env = []string{"DOCKER_HOST=" + e.Host()}
	p.start()
	job := fmt.Sprintf("fault-engine-%v", liveRestore)
	if code, out := p.cli("job", "run", e2eFile(t, t.TempDir(), "j.hcl", engineRestartJobHCL(job, env.Tag))); code != 0 {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	c := e.Client()
	list := jobContainers(t, c, job)
	if len(list) != 1 || list[0].State != "running" {
		t.Fatalf("containers of the job before the restart: %+v", list)
	}
	at := time.Now()
	e.Restart()
	t.Logf("private engine (live-restore %v) restarted in %v", liveRestore, time.Since(at).Round(time.Millisecond))
	check(p, c, list[0], job, at)
	if code, out := p.cli("job", "stop", "-purge", job); code != 0 {
		t.Fatalf("job stop -purge: exit %d\n%s", code, out)
	}
	testutil.Eventually(t, 30*time.Second, "no container of the job after the purge", func() bool { return len(jobContainers(t, c, job)) == 0 })
}

func jobContainers(t *testing.T, c *docker.Client, job string) []docker.ContainerSummary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.ListContainers(ctx, map[string]string{dockerdrv.LabelJob: job})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// With live-restore, an engine restart under a running docker task
// restarts nothing: after the agent's passes the allocation runs the same
// container (same ID, not restarted by the engine or the agent), no
// restart is counted, and there is one container.
func TestEndToEndAnEngineRestartWithLiveRestoreRestartsNoTask(t *testing.T) {
	engineRestart(t, true, func(p *agentProc, c *docker.Client, before docker.ContainerSummary, job string, _ time.Time) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st0, err := c.InspectContainer(ctx, before.ID)
		if err != nil || !st0.Running {
			t.Fatalf("the container after a live-restore restart: %+v %v, want running", st0, err)
		}
		p.waitPasses(2) // the agent's chances to restart it wrongly
		list := jobContainers(t, c, job)
		a := p.allocOf(job)
		if len(list) != 1 || list[0].ID != before.ID || list[0].State != "running" {
			t.Fatalf("containers of the job after the restart: %+v, want only %s running", list, before.ID)
		}
		st, err := c.InspectContainer(ctx, before.ID)
		if err != nil || !st.StartedAt.Equal(st0.StartedAt) {
			t.Fatalf("the container restarted: %+v %v", st, err)
		}
		if a.ClientStatus != model.ClientRunning || a.TaskStates["app"].Restarts != 0 {
			t.Fatalf("allocation after a live-restore restart: %s, %d restarts, events %s", a.ClientStatus, a.TaskStates["app"].Restarts, eventTypes(a, "app"))
		}
	})
}

// Without live-restore, the engine stops the container when it shuts
// down; the agent sees the task die and restarts it per the restart
// policy: exactly one new container running, the dead one removed, the
// allocation running again, and nothing more happens after. A start the
// runner makes while the engine is still shutting down fails and counts
// as one more restart (within the policy's 3 attempts); its half-made
// container is removed by the next start.
func TestEndToEndAnEngineRestartWithoutLiveRestoreRestartsTheTaskOnce(t *testing.T) {
	engineRestart(t, false, func(p *agentProc, c *docker.Client, before docker.ContainerSummary, job string, at time.Time) {
		var list []docker.ContainerSummary
		var a *model.Allocation
		testutil.Eventually(t, 45*time.Second, "the task running in a new container", func() bool {
			list = jobContainers(t, c, job)
			a = p.allocOf(job)
			return len(list) == 1 && list[0].ID != before.ID && list[0].State == "running" &&
				a.ClientStatus == model.ClientRunning && a.TaskStates["app"].Restarts >= 1
		})
		restarts := a.TaskStates["app"].Restarts
		t.Logf("the task running again in a new container %v after the engine restart began; restarts counted %d; events %s",
			time.Since(at).Round(time.Millisecond), restarts, eventTypes(a, "app"))
		p.waitPasses(2) // no further restart, no second container
		a = p.allocOf(job)
		if got := jobContainers(t, c, job); len(got) != 1 || got[0].ID != list[0].ID || got[0].State != "running" || a.TaskStates["app"].Restarts != restarts || a.ClientStatus != model.ClientRunning {
			t.Fatalf("after the agent's passes: containers %+v, allocation %s, %d restarts (events %s); want only %s running, %d restarts",
				got, a.ClientStatus, a.TaskStates["app"].Restarts, eventTypes(a, "app"), list[0].ID, restarts)
		}
	})
}

// The exec plugin SIGKILLed while a sysbatch exec task runs; the task then
// succeeds. The relaunched plugin reports its real exit (0, from its status
// keeper), so the allocation ends complete, not failed, and the restart
// policy (two attempts left) runs nothing again: the task ran once. Before
// the keeper the exit was "unknown" (-1): a failure, and the task was run
// again.
func TestEndToEndASysbatchExecTaskThatSucceedsAfterAPluginSIGKILLRunsOnce(t *testing.T) {
	// Parallel: an agent of its own (embedded NATS, ports, directories)
	// and its exec task; no Docker.
	t.Parallel()
	p := newAgent(t, "")
	p.start()
	const job = "fault-exec-batch"
	script := `echo $$ >> ${NOMAD_ALLOC_DIR}/pids; while [ ! -e ${NOMAD_ALLOC_DIR}/go ]; do sleep 0.05; done; exit 0`
	hcl := fmt.Sprintf(`job %q {
  type = "sysbatch"
  group "g" {
    restart {
      attempts = 2
      interval = "5m"
      delay    = "100ms"
      mode     = "fail"
    }
    task "app" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", %q]
      }
    }
  }
}
`, job, script)
	if code, out := p.cli("job", "run", "-detach", e2eFile(t, t.TempDir(), "b.hcl", hcl)); code != 0 {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	var allocDir string
	// Running as the host sees it (StartTask returned): the fault here is
	// the plugin's death during the wait. Its death inside a start is
	// plugins/exec TestAStartInterruptedByAPluginSIGKILLIsAdoptedOrDestroyed.
	// The task's own PID line alone once came before the handle, and the
	// kill landed inside the start.
	testutil.Eventually(t, 20*time.Second, "the task running", func() bool {
		a := p.allocOf(job)
		if a == nil {
			return false
		}
		allocDir = filepath.Join(p.dir, "state", "alloc", a.ID)
		ts := a.TaskStates["app"]
		return ts != nil && ts.State == "running" && len(readPIDs(t, filepath.Join(allocDir, "pids"))) == 1
	})
	old := p.pluginPIDs()["exec"]
	if old <= 0 {
		t.Fatal("no exec plugin PID")
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the exec plugin relaunched", func() bool {
		pid := p.pluginPIDs()["exec"]
		return pid > 0 && pid != old
	})
	if err := os.WriteFile(filepath.Join(allocDir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var a *model.Allocation
	testutil.Eventually(t, 30*time.Second, "the allocation terminal", func() bool {
		a = p.allocOf(job)
		return a != nil && a.ClientStatus.Terminal()
	})
	p.waitPasses(2) // a restart, if one were coming, is decided by then
	a = p.allocOf(job)
	ts := a.TaskStates["app"]
	t.Logf("allocation %s; task events: %s", a.ClientStatus, eventTypes(a, "app"))
	if a.ClientStatus != model.ClientComplete || ts == nil || ts.Failed || ts.Restarts != 0 {
		t.Fatalf("allocation %s, task %+v: want complete, not failed, no restart", a.ClientStatus, ts)
	}
	if n := len(readPIDs(t, filepath.Join(allocDir, "pids"))); n != 1 {
		t.Fatalf("the task ran %d times, want once", n)
	}
}
