package main

import (
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
