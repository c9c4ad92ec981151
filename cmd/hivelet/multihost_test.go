package main

// The fleet of examples/multihost run for real: three agents started from
// those very configuration files (ports and directories rewritten into
// temporary copies), their embedded NATS servers routed into one JetStream
// cluster with R3 buckets.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/config"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// examplePorts are the ports the example files use: HTTP, NATS clients,
// NATS routes, for agents 1 to 3.
var examplePorts = []int{4646, 4647, 4648, 4222, 4223, 4224, 6222, 6223, 6224}

// multihostConfig rewrites examples/multihost/agent-<i>.hcl: every example
// port to its free counterpart and the state directory to dir.
func multihostConfig(t *testing.T, i int, ports map[int]int, dir string) string {
	t.Helper()
	src, err := os.ReadFile(fmt.Sprintf("../../examples/multihost/agent-%d.hcl", i))
	if err != nil {
		t.Fatal(err)
	}
	oldDir := fmt.Sprintf("/tmp/hivelet-multihost/agent-%d", i)
	if !strings.Contains(string(src), oldDir) {
		t.Fatalf("agent-%d.hcl: state_dir %s not found", i, oldDir)
	}
	out := strings.ReplaceAll(string(src), oldDir, dir)
	out = regexp.MustCompile(`\b\d{4}\b`).ReplaceAllStringFunc(out, func(s string) string {
		n, _ := strconv.Atoi(s)
		if p, ok := ports[n]; ok {
			return strconv.Itoa(p)
		}
		return s
	})
	return out
}

// launch starts the agent without waiting for it (a cluster member waits for
// its peers before it serves).
func (p *agentProc) launch() {
	p.t.Helper()
	p.spawn("-config", p.cfgPath, "-no-policies", "-log-level", "debug")
}

func (p *agentProc) healthy() bool {
	resp, err := http.Get("http://" + p.apiAddr + "/v1/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h struct {
		Status string `json:"status"`
		Synced bool   `json:"synced"`
	}
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&h) == nil && h.Synced
}

func (p *agentProc) node() model.Node {
	var n model.Node
	resp, err := http.Get("http://" + p.apiAddr + "/v1/node")
	if err != nil {
		return n
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&n)
	return n
}

// runningVersion reports whether the agent runs an allocation of job at
// version v.
func runningVersion(p *agentProc, job string, v uint64) bool {
	for _, a := range liveOf(p.allocs(), job) {
		if a.ClientStatus == model.ClientRunning && a.JobVersion == v {
			return true
		}
	}
	return false
}

