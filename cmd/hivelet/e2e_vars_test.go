package main

import (
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

const varsJob = `job "dbclient" {
  type = "system"
  update {
    min_healthy_time = "300ms"
    healthy_deadline = "30s"
  }
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    task "client" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "cat \"$NOMAD_TASK_DIR/secrets/db.conf\"; echo; exec sleep 600"]
      }
      kill_timeout = "2s"
      template {
        destination = "secrets/db.conf"
        change_mode = "restart"
        data        = "{{ with nomadVar \"app/db\" }}pw={{ .password }}{{ end }}"
      }
    }
  }
}
`

// TestEndToEndAVariableChangeRerendersTheTemplateAndRestartsTheTask: the
// task renders the variable written with `hivelet var put`; a new put
// renders the file again and restarts the task (outside its restart policy,
// which allows none), and the allocation keeps running.
func TestEndToEndAVariableChangeRerendersTheTemplateAndRestartsTheTask(t *testing.T) {
	p := newAgent(t, "")
	p.start()
	if code, out := p.cli("var", "put", "app/db", "password=one"); code != 0 {
		t.Fatalf("var put: exit %d\n%s", code, out)
	}
	if code, out := p.cli("var", "get", "app/db"); code != 0 || out != "password=one\n" {
		t.Fatalf("var get: exit %d\n%q", code, out)
	}
	if code, out := p.cli("job", "run", e2eFile(t, t.TempDir(), "db.hcl", varsJob)); code != 0 || !strings.Contains(out, "deployment successful") {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	live := liveOf(p.allocs(), "dbclient")
	if len(live) != 1 {
		t.Fatalf("live: %+v", live)
	}
	id := live[0].ID
	logsHave := func(s string) func() bool {
		return func() bool { code, out := p.cli("alloc", "logs", id); return code == 0 && strings.Contains(out, s) }
	}
	testutil.Eventually(t, 20*time.Second, "the first value in the task's output", logsHave("pw=one"))

	if code, out := p.cli("var", "put", "app/db", "password=two"); code != 0 {
		t.Fatalf("var put two: exit %d\n%s", code, out)
	}
	testutil.Eventually(t, 30*time.Second, "the restarted task printing the new value", logsHave("pw=two"))
	testutil.Eventually(t, 10*time.Second, "running again after one template restart", func() bool {
		l := liveOf(p.allocs(), "dbclient")
		return len(l) == 1 && l[0].ID == id && l[0].ClientStatus == model.ClientRunning && l[0].TaskStates["client"].Restarts == 1
	})
	if code, out := p.cli("var", "list", "app/"); code != 0 || out != "app/db\n" {
		t.Fatalf("var list: exit %d\n%q", code, out)
	}
	if code, out := p.cli("job", "stop", "dbclient"); code != 0 {
		t.Fatalf("job stop: exit %d\n%s", code, out)
	}
}

const webServiceJob = `job "web" {
  type = "system"
  update {
    min_healthy_time = "300ms"
    healthy_deadline = "30s"
  }
  group "g" {
    service {
      name = "web"
      port = "8080"
      tags = ["backend"]
    }
    task "web" {
      driver = "mock"
    }
  }
}
`

const ingressJob = `job "ingress" {
  type = "system"
  update {
    min_healthy_time = "300ms"
    healthy_deadline = "30s"
  }
  group "g" {
    task "lb" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo \"upstreams: $(cat \"$NOMAD_TASK_DIR/local/upstreams\")\"; exec sleep 600"]
      }
      kill_timeout = "2s"
      template {
        destination = "local/upstreams"
        data        = "{{ range nomadService \"web\" }}{{ .Port }}/{{ index .Tags 0 }} {{ end }}end"
      }
    }
  }
}
`

// TestEndToEndAnIngressTemplateFollowsTheServicesItReads: an ingress-style
// template lists the instances of a service; when the service registers
// (its job placed after the ingress), the file is rendered again and the
// task restarted with the instance in it.
func TestEndToEndAnIngressTemplateFollowsTheServicesItReads(t *testing.T) {
	p := newAgent(t, "")
	p.start()
	dir := t.TempDir()
	if code, out := p.cli("job", "run", e2eFile(t, dir, "ingress.hcl", ingressJob)); code != 0 {
		t.Fatalf("job run ingress: exit %d\n%s", code, out)
	}
	id := liveOf(p.allocs(), "ingress")[0].ID
	logsHave := func(s string) func() bool {
		return func() bool { code, out := p.cli("alloc", "logs", id); return code == 0 && strings.Contains(out, s) }
	}
	testutil.Eventually(t, 20*time.Second, "the ingress rendered with no upstream", logsHave("upstreams: end"))
	if code, out := p.cli("job", "run", e2eFile(t, dir, "web.hcl", webServiceJob)); code != 0 {
		t.Fatalf("job run web: exit %d\n%s", code, out)
	}
	testutil.Eventually(t, 30*time.Second, "the ingress restarted with the web instance", logsHave("upstreams: 8080/backend end"))
	if code, out := p.cli("service", "info", "web"); code != 0 || !strings.Contains(out, ":8080") {
		t.Fatalf("service info web: exit %d\n%s", code, out)
	}
	for _, j := range []string{"web", "ingress"} {
		if code, out := p.cli("job", "stop", j); code != 0 {
			t.Fatalf("job stop %s: exit %d\n%s", j, code, out)
		}
	}
}
