package allocrunner

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/state"
	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/sdk/driver"
)

// memStore records what the runner writes.
type memStore struct {
	mu       sync.Mutex
	allocs   map[string]*state.AllocRecord
	handles  map[string]*driver.TaskHandle
	statuses []model.ClientStatus // client status of every allocation write, in order
}

func newMemStore() *memStore {
	return &memStore{allocs: map[string]*state.AllocRecord{}, handles: map[string]*driver.TaskHandle{}}
}
func (m *memStore) PutAlloc(r *state.AllocRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.allocs[r.Alloc.ID] = r
	m.statuses = append(m.statuses, r.Alloc.ClientStatus)
	return nil
}

func (m *memStore) written() []model.ClientStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]model.ClientStatus(nil), m.statuses...)
}
func (m *memStore) PutHandle(a, t string, h *driver.TaskHandle) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.handles[a+"/"+t] = h
	return nil
}
func (m *memStore) DeleteHandle(a, t string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.handles, a+"/"+t)
	return nil
}
func (m *memStore) handleCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.handles)
}

// validate refuses keys the schema does not name (a stand-in for
// driver.ValidateConfig in these unit tests).
func validate(s *driver.Schema, cfg map[string]any) error {
	for k := range cfg {
		if _, ok := s.Fields[k]; !ok {
			return fmt.Errorf("unknown key %q", k)
		}
	}
	return nil
}

type fixture struct {
	drv   *fakeDriver
	store *memStore
	job   *model.Job
	alloc *model.Allocation
	root  string
}

func newFixture(t *testing.T, cfg map[string]any, restart *model.RestartPolicy, update *model.UpdateStrategy) *fixture {
	t.Helper()
	job := &model.Job{ID: "web", Type: model.JobTypeSystem, Version: 1, Groups: []*model.Group{{
		Name: "g", Count: 1, Restart: restart, Update: update,
		Tasks: []*model.Task{{Name: "t", Driver: "fake", Config: cfg, KillTimeout: model.Duration(150 * time.Millisecond), KillSignal: "SIGINT"}},
	}}}
	return &fixture{
		drv:   newFakeDriver(),
		store: newMemStore(),
		job:   job,
		alloc: &model.Allocation{ID: "a1", Name: "web.g[0]", JobID: "web", JobVersion: 1, TaskGroup: "g", NodeID: "n1", DesiredStatus: model.DesiredRun},
		root:  t.TempDir(),
	}
}

func (f *fixture) runner(handles map[string]*driver.TaskHandle) *Runner {
	return New(Config{Alloc: f.alloc, Job: f.job, Node: &model.Node{ID: "n1", Name: "node-1", Datacenter: "dc1"},
		Drivers: f.drv, Validate: validate, Store: f.store, AllocRoot: f.root, Handles: handles})
}

// restored runs the fixture's allocation until its task runs, detaches
// its runner (the agent's restart) and returns the runner a restarted
// agent makes from what was stored, not yet run; the fake driver's next
// driverErrs lookups and recoverErrs recoveries fail (transiently).
func (f *fixture) restored(t *testing.T, driverErrs, recoverErrs int) *Runner {
	t.Helper()
	r := f.runner(nil)
	r.Run()
	testutil.Eventually(t, 3*time.Second, "running", func() bool { return r.Alloc().ClientStatus == model.ClientRunning })
	r.Detach()
	f.drv.mu.Lock()
	f.drv.driverErrs, f.drv.recoverErrs = driverErrs, recoverErrs
	f.drv.mu.Unlock()
	f.alloc = f.store.allocs["a1"].Alloc
	return f.runner(map[string]*driver.TaskHandle{"t": f.store.handles["a1/t"]})
}

func fastUpdate(minHealthy, deadline time.Duration) *model.UpdateStrategy {
	return &model.UpdateStrategy{MaxParallel: 1, MinHealthyTime: model.Duration(minHealthy), HealthyDeadline: model.Duration(deadline)}
}

