package manager_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/plugins/manager"
	"github.com/hivelet/hivelet/plugins/mock"
	"github.com/hivelet/hivelet/sdk/driver"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// reportLatencies adds the median and p99 of per-call durations.
func reportLatencies(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(ds[len(ds)*99/100].Nanoseconds()), "p99-ns")
}

func benchRoundTrip(b *testing.B, d driver.Driver) {
	ctx := context.Background()
	if _, err := d.StartTask(ctx, &driver.TaskConfig{ID: "bench"}); err != nil {
		b.Fatal(err)
	}
	timeCalls(b, func(int) error { _, err := d.InspectTask(ctx, "bench"); return err })
}

// timeCalls times b.N calls of call(i) and reports their median and p99.
func timeCalls(b *testing.B, call func(i int) error) { timeCallsIdle(b, 0, call) }

// timeCallsIdle is timeCalls with idle before each call, not timed: each
// call then wakes processes and CPUs that had gone to sleep.
func timeCallsIdle(b *testing.B, idle time.Duration, call func(i int) error) {
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if idle > 0 {
			b.StopTimer()
			time.Sleep(idle)
			b.StartTimer()
		}
		start := time.Now()
		if err := call(i); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	b.StopTimer()
	reportLatencies(b, ds)
}

// BenchmarkInspectTaskRoundTrip compares one trivial driver call (InspectTask
// of a mock task) made in-process with the same call through go-plugin: the
// manager's proxy, gRPC over a Unix socket, the plugin process, and back.
func BenchmarkInspectTaskRoundTrip(b *testing.B) {
	b.Run("in-process", func(b *testing.B) { benchRoundTrip(b, mock.New()) })
	b.Run("go-plugin", func(b *testing.B) { benchRoundTrip(b, pluginMock(b)) })
}

// pluginMock is the mock driver as a go-plugin process of its own, through
// a manager that is killed when b ends.
func pluginMock(b *testing.B) driver.Driver {
	dir, err := os.MkdirTemp("", "hvb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	m, err := manager.New(manager.Config{SelfExe: os.Args[0], Builtins: []string{"mock"}, StateDir: dir, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Kill() })
	d, err := m.Driver(context.Background(), "mock")
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkPluginLaunchToReady measures a built-in plugin's launch: the
// re-executed binary's start, the go-plugin handshake, the gRPC connection,
// and a first answered call.
func BenchmarkPluginLaunchToReady(b *testing.B) {
	dir, err := os.MkdirTemp("", "hvb")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		m, err := manager.New(manager.Config{SelfExe: os.Args[0], Builtins: []string{"mock"}, StateDir: dir, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		d, err := m.Driver(ctx, "mock")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := d.Info(ctx); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
		b.StopTimer()
		_ = m.Kill()
		b.StartTimer()
	}
	b.StopTimer()
	reportLatencies(b, ds)
}

// BenchmarkCrashToRecovered measures, with 200 mock tasks tracked, the time
// from a SIGKILL of the plugin to a relaunched plugin serving calls with
// every task recovered into it (death noticed through a pidfd, relaunch,
// 200 RecoverTask calls).
func BenchmarkCrashToRecovered(b *testing.B) {
	dir, err := os.MkdirTemp("", "hvb")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	m, err := manager.New(manager.Config{SelfExe: os.Args[0], Builtins: []string{"mock"}, StateDir: dir, Logger: quiet, MinBackoff: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Kill()
	d, err := m.Driver(ctx, "mock")
	if err != nil {
		b.Fatal(err)
	}
	for k := 0; k < 200; k++ {
		if _, err := d.StartTask(ctx, &driver.TaskConfig{ID: "t" + strconv.Itoa(k)}); err != nil {
			b.Fatal(err)
		}
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		old, _ := m.PID("mock")
		start := time.Now()
		if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		for {
			if pid, up := m.PID("mock"); up && pid != old {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		ds = append(ds, time.Since(start))
	}
	b.StopTimer()
	if _, err := d.InspectTask(ctx, "t199"); err != nil {
		b.Fatalf("task lost: %v", err)
	}
	reportLatencies(b, ds)
}

// benchStarts starts b.N mock tasks, each with a task configuration of the
// size the agent sends (environment, directories, log paths, the driver's
// config), and reports the StartTask calls' median and p99.
func benchStarts(b *testing.B, d driver.Driver) { benchStartsIdle(b, d, 0) }

// benchStartsIdle is benchStarts with idle before each call (timeCallsIdle).
func benchStartsIdle(b *testing.B, d driver.Driver, idle time.Duration) {
	ctx := context.Background()
	dir := b.TempDir()
	env := map[string]string{}
	for i := range 20 {
		env["HIVELET_VAR_"+strconv.Itoa(i)] = "value-" + strconv.Itoa(i)
	}
	timeCallsIdle(b, idle, func(i int) error {
		id := "bench-" + strconv.Itoa(i) + "/t"
		cfg := &driver.TaskConfig{ID: id, AllocID: "bench-" + strconv.Itoa(i), TaskName: "t", JobID: "j", Group: "g", NodeID: "n1",
			Env: env, AllocDir: dir, StdoutPath: dir + "/out", StderrPath: dir + "/err",
			Config: map[string]any{"run_for": "1h"}}
		_, err := d.StartTask(ctx, cfg)
		return err
	})
}

// BenchmarkStartTaskRoundTrip is BenchmarkInspectTaskRoundTrip's
// comparison for StartTask: the call the KV put → driver start path makes.
func BenchmarkStartTaskRoundTrip(b *testing.B) {
	b.Run("in-process", func(b *testing.B) { benchStarts(b, mock.New()) })
	b.Run("go-plugin", func(b *testing.B) { benchStarts(b, pluginMock(b)) })
}

// BenchmarkStartTaskRoundTripAfterIdle is BenchmarkStartTaskRoundTrip with
// 20 ms of idle before each call, as a node that is not busy sees a start.
func BenchmarkStartTaskRoundTripAfterIdle(b *testing.B) {
	b.Run("in-process", func(b *testing.B) { benchStartsIdle(b, mock.New(), 20*time.Millisecond) })
	b.Run("go-plugin", func(b *testing.B) { benchStartsIdle(b, pluginMock(b), 20*time.Millisecond) })
}