func TestTheMultihostExampleFleetPlacesOnEveryNodeAndSurvivesLosingOne(t *testing.T) {
	// Parallel (with the other end-to-end tests that mostly wait): most of
	// its time is the cluster forming and the killed node's heartbeat TTL
	// running out (30 s); its three agents, their NATS cluster, ports and
	// directories are its own.
	t.Parallel()
	bin := hiveletBinary(t)
	ports := map[int]int{}
	for _, old := range examplePorts {
		ports[old] = testutil.FreePort(t)
	}
	var agents []*agentProc
	for i := 1; i <= 3; i++ {
		dir := testutil.ShortTempDir(t, "hv-mh-") // short: plugin socket paths are limited
		cfg := multihostConfig(t, i, ports, filepath.Join(dir, "state"))
		p := &agentProc{t: t, bin: bin, dir: dir, owned: map[int]bool{},
			cfgPath: e2eFile(t, dir, "agent.hcl", cfg),
			apiAddr: fmt.Sprintf("127.0.0.1:%d", ports[4645+i]),
			natsURL: fmt.Sprintf("nats://127.0.0.1:%d", ports[4221+i])}
		// The rewritten file is what the agent will read: check it took.
		c, err := config.Load(p.cfgPath)
		if err != nil {
			t.Fatalf("agent-%d.hcl: %v", i, err)
		}
		r, err := c.Resolve(false, "")
		if err != nil {
			t.Fatal(err)
		}
		if r.HTTPAddr != p.apiAddr || r.EmbeddedPort != ports[4221+i] || r.Cluster == nil || r.Cluster.Port != ports[6221+i] ||
			len(r.Cluster.Routes) != 3 || r.Replicas != 3 || !strings.HasPrefix(r.StateDir, dir) {
			t.Fatalf("agent-%d.hcl rewritten as %+v (cluster %+v)", i, r, r.Cluster)
		}
		t.Cleanup(p.cleanup)
		agents = append(agents, p)
	}
	start := time.Now()
	for _, p := range agents {
		p.launch()
	}
	testutil.Eventually(t, 45*time.Second, "three agents serving from an R3 cluster", func() bool {
		for _, p := range agents {
			select {
			case <-p.done:
				t.Fatalf("agent %s exited during start-up", p.apiAddr)
			default:
			}
			if !p.healthy() {
				return false
			}
		}
		return true
	})
	t.Logf("cluster and agents up in %s", time.Since(start).Round(time.Millisecond))
	for _, p := range agents {
		p.notePlugins()
	}
	names := map[string]bool{}
	var ids []string
	for _, p := range agents {
		n := p.node()
		names[n.Name] = true
		ids = append(ids, n.ID)
	}
	if !names["agent-1"] || !names["agent-2"] || !names["agent-3"] {
		t.Fatalf("node names %v, want agent-1..3 from the example files", names)
	}

	// Every agent sees the others' node records through the shared buckets.
	testutil.Eventually(t, 20*time.Second, "three nodes listed through each server", func() bool {
		for _, p := range agents {
			code, out := p.cli("node", "status")
			if code != 0 || !strings.Contains(out, "agent-1") || !strings.Contains(out, "agent-2") || !strings.Contains(out, "agent-3") {
				return false
			}
		}
		return true
	})

	// The example job, written through agent 1's server, runs on all three.
	code, out := agents[0].cli("job", "run", "-timeout", "40s", "../../examples/jobs/mock.hcl")
	if code != 0 {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	testutil.Eventually(t, 20*time.Second, "mock-demo v0 running on every node", func() bool {
		for _, p := range agents {
			if !runningVersion(p, "mock-demo", 0) {
				return false
			}
		}
		return true
	})
	// The allocations bucket, read through agent 2's server, shows all three.
	code, out = agents[1].cli("job", "status", "mock-demo")
	t.Logf("job status through agent 2:\n%s", out)
	if code != 0 {
		t.Fatalf("job status through agent 2: exit %d\n%s", code, out)
	}
	for _, id := range ids {
		running := 0
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, id) && strings.Contains(line, " running ") {
				running++
			}
		}
		if running != 2 { // mock.hcl: count = 2 per node
			t.Fatalf("job status shows %d running allocations on node %s, want 2", running, id)
		}
	}

	// Draining agent 2 stops its allocation only; ending the drain brings
	// it back.
	if code, out := agents[0].cli("node", "drain", "-enable", "-deadline", "10s", "-wait", "20s", "agent-2"); code != 0 {
		t.Fatalf("node drain: exit %d\n%s", code, out)
	}
	testutil.Eventually(t, 20*time.Second, "agent 2 drained, agents 1 and 3 still running", func() bool {
		return len(liveOf(agents[1].allocs(), "mock-demo")) == 0 && runningVersion(agents[0], "mock-demo", 0) && runningVersion(agents[2], "mock-demo", 0)
	})
	if code, out := agents[0].cli("node", "drain", "-disable", "-wait", "20s", "agent-2"); code != 0 {
		t.Fatalf("node drain -disable: exit %d\n%s", code, out)
	}
	testutil.Eventually(t, 20*time.Second, "agent 2 running mock-demo again", func() bool { return runningVersion(agents[1], "mock-demo", 0) })

	// Lose agent 3 and its NATS server at once.
	if err := agents[2].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-agents[2].done
	agents[2].logf.Close()
	killed := time.Now()

	// The other two keep serving and take a job update (after any stream
	// leader that died with agent 3 is re-elected: a few seconds).
	src, err := os.ReadFile("../../examples/jobs/mock.hcl")
	if err != nil {
		t.Fatal(err)
	}
	v1 := strings.Replace(string(src), "hello from", "hello again from", 1)
	if v1 == string(src) {
		t.Fatal("mock.hcl: no stdout_string to change")
	}
	v1Path := e2eFile(t, t.TempDir(), "mock-v1.hcl", v1)
	// A try can write version 1 and then fail to record it (the versions
	// stream's leader not re-elected yet); the next try finds the spec in
	// force, records it and says so.
	testutil.Eventually(t, 45*time.Second, "job update accepted by agent 2's server", func() bool {
		code, out := agents[1].cli("job", "run", "-detach", v1Path)
		ok := code == 0 && (strings.Contains(out, "version 1 written") || strings.Contains(out, "unchanged (version 1 in force)"))
		if !ok {
			t.Logf("job run after the kill: exit %d: %s", code, strings.TrimSpace(out))
		}
		return ok
	})
	t.Logf("job update accepted %s after the kill", time.Since(killed).Round(time.Millisecond))
	// The killed agent's node still counts as live until its heartbeat key
	// expires (node_ttl, 30 s here): until then it may hold its turn in the
	// update slots' admission order (docs/rollout.md), so the survivors'
	// update can wait for the expiry.
	testutil.Eventually(t, 75*time.Second, "mock-demo v1 running on the two survivors", func() bool {
		return runningVersion(agents[0], "mock-demo", 1) && runningVersion(agents[1], "mock-demo", 1) &&
			agents[0].healthy() && agents[1].healthy()
	})
	t.Logf("update placed on the survivors %s after the kill", time.Since(killed).Round(time.Millisecond))
	if code, out := agents[0].cli("job", "status", "mock-demo"); code != 0 {
		t.Fatalf("job status through agent 1 after the kill: exit %d\n%s", code, out)
	}

	// Agent 3 started again from the same file rejoins and catches up.
	agents[2].launch()
	testutil.Eventually(t, 30*time.Second, "agent 3 back and running mock-demo v1", func() bool {
		return agents[2].healthy() && runningVersion(agents[2], "mock-demo", 1)
	})
	agents[2].notePlugins()
	t.Logf("agent 3 rejoined and runs v1 %s after the kill", time.Since(killed).Round(time.Millisecond))
}
