package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	dockerdrv "github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/runtime/docker/dockertest"
)

// bridgeJobHCL is Nomad's bridge-mode shape: the group's ports are mapped
// into the task's own network (a static one and a dynamic one, each to
// port 8080 or 9090 inside) with no docker ports = [...] in the config.
func bridgeJobHCL(id, image string, static int) string {
	return fmt.Sprintf(`job %q {
  type = "system"
  update {
    min_healthy_time = "300ms"
    healthy_deadline = "60s"
  }
  group "edge" {
    network {
      mode = "bridge"
      port "http" {
        static = %d
        to     = 8080
      }
      port "alt" {
        to = 8080
      }
    }
    task "edge" {
      driver = "docker"
      config {
        image = %q
        args  = ["serve", "8080"]
      }
    }
  }
}
`, id, static, image)
}

// TestEndToEndABridgeGroupsPortsAreMappedIntoItsTask: on the real engine,
// a bridge-mode group's task, whose config names no port, answers on the
// node at its static port and at its dynamic one, both mapped to the port
// it listens on inside its own network; a bridge group with an exec task is
// refused by job validate.
func TestEndToEndABridgeGroupsPortsAreMappedIntoItsTask(t *testing.T) {
	hiveletBinary(t)
	env := dockertest.NewEnv("e2e-bridge", dockertest.Program)
	defer env.Close()
	client := env.Client(t)
	id := "bridge-" + env.RunID
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = dockertest.RemoveContainers(ctx, client, map[string]string{dockerdrv.LabelJob: id})
	})
	p := newAgent(t, "")
	p.addConfig("network {\n  address = \"127.0.0.1\"\n}\n")
	p.start()
	dir := t.TempDir()
	static := testutil.FreePort(t)
	if code, out := p.cli("job", "run", e2eFile(t, dir, "bridge.hcl", bridgeJobHCL(id, env.Tag, static))); code != 0 || !strings.Contains(out, "deployment successful") {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	live := liveOf(p.allocs(), id)
	if len(live) != 1 {
		t.Fatalf("live: %+v", live)
	}
	alt := portOf(t, live[0], "alt")
	if alt.Value == static || alt.InTask() != 8080 {
		t.Fatalf("the dynamic port %+v", alt)
	}
	for _, port := range []int{static, alt.Value} {
		url := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
		testutil.Eventually(t, 20*time.Second, "the task answering at "+url, func() bool { return hello(url) })
	}

	bad := strings.Replace(strings.Replace(bridgeJobHCL("bad", env.Tag, static), `driver = "docker"`, `driver = "exec"`, 1), `image = `, `command = `, 1)
	out, err := exec.Command(hiveletBinary(t), "job", "validate", e2eFile(t, dir, "bad.hcl", bad)).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), `network mode "bridge" needs the docker driver`) {
		t.Fatalf("job validate of a bridge exec task: %v\n%s", err, out)
	}
	if code, out := p.cli("job", "stop", id); code != 0 {
		t.Fatalf("job stop: exit %d\n%s", code, out)
	}
}
