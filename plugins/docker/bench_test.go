package docker_test

import (
	"context"
	"log/slog"
	"os"
	"sort"
	"testing"
	"time"

	docker "github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/plugins/manager"
	engine "github.com/hivelet/hivelet/runtime/docker"
	"github.com/hivelet/hivelet/runtime/docker/dockertest"
	"github.com/hivelet/hivelet/sdk/driver"
)

// BenchmarkContainerStart starts the same image three ways in each
// iteration, interleaved so that the noise of a shared machine hits all
// three alike (the order rotates each iteration): a direct Engine API create+start, StartTask on an in-process
// driver, and StartTask through the plugin manager (gRPC over a Unix
// socket to the driver in its own process). It reports the median of each
// and the ratios to the direct start. Containers are removed outside the
// measured spans.
func BenchmarkContainerStart(b *testing.B) {
	c := env.Client(b)
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	inproc, err := docker.New(docker.Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer inproc.Close()
	dir, err := os.MkdirTemp("", "hvb")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	m, err := manager.New(manager.Config{SelfExe: os.Args[0], Builtins: []string{docker.Name}, StateDir: dir, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Kill()
	plugin, err := m.Driver(ctx, docker.Name)
	if err != nil {
		b.Fatal(err)
	}
	run := dockertest.RandomID()
	defer dockertest.RemoveContainers(context.Background(), c, map[string]string{docker.LabelNodeID: nodeID, "hivelet-bench.run": run})
	taskFor := func() *driver.TaskConfig {
		alloc := dockertest.RandomID()
		return &driver.TaskConfig{
			ID: alloc + "/app", AllocID: alloc, TaskName: "app", JobID: "bench", NodeID: nodeID,
			Config:     map[string]any{"image": env.Tag, "args": []any{"run"}, "labels": map[string]any{"hivelet-bench.run": run}},
			StdoutPath: dir + "/" + alloc + ".stdout", StderrPath: dir + "/" + alloc + ".stderr",
		}
	}
	var direct, viaDriver, viaPlugin []time.Duration
	startDirect := func() {
		name := "hivelet-bench-" + dockertest.RandomID()
		t0 := time.Now()
		// The container the driver would create: same labels, same log settings.
		id, err := c.CreateContainer(ctx, engine.ContainerSpec{Name: name, Image: env.Tag, Cmd: []string{"run"},
			Labels: map[string]string{docker.LabelAllocID: name, docker.LabelTask: "app", docker.LabelJob: "bench",
				docker.LabelNodeID: nodeID, "hivelet-bench.run": run},
			LogType: "json-file", LogOptions: map[string]string{"max-size": "10m", "max-file": "3"}})
		if err == nil {
			err = c.StartContainer(ctx, id)
		}
		direct = append(direct, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		if err := c.RemoveContainer(ctx, id, true); err != nil {
			b.Fatal(err)
		}
	}
	startVia := func(d driver.Driver, out *[]time.Duration) func() {
		return func() {
			tc := taskFor()
			t0 := time.Now()
			if _, err := d.StartTask(ctx, tc); err != nil {
				b.Fatal(err)
			}
			*out = append(*out, time.Since(t0))
			if err := d.DestroyTask(ctx, tc.ID, true); err != nil {
				b.Fatal(err)
			}
		}
	}
	ways := []func(){startDirect, startVia(inproc, &viaDriver), startVia(plugin, &viaPlugin)}
	for i := 0; i < b.N; i++ {
		// Rotate the order: each way goes first, second and third equally.
		for k := range ways {
			ways[(i+k)%len(ways)]()
		}
	}
	md, mi, mp := median(direct), median(viaDriver), median(viaPlugin)
	b.ReportMetric(ms(md), "direct-ms")
	b.ReportMetric(ms(mi), "driver-ms")
	b.ReportMetric(ms(mp), "plugin-ms")
	b.ReportMetric(float64(mi)/float64(md), "driver/direct")
	b.ReportMetric(float64(mp)/float64(md), "plugin/direct")
	b.ReportMetric(0, "ns/op") // the per-way medians above are the result
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
