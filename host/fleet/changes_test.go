package fleet

import (
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

func allocValue(t *testing.T, node, id, job string) []byte {
	t.Helper()
	b, err := json.Marshal(&model.Allocation{ID: id, Name: job + ".g[0]", Namespace: "default", JobID: job, TaskGroup: "g", NodeID: node,
		DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The change log names every applied change with the jobs it touched,
// before and after, and says when it no longer reaches back far enough.
func TestChangesSinceNamesTheJobsEachChangeTouched(t *testing.T) {
	s := NewSource(nil, SourceConfig{})
	log := slog.New(slog.DiscardHandler)
	allocs := bucketRef{kind: KindAllocs, name: "allocs"}
	key := wanted.AllocKey("n1", "default", "web", "a1")
	s.apply(allocs, wanted.Entry{Key: key, Value: allocValue(t, "n1", "a1", "web"), Revision: 1, Op: wanted.OpPut}, log)
	g1 := s.View().Generation
	// A rewrite by hand that moves the record to another job is refused
	// (the key names the job): still a change of the same job. Then deleted.
	s.apply(allocs, wanted.Entry{Key: key, Value: allocValue(t, "n1", "a1", "api"), Revision: 2, Op: wanted.OpPut}, log)
	s.apply(allocs, wanted.Entry{Key: key, Revision: 3, Op: wanted.OpDelete}, log)
	// A malformed value changes nothing in force but is still a change
	// (a rejection) of the same job.
	s.apply(allocs, wanted.Entry{Key: wanted.AllocKey("n2", "default", "web", "a2"), Value: []byte(`{"id":`), Revision: 4, Op: wanted.OpPut}, log)
	g := s.View().Generation

	all, ok := s.ChangesSince(0, g)
	if !ok {
		t.Fatal("the log does not reach back to generation 0")
	}
	if len(all) != 4 || uint64(len(all)) != g {
		t.Fatalf("%d changes, want 4: %+v", len(all), all)
	}
	want := [][2]string{{"", "default.web"}, {"default.web", "default.web"}, {"default.web", ""}, {"", ""}}
	for i, c := range all {
		if c.Kind != KindAllocs || c.Jobs != want[i] {
			t.Fatalf("change %d = %+v, want jobs %v", i, c, want[i])
		}
	}
	since, ok := s.ChangesSince(g1, g)
	if !ok || len(since) != 3 || since[0].Gen <= g1 || since[0].Revision != 2 {
		t.Fatalf("changes since %d: %+v (complete %v)", g1, since, ok)
	}
	if none, ok := s.ChangesSince(g, g); !ok || len(none) != 0 {
		t.Fatalf("changes since the newest generation: %+v", none)
	}

	// Overflow: a consumer left behind is told to rebuild.
	for i := 0; i < maxChanges+10; i++ {
		s.apply(allocs, wanted.Entry{Key: key, Value: allocValue(t, "n1", "a1", "web"), Revision: uint64(10 + i), Op: wanted.OpPut}, log)
	}
	if _, ok := s.ChangesSince(g1, s.View().Generation); ok {
		t.Fatal("a log that dropped changes claimed to be complete")
	}
	latest := s.View().Generation
	if cs, ok := s.ChangesSince(latest-5, latest); !ok || len(cs) != 5 {
		t.Fatalf("recent changes after an overflow: %d (complete %v)", len(cs), ok)
	}
}

// A snapshot shares the maps of the kinds that did not change since the
// previous one, and copies those that did.
func TestAViewCopiesOnlyTheKindsThatChanged(t *testing.T) {
	s := NewSource(nil, SourceConfig{})
	log := slog.New(slog.DiscardHandler)
	allocs := bucketRef{kind: KindAllocs, name: "allocs"}
	jobs := bucketRef{kind: KindJobs, name: "jobs"}
	s.apply(allocs, wanted.Entry{Key: wanted.AllocKey("n1", "default", "web", "a1"), Value: allocValue(t, "n1", "a1", "web"), Revision: 1, Op: wanted.OpPut}, log)
	v1 := s.View()
	s.apply(allocs, wanted.Entry{Key: wanted.AllocKey("n1", "default", "web", "a2"), Value: allocValue(t, "n1", "a2", "web"), Revision: 2, Op: wanted.OpPut}, log)
	v2 := s.View()
	if v1.Allocs.Len() != 1 || v2.Allocs.Len() != 2 {
		t.Fatalf("allocations in the snapshots: %d then %d, want 1 then 2", v1.Allocs.Len(), v2.Allocs.Len())
	}
	same := func(a, b Map[wanted.JobState]) bool { return a.p == b.p }
	if !same(v1.Jobs, v2.Jobs) {
		t.Fatal("the jobs map was copied though no job changed")
	}
	// Control: a job change copies the jobs, and the older snapshot keeps
	// what it held.
	s.apply(jobs, wanted.Entry{Key: "default.web", Value: []byte(`{"id":`), Revision: 3, Op: wanted.OpPut}, log)
	v3 := s.View()
	if same(v2.Jobs, v3.Jobs) || v3.Jobs.Len() != 1 || v2.Jobs.Len() != 0 {
		t.Fatalf("after a job change: shared %v, jobs %d (older snapshot %d)", same(v2.Jobs, v3.Jobs), v3.Jobs.Len(), v2.Jobs.Len())
	}
}

// ChangesSince hands out the log's own runs, not copies: a run answered
// must stay as it was while the log grows past it and is compacted (half
// of it dropped each time it is full), over four times the log's length
// of changes. Each run is checked against the copy taken when it was
// answered, and against the changes' generations.
func TestARunOfTheChangeLogNeverChangesAfterItIsAnswered(t *testing.T) {
	s := NewSource(nil, SourceConfig{})
	log := slog.New(slog.DiscardHandler)
	allocs := bucketRef{kind: KindAllocs, name: "allocs"}
	type answered struct {
		run, copied []Change
	}
	var runs []answered
	for i := range 4 * maxChanges {
		key := wanted.AllocKey("n1", "default", "web", "a1")
		s.apply(allocs, wanted.Entry{Key: key, Value: allocValue(t, "n1", "a1", "web"), Revision: uint64(i + 1), Op: wanted.OpPut}, log)
		if i%97 != 0 {
			continue
		}
		g := s.Generation()
		run, ok := s.ChangesSince(g-min(g, 50), g)
		if !ok || uint64(len(run)) != min(g, 50) || run[len(run)-1].Gen != g {
			t.Fatalf("change %d: %d changes up to %d (complete %v)", i, len(run), g, ok)
		}
		runs = append(runs, answered{run, append([]Change(nil), run...)})
	}
	compactions := 0
	s.mu.Lock()
	floor := s.changes.floor
	s.mu.Unlock()
	for i, r := range runs {
		if r.run[0].Gen <= floor {
			compactions++
		}
		for j := range r.run {
			if r.run[j] != r.copied[j] || (j > 0 && r.run[j].Gen != r.run[j-1].Gen+1) {
				t.Fatalf("run %d changed after it was answered: at %d %+v, was %+v", i, j, r.run[j], r.copied[j])
			}
		}
	}
	if compactions == 0 {
		t.Fatal("control: no run answered before a compaction")
	}
}
