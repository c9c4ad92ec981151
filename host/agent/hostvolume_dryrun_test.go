package agent

import (
	"fmt"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// TestTheDryRunPlacesAGroupOnlyWhereTheNodeHasItsHostVolume: a version
// that adds a host volume is an update on the node that offers it and a
// placement on a new node that offers it; a node that does not offer it
// and runs nothing of the job is left out (the reconciler's view: the
// node is out of the job's scope, as for a constraint it fails).
func TestTheDryRunPlacesAGroupOnlyWhereTheNodeHasItsHostVolume(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	with := func(n *model.Node) *model.Node {
		n.HostVolumes = map[string]model.HostVolume{"data": {Path: "/srv/data"}}
		return n
	}
	nodes := []*model.Node{with(explainNode("n1", "dc1", "docker")), explainNode("n2", "dc1", "docker"), with(explainNode("n3", "dc1", "docker"))}
	running := dryJob(1, "web:1", 1)
	next := dryJob(2, "web:1", 1)
	next.Groups[0].Volumes = []model.Volume{{Name: "d", Type: model.VolumeHost, Source: "data"}}
	next.Groups[0].Tasks[0].VolumeMounts = []model.VolumeMount{{Volume: "d", Destination: "/data"}}
	runs, err := DryRun(DryRunInput{Job: next, Running: running, Nodes: nodes, Allocs: []*model.Allocation{dryAlloc("a1", "n1", 1)}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	got := actions(runs)
	want := map[string][]string{"n1": {ActionUpdate}, "n3": {ActionPlace}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("dry run:\n got  %v\n want %v", got, want)
	}
}
