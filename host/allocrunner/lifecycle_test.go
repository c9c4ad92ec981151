package allocrunner

import (
	"slices"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/sdk/driver"
)

func (f *fakeDriver) startOrder() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.order)
}

// lifecycleFixture is a system group with an init task (prestart) given
// initCfg, a prestart sidecar and a main task.
func lifecycleFixture(t *testing.T, initCfg map[string]any, pol *model.RestartPolicy) *fixture {
	f := newFixture(t, map[string]any{}, pol, nil)
	g := f.job.Groups[0]
	g.Tasks = append([]*model.Task{
		{Name: "init", Driver: "fake", Config: initCfg, Lifecycle: &model.Lifecycle{Hook: model.HookPrestart}},
		{Name: "side", Driver: "fake", Config: map[string]any{}, Lifecycle: &model.Lifecycle{Hook: model.HookPrestart, Sidecar: true}},
	}, g.Tasks...)
	return f
}

// TestAPrestartTaskRunsToCompletionBeforeTheMainTasks: the init task runs
// first, once (its exit 0 is not restarted in a system job), then the
// sidecar and the main task start; the allocation runs and turns healthy
// with the init task dead.
func TestAPrestartTaskRunsToCompletionBeforeTheMainTasks(t *testing.T) {
	f := lifecycleFixture(t, map[string]any{"run_for": "50ms"}, nil)
	f.job.Groups[0].Update = fastUpdate(50*time.Millisecond, 5*time.Second)
	r := f.runner(nil)
	r.Run()
	testutil.Eventually(t, 5*time.Second, "healthy", func() bool { return r.Alloc().DeploymentStatus.IsHealthy() })
	order := f.drv.startOrder()
	if len(order) != 3 || order[0] != "a1/init" || !slices.Contains(order, "a1/side") || !slices.Contains(order, "a1/t") {
		t.Fatalf("start order %v: the init task must start first, alone, and once", order)
	}
	a := r.Alloc()
	if a.ClientStatus != model.ClientRunning || a.TaskStates["init"].State != "dead" || a.TaskStates["init"].Failed {
		t.Fatalf("status %s, init %+v", a.ClientStatus, a.TaskStates["init"])
	}
	stopRunner(t, r)
}

// TestAFailingPrestartTaskFailsTheAllocationWithoutStartingTheMainTasks,
// and a restored allocation whose init task completed does not run it
// again (control: the main tasks are reattached, not started).
func TestAFailingPrestartTaskFailsTheAllocationWithoutStartingTheMainTasks(t *testing.T) {
	pol := &model.RestartPolicy{Attempts: 1, Interval: model.Duration(time.Minute), Delay: model.Duration(5 * time.Millisecond), Mode: model.RestartModeFail}
	f := lifecycleFixture(t, map[string]any{"run_for": "5ms", "exit_code": 3}, pol)
	r := f.runner(nil)
	r.Run()
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the runner never finished")
	}
	if a := r.Alloc(); a.ClientStatus != model.ClientFailed || f.drv.startCount("a1/init") != 2 || f.drv.startCount("a1/t") != 0 || f.drv.startCount("a1/side") != 0 {
		t.Fatalf("status %s; starts init %d, main %d, sidecar %d", a.ClientStatus, f.drv.startCount("a1/init"), f.drv.startCount("a1/t"), f.drv.startCount("a1/side"))
	}

	ok := lifecycleFixture(t, map[string]any{"run_for": "5ms"}, nil)
	first := ok.runner(nil)
	first.Run()
	testutil.Eventually(t, 5*time.Second, "running", func() bool { return first.Alloc().ClientStatus == model.ClientRunning })
	first.Detach()
	ok.store.mu.Lock()
	rec := ok.store.allocs["a1"]
	handles := map[string]*driver.TaskHandle{"t": ok.store.handles["a1/t"], "side": ok.store.handles["a1/side"]}
	ok.store.mu.Unlock()
	ok.alloc, ok.job = rec.Alloc, rec.Job
	restored := ok.runner(handles)
	restored.Run()
	testutil.Eventually(t, 5*time.Second, "reattached", func() bool { return ok.drv.recoverCount("a1/t") == 1 && ok.drv.recoverCount("a1/side") == 1 })
	if ok.drv.startCount("a1/init") != 1 || ok.drv.startCount("a1/t") != 1 {
		t.Fatalf("after the restore: init started %d times, main %d", ok.drv.startCount("a1/init"), ok.drv.startCount("a1/t"))
	}
	stopRunner(t, restored)
}

