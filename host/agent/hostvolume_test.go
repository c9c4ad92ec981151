package agent

import (
	"reflect"
	"testing"

	"github.com/hivelet/hivelet/host/model"
)

// TestANodeWithoutTheHostVolumeOrNetworkIsExcludedNamingIt: a group's
// host volume (volume source) and a port's host_network must be on the
// node; the report names the one missing, with a near name the node has,
// or what it has, or how its agent would offer one. Control: the node
// offering both runs the job, and PlacesOn agrees with the report.
func TestANodeWithoutTheHostVolumeOrNetworkIsExcludedNamingIt(t *testing.T) {
	job := explainJob("docker", func(j *model.Job) {
		j.Groups[0].Volumes = []model.Volume{{Name: "sock", Type: model.VolumeHost, Source: "docker-sock-ro", ReadOnly: true}}
		j.Groups[0].Network = &model.Network{Mode: model.NetworkHost, Ports: []model.Port{{Label: "http", HostNetwork: "tailscale"}}}
	})
	both := explainNode("both", "dc1", "docker")
	both.HostVolumes = map[string]model.HostVolume{"docker-sock-ro": {Path: "/var/run/docker.sock", ReadOnly: true}}
	both.HostNetworks = map[string]model.HostNetwork{"tailscale": {Address: "100.64.0.1"}}
	typo := explainNode("typo", "dc1", "docker")
	typo.HostVolumes = map[string]model.HostVolume{"docker-sock-r": {Path: "/x"}}
	other := explainNode("other", "dc1", "docker")
	other.HostVolumes = map[string]model.HostVolume{"certs": {Path: "/x"}}
	none := explainNode("none", "dc1", "docker")
	nonet := explainNode("nonet", "dc1", "docker")
	nonet.HostVolumes = both.HostVolumes

	r := ExplainPlacement(job, []*model.Node{both, typo, other, none, nonet})
	if !reflect.DeepEqual(r.Eligible, []string{"both"}) {
		t.Fatalf("eligible %v, want [both]", r.Eligible)
	}
	want := map[string]Exclusion{
		"typo":  {Filter: FilterVolume, What: `"docker-sock-ro" missing`, Hint: "did you mean docker-sock-r?"},
		"other": {Filter: FilterVolume, What: `"docker-sock-ro" missing`, Hint: "the node's host volumes: certs"},
		"none":  {Filter: FilterVolume, What: `"docker-sock-ro" missing`, Hint: `the node has no host volumes; its agent configuration offers one with client { host_volume "docker-sock-ro" { path = ... } }`},
		"nonet": {Filter: FilterHostNet, What: `"tailscale" missing`, Hint: `the node has no host networks; its agent configuration offers one with client { host_network "tailscale" { cidr = ... } }`},
	}
	for id, w := range want {
		n := map[string]*model.Node{"typo": typo, "other": other, "none": none, "nonet": nonet}[id]
		f, what, hint := firstExclusion(job, n, fleetValues(nil))
		if f != w.Filter || what != w.What || hint != w.Hint {
			t.Errorf("%s: excluded by %q %q (%s), want %q %q (%s)", id, f, what, hint, w.Filter, w.What, w.Hint)
		}
		if PlacesOn(job, n) {
			t.Errorf("%s: PlacesOn says it runs the job", id)
		}
	}
	if !PlacesOn(job, both) {
		t.Fatal("PlacesOn refuses the node that has both")
	}
}
