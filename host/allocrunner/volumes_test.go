package allocrunner

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/sdk/driver"
)

// TestAMountIsReadOnlyWhenTheNodeTheGroupOrTheTaskSaysSo: each
// volume_mount becomes the node's host volume path at its destination,
// read-only when any of the three says so; only the mount with none of
// them read-only (the control) is writable.
func TestAMountIsReadOnlyWhenTheNodeTheGroupOrTheTaskSaysSo(t *testing.T) {
	g := &model.Group{Name: "g", Volumes: []model.Volume{
		{Name: "rw", Type: model.VolumeHost, Source: "data"},
		{Name: "grp-ro", Type: model.VolumeHost, Source: "data", ReadOnly: true},
		{Name: "node-ro", Type: model.VolumeHost, Source: "sock"},
	}}
	task := &model.Task{Name: "t", VolumeMounts: []model.VolumeMount{
		{Volume: "rw", Destination: "/a"},
		{Volume: "rw", Destination: "/b", ReadOnly: true},
		{Volume: "grp-ro", Destination: "/c"},
		{Volume: "node-ro", Destination: "/var/run/docker.sock", PropagationMode: "host-to-task"},
	}}
	n := &model.Node{HostVolumes: map[string]model.HostVolume{"data": {Path: "/srv/data"}, "sock": {Path: "/var/run/docker.sock", ReadOnly: true}}}
	got, err := taskMounts(g, task, n)
	if err != nil {
		t.Fatal(err)
	}
	want := []driver.Mount{
		{HostPath: "/srv/data", TaskPath: "/a"},
		{HostPath: "/srv/data", TaskPath: "/b", ReadOnly: true},
		{HostPath: "/srv/data", TaskPath: "/c", ReadOnly: true},
		{HostPath: "/var/run/docker.sock", TaskPath: "/var/run/docker.sock", ReadOnly: true, PropagationMode: "host-to-task"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("mounts %+v\nwant %+v", got, want)
	}

	// The node lost the host volume since the job was placed: the task
	// cannot start, and the error says which one and where it comes from.
	_, err = taskMounts(g, task, &model.Node{})
	if err == nil || !strings.Contains(err.Error(), `host volume "data", which this node does not offer (its agent's client { host_volume "data"`) {
		t.Fatalf("err = %v", err)
	}
}

// TestAHostVolumeReachesTheDriverOnlyIfItMounts: the task's volume_mount
// reaches a driver whose capabilities say it mounts as TaskConfig.Mounts;
// a driver that does not (one written before mounts, or exec) never
// starts the task: it fails validation, naming the path, rather than
// running without its volume.
func TestAHostVolumeReachesTheDriverOnlyIfItMounts(t *testing.T) {
	node := &model.Node{ID: "n1", Name: "node-1", Datacenter: "dc1",
		HostVolumes: map[string]model.HostVolume{"data": {Path: "/srv/data", ReadOnly: true}}}
	run := func(noMounts bool) (*fixture, *Runner) {
		f := newFixture(t, map[string]any{}, nil, nil)
		f.drv.noMounts = noMounts
		g := f.job.Groups[0]
		g.Volumes = []model.Volume{{Name: "d", Type: model.VolumeHost, Source: "data"}}
		g.Tasks[0].VolumeMounts = []model.VolumeMount{{Volume: "d", Destination: "/data"}}
		r := New(Config{Alloc: f.alloc, Job: f.job, Node: node, Drivers: f.drv, Validate: validate, Store: f.store, AllocRoot: f.root})
		r.Run()
		return f, r
	}
	f, r := run(false)
	testutil.Eventually(t, 3*time.Second, "start", func() bool { return f.drv.startCount("a1/t") == 1 })
	f.drv.mu.Lock()
	got := f.drv.tasks["a1/t"].cfg.Mounts
	f.drv.mu.Unlock()
	r.Detach()
	if want := []driver.Mount{{HostPath: "/srv/data", TaskPath: "/data", ReadOnly: true}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("driver got mounts %+v, want %+v", got, want)
	}

	f, r = run(true)
	<-r.Done()
	if n := f.drv.startCount("a1/t"); n != 0 {
		t.Fatalf("a driver that cannot mount was asked to start the task %d times", n)
	}
	ev := r.Alloc().TaskStates["t"].Events
	if last := ev[len(ev)-1]; last.Type != EventFailedValidation || !strings.Contains(last.Message, "driver fake does not mount host volumes (its capabilities say so): drop the volume_mount and read /srv/data") {
		t.Fatalf("events %+v", ev)
	}
}
