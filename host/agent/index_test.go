package agent

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// fakeChanges is a ViewSource over a hand-built view and change log.
type fakeChanges struct {
	view    *fleet.View
	changes []fleet.Change
	floor   uint64
}

func (f *fakeChanges) Changed() <-chan struct{} { return nil }
func (f *fakeChanges) Synced() <-chan struct{}  { return nil }
func (f *fakeChanges) View() *fleet.View        { return f.view }
func (f *fakeChanges) Generation() uint64       { return f.view.Generation }
func (f *fakeChanges) Alloc(k string) (wanted.AllocState, bool) {
	st, ok := f.view.Allocs.Get(k)
	return st, ok
}
func (f *fakeChanges) Deployment(k string) (wanted.DeploymentState, bool) {
	st, ok := f.view.Deployments.Get(k)
	return st, ok
}
func (f *fakeChanges) ChangesSince(from, to uint64) ([]fleet.Change, bool) {
	if from < f.floor {
		return nil, false
	}
	var out []fleet.Change
	for _, c := range f.changes {
		if c.Gen > from && c.Gen <= to {
			out = append(out, c)
		}
	}
	return out, true
}

// An index brought forward by the change log holds exactly what one rebuilt
// from the view holds, after every step of a random history of allocation
// and deployment writes, moves between jobs and deletes; and the jobs it
// reports dirty include every job a step touched.
func TestTheIndexKeptByChangesEqualsARebuild(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	src := &fakeChanges{view: &fleet.View{Allocs: fleet.MapOf(map[string]wanted.AllocState{}), Deployments: fleet.MapOf(map[string]wanted.DeploymentState{}), Revisions: map[string]uint64{}}}
	var ix viewIndex
	ix.refresh(src, src.view, "self", 1, true)
	jobOfAlloc := func(k string) string {
		if st, ok := src.view.Allocs.Get(k); ok && st.Value != nil {
			return wanted.JobKey(st.Value.Namespace, st.Value.JobID)
		}
		return ""
	}
	jobOfDep := func(k string) string {
		if st, ok := src.view.Deployments.Get(k); ok && st.Value != nil {
			return wanted.JobKey(st.Value.Namespace, st.Value.JobID)
		}
		return ""
	}
	gen := uint64(0)
	for step := 0; step < 3000; step++ {
		touched := map[string]bool{}
		for n := rng.Intn(4); n >= 0; n-- {
			gen++
			job := fmt.Sprintf("j%d", rng.Intn(6))
			switch rng.Intn(4) {
			case 0, 1: // an allocation of some node, possibly this one, put or moved
				node := []string{"self", "n1", "n2"}[rng.Intn(3)]
				k := wanted.AllocKey(node, "default", job, fmt.Sprintf("a%d", rng.Intn(20)))
				before := jobOfAlloc(k)
				allocs := src.view.Allocs.Clone()
				allocs[k] = wanted.AllocState{Key: k, Revision: gen, Value: &model.Allocation{ID: k, Namespace: "default", JobID: job, NodeID: node}}
				src.view = withAllocs(src.view, allocs)
				src.changes = append(src.changes, fleet.Change{Gen: gen, Kind: fleet.KindAllocs, Key: k, Jobs: [2]string{before, jobOfAlloc(k)}})
				if node != "self" {
					touched[before], touched[jobOfAlloc(k)] = true, true
				}
			case 2: // an allocation deleted
				k := wanted.AllocKey([]string{"self", "n1", "n2"}[rng.Intn(3)], "default", job, fmt.Sprintf("a%d", rng.Intn(20)))
				before := jobOfAlloc(k)
				allocs := src.view.Allocs.Clone()
				delete(allocs, k)
				src.view = withAllocs(src.view, allocs)
				src.changes = append(src.changes, fleet.Change{Gen: gen, Kind: fleet.KindAllocs, Key: k, Jobs: [2]string{before, ""}})
				if k[:4] != "self" {
					touched[before] = true
				}
			case 3: // a deployment written or deleted
				k := wanted.DeploymentKey("default", job, uint64(rng.Intn(3)))
				before := jobOfDep(k)
				deps := make(map[string]wanted.DeploymentState, src.view.Deployments.Len())
				for kk, v := range src.view.Deployments.All() {
					deps[kk] = v
				}
				if rng.Intn(3) == 0 {
					delete(deps, k)
				} else {
					deps[k] = wanted.DeploymentState{Key: k, Revision: gen, Value: &model.Deployment{ID: k, Namespace: "default", JobID: job}}
				}
				v := *src.view
				v.Deployments = fleet.MapOf(deps)
				src.view = &v
				src.changes = append(src.changes, fleet.Change{Gen: gen, Kind: fleet.KindDeployments, Key: k, Jobs: [2]string{before, jobOfDep(k)}})
				touched[before], touched[jobOfDep(k)] = true, true
			}
		}
		src.view.Generation = gen
		dirty, all := ix.refresh(src, src.view, "self", 1, false)
		if all {
			t.Fatalf("step %d: the index was rebuilt though the log was complete", step)
		}
		for jk := range touched {
			if jk != "" && !dirty[jk] {
				t.Fatalf("step %d: job %s was touched but not reported dirty (dirty %v)", step, jk, dirty)
			}
		}
		var fresh viewIndex
		fresh.refresh(src, src.view, "self", 1, true)
		if !reflect.DeepEqual(ix.others, fresh.others) || !reflect.DeepEqual(ix.deps, fresh.deps) {
			t.Fatalf("step %d: incremental index\n others %v\n deps %v\nrebuilt\n others %v\n deps %v", step, ix.others, ix.deps, fresh.others, fresh.deps)
		}
	}
	// Control: a log that no longer reaches back makes a rebuild; a change
	// of this node's record (base) makes every job dirty.
	src.floor = gen + 1
	gen++
	src.view.Generation = gen
	if _, all := ix.refresh(src, src.view, "self", 1, false); !all {
		t.Fatal("a log that dropped changes did not make a rebuild")
	}
	src.floor = 0
	if _, all := ix.refresh(src, src.view, "self", 2, false); !all {
		t.Fatal("a change of this node's record did not make every job dirty")
	}
}

