package docker_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	docker "github.com/hivelet/hivelet/plugins/docker"
	engine "github.com/hivelet/hivelet/runtime/docker"
	"github.com/hivelet/hivelet/runtime/docker/dockertest"
	"github.com/hivelet/hivelet/sdk/driver"
)

var env = dockertest.NewEnv("driver", dockertest.Program)

// nodeID labels every container these tests create, through the driver's
// own hivelet.node_id label: TestMain checks none is left behind.
var nodeID = "test-node-" + env.RunID

func TestMain(m *testing.M) {
	if servePluginIfAsked() {
		return
	}
	code := m.Run()
	if code == 0 {
		code = checkNothingLeaked()
	}
	env.Close()
	os.Exit(code)
}

// checkNothingLeaked fails the run if a test left a container behind.
func checkNothingLeaked() int {
	c, err := dockertest.Reachable(context.Background())
	if err != nil {
		return 0 // the tests skipped
	}
	defer c.Close()
	left, err := c.ListContainers(context.Background(), map[string]string{docker.LabelNodeID: nodeID})
	if err != nil {
		fmt.Fprintln(os.Stderr, "listing leftover containers:", err)
		return 1
	}
	if len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d containers leaked by the tests (first: %v)\n", len(left), left[0].Names)
		_ = dockertest.RemoveContainers(context.Background(), c, map[string]string{docker.LabelNodeID: nodeID})
		return 1
	}
	return 0
}

// newDriver returns a driver closed at the end of the test.
func newDriver(t *testing.T, cfg docker.Config) *docker.Driver {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testLog{t}, nil))
	}
	d, err := docker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// testLog sends the driver's log to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// task returns a task of the test image running args, with its own alloc
// ID and log files; its containers are removed at the end of the test.
func task(t *testing.T, c *engine.Client, args ...string) *driver.TaskConfig {
	t.Helper()
	alloc := dockertest.RandomID()
	dir := t.TempDir()
	t.Cleanup(func() {
		if err := dockertest.RemoveContainers(context.Background(), c, map[string]string{docker.LabelAllocID: alloc}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	cfgArgs := make([]any, len(args))
	for i, a := range args {
		cfgArgs[i] = a
	}
	return &driver.TaskConfig{
		ID:         alloc + "/app",
		AllocID:    alloc,
		TaskName:   "app",
		JobID:      "test-job",
		NodeID:     nodeID,
		Config:     map[string]any{"image": env.Tag, "args": cfgArgs},
		AllocDir:   dir,
		StdoutPath: filepath.Join(dir, "app.stdout"),
		StderrPath: filepath.Join(dir, "app.stderr"),
	}
}

func start(t *testing.T, d driver.Driver, tc *driver.TaskConfig) *driver.TaskHandle {
	t.Helper()
	h, err := d.StartTask(context.Background(), tc)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return h
}

func wait(t *testing.T, d driver.Driver, id string, within time.Duration) *driver.ExitResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	ch, err := d.WaitTask(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := <-ch
	if !ok {
		t.Fatalf("task %s did not exit within %v", id, within)
	}
	return r
}

// waitOutput waits until the file at path contains substr.
func waitOutput(t *testing.T, path, substr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), substr) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("%s never contained %q (has %q)", path, substr, b)
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestATaskRunsWithItsEnvAndItsOutputReachesTheLogFiles(t *testing.T) {
	c := env.Client(t)
	d := newDriver(t, docker.Config{})
	tc := task(t, c, "env", "FROM_TASK", "FROM_CONFIG", "BOTH")
	tc.Env = map[string]string{"FROM_TASK": "t", "BOTH": "task"}
	tc.Config["env"] = map[string]any{"FROM_CONFIG": "c", "BOTH": "config"}
	h := start(t, d, tc)
	if r := wait(t, d, tc.ID, 30*time.Second); !r.Successful() {
		t.Fatalf("exit %+v", r)
	}
	if got, want := read(t, tc.StdoutPath), "FROM_TASK=t\nFROM_CONFIG=c\nBOTH=config\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if h.Driver != docker.Name || h.StartedAt.IsZero() || len(h.DriverState) == 0 {
		t.Errorf("handle %+v", h)
	}
	st, err := d.InspectTask(context.Background(), tc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != driver.TaskStateExited || st.Name != docker.ContainerName("app", tc.AllocID) {
		t.Errorf("inspect %+v", st)
	}
	ct, err := c.InspectContainer(context.Background(), st.Attributes["container_id"])
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{docker.LabelAllocID: tc.AllocID, docker.LabelTask: "app", docker.LabelJob: "test-job", docker.LabelNodeID: nodeID} {
		if ct.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, ct.Labels[k], v)
		}
	}
}

