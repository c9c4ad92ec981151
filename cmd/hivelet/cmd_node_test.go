package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/node"
	"github.com/hivelet/hivelet/internal/testutil"
)

// cli runs the root command and returns stdout, stderr and the exit code.
func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.Execute()
	code := 0
	if err != nil {
		code = 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		errb.WriteString(err.Error())
	}
	return out.String(), errb.String(), code
}

// fleetFixture starts an embedded server with the buckets and one agent-like
// node that merges its operator intent (Source + Heartbeater, as the agent).
func fleetFixture(t *testing.T) (url string, st *fleet.Store, src *fleet.Source) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	emb, err := fleet.StartEmbedded(ctx, fleet.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := fleet.Connect(ctx, fleet.ConnConfig{URLs: []string{emb.ClientURL()}, FailFast: true}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err = fleet.EnsureBuckets(ctx, conn, fleet.Names("cli"), fleet.BucketOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src = fleet.NewSource(st, fleet.SourceConfig{})
	done := make(chan struct{}, 2)
	go func() { _ = src.Run(ctx); done <- struct{}{} }()
	id := "5b0c1c43-8a5e-4d8c-9d5e-1f2a3b4c5d6e"
	build := func() *model.Node {
		return node.Build(id, node.Config{Name: "alpha", Meta: map[string]string{"rack": "r1"}},
			map[string]string{"cpu.numcores": "2"}, map[string]model.DriverInfo{"mock": {Detected: true, Healthy: true}},
			src.View().Intent(id), time.Now())
	}
	hb := node.NewHeartbeater(node.HeartbeatConfig{Period: time.Hour}, st.ForNode(id), build, nil)
	go func() { _ = hb.Run(ctx); done <- struct{}{} }()
	// Like the agent: push the record when the intent changes.
	go node.FollowIntent(ctx, src, id, hb)
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
		conn.Close()
		emb.Shutdown()
	})
	<-src.Synced()
	testutil.Eventually(t, 5*time.Second, "the node in the fleet view", func() bool { return src.View().Node(id) != nil })
	return emb.ClientURL(), st, src
}

func TestNodeDrainAndEligibilityChangeWhatTheFleetSees(t *testing.T) {
	url, st, src := fleetFixture(t)
	flags := []string{"--nats", url, "--bucket-prefix", "cli"}
	id := "5b0c1c43-8a5e-4d8c-9d5e-1f2a3b4c5d6e"

	out, errs, code := cli(t, append([]string{"node", "status"}, flags...)...)
	if code != 0 || !strings.Contains(out, "5b0c1c43") || !strings.Contains(out, "alpha") || !strings.Contains(out, "ready") {
		t.Fatalf("node status: %d %q %q", code, out, errs)
	}
	out, _, code = cli(t, append([]string{"node", "status", "alpha"}, flags...)...)
	if code != 0 || !strings.Contains(out, "driver.mock") || !strings.Contains(out, "rack") || !strings.Contains(out, "Operator Intent = none") {
		t.Fatalf("node status alpha: %d %q", code, out)
	}
	if !src.View().Node(id).Ready() {
		t.Fatal("control: the node is not ready before the drain")
	}

	out, errs, code = cli(t, append([]string{"node", "drain", "--enable", "--deadline", "10m", "--wait", "10s", "5b0c"}, flags...)...)
	if code != 0 || !strings.Contains(out, "applied by the agent") {
		t.Fatalf("drain: %d %q %q", code, out, errs)
	}
	testutil.Eventually(t, 5*time.Second, "the drain in the fleet view", func() bool { return src.View().Node(id).Drain != nil })
	n := src.View().Node(id)
	if n.Drain == nil || time.Duration(n.Drain.Deadline) != 10*time.Minute || n.Eligibility != model.Ineligible || n.Ready() {
		t.Fatalf("after drain the fleet sees %+v", n)
	}
	in, _, err := st.GetIntent(context.Background(), id)
	if err != nil || in.Drain == nil {
		t.Fatalf("intent %+v %v", in, err)
	}

	_, errs, code = cli(t, append([]string{"node", "drain", "--disable", "--wait", "10s", id}, flags...)...)
	if code != 0 {
		t.Fatalf("drain disable: %d %q", code, errs)
	}
	_, errs, code = cli(t, append([]string{"node", "eligibility", "--disable", "--wait", "10s", "alpha"}, flags...)...)
	if code != 0 {
		t.Fatalf("eligibility disable: %d %q", code, errs)
	}
	if n, _, _ := st.GetNode(context.Background(), id); n.Eligibility != model.Ineligible || n.Drain != nil {
		t.Fatalf("record after eligibility -disable: %+v", n)
	}
	_, errs, code = cli(t, append([]string{"node", "eligibility", "--enable", "--wait", "10s", "alpha"}, flags...)...)
	if n, _, _ := st.GetNode(context.Background(), id); code != 0 || !n.Ready() {
		t.Fatalf("eligibility enable: %d %q %+v", code, errs, n)
	}
}