// poststartFixture is a system group with a main task given mainCfg, a
// poststart task that runs to completion and a poststart sidecar.
func poststartFixture(t *testing.T, mainCfg map[string]any) *fixture {
	f := newFixture(t, mainCfg, nil, nil)
	g := f.job.Groups[0]
	g.Update = fastUpdate(50*time.Millisecond, 5*time.Second)
	g.Tasks = append(g.Tasks,
		&model.Task{Name: "post", Driver: "fake", Config: map[string]any{"run_for": "20ms"}, Lifecycle: &model.Lifecycle{Hook: model.HookPoststart}},
		&model.Task{Name: "postside", Driver: "fake", Config: map[string]any{}, Lifecycle: &model.Lifecycle{Hook: model.HookPoststart, Sidecar: true}})
	return f
}

// TestPoststartTasksStartOnceTheMainTaskRuns: with a main task slow to
// start, both poststart tasks start after it; the one that runs to
// completion is dead and not failed while the allocation runs healthy; the
// sidecar keeps running. A restored allocation does not run the completed
// one again and reattaches the sidecar.
func TestPoststartTasksStartOnceTheMainTaskRuns(t *testing.T) {
	f := poststartFixture(t, map[string]any{"start_delay": "100ms"})
	r := f.runner(nil)
	r.Run()
	testutil.Eventually(t, 5*time.Second, "healthy", func() bool { return r.Alloc().DeploymentStatus.IsHealthy() })
	order := f.drv.startOrder()
	if len(order) != 3 || order[0] != "a1/t" {
		t.Fatalf("start order %v: the main task must start first, then both poststart tasks once", order)
	}
	a := r.Alloc()
	if a.ClientStatus != model.ClientRunning || a.TaskStates["post"].State != "dead" || a.TaskStates["post"].Failed || a.TaskStates["postside"].State != "running" {
		t.Fatalf("status %s, post %+v, postside %+v", a.ClientStatus, a.TaskStates["post"], a.TaskStates["postside"])
	}
	r.Detach()
	f.store.mu.Lock()
	rec := f.store.allocs["a1"]
	handles := map[string]*driver.TaskHandle{"t": f.store.handles["a1/t"], "postside": f.store.handles["a1/postside"]}
	f.store.mu.Unlock()
	f.alloc, f.job = rec.Alloc, rec.Job
	restored := f.runner(handles)
	restored.Run()
	testutil.Eventually(t, 5*time.Second, "reattached", func() bool { return f.drv.recoverCount("a1/t") == 1 && f.drv.recoverCount("a1/postside") == 1 })
	if f.drv.startCount("a1/post") != 1 || f.drv.startCount("a1/t") != 1 || f.drv.startCount("a1/postside") != 1 {
		t.Fatalf("after the restore: starts %v", f.drv.startOrder())
	}
	stopRunner(t, restored)
}

// TestAMainTaskThatNeverRunsKeepsThePoststartTasksFromStarting: a main
// task whose config the driver's schema refuses fails the allocation, and
// neither poststart task is ever started; the runner still finishes.
func TestAMainTaskThatNeverRunsKeepsThePoststartTasksFromStarting(t *testing.T) {
	f := poststartFixture(t, map[string]any{"not_a_key": true})
	f.drv.schema = &driver.Schema{Fields: map[string]*driver.Field{"run_for": {Type: driver.TypeString}, "start_delay": {Type: driver.TypeString}}}
	r := f.runner(nil)
	r.Run()
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the runner never finished")
	}
	if a := r.Alloc(); a.ClientStatus != model.ClientFailed || len(f.drv.startOrder()) != 0 {
		t.Fatalf("status %s, starts %v", a.ClientStatus, f.drv.startOrder())
	}
}

// poststopFixture is a group with a main task given mainCfg and a
// poststop task that runs for a moment.
func poststopFixture(t *testing.T, jt model.JobType, mainCfg map[string]any, pol *model.RestartPolicy) *fixture {
	f := newFixture(t, mainCfg, pol, nil)
	f.job.Type = jt
	g := f.job.Groups[0]
	g.Update = fastUpdate(50*time.Millisecond, 5*time.Second)
	g.Tasks = append(g.Tasks, &model.Task{Name: "cleanup", Driver: "fake", Config: map[string]any{"run_for": "30ms"},
		Lifecycle: &model.Lifecycle{Hook: model.HookPoststop}})
	return f
}