func TestExitCodesAreReportedAsTheContainerEnded(t *testing.T) {
	c := env.Client(t)
	d := newDriver(t, docker.Config{})
	for _, code := range []int{0, 1, 42} {
		tc := task(t, c, "exit", strconv.Itoa(code))
		start(t, d, tc)
		r := wait(t, d, tc.ID, 30*time.Second)
		if r.ExitCode != code || r.OOMKilled || r.Successful() != (code == 0) {
			t.Errorf("exit %d: got %+v", code, r)
		}
		if got := read(t, tc.StderrPath); got != "hello stderr\n" {
			t.Errorf("exit %d: stderr %q", code, got)
		}
	}
}

func TestAPublishedPortAnswersOnTheHost(t *testing.T) {
	c := env.Client(t)
	d := newDriver(t, docker.Config{})
	port := testutil.FreePort(t)
	tc := task(t, c, "serve", "8080")
	tc.Config["publish"] = []any{map[string]any{"host": port, "container": 8080, "host_ip": "127.0.0.1"}}
	start(t, d, tc)
	awaitHello(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/")
	st, err := d.InspectTask(context.Background(), tc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(port) + ":8080/tcp"; st.Attributes["ports"] != want {
		t.Errorf("ports attribute %q, want %q", st.Attributes["ports"], want)
	}
	if err := d.StopTask(context.Background(), tc.ID, 5*time.Second, ""); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, d, tc.ID, 10*time.Second); r.ExitCode != 0 {
		t.Errorf("exit after stop: %+v", r)
	}
}

// awaitHello polls url until the test program's "hello <host>" answers.
func awaitHello(t *testing.T, url string) {
	t.Helper()
	var body string
	testutil.Eventually(t, 20*time.Second, "an answer on "+url, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return strings.HasPrefix(body, "hello ")
	})
}

// TestAPortLabelIsPublishedOnTheNodeAddressFromTheAllocationsPorts: the
// node hands the allocation's ports to the driver in the task's env; a
// ports = ["http"] task answers on the node's port, mapped to its `to`.
func TestAPortLabelIsPublishedOnTheNodeAddressFromTheAllocationsPorts(t *testing.T) {
	c := env.Client(t)
	d := newDriver(t, docker.Config{})
	port := testutil.FreePort(t)
	tc := task(t, c, "serve", "8080")
	tc.Config["ports"] = []any{"http"}
	tc.Env = map[string]string{"NOMAD_HOST_PORT_http": strconv.Itoa(port), "NOMAD_PORT_http": "8080", "NOMAD_HOST_IP_http": "127.0.0.1"}
	start(t, d, tc)
	awaitHello(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/")
	st, err := d.InspectTask(context.Background(), tc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p := st.Attributes["ports"]; !strings.Contains(p, strconv.Itoa(port)+":8080/tcp") || !strings.Contains(p, strconv.Itoa(port)+":8080/udp") {
		t.Errorf("ports attribute %q: want the label published for tcp and udp", p)
	}
	if err := d.StopTask(context.Background(), tc.ID, 5*time.Second, ""); err != nil {
		t.Fatal(err)
	}
	wait(t, d, tc.ID, 10*time.Second)
}

// TestNamespacesCapabilitiesAndDevicesAreWhatTheConfigAsks: pid_mode and
// ipc_mode "host" put the container in this machine's namespaces, cap_drop
// and cap_add leave exactly the capability asked for, and a device appears
// at its container path. The control container, with none of it, gets its
// own namespaces and Docker's default capabilities.
func TestNamespacesCapabilitiesAndDevicesAreWhatTheConfigAsks(t *testing.T) {
	c := env.Client(t)
	d := newDriver(t, docker.Config{})
	run := func(extra map[string]any) map[string]string {
		tc := task(t, c, "ns", "/dev/hivelet-null")
		for k, v := range extra {
			tc.Config[k] = v
		}
		start(t, d, tc)
		waitOutput(t, tc.StdoutPath, "done\n")
		out := map[string]string{}
		for _, line := range strings.Split(read(t, tc.StdoutPath), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				out[k] = v
			}
		}
		if err := d.StopTask(context.Background(), tc.ID, 5*time.Second, ""); err != nil {
			t.Fatal(err)
		}
		wait(t, d, tc.ID, 10*time.Second)
		return out
	}
	hostNS := map[string]string{}
	for _, n := range []string{"pid", "ipc"} {
		l, err := os.Readlink("/proc/self/ns/" + n)
		if err != nil {
			t.Fatal(err)
		}
		hostNS[n] = l
	}
	got := run(map[string]any{
		"pid_mode": "host", "ipc_mode": "host",
		"cap_drop": []any{"ALL"}, "cap_add": []any{"CHOWN"},
		"devices": []any{map[string]any{"host_path": "/dev/null", "container_path": "/dev/hivelet-null"}},
	})
	if got["pid"] != hostNS["pid"] || got["ipc"] != hostNS["ipc"] {
		t.Errorf("namespaces pid=%s ipc=%s, want the host's %v", got["pid"], got["ipc"], hostNS)
	}
	if got["capeff"] != "0000000000000001" {
		t.Errorf("capabilities %s, want only CAP_CHOWN (bit 0)", got["capeff"])
	}
	if got["dev /dev/hivelet-null"] != "ok" {
		t.Errorf("device at its container path: %q", got["dev /dev/hivelet-null"])
	}
	control := run(nil)
	if control["pid"] == hostNS["pid"] || control["ipc"] == hostNS["ipc"] || control["capeff"] == "0000000000000001" ||
		control["dev /dev/hivelet-null"] != "missing" {
		t.Errorf("control container: %v (host %v)", control, hostNS)
	}
}

func TestStopSendsTheKillSignalAndKillsWhatIgnoresItAfterTheTimeout(t *testing.T) {
	c := env.Client(t)
	d := newDriver(t, docker.Config{})
	ctx := context.Background()

	// The task's kill signal is SIGUSR1, and the program exits 3 on it.
	handles := task(t, c, "run", "-exit", "SIGUSR1", "-code", "3")
	handles.KillSignal = "SIGUSR1"
	// Control: a program ignoring SIGTERM (the default kill signal).
	ignores := task(t, c, "run", "-ignore", "SIGTERM", "-exit", "SIGUSR2")
	start(t, d, handles)
	start(t, d, ignores)
	waitOutput(t, handles.StdoutPath, "ready")
	waitOutput(t, ignores.StdoutPath, "ready")

	t0 := time.Now()
	if err := d.StopTask(ctx, handles.ID, 10*time.Second, ""); err != nil {
		t.Fatal(err)
	}
	r := wait(t, d, handles.ID, 10*time.Second)
	if d := time.Since(t0); d > 5*time.Second || r.ExitCode != 3 {
		t.Errorf("handled kill signal: exit %+v after %v, want code 3 at once", r, d)
	}

	t0 = time.Now()
	if err := d.StopTask(ctx, ignores.ID, time.Second, ""); err != nil {
		t.Fatal(err)
	}
	r = wait(t, d, ignores.ID, 10*time.Second)
	if d := time.Since(t0); d < time.Second || r.ExitCode != 137 {
		t.Errorf("ignored signal: exit %+v after %v, want 137 after the 1s timeout", r, d)
	}

	// A signal other than the one set at creation goes through a kill call.
	other := task(t, c, "run", "-exit", "SIGHUP", "-code", "5")
	start(t, d, other)
	waitOutput(t, other.StdoutPath, "ready")
	if err := d.StopTask(ctx, other.ID, 5*time.Second, "SIGHUP"); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, d, other.ID, 10*time.Second); r.ExitCode != 5 {
		t.Errorf("stop with SIGHUP: %+v, want code 5", r)
	}
}

