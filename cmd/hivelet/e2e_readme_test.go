package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	dockerdrv "github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/runtime/docker/dockertest"
)

// TestEndToEndTheREADMEsFirstSessionWorksAsWritten runs README.md's "A
// first session" on the real docker engine: the example program
// (examples/web, built here the way build.sh builds it, a static binary in
// a FROM scratch image, with no root and no host directory to prepare) and
// examples/jobs/web.hcl, changed only where two runs on one machine must
// differ: the job's name, the image's tag and the static port. validate
// accepts it, plan says it would place (exit 1, Nomad's convention), run
// ends with a successful deployment, the container answers on the port and
// serves the page its template rendered, the service is registered, alloc
// logs prints the server's own output (its start and the requests just
// made), and stop -purge removes the job.
func TestEndToEndTheREADMEsFirstSessionWorksAsWritten(t *testing.T) {
	// Parallel (with the other end-to-end tests that mostly wait): its time
	// is mostly the engine's and the deployment's; its agent, NATS, ports
	// (the job's static one included), directories, image and job-labelled
	// containers are its own, and nothing it checks depends on how fast it
	// went.
	t.Parallel()
	src, err := os.ReadFile("../../examples/web/main.go")
	if err != nil {
		t.Fatal(err)
	}
	hclSrc, err := os.ReadFile("../../examples/jobs/web.hcl")
	if err != nil {
		t.Fatal(err)
	}
	hiveletBinary(t)
	env := dockertest.NewEnv("e2e-readme", string(src))
	defer env.Close()
	client := env.Client(t)
	jobID := "readme-" + env.RunID
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = dockertest.RemoveContainers(ctx, client, map[string]string{dockerdrv.LabelJob: jobID})
	})
	port := testutil.FreePort(t)
	job := string(hclSrc)
	for old, repl := range map[string]string{`job "web" {`: fmt.Sprintf("job %q {", jobID), `"hivelet/web:local"`: fmt.Sprintf("%q", env.Tag),
		"static = 8080": fmt.Sprintf("static = %d", port)} {
		if !strings.Contains(job, old) {
			t.Fatalf("examples/jobs/web.hcl no longer has %q: update this test with the README", old)
		}
		job = strings.Replace(job, old, repl, 1)
	}
	file := e2eFile(t, t.TempDir(), "web.hcl", job)

	p := newAgent(t, "")
	p.addConfig("network {\n  address = \"127.0.0.1\"\n}\nname = \"readme-node\"\n")
	p.start()
	// The README's session runs with the agent up for a while: its node
	// record carries the docker driver once the plugin's first fingerprint
	// is in (the node registers as soon as its plugins are launched).
	testutil.Eventually(t, 30*time.Second, "the node's record with the docker driver", func() bool {
		resp, err := http.Get("http://" + p.apiAddr + "/v1/node")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `"driver.docker": "1"`)
	})
	// validate reads no fleet: no -nats.
	if out, err := exec.Command(p.bin, "job", "validate", file).CombinedOutput(); err != nil || !strings.Contains(string(out), "OK: system job") {
		t.Fatalf("job validate: %v\n%s", err, out)
	}
	if code, out := p.cli("job", "plan", file); code != 1 || !strings.Contains(out, "place 1") {
		t.Fatalf("job plan of the new job: exit %d, want 1 (it would place)\n%s", code, out)
	}
	if code, out := p.cli("job", "run", file); code != 0 || !strings.Contains(out, "deployment successful") {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := get("/"); got != "hello from readme-node (datacenter dc1)\n" {
		t.Errorf("GET /: %q", got)
	}
	if got := get("/static/index.txt"); got != fmt.Sprintf("hello from readme-node, port %d\n", port) {
		t.Errorf("GET /static/index.txt (the rendered template): %q", got)
	}
	if code, out := p.cli("service", "info", "web"); code != 0 || !strings.Contains(out, fmt.Sprintf("127.0.0.1:%d", port)) {
		t.Errorf("service info web: exit %d\n%s", code, out)
	}
	live := liveOf(p.allocs(), jobID)
	if len(live) != 1 {
		t.Fatalf("live allocations: %+v", live)
	}
	var logs string
	testutil.Eventually(t, 20*time.Second, "the server's start and requests in alloc logs", func() bool {
		var code int
		code, logs = p.cli("alloc", "logs", live[0].ID[:8])
		return code == 0 && strings.Contains(logs, fmt.Sprintf("listening on :%d", port)) && strings.Contains(logs, "GET /static/index.txt from ")
	})
	if strings.Contains(logs, "/health") {
		t.Errorf("alloc logs carries the health checks:\n%s", logs)
	}
	if code, out := p.cli("job", "stop", "-purge", jobID); code != 0 || !strings.Contains(out, "purged") {
		t.Fatalf("job stop -purge: exit %d\n%s", code, out)
	}
	if code, out := p.cli("job", "status", jobID); code == 0 {
		t.Errorf("job status after the purge: exit 0\n%s", out)
	}
}
