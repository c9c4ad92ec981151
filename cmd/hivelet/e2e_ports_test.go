package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
	dockerdrv "github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/runtime/docker/dockertest"
)

// exporterJobHCL is the shape of a node exporter–style community system
// job: a group network with a static port label, docker ports = ["label"],
// the task told its port through ${NOMAD_PORT_label}, and a service whose
// http check names the label. A dynamic "admin" port rides along.
func exporterJobHCL(id, image string, static int) string {
	return fmt.Sprintf(`job %q {
  region      = "global"
  datacenters = ["dc1"]
  type        = "system"

  update {
    min_healthy_time = "300ms"
    healthy_deadline = "60s"
  }

  group "exporter" {
    network {
      port "metrics" {
        static = %d
      }
      port "admin" {}
    }

    task "exporter" {
      driver = "docker"
      config {
        image = %q
        args  = ["serve", "${NOMAD_PORT_metrics}"]
        ports = ["metrics"]
      }
      service {
        name = "exporter"
        port = "metrics"
        tags = ["metrics"]
        check {
          type     = "http"
          path     = "/"
          interval = "1s"
          timeout  = "1s"
        }
      }
    }
  }
}
`, id, static, image)
}

// dynamicJobHCL serves on a dynamic port mapped to container port 8080.
func dynamicJobHCL(id, image string) string {
	return fmt.Sprintf(`job %q {
  type = "system"
  update {
    min_healthy_time = "300ms"
    healthy_deadline = "60s"
  }
  group "g" {
    network {
      port "http" {
        to = 8080
      }
    }
    task "web" {
      driver = "docker"
      config {
        image = %q
        args  = ["serve", "${NOMAD_PORT_http}"]
        ports = ["http"]
      }
      env {
        SELF = "${NOMAD_ADDR_http}"
      }
    }
  }
}
`, id, image)
}

// addConfig appends HCL to the agent's configuration file (before start).
func (p *agentProc) addConfig(hcl string) {
	p.t.Helper()
	cfg, err := os.ReadFile(p.cfgPath)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(p.cfgPath, append(cfg, hcl...), 0o600); err != nil {
		p.t.Fatal(err)
	}
}

func hello(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.HasPrefix(string(b), "hello ")
}

func portOf(t *testing.T, a *model.Allocation, label string) model.AllocatedPort {
	t.Helper()
	p, ok := a.LookupPort(label)
	if !ok {
		t.Fatalf("allocation %s records no port %q: %+v", a.ID, label, a.Ports)
	}
	return p
}

