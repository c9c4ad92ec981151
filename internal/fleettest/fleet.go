package fleettest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/runtime/docker/dockertest"
)

// Labels on everything a Fleet creates.
const (
	// LabelRun is on every container and network of a fleet; its value is
	// the run's ID.
	LabelRun = "hivelet.fleettest.run"
	// LabelPID is the ID of the test process that created it: a resource
	// whose process is gone was left behind by a crash (RemoveLeftovers).
	LabelPID = "hivelet.fleettest.pid"
	// LabelCreated is the Unix time it was created at.
	LabelCreated = "hivelet.fleettest.created"
)

// staleAfter is the age past which a labelled resource is a leftover even
// if its process ID is in use again (no fleet test runs that long).
const staleAfter = 30 * time.Minute

// NATSServers is the size of the NATS cluster: R3 buckets need three.
const NATSServers = 3

// Options says which fleet to start.
type Options struct {
	// Image from BuildImage (required).
	Image Image
	// ExampleDir holds nats.conf and agent-<i>.hcl (examples/fleet).
	ExampleDir string
	// Agents is the number of agent containers (default 4). Agent i reads
	// ExampleDir/agent-<i>.hcl; past the last file, agent i reads the file
	// of agent ((i-1) mod files)+1 with its name changed to "agent-<i>".
	Agents int
	// AgentConfig, when set, rewrites the configuration of agent i (from 1)
	// before it is mounted (e.g. a shorter nats.node_ttl).
	AgentConfig func(i int, hcl string) string
}

// Container is one member of the fleet.
type Container struct {
	// Name is the container's host name and its alias on the fleet network
	// ("nats-1", "agent-3"): what the configuration files name.
	Name string
	// Docker is the container's name for the engine (unique to the run).
	Docker string
	// ClientPort and MonitorPort are, for a NATS server, the ports on
	// 127.0.0.1 its 4222 and 8222 are published at.
	ClientPort, MonitorPort int

	ip      string // its address on the fleet network, for Reconnect
	config  string // agent: the configuration file mounted
	stopped bool   // killed by KillNATS or KillAgent, not started again
}

// Fleet is a started fleet. Its methods fail the test they were given at
// Start on any error, so a test reads as the steps it takes.
type Fleet struct {
	T       testing.TB
	RunID   string
	Network string
	Image   Image
	NATS    []*Container
	Agents  []*Container

	opts Options
	dir  string // configuration files, job files
}

// Start starts a fleet: the network, the NATS cluster (waiting until every
// server reports JetStream healthy), then the agents (waiting until every
// one's node is ready in the nodes bucket, through the CLI). Everything is
// removed at the test's cleanup.
func Start(t testing.TB, opts Options) *Fleet {
	t.Helper()
	f := New(t, opts)
	f.StartCluster()
	f.StartAgents(f.opts.Agents)
	return f
}

// New creates the fleet's private network (and removes the leftovers of
// crashed runs first) but starts nothing.
func New(t testing.TB, opts Options) *Fleet {
	t.Helper()
	if opts.Image.Tag == "" {
		t.Fatal("fleettest: Options.Image is required (BuildImage)")
	}
	if opts.Agents == 0 {
		opts.Agents = 4
	}
	if opts.ExampleDir == "" {
		opts.ExampleDir = "."
	}
	RemoveLeftovers(t)
	run := dockertest.RandomID()
	dir := runDir(run)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := &Fleet{T: t, RunID: run, Image: opts.Image, opts: opts, dir: dir}
	f.Network = "hvfleet-" + f.RunID
	t.Cleanup(f.cleanup)
	f.createNetwork()
	return f
}

func (f *Fleet) labels() []string {
	return []string{
		"--label", LabelRun + "=" + f.RunID,
		"--label", LabelPID + "=" + strconv.Itoa(os.Getpid()),
		"--label", LabelCreated + "=" + strconv.FormatInt(time.Now().Unix(), 10),
	}
}

