package fleettest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hivelet/hivelet/host/model"
)

// NATSURLs are the client URLs of the NATS servers, on 127.0.0.1 (their
// published ports), comma-separated as the CLI's -nats takes them. A server
// killed by KillNATS is left out until StartNATS, so no request waits on its
// dead port.
func (f *Fleet) NATSURLs() string {
	var urls []string
	for _, c := range f.NATS {
		if !c.stopped {
			urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", c.ClientPort))
		}
	}
	return strings.Join(urls, ",")
}

// CLI runs the hivelet CLI on the host against the fleet's NATS servers and
// returns its exit code and combined output. `job run` and `job stop` get
// -timeout 90s unless args give one. It fails the test only when the CLI
// cannot be run at all.
func (f *Fleet) CLI(args ...string) (int, string) {
	f.T.Helper()
	code, stdout, stderr := f.cli(args...)
	return code, stdout + stderr
}

// cli runs the CLI on the host and returns its exit code, stdout and
// stderr apart (JSON is read from stdout alone).
func (f *Fleet) cli(args ...string) (int, string, string) {
	f.T.Helper()
	args = append(args, "-nats", f.NATSURLs())
	if len(args) > 1 && args[0] == "job" && (args[1] == "run" || args[1] == "stop") && !strings.Contains(strings.Join(args, " "), "-timeout") {
		args = append(args, "-timeout", "90s")
	}
	cmd := exec.Command(f.Image.CLI, args...)
	cmd.Env = append(os.Environ(), "HIVELET_NATS_URL=") // only -nats, never an operator's default
	return f.run(cmd)
}

// run runs cmd with a deadline of 3 minutes and returns its exit code,
// stdout and stderr. It fails the test only when cmd cannot run at all.
func (f *Fleet) run(cmd *exec.Cmd) (int, string, string) {
	f.T.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		f.T.Fatalf("fleettest: running %v: %v", cmd.Args, err)
	}
	timer := time.AfterFunc(3*time.Minute, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stdout.String(), stderr.String()
	} else if err != nil {
		f.T.Fatalf("fleettest: running %v: %v", cmd.Args, err)
	}
	return 0, stdout.String(), stderr.String()
}

// InnerNATSURLs are the NATS servers' client URLs on the fleet network, as
// the agents' configuration files name them (killed servers left out).
func (f *Fleet) InnerNATSURLs() string {
	var urls []string
	for _, c := range f.NATS {
		if !c.stopped {
			urls = append(urls, "nats://"+c.Name+":4222")
		}
	}
	return strings.Join(urls, ",")
}

// CLIIn runs the hivelet CLI inside a container (docker exec of its
// /hivelet) against the NATS servers on the fleet network: the fleet as
// that host sees it. It returns the exit code and combined output.
func (f *Fleet) CLIIn(c *Container, args ...string) (int, string) {
	f.T.Helper()
	code, stdout, stderr := f.cliIn(c, args...)
	return code, stdout + stderr
}

func (f *Fleet) cliIn(c *Container, args ...string) (int, string, string) {
	f.T.Helper()
	args = append(append([]string{"exec", c.Docker, "/hivelet"}, args...), "-nats", f.InnerNATSURLs())
	return f.run(exec.Command("docker", args...))
}

// NodesFrom lists the nodes bucket as seen from inside a container
// (`node status -json` run there by CLIIn).
func (f *Fleet) NodesFrom(c *Container) ([]*model.Node, error) {
	code, out, errOut := f.cliIn(c, "node", "status", "-json")
	if code != 0 {
		return nil, fmt.Errorf("node status in %s: exit %d: %s", c.Name, code, strings.TrimSpace(out+errOut))
	}
	var nodes []*model.Node
	if err := json.Unmarshal([]byte(out), &nodes); err != nil {
		return nil, fmt.Errorf("node status -json in %s: %w: %s", c.Name, err, out)
	}
	return nodes, nil
}

// WriteFile writes a file (a job file) into the fleet's directory and
// returns its path.
func (f *Fleet) WriteFile(name, text string) string {
	f.T.Helper()
	p := filepath.Join(f.dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		f.T.Fatal(err)
	}
	return p
}

