package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	dockerdrv "github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/runtime/docker/dockertest"
)

// e2eVolumeSrc is the test image's program: it reads /data/greeting (a
// host volume), tries to write /data/probe, and serves what it read, the
// write's outcome and its NOMAD_ADDR_http on :8080. Run as "/app check"
// (the job's script check, inside the container) it exits 0 when
// /data/greeting is there, 2 otherwise.
const e2eVolumeSrc = `package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "check" {
		if _, err := os.Stat("/data/greeting"); err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		fmt.Println("greeting there")
		return
	}
	b, err := os.ReadFile("/data/greeting")
	werr := os.WriteFile("/data/probe", []byte("x"), 0o644)
	fmt.Println("read", string(b), err, "write", werr)
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "%s|written=%v|%s", b, werr == nil, os.Getenv("NOMAD_ADDR_http"))
	})
	go http.ListenAndServe(":8080", nil)
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
`

func volumeJobHCL(id, image, source string) string {
	return fmt.Sprintf(`job %q {
  type = "system"
  update {
    max_parallel     = 1
    min_healthy_time = "300ms"
    healthy_deadline = "60s"
  }
  group "g" {
    network {
      port "http" {
        host_network = "loop"
        to           = 8080
      }
    }
    volume "data" {
      type      = "host"
      source    = %q
      read_only = true
    }
    task "web" {
      driver = "docker"
      config {
        image = %q
        ports = ["http"]
      }
      volume_mount {
        volume      = "data"
        destination = "/data"
      }
      service {
        name = "web"
        port = "http"
        check {
          type     = "script"
          command  = "/app"
          args     = ["check"]
          interval = "3s"
          timeout  = "3s" # a docker exec takes a while on a loaded machine
        }
      }
      kill_timeout = "5s"
    }
  }
}
`, id, source, image)
}

// TestEndToEndAHostVolumeIsMountedAndAHostNetworkPortServes runs a docker
// job with a group volume on the node's host volume and a port on a host
// network: the container reads the file the node's directory holds, cannot
// write there (the group's volume is read-only, though the mount does not
// say so), and is reached on the host network's address, which its
// NOMAD_ADDR_http names; its deployment succeeds through a script check
// run inside the container (docker exec), and the service it gates is
// registered. The same job asking for a host volume the node
// lacks places nowhere, and job run says which volume (control: the
// placement filter is the volume, not anything else). Under
// HIVELET_REQUIRE_DOCKER=1 an unreachable engine fails the test.
func TestEndToEndAHostVolumeIsMountedAndAHostNetworkPortServes(t *testing.T) {
	// Parallel (with the other end-to-end tests that mostly wait): most of
	// its time is job run's wait for a node before it says none runs the
	// control job (noNodeGrace, 15 s); its agent, NATS, ports, directories,
	// image and containers (labelled with its own job ID) are its own.
	t.Parallel()
	hiveletBinary(t)
	env := dockertest.NewEnv("e2e-volume", e2eVolumeSrc)
	defer env.Close()
	client := env.Client(t)
	jobID := "dvol-" + env.RunID
	labels := map[string]string{dockerdrv.LabelJob: jobID}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = dockertest.RemoveContainers(ctx, client, labels)
	})

	vol := t.TempDir()
	if err := os.WriteFile(filepath.Join(vol, "greeting"), []byte("hello from the node"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(vol, 0o777); err != nil { // writable by anyone: only the mount's read-only flag stops a write
		t.Fatal(err)
	}
	p := newAgent(t, "")
	p.addConfig(fmt.Sprintf("client {\n  host_volume \"shared\" {\n    path = %q\n  }\n  host_network \"loop\" {\n    cidr = \"127.0.0.0/8\"\n  }\n}\n", vol))
	p.start()
	dir := t.TempDir()
	// The node's record advertises both; node status shows them.
	if code, out := p.cli("node", "status", p.nodeID()); code != 0 || !strings.Contains(out, "Host Volumes") ||
		!regexp.MustCompile(`shared\s+`+regexp.QuoteMeta(vol)+`\s+false`).MatchString(out) || !regexp.MustCompile(`loop\s+127\.0\.0\.1\s+127\.0\.0\.0/8`).MatchString(out) {
		t.Fatalf("node status: exit %d\n%s", code, out)
	}

	// Control first: a volume the node does not offer.
	code, out := p.cli("job", "run", "-timeout", "20s", e2eFile(t, dir, "missing.hcl", volumeJobHCL(jobID+"-x", env.Tag, "sharde")))
	if code != 1 || !strings.Contains(out, `excluded by host volume: "sharde" missing (did you mean shared?)`) {
		t.Fatalf("job run needing a host volume the node lacks: exit %d\n%s", code, out)
	}

	if code, out := p.cli("job", "run", e2eFile(t, dir, "v1.hcl", volumeJobHCL(jobID, env.Tag, "shared"))); code != 0 || !strings.Contains(out, "deployment successful") {
		t.Fatalf("job run: exit %d\n%s\nagent log:\n%s", code, out, p.logText())
	}
	live := liveOf(p.allocs(), jobID)
	if len(live) != 1 || len(live[0].Ports) != 1 {
		t.Fatalf("live allocations: %+v", live)
	}
	port := live[0].Ports[0]
	if port.HostIP != "127.0.0.1" {
		t.Fatalf("port %+v: want it on the host network's address 127.0.0.1", port)
	}
	addr := port.Addr()
	var body string
	testutil.Eventually(t, 20*time.Second, "the container answering on "+addr, func() bool {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == 200
	})
	if want := "hello from the node|written=false|" + addr; body != want {
		t.Fatalf("the container said %q, want %q", body, want)
	}
	if _, err := os.Stat(filepath.Join(vol, "probe")); err == nil {
		t.Fatal("the container wrote into a read-only host volume")
	}
	if code, out := p.cli("service", "info", "web"); code != 0 || !strings.Contains(out, addr) {
		t.Fatalf("service list: exit %d\n%s", code, out)
	}
	if code, out := p.cli("job", "stop", jobID); code != 0 {
		t.Fatalf("job stop: exit %d\n%s", code, out)
	}
}