func TestSignalTaskDeliversTheSignal(t *testing.T) {
	c := env.Client(t)
	d := newDriver(t, docker.Config{})
	tc := task(t, c, "run", "-exit", "SIGUSR2", "-code", "7")
	start(t, d, tc)
	waitOutput(t, tc.StdoutPath, "ready")
	// Control: the task is still running before the signal.
	if st, err := d.InspectTask(context.Background(), tc.ID); err != nil || st.State != driver.TaskStateRunning {
		t.Fatalf("before the signal: %+v %v", st, err)
	}
	if err := d.SignalTask(context.Background(), tc.ID, "SIGUSR2"); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, d, tc.ID, 10*time.Second); r.ExitCode != 7 {
		t.Errorf("after SIGUSR2: %+v, want code 7", r)
	}
}

func TestAnOOMKillIsReportedAsSuch(t *testing.T) {
	c := env.Client(t)
	d := newDriver(t, docker.Config{})
	events, err := d.TaskEvents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	oom := task(t, c, "oom")
	oom.Resources.MemoryMB = 32
	control := task(t, c, "exit", "0")
	control.Resources.MemoryMB = 32
	start(t, d, oom)
	start(t, d, control)
	r := wait(t, d, oom.ID, 60*time.Second)
	if !r.OOMKilled || r.Successful() {
		t.Errorf("allocating past 32 MiB: %+v, want OOMKilled", r)
	}
	if r := wait(t, d, control.ID, 30*time.Second); r.OOMKilled || !r.Successful() {
		t.Errorf("control under the same limit: %+v", r)
	}
	if ev := findEvent(t, events, oom.ID, "OOM killed", 5*time.Second); ev.Annotations["oom_killed"] != "true" {
		t.Errorf("OOM event %+v", ev)
	}
}

// findEvent reads events until one of task id contains substr (or one of
// its "|"-separated alternatives).
func findEvent(t *testing.T, events <-chan *driver.TaskEvent, id, substr string, within time.Duration) *driver.TaskEvent {
	t.Helper()
	timeout := time.After(within)
	var seen []string
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("event stream closed; seen %q", seen)
			}
			if ev.TaskID == id {
				seen = append(seen, ev.Message)
				for _, alt := range strings.Split(substr, "|") {
					if strings.Contains(ev.Message, alt) {
						return ev
					}
				}
			}
		case <-timeout:
			t.Fatalf("no event %q for %s within %v; seen %q", substr, id, within, seen)
		}
	}
}

