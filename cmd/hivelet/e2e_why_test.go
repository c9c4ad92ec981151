package main

import (
	"context"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/runtime/docker/dockertest"
)

const typoJob = `job "typo" {
  type = "system"
  group "g" {
    task "t" {
      driver = "exce"
      config {
        command = "/bin/sleep"
        args    = ["600"]
      }
    }
  }
}
`

const constrainedJob = `job "nowhere" {
  type = "system"
  constraint {
    attribute = "${attr.kernel.name}"
    value     = "plan9"
  }
  group "g" {
    task "t" {
      driver = "exec"
      config {
        command = "/bin/sleep"
        args    = ["600"]
      }
    }
  }
}
`

// TestEndToEndAJobThatPlacesNowhereSaysWhy: on the dev agent, job run of a
// job whose driver is misspelt ends saying which filter excluded the node
// and suggests the driver the node has; job status of a job whose
// constraint no node meets names the constraint and the node's value.
func TestEndToEndAJobThatPlacesNowhereSaysWhy(t *testing.T) {
	// Parallel (with the other end-to-end tests that mostly wait): most of
	// its time is job run's wait for a node before it says none runs the
	// job (noNodeGrace, 15 s); its agent, NATS, ports and directories are
	// its own, and nothing it checks depends on how fast it went.
	t.Parallel()
	p := newAgent(t, "")
	p.start()
	dir := t.TempDir()
	code, out := p.cli("job", "run", e2eFile(t, dir, "typo.hcl", typoJob))
	if code != 1 || !strings.Contains(out, "no ready node runs this job") ||
		!strings.Contains(out, `1 node(s) excluded by driver: "exce" missing (did you mean exec?)`) {
		t.Fatalf("job run of a misspelt driver: exit %d\n%s", code, out)
	}
	if code, out := p.cli("job", "run", "-detach", e2eFile(t, dir, "nowhere.hcl", constrainedJob)); code != 0 {
		t.Fatalf("job run -detach: exit %d\n%s", code, out)
	}
	code, out = p.cli("job", "status", "nowhere")
	if code != 0 || !strings.Contains(out, "Placement") ||
		!strings.Contains(out, `job "nowhere" places on 0 of 1 node(s)`) ||
		!strings.Contains(out, "excluded by constraint: ${attr.kernel.name} = plan9 (the node's is \"linux\")") {
		t.Fatalf("job status of a job no node meets: exit %d\n%s", code, out)
	}
	// Control: a job that runs on the node has no Placement section.
	if code, out := p.cli("job", "run", "-detach", e2eFile(t, dir, "fixed.hcl", strings.Replace(typoJob, `"exce"`, `"exec"`, 1))); code != 0 {
		t.Fatalf("job run -detach: exit %d\n%s", code, out)
	}
	if code, out := p.cli("job", "status", "typo"); code != 0 || strings.Contains(out, "Placement") || !strings.Contains(out, "Version") {
		t.Fatalf("job status of a job that places: exit %d\n%s", code, out)
	}
	for _, j := range []string{"typo", "nowhere"} {
		if code, out := p.cli("job", "stop", j); code != 0 {
			t.Fatalf("job stop %s: exit %d\n%s", j, code, out)
		}
	}
}

// TestEndToEndAFailedDeploymentShowsTheFailingAllocationsNodeAndEvent: on
// the real docker engine, job run of an image that exists nowhere ends
// with the deployment failed and, right there, the failing allocation's
// node and the driver's event saying the image could not be pulled, once
// (the error chain does not repeat itself).
func TestEndToEndAFailedDeploymentShowsTheFailingAllocationsNodeAndEvent(t *testing.T) {
	hiveletBinary(t)
	if _, err := dockertest.Reachable(context.Background()); err != nil {
		if dockertest.Required() {
			t.Fatalf("docker required: %v", err)
		}
		t.Skipf("no docker engine: %v", err)
	}
	missing := "hivelet-test/missing:" + dockertest.RandomID()
	job := `job "unpullable" {
  type = "system"
  update {
    min_healthy_time = "300ms"
    healthy_deadline = "20s"
  }
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    task "web" {
      driver = "docker"
      config {
        image = "` + missing + `"
      }
    }
  }
}
`
	p := newAgent(t, "")
	p.start()
	code, out := p.cli("job", "run", e2eFile(t, t.TempDir(), "unpullable.hcl", job))
	if code != 1 || !strings.Contains(out, "failing allocations of version 0:") || !strings.Contains(out, " on node ") ||
		!strings.Contains(out, "task web: Driver Failure: ") || !strings.Contains(out, missing) {
		t.Fatalf("job run of a missing image: exit %d\n%s", code, out)
	}
	// The event reads once: no gRPC wrapping, no step said twice.
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "task web: Driver Failure: ") && (strings.Contains(line, "rpc error") || strings.Count(line, "starting task") != 1) {
			t.Errorf("the event repeats itself: %s", line)
		}
	}
	if code, out := p.cli("job", "status", "unpullable"); code != 0 || !strings.Contains(out, "Failures") || !strings.Contains(out, missing) {
		t.Fatalf("job status: exit %d\n%s", code, out)
	}
	if code, out := p.cli("job", "stop", "unpullable"); code != 0 {
		t.Fatalf("job stop: exit %d\n%s", code, out)
	}
}
