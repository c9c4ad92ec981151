package allocrunner

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
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
