package main

// End-to-end tests: the hivelet binary, built once by the test, runs as an
// agent subprocess (embedded or external NATS, the real plugin manager
// re-executing the binary for the built-in drivers) and as the CLI.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/fleettest"
	"github.com/hivelet/hivelet/internal/testutil"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// hiveletBinary is the binary the end-to-end tests run (sharedBinary); it
// skips the test with -short.
func hiveletBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	return sharedBinary(t)
}

// sharedBinary builds the hivelet binary once per test process and returns
// its path: every test that runs the real binary (an agent, the CLI, the
// plugin manager re-executing it) shares this one build.
func sharedBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		// One path per source tree, replaced atomically by each test
		// process of that tree: no binary is left behind per run, a binary
		// another process is running keeps its inode, and the agents
		// spawned here run this tree's build, never one another checkout
		// of the module (a worktree next to this one) put in its place.
		wd, err := os.Getwd()
		if err != nil {
			binErr = err
			return
		}
		tree := sha256.Sum256([]byte(wd))
		dir := filepath.Join(os.TempDir(), "hivelet-e2e-bin-"+hex.EncodeToString(tree[:6]))
		if binErr = os.MkdirAll(dir, 0o755); binErr != nil {
			return
		}
		tmp, err := os.CreateTemp(dir, "build-")
		if err != nil {
			binErr = err
			return
		}
		tmp.Close()
		// Built as the fleet image's binary is (fleettest.BuildStatic:
		// static, the same flags), so that the packages' test processes
		// share one compile of the module; a build of its own (cgo, full
		// paths) cost 250 CPU-seconds more from a cold cache.
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		if binErr = fleettest.BuildStatic(ctx, ".", tmp.Name(), "."); binErr != nil {
			os.Remove(tmp.Name())
			return
		}
		binPath = filepath.Join(dir, "hivelet")
		binErr = os.Rename(tmp.Name(), binPath)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// agentProc is one agent subprocess.
type agentProc struct {
	t       *testing.T
	bin     string
	dir     string
	cfgPath string
	natsURL string
	apiAddr string
	cmd     *exec.Cmd
	logf    *os.File
	done    chan struct{}
	// owned are the PIDs of processes this test started through the agent
	// (plugins, exec tasks), ended by ID at cleanup.
	owned map[int]bool
	// env is added to the agent's environment (its plugins inherit it).
	env []string
}

// newAgent prepares an agent with its own state directory; natsURL empty
// means an embedded server on a free port.
func newAgent(t *testing.T, natsURL string) *agentProc {
	bin := hiveletBinary(t)
	dir := testutil.ShortTempDir(t, "hv-e2e-") // short: plugin socket paths are limited
	// Searchable by others (as /var/lib is): exec tasks run as nobody.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	p := &agentProc{t: t, bin: bin, dir: dir, apiAddr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), owned: map[int]bool{}}
	var cfg string
	if natsURL == "" {
		port := testutil.FreePort(t)
		p.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", port)
		cfg = fmt.Sprintf("http {\n  address = %q\n}\nnats {\n  embedded_port = %d\n}\n", p.apiAddr, port)
	} else {
		p.natsURL = natsURL
		cfg = fmt.Sprintf("http {\n  address = %q\n}\nnats {\n  urls = [%q]\n  node_ttl = \"30s\"\n}\n", p.apiAddr, natsURL)
	}
	p.cfgPath = filepath.Join(dir, "agent.hcl")
	if err := os.WriteFile(p.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.cleanup)
	return p
}

func (p *agentProc) start() { p.startWith("-no-policies") }