func withAllocs(v *fleet.View, allocs map[string]wanted.AllocState) *fleet.View {
	c := *v
	c.Allocs = fleet.MapOf(allocs)
	return &c
}

// A runner write kicks a pass only when it changes what a pass reads:
// task events, restart counts and times do not; status, intent, health,
// canary, version and migration marks do.
func TestPlanSigMovesOnlyWithWhatAPassReads(t *testing.T) {
	yes := true
	base := func() *model.Allocation {
		return &model.Allocation{ID: "a", Name: "web.g[0]", JobID: "web", TaskGroup: "g", NodeID: "n1", JobVersion: 1,
			DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning, DeploymentID: "d1",
			TaskStates: map[string]*model.TaskState{"t": {State: "running"}}}
	}
	ref := planSig(base())
	quiet := []func(a *model.Allocation){
		func(a *model.Allocation) { a.TaskStates["t"].Restarts = 3 },
		func(a *model.Allocation) {
			a.TaskStates["t"].Events = append(a.TaskStates["t"].Events, model.TaskEvent{Type: "Started"})
		},
		func(a *model.Allocation) { a.ClientDescription = "tasks are running" },
	}
	for i, f := range quiet {
		a := base()
		f(a)
		if planSig(a) != ref {
			t.Fatalf("quiet change %d moved the signature", i)
		}
	}
	loud := []func(a *model.Allocation){
		func(a *model.Allocation) { a.ClientStatus = model.ClientFailed },
		func(a *model.Allocation) { a.DesiredStatus = model.DesiredStop },
		func(a *model.Allocation) { a.JobVersion = 2 },
		func(a *model.Allocation) { a.DeploymentID = "d2" },
		func(a *model.Allocation) { a.DeploymentStatus = &model.AllocDeploymentStatus{Healthy: &yes} },
		func(a *model.Allocation) { a.DeploymentStatus = &model.AllocDeploymentStatus{Canary: true} },
		func(a *model.Allocation) { a.DesiredTransition.Migrate = &yes },
	}
	for i, f := range loud {
		a := base()
		f(a)
		if planSig(a) == ref {
			t.Fatalf("change %d did not move the signature", i)
		}
	}
}
