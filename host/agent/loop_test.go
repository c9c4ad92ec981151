package agent

import (
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

func view(gen uint64, revs map[string]uint64) *fleet.View {
	return &fleet.View{Generation: gen, Revisions: revs}
}

// TestOnlyEchoesSkipsExactlyThisNodesOwnAllocationWrites: a view change is
// an echo only when every revision the allocations bucket moved by is one
// this agent wrote and nothing else moved; each case states whether a pass
// must run.
func TestOnlyEchoesSkipsExactlyThisNodesOwnAllocationWrites(t *testing.T) {
	base := map[string]uint64{fleet.KindJobs: 10, fleet.KindNodes: 3, fleet.KindAllocs: 20, fleet.KindDeployments: 5}
	with := func(k string, r uint64) map[string]uint64 {
		m := map[string]uint64{}
		for kk, v := range base {
			m[kk] = v
		}
		m[k] = r
		return m
	}
	cases := []struct {
		name   string
		primed bool
		own    []uint64
		gen    uint64
		revs   map[string]uint64
		echo   bool
	}{
		{"own writes 21 and 22 only", true, []uint64{21, 22}, 102, with(fleet.KindAllocs, 22), true},
		{"control: 22 written by another node", true, []uint64{21}, 102, with(fleet.KindAllocs, 22), false},
		{"control: own write, and a job changed", true, []uint64{21}, 102, func() map[string]uint64 { m := with(fleet.KindAllocs, 21); m[fleet.KindJobs] = 11; return m }(), false},
		{"control: a deployment changed", true, nil, 101, with(fleet.KindDeployments, 6), false},
		{"control: generation moved beyond the revisions", true, []uint64{21}, 105, with(fleet.KindAllocs, 21), false},
		{"control: no pass read a view yet", false, []uint64{21}, 101, with(fleet.KindAllocs, 21), false},
		{"nothing moved", true, nil, 100, with(fleet.KindAllocs, 20), true},
		{"control: a bucket appeared", true, nil, 101, func() map[string]uint64 { m := with(fleet.KindAllocs, 20); m[fleet.KindIntents] = 1; return m }(), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e ownEchoes
			if c.primed {
				e.passed(view(100, base))
			}
			for _, r := range c.own {
				e.add(r)
			}
			if got := e.onlyEchoes(view(c.gen, c.revs)); got != c.echo {
				t.Fatalf("onlyEchoes = %v, want %v", got, c.echo)
			}
		})
	}
}

// TestAnEchoCountsAsReadAndOldRevisionsAreForgotten: once an echo is
// recognised, the next change is judged from it; a write whose echo a pass
// already read is not remembered.
func TestAnEchoCountsAsReadAndOldRevisionsAreForgotten(t *testing.T) {
	var e ownEchoes
	e.passed(view(1, map[string]uint64{fleet.KindAllocs: 5}))
	e.add(4) // read by the pass already
	if len(e.revs) != 0 {
		t.Fatalf("a revision the pass read is remembered: %v", e.revs)
	}
	e.add(6)
	if !e.onlyEchoes(view(2, map[string]uint64{fleet.KindAllocs: 6})) {
		t.Fatal("own write 6 not recognised")
	}
	if len(e.revs) != 0 {
		t.Fatalf("revisions up to the echo not forgotten: %v", e.revs)
	}
	// Control: 7 is someone else's; judged from 6, not from 5.
	if e.onlyEchoes(view(3, map[string]uint64{fleet.KindAllocs: 7})) {
		t.Fatal("a foreign write 7 taken for an echo")
	}
}

// TestOnlyEchoesRecognisesOwnKeysAndPlannedCreationsWithoutTheirRevisions:
// an echo that arrives before its put's reply is still recognised, by what
// the view holds at that revision; each control differs in one thing.
func TestOnlyEchoesRecognisesOwnKeysAndPlannedCreationsWithoutTheirRevisions(t *testing.T) {
	t0 := time.Unix(1000, 0)
	planned := &model.Deployment{ID: "d1", JobID: "web", JobVersion: 2, Status: model.DeploymentRunning, ModifyTime: t0}
	base := map[string]uint64{fleet.KindJobs: 10, fleet.KindAllocs: 20, fleet.KindDeployments: 5}
	type in struct {
		allocs map[string]wanted.AllocState
		deps   map[string]wanted.DeploymentState
		revs   map[string]uint64
		gen    uint64
	}
	revs := func(a, d uint64) map[string]uint64 {
		return map[string]uint64{fleet.KindJobs: 10, fleet.KindAllocs: a, fleet.KindDeployments: d}
	}
	al := func(rev uint64) wanted.AllocState {
		return wanted.AllocState{Revision: rev, Value: &model.Allocation{ID: "a"}}
	}
	dep := func(rev uint64, mod time.Time) wanted.DeploymentState {
		d := *planned
		d.ModifyTime = mod
		return wanted.DeploymentState{Revision: rev, Value: &d}
	}
	cases := []struct {
		name string
		in   in
		echo bool
	}{
		{"this node's key at the new revision", in{allocs: map[string]wanted.AllocState{"n1.a": al(21), "n2.b": al(19)}, revs: revs(21, 5), gen: 101}, true},
		{"control: another node's key at the new revision", in{allocs: map[string]wanted.AllocState{"n1.a": al(20), "n2.b": al(21)}, revs: revs(21, 5), gen: 101}, false},
		{"control: the revision is no key's any more (a delete)", in{allocs: map[string]wanted.AllocState{"n1.a": al(20)}, revs: revs(21, 5), gen: 101}, false},
		{"the planned creation, as planned", in{deps: map[string]wanted.DeploymentState{"web.2": dep(6, t0)}, revs: revs(20, 6), gen: 101}, true},
		{"control: the same deployment changed since", in{deps: map[string]wanted.DeploymentState{"web.2": dep(6, t0.Add(time.Second))}, revs: revs(20, 6), gen: 101}, false},
		{"control: two revisions, one left", in{deps: map[string]wanted.DeploymentState{"web.2": dep(7, t0)}, revs: revs(20, 7), gen: 102}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := ownEchoes{nodePrefix: "n1."}
			e.passed(view(100, base))
			e.creating(planned)
			v := &fleet.View{Generation: c.in.gen, Revisions: c.in.revs, Allocs: c.in.allocs, Deployments: c.in.deps}
			if got := e.onlyEchoes(v); got != c.echo {
				t.Fatalf("onlyEchoes = %v, want %v", got, c.echo)
			}
		})
	}
}
