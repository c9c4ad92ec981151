package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

const prestartJob = `job "prepared" {
  type = "system"
  update {
    min_healthy_time = "300ms"
    healthy_deadline = "30s"
  }
  group "g" {
    task "init" {
      driver = "exec"
      lifecycle {
        hook = "prestart"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "sleep 0.3; echo prepared > \"$NOMAD_ALLOC_DIR/ready\""]
      }
    }
    task "main" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo \"main sees: $(cat \"$NOMAD_ALLOC_DIR/ready\")\"; exec sleep 600"]
      }
      kill_timeout = "2s"
    }
  }
}
`

// TestEndToEndAPrestartTaskPreparesWhatTheMainTaskReads: on the real exec
// driver the init task finishes before the main task starts (the main task
// reads the file it wrote), and the deployment succeeds with the init task
// dead.
func TestEndToEndAPrestartTaskPreparesWhatTheMainTaskReads(t *testing.T) {
	p := newAgent(t, "")
	p.start()
	if code, out := p.cli("job", "run", e2eFile(t, t.TempDir(), "prepared.hcl", prestartJob)); code != 0 || !strings.Contains(out, "deployment successful") {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	live := liveOf(p.allocs(), "prepared")
	if len(live) != 1 {
		t.Fatalf("live: %+v", live)
	}
	testutil.Eventually(t, 20*time.Second, "the main task's output", func() bool {
		code, out := p.cli("alloc", "logs", live[0].ID, "main")
		return code == 0 && strings.Contains(out, "main sees: prepared")
	})
	a := liveOf(p.allocs(), "prepared")[0]
	if ts := a.TaskStates["init"]; ts.State != "dead" || ts.Failed || a.ClientStatus != model.ClientRunning {
		t.Fatalf("alloc %s, init %+v", a.ClientStatus, ts)
	}
	if code, out := p.cli("job", "stop", "prepared"); code != 0 {
		t.Fatalf("job stop: exit %d\n%s", code, out)
	}
}

const poststartJob = `job "announced" {
  type = "system"
  update {
    min_healthy_time = "300ms"
    healthy_deadline = "30s"
  }
  group "g" {
    task "main" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo up > \"$NOMAD_ALLOC_DIR/main-up\"; exec sleep 600"]
      }
      kill_timeout = "2s"
    }
    task "announce" {
      driver = "exec"
      lifecycle {
        hook = "poststart"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "while [ ! -f \"$NOMAD_ALLOC_DIR/main-up\" ]; do sleep 0.05; done; echo \"announced after main: $(cat \"$NOMAD_ALLOC_DIR/main-up\")\""]
      }
    }
  }
}
`

// TestEndToEndAPoststartTaskRunsOnceTheMainTaskRuns: on the real exec
// driver the poststart task runs after the main task started, finishes,
// and the deployment succeeds with the main task running and the
// poststart task dead (not failed).
func TestEndToEndAPoststartTaskRunsOnceTheMainTaskRuns(t *testing.T) {
	p := newAgent(t, "")
	p.start()
	if code, out := p.cli("job", "run", e2eFile(t, t.TempDir(), "announced.hcl", poststartJob)); code != 0 || !strings.Contains(out, "deployment successful") {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	live := liveOf(p.allocs(), "announced")
	if len(live) != 1 {
		t.Fatalf("live: %+v", live)
	}
	testutil.Eventually(t, 20*time.Second, "the poststart task's output", func() bool {
		code, out := p.cli("alloc", "logs", live[0].ID, "announce")
		return code == 0 && strings.Contains(out, "announced after main: up")
	})
	testutil.Eventually(t, 10*time.Second, "the poststart task finished", func() bool {
		a := liveOf(p.allocs(), "announced")[0]
		ts, main := a.TaskStates["announce"], a.TaskStates["main"]
		return ts != nil && ts.State == "dead" && !ts.Failed && main != nil && main.State == "running" && a.ClientStatus == model.ClientRunning
	})
	a := liveOf(p.allocs(), "announced")[0]
	if a.TaskStates["announce"].StartedAt.Before(a.TaskStates["main"].StartedAt) {
		t.Errorf("the poststart task started at %v, before the main task at %v", a.TaskStates["announce"].StartedAt, a.TaskStates["main"].StartedAt)
	}
	if code, out := p.cli("job", "stop", "announced"); code != 0 {
		t.Fatalf("job stop: exit %d\n%s", code, out)
	}
}

func poststopJob(marker string) string {
	return `job "tidy" {
  type = "system"
  update {
    min_healthy_time = "300ms"
    healthy_deadline = "30s"
  }
  group "g" {
    task "main" {
      driver = "exec"
      config {
        command = "/bin/sleep"
        args    = ["600"]
      }
      kill_timeout = "2s"
    }
    task "cleanup" {
      driver = "exec"
      lifecycle {
        hook = "poststop"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "echo \"cleaned up after $NOMAD_ALLOC_ID\" > ` + marker + `"]
      }
    }
  }
}
`
}

// TestEndToEndAPoststopTaskRunsWhenTheJobIsStopped: on the real exec
// driver the deployment succeeds with the poststop task not run (the
// control: its file is absent while the job runs); job stop kills the main
// task, then the poststop task runs and writes its file, and the job is
// stopped.
func TestEndToEndAPoststopTaskRunsWhenTheJobIsStopped(t *testing.T) {
	p := newAgent(t, "")
	p.start()
	// Where the task, which runs as nobody, may write.
	out := filepath.Join(p.dir, "out")
	if err := os.Mkdir(out, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	marker := filepath.Join(out, "cleaned")
	if code, out := p.cli("job", "run", e2eFile(t, t.TempDir(), "tidy.hcl", poststopJob(marker))); code != 0 || !strings.Contains(out, "deployment successful") {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	live := liveOf(p.allocs(), "tidy")
	if len(live) != 1 || live[0].ClientStatus != model.ClientRunning {
		t.Fatalf("live: %+v", live)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the poststop task ran while the job runs: %v", err)
	}
	if code, out := p.cli("job", "stop", "tidy"); code != 0 {
		t.Fatalf("job stop: exit %d\n%s", code, out)
	}
	b, err := os.ReadFile(marker)
	if err != nil || !strings.Contains(string(b), "cleaned up after "+live[0].ID) {
		t.Fatalf("after the stop, the poststop task's file: %q %v", b, err)
	}
}
