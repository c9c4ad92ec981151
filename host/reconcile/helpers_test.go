package reconcile

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// Builders for test fleets. The job is "web" with groups named by the test;
// allocation names follow model.AllocName.

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func sysJob(version uint64, groups ...*model.Group) *model.Job {
	return &model.Job{ID: "web", Type: model.JobTypeSystem, Version: version, Groups: groups}
}

func grp(name string, count int) *model.Group {
	return &model.Group{Name: name, Count: count, Update: model.DefaultUpdateStrategy()}
}

func withUpdate(g *model.Group, mod func(u *model.UpdateStrategy)) *model.Group {
	u := *g.Update
	mod(&u)
	g.Update = &u
	return g
}

func withLostAfter(g *model.Group, d time.Duration) *model.Group {
	g.Disconnect = &model.DisconnectStrategy{LostAfter: model.Duration(d)}
	return g
}

func rnode(id string) *model.Node {
	return &model.Node{ID: id, Name: id, Datacenter: "dc1", NodePool: "default", Status: model.NodeStatusReady,
		Eligibility: model.Eligible, Attributes: map[string]string{}, Meta: map[string]string{}}
}

func nodeWith(id string, st model.NodeStatus) *model.Node {
	n := rnode(id)
	n.Status = st
	return n
}

func draining(id string) *model.Node {
	n := rnode(id)
	n.Drain = &model.DrainStrategy{}
	return n
}

// al is a running allocation "web.<group>[idx]" of the given version.
func al(id, node, group string, idx int, version uint64) *model.Allocation {
	return &model.Allocation{ID: id, Name: model.AllocName("web", group, idx), JobID: "web", JobVersion: version,
		TaskGroup: group, NodeID: node, DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning}
}

func healthy(a *model.Allocation, depID string, canary bool) *model.Allocation {
	h := true
	a.DeploymentID = depID
	a.DeploymentStatus = &model.AllocDeploymentStatus{Healthy: &h, Canary: canary}
	return a
}

func transitioned(a *model.Allocation, to model.ClientStatus, at time.Time) *model.Allocation {
	a.States = append(a.States, model.AllocState{Field: model.AllocStateClientStatus, Value: string(to), Time: at})
	return a
}

func terminal(a *model.Allocation, cs model.ClientStatus) *model.Allocation {
	a.ClientStatus = cs
	return a
}

func dep(version uint64, st model.DeploymentStatus, groups map[string]*model.DeploymentState) *model.Deployment {
	if groups == nil {
		groups = map[string]*model.DeploymentState{}
	}
	return &model.Deployment{ID: DeploymentID("", "web", version), JobID: "web", JobVersion: version,
		Status: st, StatusDescription: model.DescRunning, TaskGroups: groups}
}

func fleetOf(job *model.Job, nodes ...*model.Node) Input {
	return Input{Job: job, ReadyNodes: nodes, TaintedNodes: map[string]*model.Node{}, Now: t0}
}

func mustFleet(t testing.TB, in Input) *Plan {
	t.Helper()
	p, err := ReconcileFleet(in)
	if err != nil {
		t.Fatalf("ReconcileFleet: %v", err)
	}
	return p
}

// bucketsOf returns the nine lists of a plan by name.
func bucketsOf(p *Plan) map[string][]Entry {
	return map[string][]Entry{
		"place": p.Place, "update": p.Update, "migrate": p.Migrate, "stop": p.Stop, "ignore": p.Ignore,
		"lost": p.Lost, "disconnecting": p.Disconnecting, "reconnecting": p.Reconnecting,
		"awaiting": p.AwaitingPromotion,
	}
}

// decisions maps each entry to "bucket rule[ canary]", keyed by the
// existing allocation ID, or by "node/name" for a placement.
func decisions(p *Plan) map[string]string {
	out := map[string]string{}
	for b, es := range bucketsOf(p) {
		for _, e := range es {
			k := e.AllocID
			if e.Rule == "name.3" {
				k = e.NodeID + "/" + e.Name
			}
			v := b + " " + e.Rule
			if e.Canary {
				v += " canary"
			}
			if old, dup := out[k]; dup {
				v = old + " AND " + v
			}
			out[k] = v
		}
	}
	return out
}

func dump(p *Plan) string {
	var lines []string
	for k, v := range decisions(p) {
		lines = append(lines, k+" → "+v)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// checkDecisions asserts each want entry; "" means the key must appear in
// no list.
func checkDecisions(t *testing.T, p *Plan, want map[string]string) {
	t.Helper()
	got := decisions(p)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %q, want %q\nplan:\n%s", k, got[k], w, dump(p))
		}
	}
}

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func entryFor(p *Plan, key string) (Entry, string) {
	for b, es := range bucketsOf(p) {
		for _, e := range es {
			if e.AllocID == key || e.NodeID+"/"+e.Name == key {
				return e, b
			}
		}
	}
	panic(fmt.Sprintf("no entry %s", key))
}
