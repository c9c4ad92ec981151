package fleet

import (
	"sort"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// maxChanges bounds the change log; a consumer that falls further behind is
// told to rebuild from a View.
const maxChanges = 4096

// Change is one change the Source applied, for consumers that keep their
// own indexes over the View (ChangesSince) instead of re-reading it whole.
type Change struct {
	// Gen is the View generation the change produced.
	Gen uint64
	// Kind is the bucket kind (KindJobs, ...).
	Kind string
	// Key is the KV key; empty for a change of the bucket as a whole (its
	// first full pull, a change of its watch filters or the end of their
	// pull).
	Key string
	// Revision is the KV revision of the entry applied.
	Revision uint64
	// Jobs are the job keys the record belonged to before and after the
	// change ("" for none): a job's own key, an allocation's or a
	// deployment's job. Nodes and intents belong to no job.
	Jobs [2]string
	// HeartbeatOnly marks a node record that changed in nothing but its
	// heartbeat time: what a fleet of agents sees most, and nothing a
	// reconcile reads.
	HeartbeatOnly bool
	// Filters marks a change of the kind's watch filters, or the end of
	// their pull (Key is empty): the keys of the filters kept are as they
	// were; those of new filters arrive as changes of their own.
	Filters bool
}

// heartbeatOnly reports whether a node record differs from the previous one
// in its heartbeat time alone (both in force, neither rejected).
func heartbeatOnly(prev, cur wanted.NodeState) bool {
	if prev.Value == nil || cur.Value == nil || prev.Absent || cur.Absent || prev.Rejection != nil || cur.Rejection != nil {
		return false
	}
	return model.SameButHeartbeat(prev.Value, cur.Value)
}

// changeLog keeps the newest changes, oldest first.
type changeLog struct {
	entries []Change
	// floor is the generation up to which changes may have been dropped:
	// the log is complete for any start at or after it.
	floor uint64
}

func (l *changeLog) add(c Change) {
	if len(l.entries) >= maxChanges {
		drop := len(l.entries) / 2
		l.floor = l.entries[drop-1].Gen
		// Into a new array: ChangesSince hands out runs of the old one,
		// which no later change may write.
		l.entries = append(make([]Change, 0, maxChanges), l.entries[drop:]...)
	}
	l.entries = append(l.entries, c)
}

// ChangesSince returns the changes with from < Gen <= to, oldest first, and
// whether that is all of them (false when the log no longer reaches back to
// from: the caller must rebuild from a View). Every generation is made by
// exactly one change, so a complete answer holds to - from changes. The
// slice is shared with the source and other callers: read it, never write
// it.
func (s *Source) ChangesSince(from, to uint64) ([]Change, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if from < s.changes.floor {
		return nil, false
	}
	// The log is in generation order: the changes asked for are one run
	// of it, found by two searches (a pass asks up to its view's
	// generation while the heartbeats applied since pile up past it).
	e := s.changes.entries
	lo := sort.Search(len(e), func(i int) bool { return e[i].Gen > from })
	hi := sort.Search(len(e), func(i int) bool { return e[i].Gen > to })
	if hi <= lo {
		return nil, true
	}
	// The log's own run, capped: appends land past its end and a
	// compaction makes a new array, so it never changes (a pass's copy of
	// a long run of heartbeats was 1.6 % of a 1,000-agent rollout's CPU).
	out := e[lo:hi:hi]
	return out, true
}

// Generation is the generation of the newest change applied (that of the
// next View).
func (s *Source) Generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// Alloc returns the record under an allocations-bucket key as it is now,
// without taking a snapshot.
func (s *Source) Alloc(key string) (wanted.AllocState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.allocs.Get(key)
}

// Deployment returns the record under a deployments-bucket key as it is
// now, without taking a snapshot.
func (s *Source) Deployment(key string) (wanted.DeploymentState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deps.Get(key)
}

// jobOfLocked is the job key the record under key currently belongs to, or
// "".
func (s *Source) jobOfLocked(kind, key string) string {
	switch kind {
	case KindJobs:
		if _, ok := s.jobs.Get(key); ok {
			return key
		}
	case KindAllocs:
		if st, ok := s.allocs.Get(key); ok && st.Value != nil && !st.Absent {
			return wanted.JobKey(st.Value.Namespace, st.Value.JobID)
		}
	case KindDeployments:
		if st, ok := s.deps.Get(key); ok && st.Value != nil && !st.Absent {
			return wanted.JobKey(st.Value.Namespace, st.Value.JobID)
		}
	case KindRollout:
		if ns, job, _, _, ok := wanted.ParseSlotKey(key); ok {
			return wanted.JobKey(ns, job)
		}
		if ns, job, ok := wanted.ParseSummaryKey(key); ok {
			return wanted.JobKey(ns, job)
		}
	}
	return ""
}