// TestAPoststopTaskRunsOnceTheOthersAreGone: while the main task runs the
// poststop task is not started and the allocation is running and healthy;
// a stop kills the main task, then the poststop task runs (the
// allocation's stop is not its stop) and the allocation completes only
// after it. In a sysbatch job it runs once the main task completed; when
// the main task fails for good it still runs, and the allocation fails.
func TestAPoststopTaskRunsOnceTheOthersAreGone(t *testing.T) {
	f := poststopFixture(t, model.JobTypeSystem, map[string]any{}, nil)
	r := f.runner(nil)
	r.Run()
	testutil.Eventually(t, 5*time.Second, "healthy", func() bool { return r.Alloc().DeploymentStatus.IsHealthy() })
	if a := r.Alloc(); a.ClientStatus != model.ClientRunning || f.drv.startCount("a1/cleanup") != 0 {
		t.Fatalf("while the main task runs: status %s, poststop starts %d", a.ClientStatus, f.drv.startCount("a1/cleanup"))
	}
	stopRunner(t, r)
	a := r.Alloc()
	if order := f.drv.startOrder(); len(order) != 2 || order[1] != "a1/cleanup" {
		t.Fatalf("start order %v", order)
	}
	if stops := f.drv.stopCalls(); len(stops) != 1 || stops[0].TaskID != "a1/t" {
		t.Fatalf("stop calls %+v: only the main task is stopped", stops)
	}
	if ts := a.TaskStates["cleanup"]; a.ClientStatus != model.ClientComplete || ts.State != "dead" || ts.Failed {
		t.Fatalf("after the stop: %s, cleanup %+v", a.ClientStatus, ts)
	}

	batch := poststopFixture(t, model.JobTypeSysbatch, map[string]any{"run_for": "20ms"}, nil)
	br := batch.runner(nil)
	br.Run()
	select {
	case <-br.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the sysbatch runner never finished")
	}
	if a := br.Alloc(); a.ClientStatus != model.ClientComplete || batch.drv.startCount("a1/cleanup") != 1 || a.TaskStates["cleanup"].State != "dead" {
		t.Fatalf("sysbatch: %s, cleanup starts %d, %+v", a.ClientStatus, batch.drv.startCount("a1/cleanup"), a.TaskStates["cleanup"])
	}

	pol := &model.RestartPolicy{Attempts: 0, Interval: model.Duration(time.Minute), Delay: model.Duration(5 * time.Millisecond), Mode: model.RestartModeFail}
	failing := poststopFixture(t, model.JobTypeSystem, map[string]any{"run_for": "10ms", "exit_code": 2}, pol)
	fr := failing.runner(nil)
	fr.Run()
	select {
	case <-fr.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the failing runner never finished")
	}
	if a := fr.Alloc(); a.ClientStatus != model.ClientFailed || failing.drv.startCount("a1/cleanup") != 1 {
		t.Fatalf("a failed main task: %s, cleanup starts %d", a.ClientStatus, failing.drv.startCount("a1/cleanup"))
	}
}

// TestARestoredAllocationRunsItsPoststopTaskWithoutRerunningTheFinishedOnes:
// an allocation restored after its main task finished (no handle, dead)
// but before its poststop task ran runs the poststop task alone; the
// control, a restored allocation whose main task still runs (a handle), is
// reattached and runs the poststop task only once it is stopped.
func TestARestoredAllocationRunsItsPoststopTaskWithoutRerunningTheFinishedOnes(t *testing.T) {
	f := poststopFixture(t, model.JobTypeSysbatch, map[string]any{}, nil)
	f.alloc.ClientStatus = model.ClientRunning
	f.alloc.TaskStates = map[string]*model.TaskState{"t": {State: "dead"}, "cleanup": {State: "pending"}}
	r := f.runner(nil)
	r.Run()
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the restored runner never finished")
	}
	if order := f.drv.startOrder(); len(order) != 1 || order[0] != "a1/cleanup" {
		t.Fatalf("starts %v, want the poststop task alone", order)
	}
	if a := r.Alloc(); a.ClientStatus != model.ClientComplete {
		t.Fatalf("status %s", a.ClientStatus)
	}

	live := poststopFixture(t, model.JobTypeSystem, map[string]any{}, nil)
	first := live.runner(nil)
	first.Run()
	testutil.Eventually(t, 5*time.Second, "running", func() bool { return first.Alloc().ClientStatus == model.ClientRunning })
	first.Detach()
	live.store.mu.Lock()
	rec := live.store.allocs["a1"]
	handles := map[string]*driver.TaskHandle{"t": live.store.handles["a1/t"]}
	live.store.mu.Unlock()
	live.alloc, live.job = rec.Alloc, rec.Job
	restored := live.runner(handles)
	restored.Run()
	testutil.Eventually(t, 5*time.Second, "reattached", func() bool { return live.drv.recoverCount("a1/t") == 1 })
	if n := live.drv.startCount("a1/cleanup"); n != 0 {
		t.Fatalf("the poststop task started %d times while the main task runs", n)
	}
	stopRunner(t, restored)
	if n := live.drv.startCount("a1/cleanup"); n != 1 || live.drv.startCount("a1/t") != 1 {
		t.Fatalf("after the stop: cleanup started %d times, main %d", n, live.drv.startCount("a1/t"))
	}
}