func TestAMissingImageFailsTheStartQuicklyWithAClearEvent(t *testing.T) {
	c := env.Client(t)
	d := newDriver(t, docker.Config{})
	events, err := d.TaskEvents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	missing := "hivelet-test/missing:" + dockertest.RandomID()
	tc := task(t, c, "exit", "0")
	tc.Config["image"] = missing
	t0 := time.Now()
	_, err = d.StartTask(context.Background(), tc)
	if err == nil {
		t.Fatal("a task with a missing image started")
	}
	if el := time.Since(t0); el > 15*time.Second {
		t.Errorf("failing took %v", el)
	}
	if !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "could not be pulled") {
		t.Errorf("error does not say what failed: %v", err)
	}
	findEvent(t, events, tc.ID, "Failed to pull image "+missing, 5*time.Second)

	// A registry that accepts connections and never answers: the pull is
	// bounded by image_pull_timeout.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns sync.WaitGroup
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() { defer conns.Done(); _, _ = io.Copy(io.Discard, conn); conn.Close() }()
		}
	}()
	silent := task(t, c, "exit", "0")
	silent.Config["image"] = ln.Addr().String() + "/hivelet/silent:1"
	silent.Config["image_pull_timeout"] = "1s"
	t0 = time.Now()
	_, err = d.StartTask(context.Background(), silent)
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("pull from a silent registry: %v, want a timeout", err)
	}
	if el := time.Since(t0); el > 8*time.Second {
		t.Errorf("timing out took %v for a 1s bound", el)
	}

	// Control: the local image starts without any pull event.
	ok := task(t, c, "exit", "0")
	start(t, d, ok)
	if r := wait(t, d, ok.ID, 30*time.Second); !r.Successful() {
		t.Errorf("control: %+v", r)
	}
}

func TestRecoveryAfterTheHostRestartsReattachesWithoutRestartingOrDuplicatingLogs(t *testing.T) {
	c := env.Client(t)
	ctx := context.Background()
	d1, err := docker.New(docker.Config{Logger: slog.New(slog.NewTextHandler(testLog{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tc := task(t, c, "tick", "20")
	h := start(t, d1, tc)
	before, err := d1.InspectTask(ctx, tc.ID)
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, tc.StdoutPath, "tick 5\n")
	d1.Close() // the host process goes away; the container keeps running
	time.Sleep(400 * time.Millisecond)

	d2 := newDriver(t, docker.Config{})
	// Control: the new driver knows nothing before recovery.
	if _, err := d2.InspectTask(ctx, tc.ID); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("before recovery: %v, want ErrTaskNotFound", err)
	}
	if err := d2.RecoverTask(ctx, h); err != nil {
		t.Fatal(err)
	}
	if err := d2.RecoverTask(ctx, h); err != nil {
		t.Fatalf("recovering twice: %v", err)
	}
	after, err := d2.InspectTask(ctx, tc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Attributes["container_id"] != before.Attributes["container_id"] || !after.StartedAt.Equal(before.StartedAt) || after.State != driver.TaskStateRunning {
		t.Fatalf("recovered %+v, was %+v: not the same running container", after, before)
	}
	waitOutput(t, tc.StdoutPath, "tick 40\n")
	if err := d2.StopTask(ctx, tc.ID, 5*time.Second, ""); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, d2, tc.ID, 10*time.Second); r.ExitCode != 0 {
		t.Errorf("exit %+v", r)
	}
	checkTicks(t, tc.StdoutPath, 40)
}

// checkTicks checks a tick program's log: "tick 0", "tick 1"... with no
// line repeated or missing, at least min lines.
func checkTicks(t *testing.T, path string, min int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		if want := "tick " + strconv.Itoa(n); sc.Text() != want {
			t.Fatalf("line %d is %q, want %q: lines lost or duplicated", n, sc.Text(), want)
		}
		n++
	}
	if n < min {
		t.Fatalf("%d lines, want at least %d", n, min)
	}
}

func TestAForeignContainerWithOurNameIsNeverTouched(t *testing.T) {
	c := env.Client(t)
	ctx := context.Background()
	d := newDriver(t, docker.Config{})
	tc := task(t, c, "exit", "0")
	name := docker.ContainerName(tc.TaskName, tc.AllocID)
	foreign, err := c.CreateContainer(ctx, engine.ContainerSpec{Name: name, Image: env.Tag, Cmd: []string{"run"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.RemoveContainer(context.Background(), foreign, true) })
	if err := c.StartContainer(ctx, foreign); err != nil {
		t.Fatal(err)
	}

	// Starting the task must not remove or reuse the foreign container.
	_, err = d.StartTask(ctx, tc)
	if err == nil || !strings.Contains(err.Error(), "not this task's") {
		t.Fatalf("start over a foreign container: %v", err)
	}
	// Recovering a handle that names the foreign container must refuse it.
	forged := &driver.TaskHandle{Version: 1, TaskID: tc.ID, Driver: docker.Name,
		DriverState: []byte(`{"container_id":"` + foreign + `","alloc_id":"` + tc.AllocID + `","task":"app"}`)}
	if err := d.RecoverTask(ctx, forged); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("recover onto a foreign container: %v, want ErrTaskNotFound", err)
	}
	if _, err := d.InspectTask(ctx, tc.ID); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("the foreign container was adopted: %v", err)
	}
	st, err := c.InspectContainer(ctx, foreign)
	if err != nil || !st.Running || st.ID != foreign {
		t.Fatalf("the foreign container was touched: %+v %v", st, err)
	}

	// Control: a leftover container that IS the task's (an earlier attempt)
	// is replaced by the start.
	if err := c.RemoveContainer(ctx, foreign, true); err != nil {
		t.Fatal(err)
	}
	h1 := start(t, d, tc)
	wait(t, d, tc.ID, 30*time.Second)
	d2 := newDriver(t, docker.Config{}) // a fresh driver that does not track it
	h2 := start(t, d2, tc)
	if string(h1.DriverState) == string(h2.DriverState) {
		t.Fatal("the second start reused the first container")
	}
	wait(t, d2, tc.ID, 30*time.Second)
	if err := d2.DestroyTask(ctx, tc.ID, true); err != nil {
		t.Fatal(err)
	}
	if left, _ := c.ListContainers(ctx, map[string]string{docker.LabelAllocID: tc.AllocID}); len(left) != 0 {
		t.Errorf("destroy left %d containers", len(left))
	}
}

func TestDestroyRefusesARunningTaskUnlessForced(t *testing.T) {
	c := env.Client(t)
	ctx := context.Background()
	d := newDriver(t, docker.Config{})
	tc := task(t, c, "run")
	start(t, d, tc)
	if err := d.DestroyTask(ctx, tc.ID, false); err == nil {
		t.Fatal("a running task was destroyed without force")
	}
	if err := d.DestroyTask(ctx, tc.ID, true); err != nil {
		t.Fatal(err)
	}
	if left, _ := c.ListContainers(ctx, map[string]string{docker.LabelAllocID: tc.AllocID}); len(left) != 0 {
		t.Errorf("forced destroy left %d containers", len(left))
	}
	if _, err := d.InspectTask(ctx, tc.ID); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Errorf("after destroy: %v, want ErrTaskNotFound", err)
	}
}

