package docker_test

// The Docker engine's own faults (issue 11): a restart with and without
// live-restore, and an engine down for a while. They run against a
// private dockerd (dockertest.PrivateEngine), never the machine's engine,
// which other tests use.

import (
	"context"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	docker "github.com/hivelet/hivelet/plugins/docker"
	engine "github.com/hivelet/hivelet/runtime/docker"
	"github.com/hivelet/hivelet/runtime/docker/dockertest"
	"github.com/hivelet/hivelet/sdk/driver"
)

// privateDriver is a driver of the private engine e that checks the
// engine's health every 100ms.
func privateDriver(t *testing.T, e *dockertest.PrivateEngine) *docker.Driver {
	t.Helper()
	return newDriver(t, docker.Config{Engine: engine.Options{Host: e.Host()}, FingerprintInterval: 100 * time.Millisecond})
}

// nextFingerprint returns the next fingerprint whose health is healthy,
// within d.
func nextFingerprint(t *testing.T, fps <-chan *driver.Fingerprint, healthy bool, d time.Duration) *driver.Fingerprint {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case fp, ok := <-fps:
			if !ok {
				t.Fatal("the fingerprint stream ended")
			}
			if fp.Healthy == healthy {
				return fp
			}
		case <-timer.C:
			t.Fatalf("no fingerprint with healthy=%v within %v", healthy, d)
			return nil
		}
	}
}

