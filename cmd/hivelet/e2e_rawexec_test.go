package main

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

const rawExecJob = `job "prune" {
  type = "sysbatch"
  group "g" {
    max_run_duration = "1m"
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/echo"
        args    = ["pruned on ${node.unique.name}"]
      }
    }
  }
}
`

// TestEndToEndRawExecRunsOnlyWhereTheAgentEnablesIt: with
// raw_exec { enabled = true } the agent serves the raw_exec driver and a
// raw_exec sysbatch job runs to completion; an agent without it reports no
// such driver (control), as Nomad's does, and job run there says raw_exec
// is off on the node and how to turn it on.
func TestEndToEndRawExecRunsOnlyWhereTheAgentEnablesIt(t *testing.T) {
	// Parallel (with the other end-to-end tests that mostly wait): most of
	// its time is job run's wait for a node before it says none runs the
	// job (noNodeGrace, 15 s); its agents, NATS, ports and directories are
	// its own, and nothing it checks depends on how fast it went.
	t.Parallel()
	off := newAgent(t, "")
	off.start()
	if plugins := off.pluginNames(); len(plugins) == 0 || strings.Contains(plugins, "raw_exec") {
		t.Fatalf("plugins of an agent without raw_exec enabled: %q", plugins)
	}
	// The job run there says why it places nowhere: raw_exec is off, and how
	// to turn it on.
	code, out := off.cli("job", "run", "-timeout", "20s", e2eFile(t, t.TempDir(), "prune.hcl", rawExecJob))
	if code != 1 || !strings.Contains(out, `excluded by driver: "raw_exec" off (raw_exec runs tasks as the agent's user, not isolated, so an agent serves it only with raw_exec { enabled = true } in its configuration`) {
		t.Fatalf("job run on an agent with raw_exec off: exit %d\n%s", code, out)
	}
	off.signal(syscall.SIGTERM)

	p := newAgent(t, "")
	p.addConfig("raw_exec {\n  enabled = true\n}\nname = \"raw-node\"\n")
	p.start()
	if plugins := p.pluginNames(); !strings.Contains(plugins, "raw_exec") {
		t.Fatalf("plugins of an agent with raw_exec enabled: %q", plugins)
	}
	if code, out := p.cli("job", "run", "-detach", e2eFile(t, t.TempDir(), "prune.hcl", rawExecJob)); code != 0 {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	var done *model.Allocation
	testutil.Eventually(t, 30*time.Second, "the raw_exec allocation complete", func() bool {
		for _, a := range p.allocs() {
			if a.JobID == "prune" && a.ClientStatus == model.ClientComplete {
				done = a
				return true
			}
		}
		return false
	})
	if code, out := p.cli("alloc", "logs", done.ID); code != 0 || out != "pruned on raw-node\n" {
		t.Fatalf("alloc logs: exit %d\n%q", code, out)
	}
}

// pluginNames is the agent's /v1/plugins answer, as text.
func (p *agentProc) pluginNames() string {
	p.t.Helper()
	resp, err := http.Get("http://" + p.apiAddr + "/v1/plugins")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	return string(b)
}