// createNetwork creates the bridge network with a subnet of its own: the
// engine picks a free one for a probe network, which is removed and made
// again with that subnet given explicitly, since only a user-configured
// subnet lets Reconnect ask for an agent's old address. (Docker gives a
// reconnected container the lowest free address, usually its old one, but
// not when another container took it meanwhile.)
func (f *Fleet) createNetwork() {
	f.T.Helper()
	var lastErr error
	for range 3 {
		probe := f.Network + "-probe"
		if _, err := f.docker(append([]string{"network", "create"}, append(f.labels(), probe)...)...); err != nil {
			f.T.Fatalf("fleettest: %v", err)
		}
		out, err := f.docker("network", "inspect", "--format", "{{range .IPAM.Config}}{{.Subnet}}{{end}}", probe)
		_, _ = f.docker("network", "rm", probe)
		if err != nil {
			f.T.Fatalf("fleettest: %v", err)
		}
		subnet := strings.TrimSpace(out)
		args := append([]string{"network", "create", "--driver", "bridge", "--subnet", subnet}, f.labels()...)
		if _, lastErr = f.docker(append(args, f.Network)...); lastErr == nil {
			return
		}
	}
	f.T.Fatalf("fleettest: creating network %s: %v", f.Network, lastErr)
}

// StartCluster starts the NATS servers nats-1..3 from ExampleDir/nats.conf,
// each publishing its client and monitoring ports on 127.0.0.1, and waits
// until every one answers /healthz (JetStream enabled, meta leader known).
func (f *Fleet) StartCluster() {
	f.T.Helper()
	conf, err := filepath.Abs(filepath.Join(f.opts.ExampleDir, "nats.conf"))
	if err != nil {
		f.T.Fatal(err)
	}
	for i := 1; i <= NATSServers; i++ {
		c := &Container{Name: fmt.Sprintf("nats-%d", i), Docker: fmt.Sprintf("%s-nats-%d", f.Network, i)}
		args := []string{"run", "-d", "--name", c.Docker, "--hostname", c.Name, "--network", f.Network, "--network-alias", c.Name,
			"-e", "SERVER_NAME=" + c.Name, "-v", conf + ":/etc/nats/nats.conf:ro",
			"-p", "127.0.0.1::4222", "-p", "127.0.0.1::8222", "--entrypoint", "/nats-server"}
		args = append(append(args, f.labels()...), f.Image.Tag, "-c", "/etc/nats/nats.conf")
		if _, err := f.docker(args...); err != nil {
			f.T.Fatalf("fleettest: starting %s: %v", c.Name, err)
		}
		c.ClientPort = f.hostPort(c, "4222/tcp")
		c.MonitorPort = f.hostPort(c, "8222/tcp")
		f.NATS = append(f.NATS, c)
	}
	f.WaitFor(60*time.Second, "every NATS server reporting JetStream healthy", func() (bool, string) {
		for _, c := range f.NATS {
			if ok, why := f.NATSHealthy(c); !ok {
				return false, c.Name + ": " + why
			}
		}
		return true, ""
	})
}

// NATSHealthy asks a server's /healthz (through its published monitoring
// port) whether its JetStream is healthy.
func (f *Fleet) NATSHealthy(c *Container) (bool, string) {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", c.MonitorPort))
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	var h struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&h)
	return resp.StatusCode == http.StatusOK && h.Status == "ok", fmt.Sprintf("%d %s %s", resp.StatusCode, h.Status, h.Error)
}

// hostPort reads which port of 127.0.0.1 a container port is published at.
func (f *Fleet) hostPort(c *Container, port string) int {
	f.T.Helper()
	out, err := f.docker("port", c.Docker, port)
	if err != nil {
		f.T.Fatalf("fleettest: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		host, p, err := net.SplitHostPort(strings.TrimSpace(line))
		if err == nil && host == "127.0.0.1" {
			n, _ := strconv.Atoi(p)
			return n
		}
	}
	f.T.Fatalf("fleettest: %s %s is not published on 127.0.0.1: %q", c.Name, port, out)
	return 0
}

var nameLine = regexp.MustCompile(`(?m)^name\s*=\s*"[^"]*"`)

// agentConfig is agent i's configuration file: the example's, or for an
// agent past the last file, a cycled one renamed.
func agentConfig(dir string, i int) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "agent-*.hcl"))
	if err != nil || len(files) == 0 {
		return "", fmt.Errorf("no agent-*.hcl in %s", dir)
	}
	own := filepath.Join(dir, fmt.Sprintf("agent-%d.hcl", i))
	if b, err := os.ReadFile(own); err == nil {
		return string(b), nil
	}
	src := filepath.Join(dir, fmt.Sprintf("agent-%d.hcl", (i-1)%len(files)+1))
	b, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	if !nameLine.Match(b) {
		return "", fmt.Errorf("%s: no name line to rename", src)
	}
	return nameLine.ReplaceAllString(string(b), fmt.Sprintf(`name = "agent-%d"`, i)), nil
}

