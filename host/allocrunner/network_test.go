package allocrunner

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/ports"
	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/sdk/driver"
)

func portTable(t *testing.T) *ports.Table {
	t.Helper()
	tb, err := ports.New(ports.Config{Address: "127.0.0.1", MinDynamic: 24000, MaxDynamic: 24010})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func networkFixture(t *testing.T, tb *ports.Table, allocID string) (*fixture, *Runner) {
	f := newFixture(t, map[string]any{"echo": "listen on :${NOMAD_PORT_dyn}, reach ${NOMAD_ADDR_web}"}, nil, nil)
	f.job.Groups[0].Network = &model.Network{Mode: model.NetworkHost, Ports: []model.Port{{Label: "web", Static: 8080}, {Label: "dyn", To: 9000}}}
	f.job.Groups[0].Tasks[0].Env = map[string]string{"SELF": "${NOMAD_HOST_PORT_dyn}", "NOMAD_PORT_web": "1"}
	f.alloc.ID = allocID
	r := New(Config{Alloc: f.alloc, Job: f.job, Node: &model.Node{ID: "n1"}, Drivers: f.drv, Validate: validate, Store: f.store,
		AllocRoot: f.root, Ports: tb})
	return f, r
}

func stopRunner(t *testing.T, r *Runner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Stop(ctx, "test over"); err != nil {
		t.Fatal(err)
	}
}

// TestTheAllocationsPortsAreRecordedBeforeItsTasksStartAndReachTheirConfigAndEnv:
// the runner takes the group's ports from the node's table, records them
// with the allocation (in the store, with the task's handle), and the task
// sees them in its interpolated config and env, where the node's port
// variables win over the task's own env.
func TestTheAllocationsPortsAreRecordedBeforeItsTasksStartAndReachTheirConfigAndEnv(t *testing.T) {
	tb := portTable(t)
	f, r := networkFixture(t, tb, "a1")
	r.Run()
	testutil.Eventually(t, 3*time.Second, "running", func() bool { return r.Alloc().ClientStatus == model.ClientRunning })
	want := []model.AllocatedPort{{Label: "web", Value: 8080, HostIP: "127.0.0.1"}, {Label: "dyn", Value: 24000, To: 9000, HostIP: "127.0.0.1"}}
	if got := r.Alloc().Ports; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("allocation ports = %+v, want %+v", got, want)
	}
	f.store.mu.Lock()
	stored := f.store.allocs["a1"].Alloc.Ports
	f.store.mu.Unlock()
	if len(stored) != 2 {
		t.Fatalf("stored record has ports %+v", stored)
	}
	task, err := f.drv.task("a1/t")
	if err != nil {
		t.Fatal(err)
	}
	if got := task.cfg.Config["echo"]; got != "listen on :9000, reach 127.0.0.1:8080" {
		t.Errorf("config interpolated to %q", got)
	}
	env := task.cfg.Env
	for k, v := range map[string]string{"NOMAD_PORT_dyn": "9000", "NOMAD_HOST_PORT_dyn": "24000", "NOMAD_IP_dyn": "127.0.0.1",
		"NOMAD_ADDR_dyn": "127.0.0.1:24000", "NOMAD_PORT_web": "8080", "HIVELET_HOST_PORT_web": "8080", "SELF": "24000"} {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	if held := tb.Held(); len(held) != 2 || held[8080] != "a1" || held[24000] != "a1" {
		t.Fatalf("table holds %v", held)
	}
	stopRunner(t, r)
	if held := tb.Held(); len(held) != 0 {
		t.Fatalf("a stopped allocation still holds %v", held)
	}
}

// TestASecondAllocationWantingAHeldStaticPortFailsBeforeAnyTaskStarts: the
// collision is the allocation's failure, with its reason in the description
// and the task's events; nothing is started. Once the holder stops, the
// same placement runs (control).
func TestASecondAllocationWantingAHeldStaticPortFailsBeforeAnyTaskStarts(t *testing.T) {
	tb := portTable(t)
	_, first := networkFixture(t, tb, "a1")
	first.Run()
	testutil.Eventually(t, 3*time.Second, "first running", func() bool { return first.Alloc().ClientStatus == model.ClientRunning })

	f2, second := networkFixture(t, tb, "a2")
	second.Run()
	<-second.Done()
	a := second.Alloc()
	if a.ClientStatus != model.ClientFailed || !strings.Contains(a.ClientDescription, `static port 8080 (label "web") is already held by allocation a1`) {
		t.Fatalf("second allocation: %s %q", a.ClientStatus, a.ClientDescription)
	}
	if ev := a.TaskStates["t"].Events; len(ev) == 0 || ev[len(ev)-1].Type != EventSetupFailure {
		t.Fatalf("task events %+v, want a setup failure", ev)
	}
	if n := f2.drv.startCount("a2/t"); n != 0 {
		t.Fatalf("the driver started the task %d times", n)
	}
	if held := tb.Held(); held[24001] != "" {
		t.Fatalf("the failed allocation holds a dynamic port: %v", held)
	}

	stopRunner(t, first)
	_, third := networkFixture(t, tb, "a3")
	third.Run()
	testutil.Eventually(t, 3*time.Second, "third running", func() bool { return third.Alloc().ClientStatus == model.ClientRunning })
	stopRunner(t, third)
}

// TestARestoredAllocationKeepsTheVeryPortsItRecorded: an agent restart
// (a new table, a runner built from the stored record) gives the
// allocation the same ports, and a new allocation cannot take them.
func TestARestoredAllocationKeepsTheVeryPortsItRecorded(t *testing.T) {
	tb := portTable(t)
	f, r := networkFixture(t, tb, "a1")
	r.Run()
	testutil.Eventually(t, 3*time.Second, "running", func() bool { return r.Alloc().ClientStatus == model.ClientRunning })
	before := r.Alloc().Ports
	r.Detach()

	tb2, err := ports.New(ports.Config{Address: "127.0.0.1", MinDynamic: 24000, MaxDynamic: 24010})
	if err != nil {
		t.Fatal(err)
	}
	f.store.mu.Lock()
	rec := f.store.allocs["a1"]
	f.store.mu.Unlock()
	h := f.store.handles["a1/t"]
	restored := New(Config{Alloc: rec.Alloc, Job: rec.Job, Node: &model.Node{ID: "n1"}, Drivers: f.drv, Validate: validate,
		Store: f.store, AllocRoot: f.root, Ports: tb2, Handles: map[string]*driver.TaskHandle{"t": h}})
	restored.Run()
	testutil.Eventually(t, 3*time.Second, "reattached", func() bool { return f.drv.recoverCount("a1/t") == 1 })
	if got := restored.Alloc().Ports; len(got) != 2 || got[0] != before[0] || got[1] != before[1] {
		t.Fatalf("restored ports %+v, before %+v", got, before)
	}
	if n := f.drv.startCount("a1/t"); n != 1 {
		t.Fatalf("%d starts: a restore must not start the task", n)
	}
	other, err := tb2.Assign("a9", &model.Network{Ports: []model.Port{{Label: "d"}}})
	if err != nil || other[0].Value == before[1].Value {
		t.Fatalf("a new allocation got %+v %v: the restored port %d must stay held", other, err, before[1].Value)
	}
	stopRunner(t, restored)
}

// TestASysbatchAllocationPastMaxRunDurationIsStoppedAndFailed, with a
// control that finishes within its limit and completes.
func TestASysbatchAllocationPastMaxRunDurationIsStoppedAndFailed(t *testing.T) {
	run := func(cfg map[string]any, limit time.Duration) (*fixture, *model.Allocation) {
		f := newFixture(t, cfg, nil, nil)
		f.job.Type = model.JobTypeSysbatch
		f.job.Groups[0].MaxRunDuration = model.Duration(limit)
		f.alloc.CreateTime = time.Now()
		r := f.runner(nil)
		r.Run()
		select {
		case <-r.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("runner never finished")
		}
		return f, r.Alloc()
	}
	f, a := run(map[string]any{}, 200*time.Millisecond)
	if a.ClientStatus != model.ClientFailed || a.ClientDescription != "max_run_duration (200ms) exceeded" {
		t.Fatalf("over the limit: %s %q", a.ClientStatus, a.ClientDescription)
	}
	if ts := a.TaskStates["t"]; !ts.Failed || ts.State != "dead" {
		t.Fatalf("task state %+v", ts)
	}
	if stops := f.drv.stopCalls(); len(stops) != 1 {
		t.Fatalf("stop calls %+v, want the task stopped once", stops)
	}
	_, ok := run(map[string]any{"run_for": "20ms"}, 5*time.Second)
	if ok.ClientStatus != model.ClientComplete {
		t.Fatalf("within the limit: %s %q, want complete", ok.ClientStatus, ok.ClientDescription)
	}
}

func TestAChecksPortLabelProbesTheAddressTheNodePublished(t *testing.T) {
	alloc := &model.Allocation{ID: "a", Ports: []model.AllocatedPort{{Label: "http", Value: 24005, HostIP: "127.0.0.2"}}}
	env := NewTaskEnv(nil, alloc, nil, nil, nil, "", "")
	got, err := checkTarget(env, model.Service{Port: "http"}, model.Check{Name: "c"})
	if err != nil || got != "127.0.0.2:24005" {
		t.Fatalf("label: %q %v", got, err)
	}
	// Control: a bare number still means loopback, an unknown label fails.
	if got, _ := checkTarget(env, model.Service{Port: strconv.Itoa(8080)}, model.Check{}); got != "127.0.0.1:8080" {
		t.Fatalf("number: %q", got)
	}
	if _, err := checkTarget(env, model.Service{Port: "nope"}, model.Check{Name: "c"}); err == nil {
		t.Fatal("an unknown label resolved")
	}
}

// TestAGroupServiceCheckProbesTheLabelOnceEveryTaskRuns: a group-level
// service's check needs every task of the group running; it then probes the
// address the node published for its port label, and the allocation turns
// healthy. The control (nothing listening) stays unhealthy.
func TestAGroupServiceCheckProbesTheLabelOnceEveryTaskRuns(t *testing.T) {
	run := func(listen bool) *model.Allocation {
		l := serveTCP(t, "127.0.0.1:0")
		port := l.Addr().(*net.TCPAddr).Port
		if !listen {
			l.Close()
		}
		f := newFixture(t, map[string]any{}, nil, fastUpdate(50*time.Millisecond, 2*time.Second))
		g := f.job.Groups[0]
		g.Tasks = append(g.Tasks, &model.Task{Name: "u", Driver: "fake"})
		g.Network = &model.Network{Mode: model.NetworkHost, Ports: []model.Port{{Label: "http", Static: port}}}
		g.Services = []model.Service{{Name: "web", Port: "http", Checks: []model.Check{
			{Type: model.CheckTCP, Interval: model.Duration(20 * time.Millisecond), Timeout: model.Duration(time.Second)}}}}
		r := New(Config{Alloc: f.alloc, Job: f.job, Node: &model.Node{ID: "n1"}, Drivers: f.drv, Validate: validate, Store: f.store,
			AllocRoot: f.root, Ports: portTable(t)})
		r.Run()
		testutil.Eventually(t, 5*time.Second, "a health verdict", func() bool {
			ds := r.Alloc().DeploymentStatus
			return ds.IsHealthy() || ds.IsUnhealthy()
		})
		a := r.Alloc()
		stopRunner(t, r)
		return a
	}
	if a := run(true); !a.DeploymentStatus.IsHealthy() {
		t.Fatalf("listening: %+v", a.DeploymentStatus)
	}
	if a := run(false); !a.DeploymentStatus.IsUnhealthy() {
		t.Fatalf("control, nothing listening: %+v", a.DeploymentStatus)
	}
}

// TestAPortLabelWithADashIsWrittenWithAnUnderscoreInTheEnvironment: as in
// Nomad, "jaeger-thrift" is NOMAD_PORT_jaeger_thrift in the task's process
// environment (a '-' is not valid in a variable name there); the job file
// may interpolate either spelling; a label without a dash (control) is
// unchanged, and no variable name of the environment holds a dash.
func TestAPortLabelWithADashIsWrittenWithAnUnderscoreInTheEnvironment(t *testing.T) {
	alloc := &model.Allocation{ID: "a1", Name: "j.g[0]", Ports: []model.AllocatedPort{
		{Label: "jaeger-thrift", Value: 6831, HostIP: "10.0.0.5"}, {Label: "http", Value: 25000, To: 8080, HostIP: "10.0.0.5"}}}
	e := NewTaskEnv(&model.Node{ID: "n1"}, alloc, &model.Job{ID: "j"}, nil, &model.Task{Name: "t"}, "/a", "/a/t")
	env := e.Env(map[string]string{"A": "${NOMAD_ADDR_jaeger-thrift}", "B": "${NOMAD_PORT_jaeger_thrift}", "C": "${NOMAD_PORT_http}"})
	for k, want := range map[string]string{"NOMAD_PORT_jaeger_thrift": "6831", "NOMAD_HOST_PORT_jaeger_thrift": "6831",
		"NOMAD_ADDR_jaeger_thrift": "10.0.0.5:6831", "NOMAD_PORT_http": "8080", "NOMAD_HOST_PORT_http": "25000",
		"A": "10.0.0.5:6831", "B": "6831", "C": "8080"} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	for k := range env {
		if strings.Contains(k, "-") {
			t.Errorf("the environment has %q: a dash in a variable name", k)
		}
	}
}

// TestACheckPassesAndFailsAfterItsThresholdsOfProbesInARow: with
// success_before_passing 3 the check passes at the third passing probe in a
// row (a failure in between starts the count again); with
// failures_before_critical 2 one failing probe leaves it passing, the
// second fails it. Control: without thresholds every probe decides.
func TestACheckPassesAndFailsAfterItsThresholdsOfProbesInARow(t *testing.T) {
	bad := errors.New("connection refused")
	run := func(c model.Check, probes ...error) string {
		var s checkState
		var out []byte
		for _, p := range probes {
			var err error
			s, err = s.next(p, c, "k")
			if err == nil {
				out = append(out, 'P')
			} else {
				out = append(out, 'F')
			}
		}
		return string(out)
	}
	for _, c := range []struct {
		check  model.Check
		probes []error
		want   string
	}{
		{model.Check{}, []error{nil, bad, nil, nil, bad}, "PFPPF"},
		{model.Check{SuccessBeforePassing: 3}, []error{nil, nil, bad, nil, nil, nil, nil}, "FFFFFPP"},
		{model.Check{FailuresBeforeCritical: 2}, []error{nil, bad, nil, bad, bad, nil}, "PPPPFP"},
		{model.Check{SuccessBeforePassing: 2, FailuresBeforeCritical: 2}, []error{nil, nil, bad, bad, nil, nil}, "FPPFFP"},
	} {
		if got := run(c.check, c.probes...); got != c.want {
			t.Errorf("%+v: %s, want %s", c.check, got, c.want)
		}
	}
	var s checkState
	s, _ = s.next(nil, model.Check{SuccessBeforePassing: 2}, "web.alive")
	if _, err := s.next(bad, model.Check{SuccessBeforePassing: 2}, "web.alive"); err != bad {
		t.Errorf("a failing probe reports its own error: %v", err)
	}
	if _, err := s.next(nil, model.Check{SuccessBeforePassing: 3}, "web.alive"); err == nil || err.Error() != "check web.alive passed 2 of the 3 probes in a row it needs (success_before_passing)" {
		t.Errorf("a passing probe below the threshold: %v", err)
	}
}
