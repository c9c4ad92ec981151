package main

// Tests of the agent's wiring (cmd_agent.go, cmd_agent_policies.go): each
// fails when the corresponding line of wiring is removed.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/api"
	"github.com/hivelet/hivelet/host/config"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/docker"
	execdriver "github.com/hivelet/hivelet/plugins/exec"
	"github.com/hivelet/hivelet/policies"
)

// launchEnv is what a plugin process sees: the inherited environment, then
// the manager's Env entries (exec keeps the last value of a name).
func launchEnv(inherited []string, extra []string) func(string) string {
	return func(k string) string {
		v := ""
		for _, kv := range append(append([]string{}, inherited...), extra...) {
			if name, val, ok := strings.Cut(kv, "="); ok && name == k {
				v = val
			}
		}
		return v
	}
}

func TestDockerAllowPrivilegedReachesTheDockerPluginEnvironment(t *testing.T) {
	cases := []struct {
		name      string
		hcl       string
		inherited []string
		want      bool
	}{
		{"default refuses", "", nil, false},
		{"configured allows", "docker {\n  allow_privileged = true\n}\n", nil, true},
		{"configured false beats an inherited true", "docker {\n  allow_privileged = false\n}\n",
			[]string{docker.EnvAllowPrivileged + "=true"}, false},
		{"unset config beats an inherited true", "", []string{docker.EnvAllowPrivileged + "=1"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agent.hcl")
			if err := os.WriteFile(path, []byte(c.hcl), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			rc, err := cfg.Resolve(false, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			env := pluginEnv(rc)
			dc, err := docker.ConfigFromEnv(launchEnv(c.inherited, env["docker"]))
			if err != nil {
				t.Fatal(err)
			}
			if dc.AllowPrivileged != c.want {
				t.Fatalf("docker plugin AllowPrivileged = %v, want %v (env %v)", dc.AllowPrivileged, c.want, env["docker"])
			}
			// The driver's own refusal of a privileged task when this is
			// false is tested in plugins/docker (config_test.go).
			for name, vars := range env {
				for _, v := range vars {
					if name != "docker" && strings.HasPrefix(v, "HIVELET_DOCKER_") {
						t.Errorf("the setting also reaches plugin %s: %s", name, v)
					}
				}
			}
		})
	}
}

func TestExecAllowRootReachesTheExecPluginEnvironment(t *testing.T) {
	cases := []struct {
		name      string
		hcl       string
		inherited []string
		want      bool
	}{
		{"default refuses root", "", nil, false},
		{"configured allows", "exec {\n  allow_root = true\n}\n", nil, true},
		{"unset config beats an inherited true", "", []string{execdriver.EnvAllowRoot + "=true"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agent.hcl")
			if err := os.WriteFile(path, []byte(c.hcl), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			rc, err := cfg.Resolve(false, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			env := pluginEnv(rc)
			o, err := execdriver.OptionsFromEnv(launchEnv(c.inherited, env["exec"]))
			if err != nil {
				t.Fatal(err)
			}
			if o.AllowRoot != c.want || o.AgentUser {
				t.Fatalf("exec plugin options %+v, want AllowRoot %v (env %v)", o, c.want, env["exec"])
			}
			// What the driver does with it: plugins/exec
			// TestATaskRunsAsNobodyUnlessRootIsAllowed.
		})
	}
}

func TestAnAllocDirInsideTheStateDirIsMadeTraversableNotListable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the agent changes modes only as root")
	}
	state := filepath.Join(t.TempDir(), "state")
	alloc := filepath.Join(state, "alloc")
	if err := os.MkdirAll(alloc, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := traversableAllocDir(state, alloc, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(state)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o711 {
		t.Fatalf("state directory mode %v, want 0711 (search, no read)", fi.Mode().Perm())
	}
	// Control: an allocation directory elsewhere leaves the state directory alone.
	other := filepath.Join(t.TempDir(), "state2")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := traversableAllocDir(other, filepath.Join(t.TempDir(), "alloc"), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(other); fi.Mode().Perm() != 0o700 {
		t.Fatalf("a state directory without the allocations changed to %v", fi.Mode().Perm())
	}
}

func TestANativeAnswerForAPolicyNotLoadedYetSaysSo(t *testing.T) {
	l := &lazyPolicies{}
	ref := &model.PolicyRef{Name: "spread"}
	c, err := l.ChooseCanaries(context.Background(), canaryReq(ref))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.Reason, `policy "spread" not loaded yet, native default`) {
		t.Fatalf("reason %q does not say the module is not loaded", c.Reason)
	}
	// Control: a decision naming no policy is the plain native default.
	c, _ = l.ChooseCanaries(context.Background(), canaryReq(nil))
	if strings.Contains(c.Reason, "not loaded") {
		t.Fatalf("no policy named, but the reason is %q", c.Reason)
	}
}

func TestThePolicyBlockSetsTheEngineLimits(t *testing.T) {
	o := policyOptions(2*time.Second, 16, "/c", nil, nil, nil)
	if o.Deadline != 2*time.Second || o.MemoryLimitPages != 256 || o.CacheDir != "/c" {
		t.Fatalf("options %+v", o)
	}
	// Control: the configuration's defaults (250ms, 32 MB) are not the
	// engine's own (100ms, 64 MiB), so a dropped setting shows.
	o = policyOptions(250*time.Millisecond, 32, "", nil, nil, nil)
	if o.Deadline != 250*time.Millisecond || o.MemoryLimitPages != 512 {
		t.Fatalf("options %+v", o)
	}
}

func canaryReq(ref *model.PolicyRef) reconcile.CanaryRequest {
	return reconcile.CanaryRequest{JobID: "j", Group: "g", Percent: 100, Count: 1,
		Eligible: []*model.Node{{ID: "n1"}}, Policy: ref}
}

func TestJobPolicyRefsCollectsJobAndGroupPoliciesOnce(t *testing.T) {
	j := &model.Job{ID: "a", Update: &model.UpdateStrategy{CanaryPolicy: &model.PolicyRef{Name: "spread"}},
		Groups: []*model.Group{
			{Name: "g1", Update: &model.UpdateStrategy{CanaryPolicy: &model.PolicyRef{Name: "spread"}, CompletionPolicy: &model.PolicyRef{Name: "quorum", Digest: "sha256:AB"}}},
			{Name: "g2"},
		}}
	v := &fleet.View{Jobs: fleet.MapOf(map[string]wanted.JobState{"a": {Value: j}, "b": {}})}
	var got []string
	for _, r := range jobPolicyRefs(v) {
		got = append(got, refKey(r))
	}
	if strings.Join(got, ",") != "quorum@ab,spread@" {
		t.Fatalf("refs %v", got)
	}
	if n := len(jobPolicyRefs(&fleet.View{})); n != 0 {
		t.Fatalf("an empty view names %d policies", n)
	}
}

// ---- end-to-end: the agent binary ----

func (p *agentProc) writeConfig(text string) {
	p.t.Helper()
	if err := os.WriteFile(p.cfgPath, []byte(text), 0o600); err != nil {
		p.t.Fatal(err)
	}
}

// logText is the agent's log so far.
func (p *agentProc) logText() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "agent.log"))
	return string(b)
}

// logHas reports whether a log line contains every part.
func (p *agentProc) logHas(parts ...string) bool {
	sc := bufio.NewScanner(strings.NewReader(p.logText()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
next:
	for sc.Scan() {
		for _, part := range parts {
			if !strings.Contains(sc.Text(), part) {
				continue next
			}
		}
		return true
	}
	return false
}

// metric returns the value of the series whose line starts with series
// (name plus labels as the exposition format prints them), or -1.
func (p *agentProc) metric(series string) float64 {
	resp, err := http.Get("http://" + p.apiAddr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// passes is how many reconcile passes the agent has made, whatever their
// outcome (hivelet_reconcile_passes_total summed over its labels); -1 when
// the agent does not answer.
func (p *agentProc) passes() float64 {
	resp, err := http.Get("http://" + p.apiAddr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "hivelet_reconcile_passes_total{") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// waitPasses waits until the agent has made n more reconcile passes than
// now: what a "nothing happens" check waits for, so that the agent had its
// chances to act (a full pass runs at least every resync period, 5 s).
func (p *agentProc) waitPasses(n int) {
	p.t.Helper()
	base := p.passes()
	if base < 0 {
		p.t.Fatal("the agent's /metrics does not answer")
	}
	testutil.Eventually(p.t, time.Duration(n)*15*time.Second, fmt.Sprintf("%d more reconcile passes", n), func() bool {
		return p.passes() >= base+float64(n)
	})
}

func (p *agentProc) nodeID() string {
	p.t.Helper()
	resp, err := http.Get("http://" + p.apiAddr + "/v1/node")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	var n model.Node
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil || n.ID == "" {
		p.t.Fatalf("GET /v1/node: %v %+v", err, n)
	}
	return n.ID
}

// recordEligibility reads the node's record from the nodes bucket (through
// the CLI), not the agent's live view.
func (p *agentProc) recordEligibility(id string) model.Eligibility {
	p.t.Helper()
	code, out := p.cli("node", "status", "-json", id)
	if code != 0 {
		return ""
	}
	var st struct {
		Node *model.Node `json:"node"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Node == nil {
		return ""
	}
	return st.Node.Eligibility
}

func (p *agentProc) pluginPIDs() map[string]int {
	resp, err := http.Get("http://" + p.apiAddr + "/v1/plugins")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var rows []struct {
		Name string `json:"name"`
		PID  int    `json:"pid"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&rows)
	out := map[string]int{}
	for _, r := range rows {
		out[r.Name] = r.PID
		if r.PID > 0 {
			p.owned[r.PID] = true
		}
	}
	return out
}

func TestEndToEndAgentMetricsIntentPluginRestartsAndQuietLines(t *testing.T) {
	// Parallel: a NATS server and an agent of its own (ports, directories;
	// the plugin it kills is its agent's), waiting on heartbeats and a
	// relaunch.
	t.Parallel()
	hiveletBinary(t)
	port := testutil.FreePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	emb, err := fleet.StartEmbedded(ctx, fleet.EmbeddedConfig{StoreDir: t.TempDir(), Port: port, ServerName: "wiring-nats"})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	p := newAgent(t, url)
	// A heartbeat period of 200 s: an intent change that reaches the node
	// record within seconds was pushed by FollowIntent, not a heartbeat.
	p.writeConfig(fmt.Sprintf("http {\n  address = %q\n  enable_debug = true\n}\nnats {\n  urls = [%q]\n  node_ttl = \"600s\"\n}\n", p.apiAddr, url))
	p.startWith("-no-policies")

	// 1. NATS connection state and heartbeats are observed.
	testutil.Eventually(t, 10*time.Second, "connection state metric", func() bool {
		return p.metric(`hivelet_nats_connection_state{state="connected"}`) == 1
	})
	testutil.Eventually(t, 10*time.Second, "heartbeat metric", func() bool {
		return p.metric(`hivelet_node_heartbeats_total{outcome="ok"}`) >= 1
	})

	// 2. The quiet case of an empty jobs bucket has its own info line.
	testutil.Eventually(t, 10*time.Second, "the no-key line", func() bool { return p.logHas("level=INFO", "quiet=no_key") })

	// 3. Operator intent reaches the node record promptly, both ways.
	id := p.nodeID()
	time.Sleep(time.Second) // past the start-up heartbeats
	if got := p.recordEligibility(id); got != model.Eligible {
		t.Fatalf("record eligibility before: %q", got)
	}
	for _, step := range []struct {
		flag string
		want model.Eligibility
	}{{"-disable", model.Ineligible}, {"-enable", model.Eligible}} {
		if code, out := p.cli("node", "eligibility", step.flag, id); code != 0 {
			t.Fatalf("node eligibility %s: %d %s", step.flag, code, out)
		}
		start := time.Now()
		testutil.Eventually(t, 5*time.Second, "the node record to show "+string(step.want), func() bool {
			return p.recordEligibility(id) == step.want
		})
		t.Logf("eligibility %s reached the node record in %v", step.flag, time.Since(start).Round(time.Millisecond))
	}

	// 4. A plugin killed with SIGKILL is relaunched and counted, by name.
	pids := p.pluginPIDs()
	if pids["mock"] <= 0 || pids["exec"] <= 0 {
		t.Fatalf("plugins: %v", pids)
	}
	if v := p.metric(`hivelet_plugin_restarts_total{plugin="mock"}`); v > 0 {
		t.Fatalf("restarts counted before any kill: %v", v)
	}
	if err := syscall.Kill(pids["mock"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 15*time.Second, "the mock plugin's restart counted", func() bool {
		return p.metric(`hivelet_plugin_restarts_total{plugin="mock"}`) == 1
	})
	p.pluginPIDs() // the relaunched one, for cleanup
	if v := p.metric(`hivelet_plugin_restarts_total{plugin="exec"}`); v > 0 {
		t.Errorf("exec was not killed but counts %v restarts", v)
	}

	// 5. A job naming a policy on an agent without policies: "not configured".
	if p.logHas("quiet=not_configured") {
		t.Fatal("not_configured logged before any job named a policy")
	}
	dir := t.TempDir()
	if code, out := p.cli("job", "run", "-detach", e2eFile(t, dir, "p.hcl", canaryJobHCL("web", "one", "spread"))); code != 0 {
		t.Fatalf("job run: %d %s", code, out)
	}
	testutil.Eventually(t, 10*time.Second, "the not-configured line", func() bool {
		return p.logHas("level=INFO", "quiet=not_configured", "policy=spread")
	})
	if p.logHas("policy engine ready") {
		t.Error("the policy engine was loaded with -no-policies")
	}

	// 6. http.enable_debug: the heap profile needs the token from loopback
	// too, and with it is a gzipped profile.
	if code, body := apiGet(t, "http://"+p.apiAddr+"/debug/pprof/heap", ""); code != 401 || !strings.Contains(body, api.TokenFile) {
		t.Fatalf("the heap profile without the token: %d %.200s", code, body)
	}
	if code, body := apiGet(t, "http://"+p.apiAddr+"/debug/pprof/heap", p.apiToken()); code != 200 || !strings.HasPrefix(body, "\x1f\x8b") {
		t.Fatalf("the heap profile with the token: %d, %d bytes, not gzip", code, len(body))
	}

	// 7. The connection state follows the server going away.
	emb.Shutdown()
	testutil.Eventually(t, 10*time.Second, "connection state leaving connected", func() bool {
		return p.metric(`hivelet_nats_connection_state{state="connected"}`) == 0 &&
			p.metric(`hivelet_nats_connection_state{state="reconnecting"}`) == 1
	})
}

func canaryJobHCL(name, stdout, policy string) string {
	pol := ""
	if policy != "" {
		pol = fmt.Sprintf("    canary_policy = %q\n", policy)
	}
	return fmt.Sprintf(`job %q {
  type = "system"
  update {
    max_parallel     = 1
    canary           = 100
    min_healthy_time = "300ms"
    healthy_deadline = "20s"
%s  }
  group "g" {
    count = 1
    task "t" {
      driver = "mock"
      config {
        stdout_string = %q
      }
    }
  }
}
`, name, pol, stdout)
}

func TestEndToEndAPushedHostilePolicyFallsBackAndTheDeploymentShowsTheFault(t *testing.T) {
	// Parallel: its time is an agent of its own (embedded NATS, ports,
	// directories, policy cache) waiting on rollouts.
	t.Parallel()
	hiveletBinary(t)
	trapPath, _ := filepath.Abs(filepath.Join("..", "..", "policies", "testdata", "wat", "trap.wasm"))
	rawPath, _ := filepath.Abs(filepath.Join("..", "..", "policies", "testdata", "wat", "raw.wasm"))
	trap, err := os.ReadFile(trapPath)
	if err != nil {
		t.Fatal(err)
	}
	p := newAgent(t, "")
	cache := filepath.Join(p.dir, "pcache")
	wrongPin := strings.Repeat("0", 64)
	base, err := os.ReadFile(p.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	p.writeConfig(string(base) +
		fmt.Sprintf("policy {\n  timeout = \"2s\"\n  memory_limit_mb = 16\n  cache_dir = %q\n  pins = {\n    pinned = \"sha256:%s\"\n    trap = \"%s\"\n  }\n}\n",
			cache, wrongPin, policies.Digest(trap)))
	p.startWith()
	p.waitPasses(2)
	if p.logHas("policy engine ready") {
		t.Fatal("the policy engine was loaded before any job named a policy (idle RSS)")
	}

	// v1 names "trap" before anyone pushed it: the bucket does not exist.
	dir := t.TempDir()
	if code, out := p.cli("job", "run", "-detach", e2eFile(t, dir, "v1.hcl", canaryJobHCL("web", "one", "trap"))); code != 0 {
		t.Fatalf("job run v1: %d %s", code, out)
	}
	testutil.Eventually(t, 60*time.Second, "the engine and the no-bucket line", func() bool {
		return p.logHas("policy engine ready") && p.logHas("level=INFO", "quiet=no_bucket", "policy=trap")
	})
	testutil.Eventually(t, 30*time.Second, "v1 running", func() bool {
		l := liveOf(p.allocs(), "web")
		return len(l) == 1 && l[0].ClientStatus == model.ClientRunning
	})

	// Push it (its configured pin matches), and push "pinned", whose
	// configured pin it cannot match.
	if code, out := p.cli("policy", "push", trapPath, "--name", "trap"); code != 0 {
		t.Fatalf("policy push: %d %s", code, out)
	}
	if code, out := p.cli("policy", "push", rawPath, "--name", "pinned"); code != 0 {
		t.Fatalf("policy push: %d %s", code, out)
	}
	testutil.Eventually(t, 30*time.Second, "trap loaded", func() bool { return p.logHas("policy module loaded", "policy=trap") })
	if _, err := os.Stat(filepath.Join(cache, "modules", policies.Digest(trap)+".wasm")); err != nil {
		t.Errorf("the fetched module is not cached under policy.cache_dir: %v", err)
	}

	if code, out := p.cli("job", "run", "-detach", e2eFile(t, dir, "other.hcl", canaryJobHCL("other", "x", "pinned"))); code != 0 {
		t.Fatalf("job run other: %d %s", code, out)
	}
	testutil.Eventually(t, 30*time.Second, "the pinned module refused", func() bool {
		return p.logHas("policy module refused", "policy=pinned", "pinned="+wrongPin)
	})

	// v2 needs a canary decision: the module traps, the native default
	// decides (the canary is placed), and the deployment says so.
	if code, out := p.cli("job", "run", "-detach", e2eFile(t, dir, "v2.hcl", canaryJobHCL("web", "two", "trap"))); code != 0 {
		t.Fatalf("job run v2: %d %s", code, out)
	}
	testutil.Eventually(t, 30*time.Second, "a v2 canary placed by the fallback", func() bool {
		for _, a := range liveOf(p.allocs(), "web") {
			if a.JobVersion == 1 {
				return true
			}
		}
		return false
	})
	conn, err := fleet.Connect(context.Background(), fleet.ConnConfig{URLs: []string{p.natsURL}, Token: p.natsToken()}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := fleet.EnsureBuckets(context.Background(), conn, fleet.Names("hivelet"), fleet.BucketOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ev *model.DeploymentEvent
	var v1Events int
	testutil.Eventually(t, 30*time.Second, "the fault event on the v2 deployment", func() bool {
		ds, _, err := st.ListDeployments(context.Background())
		if err != nil {
			return false
		}
		for _, d := range ds {
			if d.Value == nil || d.Value.JobID != "web" {
				continue
			}
			if d.Value.JobVersion == 0 {
				v1Events = len(d.Value.Events)
			}
			if d.Value.JobVersion == 1 {
				for i, e := range d.Value.Events {
					if e.Kind == model.EventPolicyFault {
						ev = &d.Value.Events[i]
					}
				}
			}
		}
		return ev != nil
	})
	if !strings.Contains(ev.Message, `"trap"`) || !strings.Contains(ev.Message, policies.Digest(trap)[:12]) ||
		!strings.Contains(ev.Message, "trap fault") || !strings.Contains(ev.Message, "native default") {
		t.Errorf("event message %q lacks the policy, its digest, the kind or the fallback", ev.Message)
	}
	if v1Events != 0 {
		t.Errorf("the v1 deployment (no canary decision) has %d events", v1Events)
	}
	if !p.logHas("policy fault", "policy=trap") {
		t.Error("the fault was not logged")
	}
	if v := p.metric(`hivelet_policy_faults_total{decision="canary",kind="trap"}`); v < 1 {
		t.Errorf("fault metric %v", v)
	}
}

// TestAJobNamingAPolicyIsPendingUntilTheLoaderHasTriedIt: the agent holds
// such a job (agent.Config.PolicyPending) so no stand-in decides for the
// policy; each attempt settles it and kicks a pass; with policies off for
// good nothing is ever pending. Control: a job naming no policy never is.
func TestAJobNamingAPolicyIsPendingUntilTheLoaderHasTriedIt(t *testing.T) {
	pol := &lazyPolicies{}
	kicks := 0
	pol.setOnSettle(func() { kicks++ })
	ref := &model.PolicyRef{Name: "spread"}
	named := &model.Job{ID: "a", Groups: []*model.Group{{Name: "g", Update: &model.UpdateStrategy{CanaryPolicy: ref}}}}
	plain := &model.Job{ID: "b", Groups: []*model.Group{{Name: "g", Update: &model.UpdateStrategy{}}}}
	if p, why := pol.Pending(named); !p || !strings.Contains(why, "spread") {
		t.Fatalf("before the loader tried: pending %v (%q), want true", p, why)
	}
	if p, _ := pol.Pending(plain); p {
		t.Fatal("control: a job naming no policy is pending")
	}
	pol.settled(ref)
	pol.settled(ref) // a retry of a settled reference releases nothing new
	if p, _ := pol.Pending(named); p || kicks != 1 {
		t.Fatalf("after an attempt: pending %v, kicks %d; want false, 1", p, kicks)
	}
	other := &model.Job{ID: "c", Groups: []*model.Group{{Name: "g", Update: &model.UpdateStrategy{CompletionPolicy: &model.PolicyRef{Name: "quorum"}}}}}
	if p, _ := pol.Pending(other); !p {
		t.Fatal("a second policy not tried yet is not pending")
	}
	pol.settled(nil) // -no-policies, or the engine failed
	if p, _ := pol.Pending(other); p {
		t.Fatal("with policies off for good a job is still held")
	}
}