func TestARunningTaskBecomesHealthyAfterMinHealthyTimeAndACrashLoopingOneDoesNot(t *testing.T) {
	pol := &model.RestartPolicy{Attempts: 100, Interval: model.Duration(time.Minute), Delay: model.Duration(10 * time.Millisecond), Mode: model.RestartModeFail}
	// Healthy: runs forever.
	f := newFixture(t, map[string]any{}, pol, fastUpdate(100*time.Millisecond, 5*time.Second))
	r := f.runner(nil)
	start := time.Now()
	r.Run()
	testutil.Eventually(t, 3*time.Second, "healthy", func() bool { return r.Alloc().DeploymentStatus.IsHealthy() })
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Fatalf("healthy after %s, before min_healthy_time", el)
	}
	if s := r.Alloc().ClientStatus; s != model.ClientRunning {
		t.Fatalf("client status %s", s)
	}
	// Control: a task that exits every 30 ms never stays up for 200 ms, so it
	// is unhealthy at the deadline.
	f2 := newFixture(t, map[string]any{"run_for": "30ms"}, pol, fastUpdate(200*time.Millisecond, 600*time.Millisecond))
	r2 := f2.runner(nil)
	r2.Run()
	testutil.Eventually(t, 3*time.Second, "unhealthy", func() bool { return r2.Alloc().DeploymentStatus.IsUnhealthy() })
	if f2.drv.startCount("a1/t") < 3 {
		t.Fatalf("crash loop restarted only %d times", f2.drv.startCount("a1/t"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.Stop(ctx, "test over")
	_ = r2.Stop(ctx, "test over")
}

func TestRestartPolicyModeFailGivesUpAfterTheAttemptsAndFailsTheAllocation(t *testing.T) {
	pol := &model.RestartPolicy{Attempts: 2, Interval: model.Duration(time.Minute), Delay: model.Duration(5 * time.Millisecond), Mode: model.RestartModeFail}
	f := newFixture(t, map[string]any{"run_for": "5ms", "exit_code": 3}, pol, nil)
	r := f.runner(nil)
	r.Run()
	select {
	case <-r.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("runner never finished")
	}
	a := r.Alloc()
	if a.ClientStatus != model.ClientFailed {
		t.Fatalf("client status %s, want failed", a.ClientStatus)
	}
	if got := f.drv.startCount("a1/t"); got != 3 {
		t.Fatalf("%d starts, want 1 + 2 restarts", got)
	}
	if ts := a.TaskStates["t"]; ts.Restarts != 2 || !ts.Failed || ts.State != "dead" {
		t.Fatalf("task state %+v", ts)
	}
	if f.store.handleCount() != 0 {
		t.Fatal("a dead task's handle is still stored")
	}
}

func TestRestartPolicyModeDelayKeepsRestartingAfterTheInterval(t *testing.T) {
	pol := &model.RestartPolicy{Attempts: 1, Interval: model.Duration(200 * time.Millisecond), Delay: model.Duration(5 * time.Millisecond), Mode: model.RestartModeDelay}
	f := newFixture(t, map[string]any{"run_for": "5ms", "exit_code": 1}, pol, nil)
	r := f.runner(nil)
	r.Run()
	// Mode fail would stop at 2 starts; delay waits out the interval and goes on.
	testutil.Eventually(t, 5*time.Second, "a fourth start", func() bool { return f.drv.startCount("a1/t") >= 4 })
	if s := r.Alloc().ClientStatus; s.Terminal() {
		t.Fatalf("delay mode made the allocation terminal: %s", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Stop(ctx, "done"); err != nil {
		t.Fatal(err)
	}
}

func TestStopSendsKillSignalAndKillsAfterKillTimeout(t *testing.T) {
	f := newFixture(t, map[string]any{"ignore_stop": true}, nil, nil)
	r := f.runner(nil)
	r.Run()
	testutil.Eventually(t, 3*time.Second, "running", func() bool { return r.Alloc().ClientStatus == model.ClientRunning })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := r.Stop(ctx, "job stopped"); err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	stops := f.drv.stopCalls()
	if len(stops) != 1 || stops[0].Signal != "SIGINT" || stops[0].Timeout != 150*time.Millisecond || !stops[0].Killed {
		t.Fatalf("stop calls %+v", stops)
	}
	if el < 150*time.Millisecond {
		t.Fatalf("stop returned after %s, before the kill timeout", el)
	}
	a := r.Alloc()
	if a.ClientStatus != model.ClientComplete || a.DesiredStatus != model.DesiredStop {
		t.Fatalf("after stop: client %s desired %s", a.ClientStatus, a.DesiredStatus)
	}
	if f.drv.live() != 0 || f.store.handleCount() != 0 {
		t.Fatalf("after stop: %d live tasks, %d handles", f.drv.live(), f.store.handleCount())
	}
	if rec := f.store.allocs["a1"]; rec.Intent != model.DesiredStop {
		t.Fatalf("stored intent %s", rec.Intent)
	}
}

func TestDetachLeavesTasksRunningAndStopStopsThem(t *testing.T) {
	f := newFixture(t, map[string]any{}, nil, nil)
	r := f.runner(nil)
	r.Run()
	testutil.Eventually(t, 3*time.Second, "running", func() bool { return r.Alloc().ClientStatus == model.ClientRunning })
	r.Detach()
	if f.drv.live() != 1 || f.store.handleCount() != 1 {
		t.Fatalf("detach: %d live tasks, %d handles", f.drv.live(), f.store.handleCount())
	}
	if len(f.drv.stopCalls()) != 0 {
		t.Fatal("detach stopped a task")
	}
	// Control: a new runner on the stored handle stops it.
	r2 := f.runner(map[string]*driver.TaskHandle{"t": f.store.handles["a1/t"]})
	r2.Run()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r2.Stop(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if f.drv.live() != 0 {
		t.Fatal("stop left the task")
	}
}

func TestARestoredRunnerReattachesWithoutStarting(t *testing.T) {
	f := newFixture(t, map[string]any{}, nil, fastUpdate(50*time.Millisecond, time.Second))
	r := f.runner(nil)
	r.Run()
	testutil.Eventually(t, 3*time.Second, "healthy", func() bool { return r.Alloc().DeploymentStatus.IsHealthy() })
	r.Detach()
	rec := f.store.allocs["a1"]
	f.alloc = rec.Alloc
	r2 := f.runner(map[string]*driver.TaskHandle{"t": f.store.handles["a1/t"]})
	r2.Run()
	testutil.Eventually(t, 3*time.Second, "reattached", func() bool { return f.drv.recoverCount("a1/t") == 1 && r2.Alloc().ClientStatus == model.ClientRunning })
	time.Sleep(50 * time.Millisecond)
	if n := f.drv.startCount("a1/t"); n != 1 {
		t.Fatalf("%d starts after a reattach, want 1", n)
	}
	if !r2.Alloc().DeploymentStatus.IsHealthy() {
		t.Fatal("restored health lost")
	}
	// Control: a handle for a task the driver no longer has goes through
	// the restart policy and is started anew.
	f.drv.mu.Lock()
	delete(f.drv.tasks, "a1/t")
	f.drv.mu.Unlock()
	r2.Detach()
	pol := &model.RestartPolicy{Attempts: 2, Interval: model.Duration(time.Minute), Delay: model.Duration(time.Millisecond), Mode: model.RestartModeFail}
	f.job.Groups[0].Restart = pol
	r3 := f.runner(map[string]*driver.TaskHandle{"t": f.store.handles["a1/t"]})
	r3.Run()
	testutil.Eventually(t, 3*time.Second, "restarted", func() bool { return f.drv.startCount("a1/t") == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r3.Stop(ctx, "x")
}

func TestAConfigTheDriverSchemaRefusesFailsWithoutStarting(t *testing.T) {
	f := newFixture(t, map[string]any{"imagee": "x"}, nil, nil)
	r := f.runner(nil)
	r.Run()
	<-r.Done()
	a := r.Alloc()
	if a.ClientStatus != model.ClientFailed || f.drv.startCount("a1/t") != 0 {
		t.Fatalf("status %s, starts %d", a.ClientStatus, f.drv.startCount("a1/t"))
	}
	ev := a.TaskStates["t"].Events
	if last := ev[len(ev)-1]; last.Type != EventFailedValidation || !strings.Contains(last.Message, "imagee") {
		t.Fatalf("events %+v", ev)
	}
	// Control: a config with known keys starts.
	f2 := newFixture(t, map[string]any{"echo": "x"}, nil, nil)
	r2 := f2.runner(nil)
	r2.Run()
	testutil.Eventually(t, 3*time.Second, "start", func() bool { return f2.drv.startCount("a1/t") == 1 })
	r2.Detach()
}

func TestHTTPAndTCPChecksGateHealth(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ok" {
			w.WriteHeader(500)
		}
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	_, deadPort, _ := net.SplitHostPort(closed.Addr().String())
	closed.Close()

	cases := []struct {
		name    string
		check   model.Check
		healthy bool
	}{
		{"http 200", model.Check{Type: model.CheckHTTP, Path: "/ok", Port: port}, true},
		{"http 500", model.Check{Type: model.CheckHTTP, Path: "/bad", Port: port}, false},
		{"tcp open", model.Check{Type: model.CheckTCP, Port: port}, true},
		{"tcp closed", model.Check{Type: model.CheckTCP, Port: deadPort}, false},
		{"interpolated port", model.Check{Type: model.CheckHTTP, Path: "/ok", Port: "${meta.port}"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.check.Interval = model.Duration(20 * time.Millisecond)
			c.check.Timeout = model.Duration(time.Second)
			f := newFixture(t, map[string]any{}, nil, fastUpdate(60*time.Millisecond, 1500*time.Millisecond))
			f.job.Groups[0].Meta = map[string]string{"port": port}
			f.job.Groups[0].Tasks[0].Services = []model.Service{{Name: "web", Checks: []model.Check{c.check}}}
			r := f.runner(nil)
			r.Run()
			testutil.Eventually(t, 3*time.Second, "health decided", func() bool { return r.Alloc().DeploymentStatus != nil && r.Alloc().DeploymentStatus.Healthy != nil })
			if got := r.Alloc().DeploymentStatus.IsHealthy(); got != c.healthy {
				t.Fatalf("healthy = %v, want %v", got, c.healthy)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = r.Stop(ctx, "x")
		})
	}
}

func TestInPlaceUpdateRestartsNoTaskAndRetracksHealthForANewDeployment(t *testing.T) {
	f := newFixture(t, map[string]any{}, nil, fastUpdate(30*time.Millisecond, time.Second))
	f.alloc.DeploymentID = "d1"
	r := f.runner(nil)
	r.Run()
	testutil.Eventually(t, 3*time.Second, "healthy", func() bool { return r.Alloc().DeploymentStatus.IsHealthy() })
	job2 := *f.job
	job2.Version = 2
	a2 := r.Alloc()
	a2.JobVersion, a2.DeploymentID = 2, "d2"
	r.UpdateInPlace(a2, &job2)
	if got := r.Alloc(); got.JobVersion != 2 || got.DeploymentStatus.IsHealthy() {
		t.Fatalf("after in-place update: version %d, health %+v", got.JobVersion, got.DeploymentStatus)
	}
	testutil.Eventually(t, 3*time.Second, "healthy again", func() bool { return r.Alloc().DeploymentStatus.IsHealthy() })
	if n := f.drv.startCount("a1/t"); n != 1 {
		t.Fatalf("in-place update started the task %d times", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.Stop(ctx, "x")
}

func TestTaskConfigAndEnvAreInterpolatedAtRunTime(t *testing.T) {
	f := newFixture(t, map[string]any{"echo": "${node.unique.name}/${NOMAD_ALLOC_ID}/${attr.kernel.name}/${meta.rack}/${nope}"}, nil, nil)
	f.job.Groups[0].Tasks[0].Env = map[string]string{"WHERE": "${node.datacenter}-${NOMAD_TASK_NAME}"}
	r := New(Config{Alloc: f.alloc, Job: f.job,
		Node:    &model.Node{ID: "n1", Name: "node-1", Datacenter: "dc1", Attributes: map[string]string{"kernel.name": "linux"}, Meta: map[string]string{"rack": "r7"}},
		Drivers: f.drv, Validate: validate, Store: f.store, AllocRoot: f.root})
	r.Run()
	testutil.Eventually(t, 3*time.Second, "start", func() bool { return f.drv.startCount("a1/t") == 1 })
	f.drv.mu.Lock()
	cfg := f.drv.tasks["a1/t"].cfg
	f.drv.mu.Unlock()
	if got := cfg.Config["echo"]; got != "node-1/a1/linux/r7/${nope}" {
		t.Fatalf("config echo = %q", got)
	}
	if cfg.Env["WHERE"] != "dc1-t" || cfg.Env["HIVELET_ALLOC_ID"] != "a1" || cfg.Env["NOMAD_ALLOC_INDEX"] != "0" {
		t.Fatalf("env %v", cfg.Env)
	}
	if !strings.HasPrefix(cfg.StdoutPath, f.root) {
		t.Fatalf("stdout path %s outside the alloc root", cfg.StdoutPath)
	}
	// The job's own config is not modified by interpolation.
	if f.job.Groups[0].Tasks[0].Config["echo"] != "${node.unique.name}/${NOMAD_ALLOC_ID}/${attr.kernel.name}/${meta.rack}/${nope}" {
		t.Fatal("interpolation mutated the job")
	}
	r.Detach()
}

func TestARunnerNeverStartedCanBeStoppedAndDetachedInAnyOrder(t *testing.T) {
	f := newFixture(t, map[string]any{}, nil, nil)
	r := f.runner(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Stop(ctx, "never ran"); err != nil {
		t.Fatal(err)
	}
	r.Detach() // must not panic on the already closed Done
	<-r.Done()
	r.Run() // a stopped runner never starts
	if f.drv.startCount("a1/t") != 0 || r.Alloc().ClientStatus != model.ClientComplete {
		t.Fatalf("status %s, starts %d", r.Alloc().ClientStatus, f.drv.startCount("a1/t"))
	}
	// Control: a started runner does start its task.
	r2 := f.runner(nil)
	r2.Run()
	testutil.Eventually(t, 3*time.Second, "start", func() bool { return f.drv.startCount("a1/t") == 1 })
	_ = r2.Stop(ctx, "x")
}

// TestARestoredTaskIsNeitherDestroyedNorStartedAgainWhileItsDriverIsUnreachable:
// fail closed. A driver that cannot be reached, or that answers a recovery
// with an error other than "not found", may hide a running task: the runner
// keeps the handle and retries; it never destroys the task or starts a second
// copy. The control at the end: "not found" does free the handle and the
// restart policy starts the task anew.
func TestARestoredTaskIsNeitherDestroyedNorStartedAgainWhileItsDriverIsUnreachable(t *testing.T) {
	for _, c := range []struct {
		name                    string
		driverErrs, recoverErrs int
	}{
		{"driver unreachable", 3, 0},
		{"transient recover error", 0, 3},
		{"both", 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, map[string]any{}, nil, nil)
			r2 := f.restored(t, c.driverErrs, c.recoverErrs)
			r2.Run()
			t.Cleanup(r2.Detach)
			testutil.Eventually(t, 10*time.Second, "reattached", func() bool {
				f.drv.mu.Lock()
				defer f.drv.mu.Unlock()
				return f.drv.driverErrs == 0 && f.drv.recoverErrs == 0 && f.drv.recovers["a1/t"] == c.recoverErrs+1
			})
			testutil.Eventually(t, 3*time.Second, "running", func() bool { return r2.Alloc().ClientStatus == model.ClientRunning })
			f.drv.mu.Lock()
			starts, destroys := f.drv.starts["a1/t"], f.drv.destroys
			f.drv.mu.Unlock()
			if starts != 1 || destroys != 0 || f.drv.live() != 1 {
				t.Fatalf("%d starts, %d destroys, %d live after recovering through errors; want 1, 0, 1", starts, destroys, f.drv.live())
			}
			// Control: the driver's "not found" frees the handle and the
			// restart policy starts the task again.
			r2.Detach()
			f.drv.mu.Lock()
			delete(f.drv.tasks, "a1/t")
			f.drv.mu.Unlock()
			f.job.Groups[0].Restart = &model.RestartPolicy{Attempts: 2, Interval: model.Duration(time.Minute), Delay: model.Duration(time.Millisecond), Mode: model.RestartModeFail}
			r3 := f.runner(map[string]*driver.TaskHandle{"t": f.store.handles["a1/t"]})
			r3.Run()
			t.Cleanup(r3.Detach)
			testutil.Eventually(t, 5*time.Second, "restarted after not found", func() bool { return f.drv.startCount("a1/t") == 2 })
		})
	}
}

// A start that returns quickly is recorded once, as running: the pending
// record would only compete with it. A start that takes longer than
// pendingWriteDelay (an image pull) is recorded as pending while it runs.
func TestThePendingRecordIsWrittenOnlyWhileAStartIsSlow(t *testing.T) {
	f := newFixture(t, map[string]any{}, nil, nil)
	r := f.runner(nil)
	r.Run()
	testutil.Eventually(t, 3*time.Second, "running", func() bool { return r.Alloc().ClientStatus == model.ClientRunning })
	time.Sleep(2 * pendingWriteDelay)
	if got := f.store.written(); len(got) != 1 || got[0] != model.ClientRunning {
		t.Fatalf("a fast start wrote %v, want [running]", got)
	}

	slow := newFixture(t, map[string]any{"start_delay": "300ms"}, nil, nil)
	rs := slow.runner(nil)
	rs.Run()
	testutil.Eventually(t, 3*time.Second, "pending written", func() bool { return len(slow.store.written()) > 0 })
	if got := slow.store.written(); got[0] != model.ClientPending {
		t.Fatalf("a slow start's first write was %v, want pending", got)
	}
	testutil.Eventually(t, 3*time.Second, "running", func() bool { return rs.Alloc().ClientStatus == model.ClientRunning })
	time.Sleep(2 * pendingWriteDelay)
	if got := slow.store.written(); len(got) != 2 || got[1] != model.ClientRunning {
		t.Fatalf("a slow start wrote %v, want [pending running]", got)
	}
	for _, x := range []*Runner{r, rs} {
		if err := x.Stop(context.Background(), "test over"); err != nil {
			t.Fatal(err)
		}
	}
}

// Reports of a runner's writes arrive in the order of the writes, however
// the writing goroutines interleave: the last report is the allocation as
// last written. (Reported after the write lock, an older write's report
// could arrive last and leave the fleet with a stale status.)
func TestReportsArriveInTheOrderOfTheWrites(t *testing.T) {
	for round := 0; round < 50; round++ {
		f := newFixture(t, map[string]any{}, nil, nil)
		var mu sync.Mutex
		var last *model.Allocation
		r := New(Config{Alloc: f.alloc, Job: f.job, Node: &model.Node{ID: "n1"}, Drivers: f.drv, Store: f.store, AllocRoot: f.root,
			OnUpdate: func(a *model.Allocation) {
				if len(a.ClientDescription)%2 == 1 {
					time.Sleep(300 * time.Microsecond) // some reports take longer than others
				}
				mu.Lock()
				last = a
				mu.Unlock()
			}})
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.mu.Lock()
				r.mutable().ClientDescription += "x"
				r.mu.Unlock()
				r.persist()
			}()
		}
		wg.Wait()
		mu.Lock()
		got := last.ClientDescription
		mu.Unlock()
		if want := r.Snapshot().ClientDescription; got != want {
			t.Fatalf("round %d: last report %q, last write %q", round, got, want)
		}
	}
}

// A start whose answer was lost (the plugin died after starting the task)
// leaves a task the runner holds no handle for. When the runner gives up on
// the task, by its restart policy or by a stop, it destroys it by ID: no
// task is left running that nothing tracks. Control: a task whose start
// failed cleanly is not destroyed twice (no DestroyTask reaches a task of
// another ID).
func TestATaskWhoseStartAnswerWasLostIsDestroyedWhenTheRunnerGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart *model.RestartPolicy
		stop    bool
	}{
		{"restart policy exhausted", &model.RestartPolicy{Attempts: 0, Mode: model.RestartModeFail}, false},
		{"allocation stopped", &model.RestartPolicy{Attempts: 5, Interval: model.Duration(time.Hour), Delay: model.Duration(time.Hour), Mode: model.RestartModeDelay}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, map[string]any{"lose_handle": true}, tc.restart, nil)
			r := f.runner(nil)
			r.Run()
			if tc.stop {
				testutil.Eventually(t, 5*time.Second, "the lost start running its task", func() bool { return f.drv.startCount("a1/t") == 1 && f.drv.live() == 1 })
				if err := r.Stop(context.Background(), "job stopped"); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-r.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("runner never finished")
			}
			if n := f.drv.live(); n != 0 {
				t.Fatalf("%d tasks left running after the runner gave up on a start whose answer was lost", n)
			}
			f.drv.mu.Lock()
			destroys := f.drv.destroys
			f.drv.mu.Unlock()
			if f.drv.startCount("a1/t") != 1 || destroys != 1 {
				t.Fatalf("%d starts and %d destroys, want 1 and 1", f.drv.startCount("a1/t"), destroys)
			}
			if ts := r.Alloc().TaskStates["t"]; ts.State != "dead" {
				t.Fatalf("task state %+v, want dead", ts)
			}
		})
	}
}

// An allocation restored mid-stop whose task had already exited (the
// agent killed after the task's exit dropped its handle, before the
// allocation was recorded complete) starts nothing: its record says
// desired stop, and the agent's stop reaches the runner only after Run.
// Before, Run started the old version again (seen in the rollout fault
// test: "allocations whose task started again"). Control: the same record
// with desired run starts its task.
func TestAnAllocationRestoredMidStopWithoutAHandleStartsNothing(t *testing.T) {
	for _, desired := range []model.DesiredStatus{model.DesiredStop, model.DesiredRun} {
		f := newFixture(t, map[string]any{}, nil, nil)
		f.alloc.ClientStatus = model.ClientRunning
		f.alloc.DesiredStatus = desired
		f.alloc.TaskStates = map[string]*model.TaskState{"t": {State: "dead"}}
		r := f.runner(nil)
		r.Run()
		if desired == model.DesiredStop {
			select {
			case <-r.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("a runner restored mid-stop did not finish")
			}
			if n := f.drv.startCount("a1/t"); n != 0 {
				t.Fatalf("restored mid-stop: %d starts, want none", n)
			}
			continue
		}
		testutil.Eventually(t, 3*time.Second, "the control's start", func() bool { return f.drv.startCount("a1/t") == 1 })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = r.Stop(ctx, "x")
		cancel()
	}
}

// An allocation whose stop reaches its restored runner before the task's
// loop reattached (an agent killed mid-stop restores it and stops it at
// once) stops its task as any running one: through StopTask with its
// kill_signal and kill_timeout, not a forced destroy that kills it at once
// and cuts its graceful stop short. The fault is made certain by a driver
// that cannot be reached at the first attempt: the stop lands during the
// pause, and the pause is not cut short by it (the task can only be
// stopped through its driver). Second case: no driver error, Stop right
// after Run. Control: a task that was never started (no handle) is not
// stopped through the driver.
func TestAStopBeforeTheRestoredTaskReattachedStillStopsItGracefully(t *testing.T) {
	for _, c := range []struct {
		name       string
		driverErrs int
	}{{"driver unreachable first", 1}, {"stop right after Run", 0}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, map[string]any{}, nil, nil)
			r2 := f.restored(t, c.driverErrs, 0)
			r2.Run()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := r2.Stop(ctx, "new version"); err != nil {
				t.Fatal(err)
			}
			f.drv.mu.Lock()
			stops, destroys, errsLeft := append([]fakeStop(nil), f.drv.stops...), f.drv.destroys, f.drv.driverErrs
			f.drv.mu.Unlock()
			if errsLeft != 0 {
				t.Fatalf("%d driver errors left unused: the fault did not happen", errsLeft)
			}
			if len(stops) != 1 || stops[0].TaskID != "a1/t" || stops[0].Signal != "SIGINT" || stops[0].Timeout != 150*time.Millisecond {
				t.Fatalf("stops %+v, want one StopTask of a1/t with SIGINT and 150ms (the task's kill_signal and kill_timeout)", stops)
			}
			if n := f.drv.startCount("a1/t"); n != 1 {
				t.Fatalf("%d starts, want 1", n)
			}
			if f.drv.live() != 0 || destroys == 0 {
				t.Fatalf("after the stop: %d live, %d destroys", f.drv.live(), destroys)
			}
			if a := r2.Alloc(); a.ClientStatus != model.ClientComplete || a.TaskStates["t"].Failed {
				t.Fatalf("allocation %s (task failed %v), want complete", a.ClientStatus, a.TaskStates["t"].Failed)
			}
		})
	}
	t.Run("control: no handle", func(t *testing.T) {
		f := newFixture(t, map[string]any{}, nil, nil)
		f.alloc.ClientStatus = model.ClientRunning
		f.alloc.DesiredStatus = model.DesiredStop
		f.alloc.TaskStates = map[string]*model.TaskState{"t": {State: "dead"}}
		r := f.runner(nil)
		r.Run()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Stop(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		f.drv.mu.Lock()
		defer f.drv.mu.Unlock()
		if len(f.drv.stops) != 0 || f.drv.starts["a1/t"] != 0 {
			t.Fatalf("a task with no handle: stops %+v, %d starts; want none", f.drv.stops, f.drv.starts["a1/t"])
		}
	})
}