// StartAgents starts n more agents (agent-<k>, k counting on from the
// agents already started) and waits until the nodes bucket lists every
// started agent as ready. Agents restart on failure, as compose.yaml's do:
// an agent with nats.urls exits when it cannot open the buckets at start.
func (f *Fleet) StartAgents(n int) {
	f.T.Helper()
	for range n {
		i := len(f.Agents) + 1
		cfg, err := agentConfig(f.opts.ExampleDir, i)
		if err != nil {
			f.T.Fatalf("fleettest: %v", err)
		}
		if f.opts.AgentConfig != nil {
			cfg = f.opts.AgentConfig(i, cfg)
		}
		c := &Container{Name: fmt.Sprintf("agent-%d", i), Docker: fmt.Sprintf("%s-agent-%d", f.Network, i),
			config: filepath.Join(f.dir, fmt.Sprintf("agent-%d.hcl", i))}
		if err := os.WriteFile(c.config, []byte(cfg), 0o644); err != nil {
			f.T.Fatal(err)
		}
		args := []string{"run", "-d", "--name", c.Docker, "--hostname", c.Name, "--network", f.Network, "--network-alias", c.Name,
			"--restart", "on-failure:5", "-v", c.config + ":/etc/hivelet/agent.hcl:ro"}
		args = append(append(args, f.labels()...), f.Image.Tag, "agent", "-config", "/etc/hivelet/agent.hcl")
		if _, err := f.docker(args...); err != nil {
			f.T.Fatalf("fleettest: starting %s: %v", c.Name, err)
		}
		f.Agents = append(f.Agents, c)
	}
	f.WaitFor(90*time.Second, fmt.Sprintf("%d agents' nodes ready", len(f.Agents)), func() (bool, string) {
		for _, c := range f.Agents {
			if state := f.State(c); state != "running" {
				return false, c.Name + " container " + state
			}
		}
		ready, why := f.NodesReady(f.Agents...)
		return ready, why
	})
}

// Agent returns agent i (from 1).
func (f *Fleet) Agent(i int) *Container {
	f.T.Helper()
	if i < 1 || i > len(f.Agents) {
		f.T.Fatalf("fleettest: no agent %d (%d started)", i, len(f.Agents))
	}
	return f.Agents[i-1]
}

// NATSByName returns the NATS server named name ("nats-2").
func (f *Fleet) NATSByName(name string) *Container {
	f.T.Helper()
	for _, c := range f.NATS {
		if c.Name == name {
			return c
		}
	}
	f.T.Fatalf("fleettest: no NATS server %q", name)
	return nil
}

// State is the container's state as the engine reports it ("running",
// "exited", ...), or the error.
func (f *Fleet) State(c *Container) string {
	out, err := f.docker("inspect", "--format", "{{.State.Status}}", c.Docker)
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(out)
}

// RestartCount is how often the engine restarted the container (its
// restart policy after an exit).
func (f *Fleet) RestartCount(c *Container) int {
	out, err := f.docker("inspect", "--format", "{{.RestartCount}}", c.Docker)
	if err != nil {
		return -1
	}
	n, _ := strconv.Atoi(strings.TrimSpace(out))
	return n
}

// Disconnect cuts the container off the fleet network (docker network
// disconnect): its processes keep running but reach nothing. The address
// it had is kept for Reconnect.
func (f *Fleet) Disconnect(c *Container) {
	f.T.Helper()
	out, err := f.docker("inspect", "--format", fmt.Sprintf("{{(index .NetworkSettings.Networks %q).IPAddress}}", f.Network), c.Docker)
	if err != nil {
		f.T.Fatalf("fleettest: %v", err)
	}
	c.ip = strings.TrimSpace(out)
	if _, err := f.docker("network", "disconnect", f.Network, c.Docker); err != nil {
		f.T.Fatalf("fleettest: disconnecting %s: %v", c.Name, err)
	}
}