func TestStatsReportCPUAndMemory(t *testing.T) {
	c := env.Client(t)
	d := newDriver(t, docker.Config{})
	busy := task(t, c, "busy")
	idle := task(t, c, "run") // control: the same program, waiting
	start(t, d, busy)
	start(t, d, idle)
	// peak is the highest CPU share among a task's first eight samples
	// (300 ms apart), and its last memory figure. One sample can catch a
	// busy task between time slices when the machine is saturated (the
	// suite runs four test processes at once): 1.7 % once.
	peak := func(id string) (cpu float64, mem uint64) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ch, err := d.TaskStats(ctx, id, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for s := range ch {
			n++
			cpu, mem = max(cpu, s.CPUPercent), s.MemoryBytes
			if n == 8 {
				cancel()
			}
		}
		if n < 8 {
			t.Fatalf("%d samples", n)
		}
		return cpu, mem
	}
	bCPU, bMem := peak(busy.ID)
	iCPU, iMem := peak(idle.ID)
	// The machine is shared: ask for a clear difference, not a full CPU.
	if bCPU < 5 || bCPU < 5*iCPU || bMem == 0 || iMem == 0 {
		t.Errorf("busy: peak CPU %.1f %%, memory %d B; idle: %.1f %%, %d B: want the busy one clearly using CPU, both some memory", bCPU, bMem, iCPU, iMem)
	}
}

func TestLogFilesAreRotatedBySize(t *testing.T) {
	c := env.Client(t)
	d := newDriver(t, docker.Config{LogMaxBytes: 4096, LogMaxFiles: 2})
	tc := task(t, c, "log", "2000")
	start(t, d, tc)
	waitOutput(t, tc.StdoutPath, "out 1999\n")
	waitOutput(t, tc.StderrPath, "err 1999\n")
	for _, p := range []string{tc.StdoutPath, tc.StdoutPath + ".1", tc.StdoutPath + ".2", tc.StderrPath, tc.StderrPath + ".2"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if st.Size() > 4096 || st.Size() == 0 {
			t.Errorf("%s: %d bytes", p, st.Size())
		}
	}
	if _, err := os.Stat(tc.StdoutPath + ".3"); !os.IsNotExist(err) {
		t.Errorf("a third rotated file exists: %v", err)
	}
	if !strings.HasSuffix(read(t, tc.StdoutPath), "out 1999\n") {
		t.Error("the current file does not end with the last line")
	}
	if err := d.StopTask(context.Background(), tc.ID, 5*time.Second, ""); err != nil {
		t.Fatal(err)
	}
	wait(t, d, tc.ID, 10*time.Second)
}