// With live-restore, a restart of the engine leaves the container running:
// the driver's fingerprint goes unhealthy while the engine is down and
// healthy after; the task is the same container (same ID, same StartedAt,
// one container, not started again), its log copy resumes, and its later
// exit (code 7) reaches the wait opened before the restart. The engine
// then stays down for 3 s (stopped, then started): the same again.
func TestALiveRestoredEngineRestartKeepsTheSameContainerAndItsExit(t *testing.T) {
	env.Client(t) // builds the test program
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	e := dockertest.StartPrivateEngine(t, true, env.Tag, env.Binary(t))
	c := e.Client()
	d := privateDriver(t, e)
	fps, err := d.Fingerprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nextFingerprint(t, fps, true, 10*time.Second)
	tc := task(t, c, "run", "-exit", "SIGUSR1", "-code", "7")
	start(t, d, tc)
	waitOutput(t, tc.StdoutPath, "ready\n")
	before := onlyContainer(t, ctx, c, tc)
	waitCh, err := d.WaitTask(ctx, tc.ID)
	if err != nil {
		t.Fatal(err)
	}

	for _, down := range []time.Duration{0, 3 * time.Second} {
		at := time.Now()
		e.Stop()
		nextFingerprint(t, fps, false, 10*time.Second)
		unhealthy := time.Since(at)
		if down > 0 {
			// The engine stays down: the driver keeps saying so, and the
			// task's wait does not end.
			testutil.Eventually(t, 2*down, "the engine down for a while", func() bool { return time.Since(at) >= down })
		}
		e.Start()
		nextFingerprint(t, fps, true, 10*time.Second)
		t.Logf("engine down %v: unhealthy %v after the stop, healthy again %v after it", down, unhealthy.Round(time.Millisecond), time.Since(at).Round(time.Millisecond))
		select {
		case r, ok := <-waitCh:
			t.Fatalf("the wait ended across the engine restart: %+v %v", r, ok)
		default:
		}
		st, err := d.InspectTask(ctx, tc.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Attributes["container_id"] != before.ID || !st.StartedAt.Equal(before.StartedAt) || st.State != driver.TaskStateRunning {
			t.Fatalf("after the engine restart %+v; before: %s started %v", st, before.ID, before.StartedAt)
		}
		if after := onlyContainer(t, ctx, c, tc); after.ID != before.ID || !after.Running {
			t.Fatalf("container after the engine restart: %+v", after)
		}
	}

	if err := c.KillContainer(ctx, before.ID, "SIGUSR1"); err != nil {
		t.Fatal(err)
	}
	select {
	case r, ok := <-waitCh:
		if !ok || r == nil || r.ExitCode != 7 {
			t.Fatalf("exit after the engine restarts: %+v %v, want 7", r, ok)
		}
	case <-ctx.Done():
		t.Fatal("the exit after the engine restarts never reached the wait")
	}
	// The log stream was broken by each restart and resumed after the
	// last entry copied: nothing twice.
	testutil.Eventually(t, 10*time.Second, "the log copied to the end", func() bool { return lines(tc.StdoutPath, "got user defined signal 1") == 1 })
	if n := lines(tc.StdoutPath, "ready"); n != 1 {
		t.Fatalf("%q appears %d times in the task's log, want once", "ready", n)
	}
	if err := d.DestroyTask(ctx, tc.ID, false); err != nil {
		t.Fatal(err)
	}
}

// Without live-restore, the engine stops its containers when it shuts
// down: the driver's wait reports the task's real exit (the engine's
// SIGTERM, handled: code 3), not a hang and not an error; the dead container is still there to be destroyed once the engine is
// back (no leak), and the engine does not start it again by itself.
func TestAnEngineRestartWithoutLiveRestoreEndsTheTaskAndLeavesItDestroyable(t *testing.T) {
	env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	e := dockertest.StartPrivateEngine(t, false, env.Tag, env.Binary(t))
	c := e.Client()
	d := privateDriver(t, e)
	tc := task(t, c, "run", "-code", "3")
	start(t, d, tc)
	waitOutput(t, tc.StdoutPath, "ready\n")
	before := onlyContainer(t, ctx, c, tc)
	waitCh, err := d.WaitTask(ctx, tc.ID)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	e.Restart()
	t.Logf("engine restarted in %v", time.Since(at).Round(time.Millisecond))
	select {
	case r, ok := <-waitCh:
		if !ok || r == nil || r.ExitCode != 3 {
			t.Fatalf("exit of a container the engine stopped: %+v %v, want 3 (its SIGTERM handler)", r, ok)
		}
		t.Logf("the task's exit (%d) seen %v after the engine stop began", r.ExitCode, time.Since(at).Round(time.Millisecond))
	case <-ctx.Done():
		t.Fatal("the task's exit never reached the wait")
	}
	after := onlyContainer(t, ctx, c, tc)
	if after.ID != before.ID || after.Running {
		t.Fatalf("container after the engine restart: %+v, want %s exited", after, before.ID)
	}
	if err := d.DestroyTask(ctx, tc.ID, false); err != nil {
		t.Fatal(err)
	}
	if list, err := c.ListContainers(ctx, map[string]string{docker.LabelAllocID: tc.AllocID}); err != nil || len(list) != 0 {
		t.Fatalf("containers left after DestroyTask: %+v %v", list, err)
	}
}

// A start the engine cannot serve because it is away (stopped here; the
// same as the moment of a restart without live-restore, when the host
// restarts the task its engine just stopped) waits for the engine and then
// starts the task: one container, running. Before, it failed at once, and
// an engine restart used up a task's restart attempts in under a second
// (the allocation failed: TestEndToEndAnEngineRestartWithoutLiveRestore...).
// Control: an engine that does not come back within EngineWait fails the
// start, with the engine's error.
func TestAStartWhileTheEngineIsAwayWaitsForItWithinEngineWait(t *testing.T) {
	env.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	e := dockertest.StartPrivateEngine(t, false, env.Tag, env.Binary(t))
	c := e.Client()
	d := newDriver(t, docker.Config{Engine: engine.Options{Host: e.Host()}, EngineWait: 30 * time.Second})
	tc := task(t, c, "run")
	e.Stop()
	started := make(chan error, 1)
	at := time.Now()
	go func() {
		_, err := d.StartTask(ctx, tc)
		started <- err
	}()
	// The start is waiting, not failed, while the engine is away.
	testutil.Eventually(t, 2*time.Second, "the start waiting 1s", func() bool { return time.Since(at) >= time.Second })
	select {
	case err := <-started:
		t.Fatalf("the start returned while the engine was away: %v", err)
	default:
	}
	e.Start()
	if err := <-started; err != nil {
		t.Fatalf("the start after the engine came back: %v", err)
	}
	t.Logf("the start succeeded %v after it began (the engine away ~1 s, then starting)", time.Since(at).Round(time.Millisecond))
	waitOutput(t, tc.StdoutPath, "ready\n")
	if st := onlyContainer(t, ctx, c, tc); !st.Running {
		t.Fatalf("the task's container: %+v, want running", st)
	}
	if err := d.StopTask(ctx, tc.ID, 5*time.Second, ""); err != nil {
		t.Fatal(err)
	}
	if err := d.DestroyTask(ctx, tc.ID, false); err != nil {
		t.Fatal(err)
	}

	// Control: the engine stays away past EngineWait.
	short := newDriver(t, docker.Config{Engine: engine.Options{Host: e.Host()}, EngineWait: time.Second})
	e.Stop()
	at = time.Now()
	if _, err := short.StartTask(ctx, task(t, c, "run")); err == nil || !engine.Unreachable(err) {
		t.Fatalf("a start with the engine away past EngineWait: %v, want the engine's unavailability", err)
	}
	if took := time.Since(at); took < 500*time.Millisecond || took > 10*time.Second {
		t.Fatalf("the start failed after %v, want about EngineWait (1s)", took)
	}
	e.Start() // for the cleanup
}