// OnDone is called once per runner, after Done is closed, whichever path
// ends it (here a stop; a second Stop calls it no more).
func TestOnDoneIsCalledOnceAfterDoneCloses(t *testing.T) {
	f := newFixture(t, map[string]any{}, nil, nil)
	var calls atomic.Int32
	var r *Runner
	closed := make(chan bool, 4)
	r = New(Config{Alloc: f.alloc, Job: f.job, Node: &model.Node{ID: "n1"}, Drivers: f.drv, Store: f.store, AllocRoot: f.root,
		OnDone: func() {
			calls.Add(1)
			select {
			case <-r.Done():
				closed <- true
			default:
				closed <- false
			}
		}})
	r.Run()
	testutil.Eventually(t, 3*time.Second, "running", func() bool { return r.Alloc().ClientStatus == model.ClientRunning })
	if calls.Load() != 0 {
		t.Fatalf("OnDone called %d times while the runner runs", calls.Load())
	}
	for range 2 {
		if err := r.Stop(context.Background(), "test over"); err != nil {
			t.Fatal(err)
		}
	}
	<-r.Done()
	testutil.Eventually(t, 3*time.Second, "OnDone called", func() bool { return calls.Load() > 0 })
	if n := calls.Load(); n != 1 {
		t.Fatalf("OnDone called %d times, want once", n)
	}
	if !<-closed {
		t.Fatal("OnDone was called before Done closed")
	}
}
