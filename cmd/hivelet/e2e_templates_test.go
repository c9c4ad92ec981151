package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	dockerdrv "github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/runtime/docker/dockertest"
)

// templateJobHCL renders a config file from the allocation's port and the
// node's name, and an env file, for a docker task that prints the file and
// the variable: the shape of a log shipper configured by a template.
func templateJobHCL(id, image string) string {
	return fmt.Sprintf(`variable "greeting" {
  default = "hello"
}

job %q {
  type = "system"
  update {
    min_healthy_time = "300ms"
    healthy_deadline = "60s"
  }
  group "g" {
    network {
      port "http" {}
    }
    task "shipper" {
      driver = "docker"
      config {
        image = %q
        args  = ["cat", "/local/shipper.yml", "/secrets/shipper.env"]
      }
      template {
        destination = "local/shipper.yml"
        data        = <<EOT
server:
  http_listen_port: {{ env "NOMAD_PORT_http" }}
  node: {{ env "node.unique.name" }}
EOT
      }
      template {
        destination = "secrets/shipper.env"
        env         = true
        data        = "GREETING=${var.greeting}\n"
      }
    }
  }
}
`, id, image)
}

// TestEndToEndATemplateIsRenderedAndMountedIntoTheContainer runs the agent
// binary on the real docker engine: the rendered file, holding the
// allocation's dynamic port and the node's name, is read by the container
// at /local, the env file at /secrets; -var overrides the variable used in
// the template's data.
func TestEndToEndATemplateIsRenderedAndMountedIntoTheContainer(t *testing.T) {
	hiveletBinary(t)
	env := dockertest.NewEnv("e2e-tpl", dockertest.Program)
	defer env.Close()
	client := env.Client(t)
	jobID := "tpl-" + env.RunID
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = dockertest.RemoveContainers(ctx, client, map[string]string{dockerdrv.LabelJob: jobID})
	})
	p := newAgent(t, "")
	p.addConfig("network {\n  address = \"127.0.0.1\"\n  min_dynamic_port = 42000\n  max_dynamic_port = 42999\n}\nname = \"tpl-node\"\n")
	p.start()
	file := e2eFile(t, t.TempDir(), "shipper.hcl", templateJobHCL(jobID, env.Tag))
	if code, out := p.cli("job", "run", file, "-var", "greeting=bonjour"); code != 0 || !strings.Contains(out, "deployment successful") {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	live := liveOf(p.allocs(), jobID)
	if len(live) != 1 {
		t.Fatalf("live allocations: %+v", live)
	}
	port := portOf(t, live[0], "http")
	want := fmt.Sprintf("server:\n  http_listen_port: %d\n  node: tpl-node\nGREETING=bonjour\ndone", port.Value)
	testutil.Eventually(t, 20*time.Second, "the rendered files in the container's output", func() bool {
		code, out := p.cli("alloc", "logs", live[0].ID)
		return code == 0 && strings.Contains(out, want)
	})
	if code, out := p.cli("job", "stop", jobID); code != 0 {
		t.Fatalf("job stop: exit %d\n%s", code, out)
	}
}