// TestEndToEndPortsAreReachableNeverSharedAndKeptAcrossARestart runs the
// agent binary on the real docker engine: a node exporter–style job's
// static port answers on 127.0.0.1; two jobs' dynamic ports differ and come
// from the configured range; after a normal agent restart every allocation
// keeps its ports, its container, and answers on the same port.
func TestEndToEndPortsAreReachableNeverSharedAndKeptAcrossARestart(t *testing.T) {
	hiveletBinary(t)
	env := dockertest.NewEnv("e2e-ports", dockertest.Program)
	defer env.Close()
	client := env.Client(t)
	exporter, dyn := "exp-"+env.RunID, "dyn-"+env.RunID
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, j := range []string{exporter, dyn} {
			_ = dockertest.RemoveContainers(ctx, client, map[string]string{dockerdrv.LabelJob: j})
		}
	})
	containerOf := func(job string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		list, err := client.ListContainers(ctx, map[string]string{dockerdrv.LabelJob: job})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list {
			if c.State == "running" {
				return c.ID
			}
		}
		return ""
	}

	p := newAgent(t, "")
	const lo, hi = 41000, 41999
	p.addConfig(fmt.Sprintf("network {\n  address = \"127.0.0.1\"\n  min_dynamic_port = %d\n  max_dynamic_port = %d\n}\n", lo, hi))
	p.start()
	dir := t.TempDir()
	static := testutil.FreePort(t)

	// The job's service check probes the label: the deployment succeeds
	// only if the port answers where the node says it is.
	if code, out := p.cli("job", "run", e2eFile(t, dir, "exporter.hcl", exporterJobHCL(exporter, env.Tag, static))); code != 0 || !strings.Contains(out, "deployment successful") {
		t.Fatalf("job run exporter: exit %d\n%s", code, out)
	}
	if !hello("http://127.0.0.1:" + strconv.Itoa(static) + "/") {
		t.Fatalf("the static port %d does not answer on 127.0.0.1", static)
	}
	// Its service is registered at the address of its label once the
	// check passes.
	testutil.Eventually(t, 20*time.Second, "the exporter service registered", func() bool {
		code, out := p.cli("service", "info", "exporter")
		return code == 0 && strings.Contains(out, "127.0.0.1:"+strconv.Itoa(static)) && strings.Contains(out, "metrics")
	})
	if code, out := p.cli("service", "list"); code != 0 || !strings.Contains(out, "exporter") {
		t.Fatalf("service list: exit %d\n%s", code, out)
	}
	if code, out := p.cli("job", "run", e2eFile(t, dir, "dyn.hcl", dynamicJobHCL(dyn, env.Tag))); code != 0 || !strings.Contains(out, "deployment successful") {
		t.Fatalf("job run dyn: exit %d\n%s", code, out)
	}
	expAlloc, dynAlloc := liveOf(p.allocs(), exporter), liveOf(p.allocs(), dyn)
	if len(expAlloc) != 1 || len(dynAlloc) != 1 {
		t.Fatalf("live allocations: exporter %+v, dyn %+v", expAlloc, dynAlloc)
	}
	metrics, admin, httpPort := portOf(t, expAlloc[0], "metrics"), portOf(t, expAlloc[0], "admin"), portOf(t, dynAlloc[0], "http")
	if metrics.Value != static || metrics.HostIP != "127.0.0.1" {
		t.Fatalf("metrics port %+v, want static %d on 127.0.0.1", metrics, static)
	}
	for _, d := range []model.AllocatedPort{admin, httpPort} {
		if d.Value < lo || d.Value > hi {
			t.Fatalf("dynamic port %+v outside the configured range %d-%d", d, lo, hi)
		}
	}
	if admin.Value == httpPort.Value {
		t.Fatalf("two allocations were given the same dynamic port %d", admin.Value)
	}
	dynURL := "http://127.0.0.1:" + strconv.Itoa(httpPort.Value) + "/"
	if httpPort.To != 8080 || !hello(dynURL) {
		t.Fatalf("dynamic port %+v does not answer at %s", httpPort, dynURL)
	}
	containers := map[string]string{exporter: containerOf(exporter), dyn: containerOf(dyn)}

	// A normal shutdown leaves the containers running; the restarted agent
	// reattaches and keeps every allocation's ports.
	p.signal(syscall.SIGTERM)
	p.start()
	testutil.Eventually(t, 30*time.Second, "both allocations reattached and running", func() bool {
		n := 0
		for _, j := range []string{exporter, dyn} {
			if l := liveOf(p.allocs(), j); len(l) == 1 && l[0].ClientStatus == model.ClientRunning {
				n++
			}
		}
		return n == 2
	})
	after := liveOf(p.allocs(), dyn)[0]
	if after.ID != dynAlloc[0].ID || portOf(t, after, "http") != httpPort {
		t.Fatalf("after the restart: %s %+v, before %s %+v", after.ID, after.Ports, dynAlloc[0].ID, httpPort)
	}
	if got := portOf(t, liveOf(p.allocs(), exporter)[0], "admin"); got != admin {
		t.Fatalf("exporter's dynamic port changed across the restart: %+v, before %+v", got, admin)
	}
	for j, id := range containers {
		if got := containerOf(j); got != id {
			t.Fatalf("job %s: container %s after the restart, %s before: a restart must not replace it", j, got, id)
		}
	}
	if !hello(dynURL) || !hello("http://127.0.0.1:"+strconv.Itoa(static)+"/") {
		t.Fatal("the ports stopped answering after the restart")
	}

	for _, j := range []string{exporter, dyn} {
		if code, out := p.cli("job", "stop", j); code != 0 {
			t.Fatalf("job stop %s: exit %d\n%s", j, code, out)
		}
	}
	testutil.Eventually(t, 30*time.Second, "no container running", func() bool { return containerOf(exporter) == "" && containerOf(dyn) == "" })
	// Stopped, its service is gone.
	testutil.Eventually(t, 20*time.Second, "the exporter service deregistered", func() bool {
		code, out := p.cli("service", "info", "exporter")
		return code == 1 && strings.Contains(out, `no instance of service "exporter"`)
	})
}