// RunJob writes jobHCL to a file and runs `hivelet job run FILE flags...`
// (e.g. "-detach"). It fails the test on a non-zero exit and returns the
// output.
func (f *Fleet) RunJob(jobHCL string, flags ...string) string {
	f.T.Helper()
	path := f.WriteFile(fmt.Sprintf("job-%d.hcl", time.Now().UnixNano()), jobHCL)
	code, out := f.CLI(append([]string{"job", "run"}, append(flags, path)...)...)
	if code != 0 {
		f.T.Fatalf("fleettest: job run %v: exit %d\n%s", flags, code, out)
	}
	return out
}

// Nodes lists the nodes bucket through the CLI (`node status -json`). A node
// whose heartbeat key expired is absent, or "down" while its expiry marker
// is kept.
func (f *Fleet) Nodes() ([]*model.Node, error) {
	code, out, errOut := f.cli("node", "status", "-json")
	if code != 0 {
		return nil, fmt.Errorf("node status: exit %d: %s", code, strings.TrimSpace(out+errOut))
	}
	var nodes []*model.Node
	if err := json.Unmarshal([]byte(out), &nodes); err != nil {
		return nil, fmt.Errorf("node status -json: %w: %s", err, out)
	}
	return nodes, nil
}

// NodeByName is the node record named name in nodes, or nil.
func NodeByName(nodes []*model.Node, name string) *model.Node {
	for _, n := range nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// NodesReady reports whether the CLI on the host lists every agent's node
// as ready, and otherwise which one is not.
func (f *Fleet) NodesReady(agents ...*Container) (bool, string) {
	nodes, err := f.Nodes()
	if err != nil {
		return false, err.Error()
	}
	return ReadyIn(nodes, agents...)
}

// NodeGone reports whether the CLI on the host no longer lists the agent's
// node as ready (its key expired: absent, or listed down).
func (f *Fleet) NodeGone(c *Container) (bool, string) {
	nodes, err := f.Nodes()
	if err != nil {
		return false, err.Error()
	}
	return GoneIn(nodes, c)
}

// ReadyIn reports whether nodes lists every agent's node as ready, and
// otherwise which one is not.
func ReadyIn(nodes []*model.Node, agents ...*Container) (bool, string) {
	for _, c := range agents {
		n := NodeByName(nodes, c.Name)
		if n == nil {
			return false, c.Name + " not listed"
		}
		if n.Status != model.NodeStatusReady {
			return false, fmt.Sprintf("%s is %s", c.Name, n.Status)
		}
	}
	return true, ""
}

// GoneIn reports whether nodes no longer lists the agent's node as ready.
func GoneIn(nodes []*model.Node, c *Container) (bool, string) {
	n := NodeByName(nodes, c.Name)
	if n == nil {
		return true, c.Name + " not listed"
	}
	return n.Status != model.NodeStatusReady, fmt.Sprintf("%s is %s", c.Name, n.Status)
}

// Allocs lists the allocations the allocations bucket holds for the agent's
// node (`node status NAME -json`), with their task states.
func (f *Fleet) Allocs(c *Container) ([]*model.Allocation, error) {
	code, out, errOut := f.cli("node", "status", c.Name, "-json")
	if code != 0 {
		return nil, fmt.Errorf("node status %s: exit %d: %s", c.Name, code, strings.TrimSpace(out+errOut))
	}
	var v struct {
		Allocations []*model.Allocation `json:"allocations"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return nil, fmt.Errorf("node status %s -json: %w: %s", c.Name, err, out)
	}
	return v.Allocations, nil
}

// Live keeps the allocations of job that are not terminal.
func Live(allocs []*model.Allocation, job string) []*model.Allocation {
	var out []*model.Allocation
	for _, a := range allocs {
		if a.JobID == job && !a.Terminal() {
			out = append(out, a)
		}
	}
	return out
}

// RunsOnly reports whether allocs hold exactly want live allocations of
// job, all running at version.
func RunsOnly(allocs []*model.Allocation, job string, version uint64, want int) bool {
	live := Live(allocs, job)
	return runningAt(live, version) == want && len(live) == want
}

// runningAt counts the allocations running at version.
func runningAt(allocs []*model.Allocation, version uint64) int {
	n := 0
	for _, a := range allocs {
		if a.ClientStatus == model.ClientRunning && a.JobVersion == version {
			n++
		}
	}
	return n
}

// RunningAt reports whether every agent runs exactly want allocations of
// job, all running at version, and nothing else of job live; otherwise
// which agent does not. It returns each agent's live allocations.
func (f *Fleet) RunningAt(job string, version uint64, want int, agents ...*Container) (bool, string, map[string][]*model.Allocation) {
	by := map[string][]*model.Allocation{}
	for _, c := range agents {
		allocs, err := f.Allocs(c)
		if err != nil {
			return false, err.Error(), by
		}
		live := Live(allocs, job)
		by[c.Name] = live
		if !RunsOnly(allocs, job, version, want) {
			return false, fmt.Sprintf("%s: %d of %d live allocations running version %d", c.Name, runningAt(live, version), len(live), version), by
		}
	}
	return true, "", by
}

// Deployments lists the deployment records of job, oldest version first
// (`deployment list -json`).
func (f *Fleet) Deployments(job string) ([]*model.Deployment, error) {
	code, out, errOut := f.cli("deployment", "list", "-json")
	if code != 0 {
		return nil, fmt.Errorf("deployment list: exit %d: %s", code, strings.TrimSpace(out+errOut))
	}
	var all []*model.Deployment
	if err := json.Unmarshal([]byte(out), &all); err != nil {
		return nil, fmt.Errorf("deployment list -json: %w: %s", err, out)
	}
	var mine []*model.Deployment
	for _, d := range all {
		if d.JobID == job {
			mine = append(mine, d)
		}
	}
	slices.SortFunc(mine, func(a, b *model.Deployment) int { return cmp.Compare(a.JobVersion, b.JobVersion) })
	return mine, nil
}

// AllocLogs is a task's stdout as `hivelet alloc logs ID TASK` reads it:
// asked over NATS of the agent running the allocation, which reads its own
// file (so it is that agent's answer now, not a stored record).
func (f *Fleet) AllocLogs(allocID, task string) (string, error) {
	code, out, errOut := f.cli("alloc", "logs", allocID, task)
	if code != 0 {
		return "", fmt.Errorf("alloc logs %s %s: exit %d: %s", allocID, task, code, strings.TrimSpace(out+errOut))
	}
	return out, nil
}

// StreamLeader names the NATS server that leads a JetStream stream (a KV
// bucket's stream is KV_<bucket>, e.g. "KV_hivelet_allocs"), asked through
// the published ports.
func (f *Fleet) StreamLeader(stream string) (string, error) {
	nc, err := nats.Connect(f.NATSURLs(), nats.Timeout(3*time.Second), nats.NoReconnect())
	if err != nil {
		return "", fmt.Errorf("connecting to the fleet's NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	// Short: while a stream has no leader nobody answers, and a caller
	// polling for the new leader should see it within a second or so.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return "", fmt.Errorf("stream %s: %w", stream, err)
	}
	info := s.CachedInfo()
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return "", fmt.Errorf("stream %s has no leader", stream)
	}
	return info.Cluster.Leader, nil
}

// Slots lists the update slots held for a job (the rollout bucket's
// `slot.<ns>.<job>.*` keys), read through the published ports.
func (f *Fleet) Slots(job string) ([]model.Slot, error) {
	nc, err := nats.Connect(f.NATSURLs(), nats.Timeout(3*time.Second), nats.NoReconnect())
	if err != nil {
		return nil, fmt.Errorf("connecting to the fleet's NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, "hivelet_rollout")
	if err != nil {
		return nil, fmt.Errorf("rollout bucket: %w", err)
	}
	lister, err := kv.ListKeysFiltered(ctx, "slot.default."+job+".>")
	if err != nil {
		return nil, err
	}
	var out []model.Slot
	for k := range lister.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue // released between the listing and the read
		}
		var s model.Slot
		if err := json.Unmarshal(e.Value(), &s); err != nil {
			return nil, fmt.Errorf("slot %s: %w", k, err)
		}
		out = append(out, s)
	}
	return out, nil
}