// spawn runs the agent binary with args, its output appended to agent.log,
// without waiting for it to serve.
func (p *agentProc) spawn(args ...string) {
	p.t.Helper()
	f, err := os.OpenFile(filepath.Join(p.dir, "agent.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		p.t.Fatal(err)
	}
	p.logf = f
	p.cmd = exec.Command(p.bin, append([]string{"agent"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if len(p.env) > 0 {
		p.cmd.Env = append(os.Environ(), p.env...)
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.done = make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(p.done) }()
}

// startWith spawns the agent on its state directory and config with extra
// flags and waits for its API, then notes its plugins.
func (p *agentProc) startWith(flags ...string) {
	p.t.Helper()
	p.spawn(append([]string{"-state-dir", filepath.Join(p.dir, "state"), "-config", p.cfgPath, "-log-level", "debug"}, flags...)...)
	testutil.Eventually(p.t, 30*time.Second, "agent API up", func() bool {
		resp, err := http.Get("http://" + p.apiAddr + "/v1/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	p.notePlugins()
}

// notePlugins records the PIDs of the agent's plugin processes.
func (p *agentProc) notePlugins() {
	resp, err := http.Get("http://" + p.apiAddr + "/v1/plugins")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	var rows []struct {
		PID int `json:"pid"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&rows)
	for _, r := range rows {
		if r.PID > 0 {
			p.owned[r.PID] = true
		}
	}
}

// killOwned ends, by ID, the processes this test started (checking the
// command line, so a reused PID is left alone).
func (p *agentProc) killOwned() {
	for pid := range p.owned {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		if strings.Contains(string(cmdline), p.bin) || strings.Contains(string(cmdline), "sleep") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// signal sends sig to the agent process only (not its plugins) and waits for
// it to exit.
func (p *agentProc) signal(sig syscall.Signal) {
	p.t.Helper()
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		p.t.Fatalf("agent did not exit after %v", sig)
	}
	p.logf.Close()
}

func (p *agentProc) cleanup() {
	if p.cmd != nil && p.cmd.Process != nil {
		select {
		case <-p.done:
		default:
			p.notePlugins()
		}
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
				_ = p.cmd.Process.Kill()
			}
		}
	}
	// Plugins outlive a normal shutdown by design: end this test's ones.
	p.killOwned()
	if p.t.Failed() {
		b, _ := os.ReadFile(filepath.Join(p.dir, "agent.log"))
		if len(b) > 20000 {
			b = b[len(b)-20000:]
		}
		p.t.Logf("agent log (tail):\n%s", b)
	}
}

// cli runs the CLI against the agent's NATS; it returns the exit code and
// the combined output.
func (p *agentProc) cli(args ...string) (int, string) {
	p.t.Helper()
	args = append(args, "-nats", p.natsURL)
	if len(args) > 1 && args[0] == "job" && (args[1] == "run" || args[1] == "stop") && !strings.Contains(strings.Join(args, " "), "-timeout") {
		args = append(args, "-timeout", "90s") // never the 15 min default in a test
	}
	cmd := exec.Command(p.bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		p.t.Fatalf("running %v: %v", args, err)
	}
	return code, out.String()
}

func (p *agentProc) allocs() []*model.Allocation {
	resp, err := http.Get("http://" + p.apiAddr + "/v1/allocations")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var out []*model.Allocation
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out
}

func liveOf(allocs []*model.Allocation, job string) []*model.Allocation {
	var out []*model.Allocation
	for _, a := range allocs {
		if a.JobID == job && !a.Terminal() {
			out = append(out, a)
		}
	}
	return out
}

func e2eFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mockJobHCL(stdout string, extra string) string {
	return fmt.Sprintf(`job "web" {
  type = "system"
  update {
    max_parallel     = 1
    min_healthy_time = "300ms"
    healthy_deadline = "20s"
  }
  group "g" {
    count = 1
    restart {
      attempts = 0
      interval = "1m"
      delay    = "100ms"
      mode     = "fail"
    }
    task "t" {
      driver = "mock"
      config {
        stdout_string = %q
        %s
      }
    }
  }
}
`, stdout, extra)
}

func TestEndToEndMockJobRunUpdateStopWithExitCodes(t *testing.T) {
	// Parallel: an agent of its own (embedded NATS, ports, directories),
	// mock tasks only.
	t.Parallel()
	p := newAgent(t, "")
	p.start()
	dir := t.TempDir()

	// Bad input: exit code 2.
	if code, out := p.cli("job", "run", e2eFile(t, dir, "bad.hcl", `job "x" { type = "service" }`)); code != 2 {
		t.Fatalf("bad job file: exit %d, want 2\n%s", code, out)
	}

	code, out := p.cli("job", "run", e2eFile(t, dir, "v1.hcl", mockJobHCL("hello v1", "")))
	if code != 0 || !strings.Contains(out, "deployment successful") {
		t.Fatalf("job run v1: exit %d\n%s", code, out)
	}
	live := liveOf(p.allocs(), "web")
	if len(live) != 1 || live[0].ClientStatus != model.ClientRunning {
		t.Fatalf("after v1: %+v", live)
	}
	first := live[0]
	if code, out := p.cli("alloc", "logs", first.ID[:8]); code != 0 || !strings.Contains(out, "hello v1") {
		t.Fatalf("alloc logs: exit %d\n%s", code, out)
	}
	// Running the same file again changes nothing.
	if code, out := p.cli("job", "run", "-detach", filepath.Join(dir, "v1.hcl")); code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("re-run: exit %d\n%s", code, out)
	}

	code, out = p.cli("job", "run", e2eFile(t, dir, "v2.hcl", mockJobHCL("hello v2", "")))
	if code != 0 || !strings.Contains(out, "version 1 written") {
		t.Fatalf("job run v2: exit %d\n%s", code, out)
	}
	live = liveOf(p.allocs(), "web")
	if len(live) != 1 || live[0].ID == first.ID || live[0].JobVersion != 1 || live[0].PreviousAllocation != first.ID {
		t.Fatalf("after v2: %+v", live)
	}
	if code, out := p.cli("job", "history", "web"); code != 0 || strings.Count(out, "put") != 2 {
		t.Fatalf("history: exit %d\n%s", code, out)
	}
	if code, out := p.cli("job", "status", "web"); code != 0 || !strings.Contains(out, "successful") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}

	// A version that cannot start: the deployment fails, exit code 1.
	code, out = p.cli("job", "run", "-timeout", "60s", e2eFile(t, dir, "v3.hcl", mockJobHCL("v3", `start_error = "boom"`)))
	if code != 1 || !strings.Contains(out, "failed") {
		t.Fatalf("failing version: exit %d, want 1\n%s", code, out)
	}

	code, out = p.cli("job", "stop", "-purge", "web")
	if code != 0 || !strings.Contains(out, "purged") {
		t.Fatalf("job stop -purge: exit %d\n%s", code, out)
	}
	if l := liveOf(p.allocs(), "web"); len(l) != 0 {
		t.Fatalf("after stop: %+v", l)
	}
	if code, out := p.cli("job", "status", "web"); code != 2 {
		t.Fatalf("status of a purged job: exit %d, want 2\n%s", code, out)
	}
}

func execJobHCL(tag string) string {
	return fmt.Sprintf(`job "sleeper" {
  type = "system"
  update {
    max_parallel     = 1
    min_healthy_time = "200ms"
  }
  group "g" {
    count = 1
    task "s" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo $$ >> ${NOMAD_ALLOC_DIR}/pids; exec sleep 300"]
      }
      env {
        TAG = %q
      }
      kill_timeout = "2s"
    }
  }
}
`, tag)
}

func readPIDs(t *testing.T, path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestEndToEndAgentKilledWithSIGKILLRestartsNoTask(t *testing.T) {
	p := newAgent(t, "")
	p.start()
	dir := t.TempDir()
	if code, out := p.cli("job", "run", e2eFile(t, dir, "s.hcl", execJobHCL("a"))); code != 0 {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	live := liveOf(p.allocs(), "sleeper")
	if len(live) != 1 {
		t.Fatalf("live: %+v", live)
	}
	alloc := live[0]
	pidFile := filepath.Join(p.dir, "state", "alloc", alloc.ID, "pids")
	testutil.Eventually(t, 10*time.Second, "pid written", func() bool { return len(readPIDs(t, pidFile)) == 1 })
	pid := readPIDs(t, pidFile)[0]
	p.owned[pid] = true

	p.signal(syscall.SIGKILL)
	if !alive(pid) {
		t.Fatal("the task died with the agent")
	}
	killed := time.Now()
	p.start()
	testutil.Eventually(t, 30*time.Second, "reattached and running", func() bool {
		l := liveOf(p.allocs(), "sleeper")
		if len(l) != 1 || l[0].ID != alloc.ID || l[0].ClientStatus != model.ClientRunning {
			return false
		}
		for _, e := range l[0].TaskStates["s"].Events {
			if e.Type == "Reattached" {
				return true
			}
		}
		return false
	})
	t.Logf("SIGKILL → restarted agent reattached to the running task: %v (agent start included)", time.Since(killed).Round(time.Millisecond))
	p.waitPasses(2) // the agent's chances to restart it wrongly
	if pids := readPIDs(t, pidFile); len(pids) != 1 || !alive(pid) {
		t.Fatalf("task restarted across the agent's SIGKILL: pids %v, original alive %v", pids, alive(pid))
	}
	if l := liveOf(p.allocs(), "sleeper"); len(l) != 1 || l[0].TaskStates["s"].Restarts != 0 {
		t.Fatalf("state after restart: %+v", l)
	}

	// SIGTERM (normal shutdown) leaves it running too; the restarted agent
	// then replaces it on a task change (control: the agent does act).
	p.signal(syscall.SIGTERM)
	if !alive(pid) {
		t.Fatal("a normal shutdown stopped the task")
	}
	p.start()
	if code, out := p.cli("job", "run", e2eFile(t, dir, "s2.hcl", execJobHCL("b"))); code != 0 {
		t.Fatalf("job run v2: exit %d\n%s", code, out)
	}
	testutil.Eventually(t, 10*time.Second, "old process stopped", func() bool { return !alive(pid) })
	if code, out := p.cli("job", "stop", "sleeper"); code != 0 {
		t.Fatalf("job stop: exit %d\n%s", code, out)
	}
}

func TestEndToEndNATSRestartedUnderARunningAgentReconnectsAndConverges(t *testing.T) {
	hiveletBinary(t)
	storeDir := t.TempDir()
	port := testutil.FreePort(t)
	startNATS := func() *fleet.Embedded {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		emb, err := fleet.StartEmbedded(ctx, fleet.EmbeddedConfig{StoreDir: storeDir, Port: port, ServerName: "e2e-nats"})
		if err != nil {
			t.Fatal(err)
		}
		return emb
	}
	emb := startNATS()
	p := newAgent(t, fmt.Sprintf("nats://127.0.0.1:%d", port))
	p.start()
	dir := t.TempDir()
	if code, out := p.cli("job", "run", e2eFile(t, dir, "v1.hcl", mockJobHCL("one", ""))); code != 0 {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	first := liveOf(p.allocs(), "web")
	emb.Shutdown()
	// Cut off from NATS, the node keeps running what it last knew, pass
	// after pass.
	p.waitPasses(2)
	if l := liveOf(p.allocs(), "web"); len(first) != 1 || len(l) != 1 || l[0].ID != first[0].ID || l[0].ClientStatus != model.ClientRunning {
		t.Fatalf("without NATS: before %+v, now %+v", first, l)
	}
	emb = startNATS()
	defer emb.Shutdown()
	back := time.Now()
	if code, out := p.cli("job", "run", "-detach", e2eFile(t, dir, "v2.hcl", mockJobHCL("two", ""))); code != 0 {
		t.Fatalf("job run after the restart: exit %d\n%s", code, out)
	}
	// Well under the ~19 s a watch left alone stays silent after a restart.
	testutil.Eventually(t, 10*time.Second, "v1 replaced by v2 after the NATS restart", func() bool {
		l := liveOf(p.allocs(), "web")
		return len(l) == 1 && l[0].JobVersion == 1 && l[0].ClientStatus == model.ClientRunning
	})
	t.Logf("NATS back → a job written after it running on the node: %v", time.Since(back).Round(time.Millisecond))
}

// A NATS server that comes back with an empty store (its data lost):
// the agent creates the fleet's buckets again, keeps running what it ran
// (its job's key is gone: orphaned, never stopped), registers its node
// again, and places a job written at revision 1 of the new jobs bucket.
func TestEndToEndNATSBackWithAnEmptyStoreGetsItsBucketsAndJobsAgain(t *testing.T) {
	hiveletBinary(t)
	port := testutil.FreePort(t)
	startNATS := func(dir string) *fleet.Embedded {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		emb, err := fleet.StartEmbedded(ctx, fleet.EmbeddedConfig{StoreDir: dir, Port: port, ServerName: "e2e-nats"})
		if err != nil {
			t.Fatal(err)
		}
		return emb
	}
	emb := startNATS(t.TempDir())
	p := newAgent(t, fmt.Sprintf("nats://127.0.0.1:%d", port))
	p.start()
	dir := t.TempDir()
	if code, out := p.cli("job", "run", e2eFile(t, dir, "v1.hcl", mockJobHCL("one", ""))); code != 0 {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	first := liveOf(p.allocs(), "web")
	emb.Shutdown()
	emb = startNATS(t.TempDir()) // the same address, nothing in its store
	defer emb.Shutdown()
	back := time.Now()
	api := strings.Replace(mockJobHCL("api", ""), `job "web"`, `job "api"`, 1)
	testutil.Eventually(t, 30*time.Second, "a job run into the re-created buckets", func() bool {
		code, _ := p.cli("job", "run", "-detach", e2eFile(t, dir, "api.hcl", api))
		return code == 0
	})
	testutil.Eventually(t, 30*time.Second, "the new job placed and the old one still running", func() bool {
		all := p.allocs()
		a, w := liveOf(all, "api"), liveOf(all, "web")
		return len(a) == 1 && a[0].ClientStatus == model.ClientRunning && len(w) == 1 && w[0].ID == first[0].ID && w[0].ClientStatus == model.ClientRunning
	})
	t.Logf("empty NATS back → buckets re-created and a new job running, the old task untouched: %v", time.Since(back).Round(time.Millisecond))
	// The node's record and its allocations' keys are written again into
	// the new buckets (the node is their single writer): readers see them.
	testutil.Eventually(t, 30*time.Second, "the node registered again", func() bool {
		code, out := p.cli("node", "status")
		return code == 0 && strings.Contains(out, "ready")
	})
	testutil.Eventually(t, 30*time.Second, "the old job's allocation in the new allocations bucket", func() bool {
		code, out := p.cli("alloc", "status", first[0].ID)
		return code == 0 && strings.Contains(out, first[0].ID)
	})
}

func TestEndToEndASecondAgentOnTheSameStateDirectoryFailsClearly(t *testing.T) {
	// Parallel: two agents on a state directory of its own, ports of its
	// own.
	t.Parallel()
	p := newAgent(t, "")
	p.start()
	cfg := e2eFile(t, t.TempDir(), "b.hcl", fmt.Sprintf("http {\n  address = \"127.0.0.1:%d\"\n}\nnats {\n  embedded_port = %d\n}\n", testutil.FreePort(t), testutil.FreePort(t)))
	cmd := exec.Command(p.bin, "agent", "-state-dir", filepath.Join(p.dir, "state"), "-config", cfg, "-no-policies")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("a second agent on the same state directory did not exit")
	}
	if err == nil || !strings.Contains(string(out), "locked by another process") {
		t.Fatalf("second agent: err %v, output:\n%s", err, out)
	}
	// Control: the first agent still serves.
	resp, herr := http.Get("http://" + p.apiAddr + "/v1/health")
	if herr != nil {
		t.Fatal(herr)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("first agent health: %d", resp.StatusCode)
	}
}

func TestEndToEndAllocLogsAreFetchedFromTheAgentOverNATS(t *testing.T) {
	// Parallel: a NATS server and an agent of its own (ports,
	// directories).
	t.Parallel()
	hiveletBinary(t)
	// NATS outside the agent, so that the CLI still reaches it once the
	// agent is stopped.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	emb, err := fleet.StartEmbedded(ctx, fleet.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1, ServerName: "e2e-logs"})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	p := newAgent(t, emb.ClientURL())
	p.start()
	dir := t.TempDir()
	job := `job "talker" {
  type = "system"
  update {
    max_parallel     = 1
    min_healthy_time = "200ms"
  }
  group "g" {
    count = 1
    task "s" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo $$ >> ${NOMAD_ALLOC_DIR}/pids; echo hello-out; echo hello-err >&2; exec sleep 300"]
      }
      kill_timeout = "2s"
    }
  }
}
`
	if code, out := p.cli("job", "run", e2eFile(t, dir, "talker.hcl", job)); code != 0 {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	live := liveOf(p.allocs(), "talker")
	if len(live) != 1 {
		t.Fatalf("live: %+v", live)
	}
	alloc := live[0]
	pidFile := filepath.Join(p.dir, "state", "alloc", alloc.ID, "pids")
	testutil.Eventually(t, 10*time.Second, "pid written", func() bool { return len(readPIDs(t, pidFile)) == 1 })
	p.owned[readPIDs(t, pidFile)[0]] = true

	// Watch the node's logs subject: the CLI's requests must go there.
	nc, err := nats.Connect(emb.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	seen := make(chan *nats.Msg, 64)
	monitor, err := nc.ChanSubscribe("hivelet.logs."+alloc.NodeID, seen)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	testutil.Eventually(t, 10*time.Second, "stdout in alloc logs", func() bool {
		code, out := p.cli("alloc", "logs", alloc.ID[:8])
		return code == 0 && out == "hello-out\n"
	})
	select {
	case m := <-seen:
		if !strings.Contains(string(m.Data), alloc.ID) {
			t.Fatalf("request on the logs subject: %s", m.Data)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("alloc logs sent no request on the node's logs subject")
	}
	// The monitor answers nothing: gone, so that a stopped agent leaves no
	// subscriber at all.
	if err := monitor.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if code, out := p.cli("alloc", "logs", "-stderr", alloc.ID); code != 0 || out != "hello-err\n" {
		t.Fatalf("alloc logs -stderr: exit %d\n%q", code, out)
	}
	if code, out := p.cli("alloc", "logs", "-tail", "4", alloc.ID, "s"); code != 0 || out != "out\n" {
		t.Fatalf("alloc logs -tail 4: exit %d\n%q", code, out)
	}
	if code, out := p.cli("alloc", "logs", alloc.ID, "nosuch"); code != 2 || !strings.Contains(out, `no task "nosuch"`) {
		t.Fatalf("alloc logs of an unknown task: exit %d\n%s", code, out)
	}

	// A finished allocation: -f ends on its own once the output is complete.
	batch := `job "batch" {
  type = "sysbatch"
  group "g" {
    task "b" {
      driver = "mock"
      config {
        stdout_string = "batch-out"
        run_for       = "2s"
      }
    }
  }
}
`
	if code, out := p.cli("job", "run", "-detach", e2eFile(t, dir, "batch.hcl", batch)); code != 0 {
		t.Fatalf("job run batch: exit %d\n%s", code, out)
	}
	var batchAlloc *model.Allocation
	testutil.Eventually(t, 10*time.Second, "batch placed", func() bool {
		for _, a := range p.allocs() {
			if a.JobID == "batch" {
				batchAlloc = a
				return true
			}
		}
		return false
	})
	// The agent's API knows the allocation before its record reaches the
	// allocs bucket, where the CLI looks it up: wait for the record.
	testutil.Eventually(t, 10*time.Second, "the batch allocation's record in the allocs bucket", func() bool {
		code, _ := p.cli("alloc", "status", batchAlloc.ID)
		return code == 0
	})
	start := time.Now()
	if code, out := p.cli("alloc", "logs", "-f", batchAlloc.ID, "b"); code != 0 || out != "batch-out" {
		t.Fatalf("alloc logs -f of a batch allocation: exit %d\n%q", code, out)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("-f took %s to end after the allocation finished", d)
	}
	if l := p.allocs(); !slices.ContainsFunc(l, func(a *model.Allocation) bool { return a.ID == batchAlloc.ID && a.ClientStatus == model.ClientComplete }) {
		t.Fatalf("-f ended before the allocation completed: %+v", l)
	}

	// With the agent stopped, the files are still on this disk but the
	// default path does not read them: it asks the agent, which is gone.
	p.signal(syscall.SIGTERM)
	code, out := p.cli("alloc", "logs", alloc.ID)
	if code != 1 || !strings.Contains(out, "the agent of node "+alloc.NodeID+" did not answer (is it running?)") || strings.Contains(out, "hello-out") {
		t.Fatalf("alloc logs with the agent stopped: exit %d\n%s", code, out)
	}
	// Control: -alloc-dir reads this machine's files directly.
	if code, out := p.cli("alloc", "logs", "-alloc-dir", filepath.Join(p.dir, "state", "alloc"), alloc.ID); code != 0 || out != "hello-out\n" {
		t.Fatalf("alloc logs -alloc-dir: exit %d\n%q", code, out)
	}
}
