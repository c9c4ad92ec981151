package agent

import (
	"testing"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/wanted"
)

// TestGoneJobsAreLookedForOnlyWhenTheJobsMoved: a pass walks the
// job-keyed maps for gone jobs' keys on its first and full passes and
// after the jobs bucket changed (its revision, or the job count: a view
// that lost a key), and not otherwise.
func TestGoneJobsAreLookedForOnlyWhenTheJobsMoved(t *testing.T) {
	view := func(rev uint64, keys ...string) *fleet.View {
		v := &fleet.View{Jobs: map[string]wanted.JobState{}, Revisions: map[string]uint64{fleet.KindJobs: rev}}
		for _, k := range keys {
			v.Jobs[k] = wanted.JobState{Key: k}
		}
		return v
	}
	var m pruneMark
	steps := []struct {
		what string
		full bool
		v    *fleet.View
		want bool
	}{
		{"the first pass, with no job", false, view(0), true},
		{"nothing moved", false, view(0), false},
		{"a job put", false, view(3, "default.a"), true},
		{"nothing moved since", false, view(3, "default.a"), false},
		{"a full pass", true, view(3, "default.a"), true},
		{"another job put", false, view(4, "default.a", "default.b"), true},
		{"a view that lost a key at the same revision", false, view(4, "default.a"), true},
		{"the same again", false, view(4, "default.a"), false},
		{"the bucket pulled again, the revision lower", false, view(2, "default.a"), true},
	}
	for _, s := range steps {
		if got := m.due(s.full, s.v); got != s.want {
			t.Fatalf("%s: due %v, want %v", s.what, got, s.want)
		}
	}
}
