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

// e2eWebSrc is the program of the test image: it prints its argument and
// runs until signalled.
const e2eWebSrc = `package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	fmt.Println("web", os.Args[1:])
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
`

func dockerJobHCL(id, image, msg string) string {
	return fmt.Sprintf(`job %q {
  type = "system"
  update {
    max_parallel     = 1
    min_healthy_time = "300ms"
    healthy_deadline = "60s"
  }
  group "g" {
    count = 1
    task "web" {
      driver = "docker"
      config {
        image = %q
        args  = [%q, "${node.unique.name}"]
      }
      kill_timeout = "5s"
    }
  }
}
`, id, image, msg)
}

// TestEndToEndDockerContainersRunAreReplacedAndGone runs the agent binary
// with the docker driver on the real engine. Under HIVELET_REQUIRE_DOCKER=1
// an unreachable engine fails the test instead of skipping it.
func TestEndToEndDockerContainersRunAreReplacedAndGone(t *testing.T) {
	hiveletBinary(t)
	env := dockertest.NewEnv("e2e-web", e2eWebSrc)
	defer env.Close()
	client := env.Client(t)
	jobID := "dweb-" + env.RunID
	labels := map[string]string{dockerdrv.LabelJob: jobID}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = dockertest.RemoveContainers(ctx, client, labels)
	})
	running := func() []string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		list, err := client.ListContainers(ctx, labels)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range list {
			if c.State == "running" {
				ids = append(ids, c.ID)
			}
		}
		return ids
	}

	p := newAgent(t, "")
	p.start()
	dir := t.TempDir()
	if code, out := p.cli("job", "run", e2eFile(t, dir, "v1.hcl", dockerJobHCL(jobID, env.Tag, "v1"))); code != 0 || !strings.Contains(out, "deployment successful") {
		t.Fatalf("job run v1: exit %d\n%s", code, out)
	}
	first := running()
	if len(first) != 1 {
		t.Fatalf("after v1: %d running containers, want 1", len(first))
	}
	live := liveOf(p.allocs(), jobID)
	if len(live) != 1 {
		t.Fatalf("live allocations: %+v", live)
	}
	testutil.Eventually(t, 10*time.Second, "container output in the alloc logs", func() bool {
		code, out := p.cli("alloc", "logs", live[0].ID)
		return code == 0 && strings.Contains(out, "web [v1")
	})

	if code, out := p.cli("job", "run", e2eFile(t, dir, "v2.hcl", dockerJobHCL(jobID, env.Tag, "v2"))); code != 0 {
		t.Fatalf("job run v2: exit %d\n%s", code, out)
	}
	second := running()
	if len(second) != 1 || second[0] == first[0] {
		t.Fatalf("after v2: running %v, before %v: want one new container", second, first)
	}

	if code, out := p.cli("job", "stop", jobID); code != 0 {
		t.Fatalf("job stop: exit %d\n%s", code, out)
	}
	testutil.Eventually(t, 30*time.Second, "no container running", func() bool { return len(running()) == 0 })
}