func TestNodeCommandsRejectBadInputWithExitCode2(t *testing.T) {
	url, _, _ := fleetFixture(t)
	flags := []string{"--nats", url, "--bucket-prefix", "cli"}
	for _, args := range [][]string{
		{"node", "drain", "alpha"},                          // neither -enable nor -disable
		{"node", "drain", "--enable", "--disable", "alpha"}, // both
		{"node", "eligibility", "--enable", "nosuchnode"},   // unknown node
		{"node", "status", "nosuchnode"},
		{"deployment", "status", "nosuchjob"},
	} {
		if _, errs, code := cli(t, append(args, flags...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errs)
		}
	}
	// Control: a good command exits 0.
	if _, errs, code := cli(t, append([]string{"node", "eligibility", "--enable", "alpha"}, flags...)...); code != 0 {
		t.Fatalf("control: %d %s", code, errs)
	}
	// NATS unreachable: exit 1.
	if _, _, code := cli(t, "node", "status", "--nats", "nats://127.0.0.1:1", "--request-timeout", "500ms"); code != 1 {
		t.Errorf("unreachable NATS: exit %d, want 1", code)
	}
}

func TestDeploymentListAndStatusReadTheBucket(t *testing.T) {
	url, st, _ := fleetFixture(t)
	flags := []string{"--nats", url, "--bucket-prefix", "cli"}
	ctx := context.Background()
	for v := uint64(1); v <= 2; v++ {
		d := &model.Deployment{ID: "dep-web-" + string(rune('0'+v)), JobID: "web", JobVersion: v, Status: model.DeploymentRunning,
			StatusDescription: model.DescRunning, TaskGroups: map[string]*model.DeploymentState{"g": {DesiredTotal: 3, HealthyAllocs: 1, CanaryNodes: []string{"n1"}}}}
		if _, _, created, err := st.CreateDeployment(ctx, d); err != nil || !created {
			t.Fatal(created, err)
		}
	}
	out, errs, code := cli(t, append([]string{"deployment", "list"}, flags...)...)
	if code != 0 || strings.Count(out, "  web  ") != 2 {
		t.Fatalf("list: %d %q %q", code, out, errs)
	}
	out, _, code = cli(t, append([]string{"deployment", "status", "web"}, flags...)...)
	if code != 0 || !strings.Contains(out, "Job Version = 2") || !strings.Contains(out, "group g: canaries 0/0 healthy on n1") {
		t.Fatalf("status web (newest): %d %q", code, out)
	}
	out, _, code = cli(t, append([]string{"deployment", "status", "web@1"}, flags...)...)
	if code != 0 || !strings.Contains(out, "dep-web-1") {
		t.Fatalf("status web@1: %d %q", code, out)
	}
	out, _, code = cli(t, append([]string{"deployment", "status", "--json", "dep-web-2"}, flags...)...)
	if code != 0 || !strings.Contains(out, `"revision"`) {
		t.Fatalf("status json: %d %q", code, out)
	}
	if _, _, code := cli(t, append([]string{"deployment", "status", "dep-web"}, flags...)...); code != 2 {
		t.Fatalf("an ambiguous prefix: exit %d, want 2", code)
	}
}

// A first read of the fleet that does not complete in time says which
// buckets were not pulled and why, and a read that completes returns the
// source.
func TestSyncedSourceNamesTheBucketsItCouldNotPull(t *testing.T) {
	_, st, _ := fleetFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	_, err := syncedSource(ctx, st, fleet.SourceConfig{Kinds: []string{fleet.KindNodes, fleet.KindAllocs},
		Filters: map[string][]string{fleet.KindAllocs: {"a.>.b"}}}, 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "cli_allocs (creating watcher:") || strings.Contains(err.Error(), "cli_nodes") ||
		!strings.Contains(err.Error(), "not every bucket was pulled within") {
		t.Fatalf("syncedSource with a refused watch: %v; want the allocations bucket named with its error, and only it", err)
	}
	src, err := syncedSource(ctx, st, fleet.SourceConfig{Kinds: []string{fleet.KindNodes, fleet.KindAllocs}}, 10*time.Second)
	if err != nil {
		t.Fatalf("syncedSource: %v", err)
	}
	if u := src.Unsynced(); len(u) != 0 {
		t.Fatalf("synced, and yet Unsynced says %v", u)
	}
}