// Reconnect connects the container again with the address and alias it had.
// Its connections of before are dead (the peers closed them); with its old
// address, a NATS client's first write after reconnecting gets a reset and
// reconnects, rather than waiting for its own ping timeout.
func (f *Fleet) Reconnect(c *Container) {
	f.T.Helper()
	args := []string{"network", "connect", "--alias", c.Name}
	if c.ip != "" {
		args = append(args, "--ip", c.ip)
	}
	if _, err := f.docker(append(args, f.Network, c.Docker)...); err != nil {
		f.T.Fatalf("fleettest: reconnecting %s: %v", c.Name, err)
	}
}

// KillNATS kills NATS servers with SIGKILL (docker kill): their clients
// reconnect to the others, their streams elect new leaders. Killing two or
// all three leaves no quorum: JetStream refuses every bucket request until
// StartNATS brings enough of them back.
func (f *Fleet) KillNATS(cs ...*Container) {
	f.T.Helper()
	for _, c := range cs {
		f.kill(c)
	}
}

// KillAgent kills an agent's container with SIGKILL (docker kill; the
// restart policy does not start it again): the agent, its plugins and
// their tasks die at once, its state directory stays for StartAgent.
func (f *Fleet) KillAgent(c *Container) {
	f.T.Helper()
	f.kill(c)
}

func (f *Fleet) kill(c *Container) {
	f.T.Helper()
	if _, err := f.docker("kill", c.Docker); err != nil {
		f.T.Fatalf("fleettest: killing %s: %v", c.Name, err)
	}
	c.stopped = true
	f.WaitFor(30*time.Second, c.Name+" stopped", func() (bool, string) {
		s := f.State(c)
		return s == "exited", s
	})
}

// StartAgent starts a killed agent's container again on its state
// directory of before (the container's file system) and waits until the
// new process has logged "node registered" and its node is ready. (The node
// record of before may still be unexpired: ready alone would prove
// nothing.)
func (f *Fleet) StartAgent(c *Container) {
	f.T.Helper()
	since := time.Now()
	if _, err := f.docker("start", c.Docker); err != nil {
		f.T.Fatalf("fleettest: starting %s: %v", c.Name, err)
	}
	c.stopped = false
	f.WaitFor(60*time.Second, c.Name+" registered again and ready", func() (bool, string) {
		if !f.LoggedSince(c, since, "node registered") {
			return false, "not registered since the start"
		}
		return f.NodesReady(c)
	})
}

// LoggedSince reports whether the container logged a line containing
// substr at or after since (the engine's timestamps of its output).
func (f *Fleet) LoggedSince(c *Container, since time.Time, substr string) bool {
	out, err := f.docker("logs", "--since", since.Add(-time.Second).UTC().Format(time.RFC3339Nano), "--timestamps", c.Docker)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(out, "\n") {
		stamp, rest, ok := strings.Cut(line, " ")
		if !ok || !strings.Contains(rest, substr) {
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, stamp); err == nil && !at.Before(since) {
			return true
		}
	}
	return false
}

// StartNATS starts killed NATS servers again, each on its JetStream store
// of before (the container's file system), and waits until all of them
// report JetStream healthy (so servers that need each other for a quorum
// are started together). Their published ports change: the CLI follows.
func (f *Fleet) StartNATS(cs ...*Container) {
	f.T.Helper()
	for _, c := range cs {
		if _, err := f.docker("start", c.Docker); err != nil {
			f.T.Fatalf("fleettest: starting %s: %v", c.Name, err)
		}
		c.stopped = false
		c.ClientPort = f.hostPort(c, "4222/tcp")
		c.MonitorPort = f.hostPort(c, "8222/tcp")
	}
	f.WaitFor(60*time.Second, "the restarted NATS servers reporting JetStream healthy", func() (bool, string) {
		for _, c := range cs {
			if ok, why := f.NATSHealthy(c); !ok {
				return false, c.Name + ": " + why
			}
		}
		return true, ""
	})
}