func TestFingerprintReportsTheEngineOrItsAbsence(t *testing.T) {
	env.Client(t)
	check := func(cfg docker.Config) *driver.Fingerprint {
		d := newDriver(t, cfg)
		ch, err := d.Fingerprint(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		select {
		case fp := <-ch:
			return fp
		case <-time.After(15 * time.Second):
			t.Fatal("no fingerprint")
			return nil
		}
	}
	fp := check(docker.Config{})
	if !fp.Healthy || fp.Attributes["version"] == "" || fp.Attributes["api_version"] != "1.41" || fp.Attributes["runtime"] == "" {
		t.Errorf("reachable engine: %+v", fp)
	}
	fp = check(docker.Config{Engine: engine.Options{Host: "unix:///nonexistent/docker.sock"}})
	if fp.Healthy || !strings.Contains(fp.Description, "unreachable") {
		t.Errorf("unreachable engine: %+v", fp)
	}
}

func TestATaskThatExitedWhileTheDriverWasAwayReportsItsExitOnRecovery(t *testing.T) {
	c := env.Client(t)
	ctx := context.Background()
	d1, err := docker.New(docker.Config{Logger: slog.New(slog.NewTextHandler(testLog{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tc := task(t, c, "run", "-exit", "SIGUSR1", "-code", "9")
	h := start(t, d1, tc)
	waitOutput(t, tc.StdoutPath, "ready")
	d1.Close()
	before, err := c.ListContainers(ctx, map[string]string{docker.LabelAllocID: tc.AllocID})
	if err != nil || len(before) != 1 {
		t.Fatalf("containers of the task: %v %v", before, err)
	}
	// The task ends while no driver watches it.
	if err := c.KillContainer(ctx, before[0].ID, "SIGUSR1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitContainer(ctx, before[0].ID); err != nil {
		t.Fatal(err)
	}

	d2 := newDriver(t, docker.Config{})
	// A handle whose container ID is stale: the container labelled for the
	// task is found instead.
	stale := *h
	stale.DriverState = []byte(strings.Replace(string(h.DriverState), before[0].ID, "0000000000000000000000000000000000000000000000000000000000000000", 1))
	if string(stale.DriverState) == string(h.DriverState) {
		t.Fatal("the handle does not hold the container ID")
	}
	if err := d2.RecoverTask(ctx, &stale); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, d2, tc.ID, 10*time.Second); r.ExitCode != 9 {
		t.Errorf("exit after recovery: %+v, want code 9", r)
	}
	if got := read(t, tc.StdoutPath); got != "ready\ngot user defined signal 1\n" {
		t.Errorf("stdout %q: the log before and after the driver's absence", got)
	}

	// Control: once no container carries the task's labels, recovery says so.
	if err := d2.DestroyTask(ctx, tc.ID, true); err != nil {
		t.Fatal(err)
	}
	if err := d2.RecoverTask(ctx, h); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Errorf("recovering a removed task: %v, want ErrTaskNotFound", err)
	}
}

// A second start of a task its driver tracks gets the same handle back
// with the same config and is refused with another. A fresh driver (a
// plugin relaunched after a crash, which never returned the handle)
// adopts the running container when the config is the same, replaces it
// when the config differs, and DestroyTask removes it without a handle.
func TestARunningContainerNoHandleNamesIsAdoptedReplacedOrDestroyed(t *testing.T) {
	c := env.Client(t)
	ctx := context.Background()
	d := newDriver(t, docker.Config{})
	tc := task(t, c, "run")
	first := start(t, d, tc)
	containers := func() []engine.ContainerSummary {
		t.Helper()
		list, err := c.ListContainers(ctx, map[string]string{docker.LabelAllocID: tc.AllocID})
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	firstID := containerID(t, first)

	// The same driver, asked again (the host lost its answer): the same
	// config gets the running task's handle; another config is refused.
	again := start(t, d, tc)
	if containerID(t, again) != firstID || !again.StartedAt.Equal(first.StartedAt) || len(containers()) != 1 {
		t.Fatalf("second start on the same driver: container %s, %d containers; want the first, alone", short(containerID(t, again)), len(containers()))
	}
	other := *tc
	other.Config = map[string]any{"image": env.Tag, "args": []any{"run", "-ignore", "SIGUSR1"}}
	if _, err := d.StartTask(ctx, &other); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("a start with another config on the same driver: %v, want refused", err)
	}

	// Same config, fresh driver: the same container, not restarted.
	d2 := newDriver(t, docker.Config{})
	adopted := start(t, d2, tc)
	if got := containerID(t, adopted); got != firstID || !adopted.StartedAt.Equal(first.StartedAt) {
		t.Fatalf("adopted container %s started %v, want %s started %v", short(got), adopted.StartedAt, short(firstID), first.StartedAt)
	}
	if list := containers(); len(list) != 1 || list[0].State != "running" {
		t.Fatalf("containers after adoption: %+v, want the one running", list)
	}

	// Another config, fresh driver: the old container is replaced.
	d3 := newDriver(t, docker.Config{})
	changed := *tc
	changed.Config = map[string]any{"image": env.Tag, "args": []any{"run", "-ignore", "SIGHUP"}}
	replaced := start(t, d3, &changed)
	if containerID(t, replaced) == firstID {
		t.Fatal("a start with another config adopted the old container")
	}
	if list := containers(); len(list) != 1 || list[0].ID != containerID(t, replaced) {
		t.Fatalf("containers after the replacement: %+v, want only the new one", list)
	}

	// No handle at all: DestroyTask on a fresh driver removes it; a task
	// with no container is still ErrTaskNotFound (control).
	d4 := newDriver(t, docker.Config{})
	if err := d4.DestroyTask(ctx, tc.ID, false); err == nil {
		t.Error("destroying a running untracked task without force succeeded")
	}
	if err := d4.DestroyTask(ctx, tc.ID, true); err != nil {
		t.Fatalf("destroying an untracked task: %v", err)
	}
	if list := containers(); len(list) != 0 {
		t.Fatalf("containers after DestroyTask: %+v, want none", list)
	}
	if err := d4.DestroyTask(ctx, tc.ID, true); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("destroying a task with no container: %v, want ErrTaskNotFound", err)
	}
}

// containerID is the container a docker handle names.
func containerID(t *testing.T, h *driver.TaskHandle) string {
	t.Helper()
	var st struct {
		ContainerID string `json:"container_id"`
	}
	if err := json.Unmarshal(h.DriverState, &st); err != nil || st.ContainerID == "" {
		t.Fatalf("handle state %s: %v", h.DriverState, err)
	}
	return st.ContainerID
}

func short(id string) string { return id[:min(12, len(id))] }

func TestAPullReportsProgressAsEventsAndALocalImageIsNotPulledAgain(t *testing.T) {
	c := env.Client(t)
	ctx := context.Background()
	reg := dockertest.NewRegistry("alice", "s3cret")
	defer reg.Close()
	ref, err := reg.AddImage("hivelet/pulled", dockertest.RandomID(), env.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.RemoveImage(context.Background(), ref) })
	d := newDriver(t, docker.Config{})
	events, err := d.TaskEvents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	withImage := func(args ...string) *driver.TaskConfig {
		tc := task(t, c, args...)
		tc.Config["image"] = ref
		tc.Config["auth"] = []any{map[string]any{"username": "alice", "password": "s3cret", "server_address": reg.Host()}}
		return tc
	}

	// Wrong credentials: the pull fails, with an event saying so.
	bad := withImage("exit", "0")
	bad.Config["auth"] = []any{map[string]any{"username": "alice", "password": "wrong", "server_address": reg.Host()}}
	t0 := time.Now()
	if _, err := d.StartTask(ctx, bad); err == nil {
		t.Fatal("a pull with wrong credentials succeeded")
	}
	t.Logf("pull with wrong credentials failed in %v", time.Since(t0))
	findEvent(t, events, bad.ID, "Failed to pull image", 5*time.Second)

	first := withImage("exit", "0")
	start(t, d, first)
	findEvent(t, events, first.ID, "Pulling image "+ref, 5*time.Second)
	// Each layer ends "Pull complete", or "Already exists" when the engine
	// has it from the test image already.
	findEvent(t, events, first.ID, "Pull complete|Already exists", 5*time.Second)
	findEvent(t, events, first.ID, "Pulled image "+ref, 5*time.Second)
	if r := wait(t, d, first.ID, 30*time.Second); !r.Successful() {
		t.Fatalf("pulled image's task: %+v", r)
	}

	// The image is now local: no request reaches the registry...
	served := reg.Requests()
	second := withImage("exit", "0")
	start(t, d, second)
	wait(t, d, second.ID, 30*time.Second)
	if n := reg.Requests(); n != served {
		t.Errorf("a local image was pulled again (%d registry requests)", n-served)
	}
	// ...unless force_pull says so (control).
	third := withImage("exit", "0")
	third.Config["force_pull"] = true
	start(t, d, third)
	wait(t, d, third.ID, 30*time.Second)
	if n := reg.Requests(); n == served {
		t.Error("force_pull did not reach the registry")
	}
}

func TestAStartThatFailsLeavesNoContainerBehind(t *testing.T) {
	c := env.Client(t)
	ctx := context.Background()
	d := newDriver(t, docker.Config{})
	events, err := d.TaskEvents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The host port is taken: the container is created, and its start fails.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	tc := task(t, c, "serve", "8080")
	tc.Config["publish"] = []any{map[string]any{"host": taken, "container": 8080, "host_ip": "127.0.0.1"}}
	if _, err := d.StartTask(ctx, tc); err == nil {
		t.Fatal("a task started on a host port that is taken")
	}
	findEvent(t, events, tc.ID, "Failed to start container", 5*time.Second)
	if left, err := c.ListContainers(ctx, map[string]string{docker.LabelAllocID: tc.AllocID}); err != nil || len(left) != 0 {
		t.Fatalf("the failed start left %d containers (%v)", len(left), err)
	}
	// Control: once the port is free, the same task starts.
	ln.Close()
	start(t, d, tc)
	if left, _ := c.ListContainers(ctx, map[string]string{docker.LabelAllocID: tc.AllocID}); len(left) != 1 {
		t.Fatalf("after the port was freed: %d containers, want 1", len(left))
	}
}

// A container killed by SIGKILL from outside (not by the OOM killer, not by
// StopTask) is not reported as OOM killed: the driver's second look for a
// late OOM record finds none. Its exit is reported after that look
// (lateOOMWait); a StopTask's kill is not delayed by it.
func TestASIGKILLFromOutsideIsNotAnOOMKill(t *testing.T) {
	c := env.Client(t)
	d := newDriver(t, docker.Config{})
	tc := task(t, c, "run")
	tc.Resources.MemoryMB = 32
	h := start(t, d, tc)
	var st struct {
		ContainerID string `json:"container_id"`
	}
	if err := json.Unmarshal(h.DriverState, &st); err != nil || st.ContainerID == "" {
		t.Fatalf("handle state %s: %v", h.DriverState, err)
	}
	killed := time.Now()
	if err := c.KillContainer(context.Background(), st.ContainerID, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	r := wait(t, d, tc.ID, 30*time.Second)
	if r.ExitCode != 137 || r.OOMKilled {
		t.Fatalf("killed from outside: %+v, want exit 137 and not OOM killed", r)
	}
	if el := time.Since(killed); el < docker.LateOOMWait {
		t.Fatalf("reported %s after the kill: the late OOM record was not looked for", el)
	}

	// Control: StopTask's own kill is reported without that wait.
	tc2 := task(t, c, "run", "-ignore", "SIGTERM", "-exit", "SIGINT")
	start(t, d, tc2)
	waitOutput(t, tc2.StdoutPath, "ready") // SIGTERM ignored from here on
	if err := d.StopTask(context.Background(), tc2.ID, 100*time.Millisecond, ""); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now() // the engine's stop returns once the container is gone
	r2 := wait(t, d, tc2.ID, 30*time.Second)
	if r2.ExitCode != 137 || r2.OOMKilled {
		t.Fatalf("a StopTask kill (SIGTERM ignored): %+v, want exit 137 and not OOM killed", r2)
	}
	if el := time.Since(stopped); el >= docker.LateOOMWait/2 {
		t.Fatalf("a StopTask kill reported %s after the stop: it waited for a late OOM record", el)
	}
}

// TestALoggingBlockSetsTheContainersLogDriverAndTheOutputStillArrives: the
// engine creates the container with the log driver and options the task
// asks for, and the task's output still reaches its log files (read back
// through the engine); the control task without a block gets the driver's
// bounded json-file.
func TestALoggingBlockSetsTheContainersLogDriverAndTheOutputStillArrives(t *testing.T) {
	c := env.Client(t)
	d := newDriver(t, docker.Config{})
	logOf := func(logging any) (string, map[string]string) {
		tc := task(t, c, "exit", "0")
		if logging != nil {
			tc.Config["logging"] = logging
		}
		start(t, d, tc)
		waitOutput(t, tc.StdoutPath, "hello stdout")
		wait(t, d, tc.ID, 10*time.Second)
		list, err := c.ListContainers(context.Background(), map[string]string{docker.LabelAllocID: tc.AllocID})
		if err != nil || len(list) != 1 {
			t.Fatalf("containers of %s: %v %v", tc.AllocID, list, err)
		}
		st, err := c.InspectContainer(context.Background(), list[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		return st.LogType, st.LogOptions
	}
	typ, opts := logOf([]any{map[string]any{"type": "local", "config": []any{map[string]any{"max-size": "1m", "max-file": "2"}}}})
	if typ != "local" || opts["max-size"] != "1m" || opts["max-file"] != "2" {
		t.Errorf("with logging { type = local }: %q %v", typ, opts)
	}
	typ, opts = logOf(nil)
	if typ != "json-file" || opts["max-size"] != "10m" {
		t.Errorf("control: %q %v, want the driver's bounded json-file", typ, opts)
	}
}
