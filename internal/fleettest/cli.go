package fleettest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hivelet/hivelet/host/model"
)

// NATSURLs are the client URLs of the running NATS servers, on 127.0.0.1
// (their published ports), comma-separated as the CLI's -nats takes them.
// A killed server is left out, so no request waits on its dead port.
func (f *Fleet) NATSURLs() string {
	var urls []string
	for _, c := range f.NATS {
		if f.State(c) == "running" {
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
	args = append(args, "-nats", f.NATSURLs())
	if len(args) > 1 && args[0] == "job" && (args[1] == "run" || args[1] == "stop") && !strings.Contains(strings.Join(args, " "), "-timeout") {
		args = append(args, "-timeout", "90s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.Image.CLI, args...)
	cmd.Env = append(os.Environ(), "HIVELET_NATS_URL=") // only -nats, never an operator's default
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	} else if err != nil {
		f.T.Fatalf("fleettest: running hivelet %v: %v", args, err)
	}
	return 0, out.String()
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
	code, out := f.CLI("node", "status", "-json")
	if code != 0 {
		return nil, fmt.Errorf("node status: exit %d: %s", code, strings.TrimSpace(out))
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

// NodesReady reports whether every agent's node is listed as ready, and
// otherwise which one is not.
func (f *Fleet) NodesReady(agents ...*Container) (bool, string) {
	nodes, err := f.Nodes()
	if err != nil {
		return false, err.Error()
	}
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

// NodeGone reports whether the agent's node is no longer ready in the
// nodes bucket (its key expired: absent, or listed down).
func (f *Fleet) NodeGone(c *Container) (bool, string) {
	nodes, err := f.Nodes()
	if err != nil {
		return false, err.Error()
	}
	n := NodeByName(nodes, c.Name)
	if n == nil {
		return true, c.Name + " not listed"
	}
	return n.Status != model.NodeStatusReady, fmt.Sprintf("%s is %s", c.Name, n.Status)
}

// Allocs lists the allocations the allocations bucket holds for the agent's
// node (`node status NAME -json`), with their task states.
func (f *Fleet) Allocs(c *Container) ([]*model.Allocation, error) {
	code, out := f.CLI("node", "status", c.Name, "-json")
	if code != 0 {
		return nil, fmt.Errorf("node status %s: exit %d: %s", c.Name, code, strings.TrimSpace(out))
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
		running := 0
		for _, a := range live {
			if a.ClientStatus == model.ClientRunning && a.JobVersion == version {
				running++
			}
		}
		if running != want || len(live) != want {
			return false, fmt.Sprintf("%s: %d of %d live allocations running version %d", c.Name, running, len(live), version), by
		}
	}
	return true, "", by
}

// AllocLogs is a task's stdout as `hivelet alloc logs ID TASK` reads it:
// asked over NATS of the agent running the allocation, which reads its own
// file (so it is that agent's answer now, not a stored record).
func (f *Fleet) AllocLogs(allocID, task string) (string, error) {
	code, out := f.CLI("alloc", "logs", allocID, task)
	if code != 0 {
		return "", fmt.Errorf("alloc logs %s %s: exit %d: %s", allocID, task, code, strings.TrimSpace(out))
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
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