// Logs returns the container's output (the agent's or server's log).
func (f *Fleet) Logs(c *Container) string {
	out, _ := f.docker("logs", c.Docker)
	return out
}

// WaitFor polls cond until it holds and returns how long that took; once d
// has passed (and one last check failed) it fails the test with what it
// waited for and cond's last explanation. Between checks it pauses 100 ms,
// or as long as the last check took.
func (f *Fleet) WaitFor(d time.Duration, what string, cond func() (bool, string)) time.Duration {
	f.T.Helper()
	start := time.Now()
	deadline := start.Add(d)
	for {
		late := !time.Now().Before(deadline)
		began := time.Now()
		ok, why := cond()
		if ok {
			return time.Since(start)
		}
		if late {
			f.T.Fatalf("fleettest: timed out after %s waiting for %s (last: %s)", d, what, why)
			return time.Since(start)
		}
		time.Sleep(max(100*time.Millisecond, time.Since(began)))
	}
}

func (f *Fleet) docker(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return docker(ctx, args...)
}

// cleanup prints the tail of every container's log when the test failed,
// then removes the containers, the network and the files.
func (f *Fleet) cleanup() {
	if f.T.Failed() {
		for _, c := range append(append([]*Container{}, f.NATS...), f.Agents...) {
			out, _ := f.docker("logs", "--tail", "60", c.Docker)
			f.T.Logf("---- %s (%s), last lines of its log:\n%s", c.Name, f.State(c), out)
		}
	}
	removeRun(f.RunID)
}

// runDir holds a run's configuration and job files (bind-mounted into the
// containers, so it must be on this machine, not in a test's t.TempDir,
// which a crashed run would leave anyway).
func runDir(run string) string { return filepath.Join(os.TempDir(), "hvfleet-"+run) }

// removeRun removes every container, then every network, labelled with
// run, and the run's directory.
func removeRun(run string) {
	if run == "" || strings.ContainsAny(run, `/\.`) {
		return // not a run ID this package made
	}
	defer os.RemoveAll(runDir(run))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	filter := "label=" + LabelRun + "=" + run
	if out, err := docker(ctx, "ps", "-aq", "--filter", filter); err == nil && strings.TrimSpace(out) != "" {
		_, _ = docker(ctx, append([]string{"rm", "-f", "-v"}, strings.Fields(out)...)...)
	}
	if out, err := docker(ctx, "network", "ls", "-q", "--filter", filter); err == nil && strings.TrimSpace(out) != "" {
		_, _ = docker(ctx, append([]string{"network", "rm"}, strings.Fields(out)...)...)
	}
}

// RemoveLeftovers removes the containers and networks of fleets whose test
// process is gone, or which are older than any fleet test runs: what a
// crashed or killed run left behind. A fleet of a run still in progress (in
// another process) is left alone.
func RemoveLeftovers(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	format := fmt.Sprintf(`{{.Label %q}} {{.Label %q}} {{.Label %q}}`, LabelRun, LabelPID, LabelCreated)
	runs := map[string]bool{}
	for _, kind := range [][]string{{"ps", "-a"}, {"network", "ls"}} {
		args := append(kind, "--filter", "label="+LabelRun, "--format", format)
		out, err := docker(ctx, args...)
		if err != nil {
			t.Fatalf("fleettest: listing leftovers: %v", err)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if run, ok := leftover(line, time.Now(), processAlive); ok {
				runs[run] = true
			}
		}
	}
	for run := range runs {
		t.Logf("fleettest: removing the leftovers of run %s", run)
		removeRun(run)
	}
}

// leftover parses "<run> <pid> <created>" and reports whether that run's
// resources are leftovers: its process is not alive, or it is older than
// staleAfter, or its labels are unreadable.
func leftover(line string, now time.Time, alive func(pid int) bool) (string, bool) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return "", false
	}
	run := fields[0]
	if len(fields) != 3 {
		return run, true
	}
	pid, err1 := strconv.Atoi(fields[1])
	created, err2 := strconv.ParseInt(fields[2], 10, 64)
	if err1 != nil || err2 != nil {
		return run, true
	}
	return run, !alive(pid) || now.Sub(time.Unix(created, 0)) > staleAfter
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
