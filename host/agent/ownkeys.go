package agent

import (
	"fmt"
	"strings"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// The node is the single writer of its allocations' keys (I1 of
// docs/rollout.md): a value under this node's prefix that it did not write
// (an operator's put, a script, a forged record) is corrected, not obeyed,
// and the correction is logged. checkOwnKeys runs in every pass over the
// allocation keys that changed since the last one (the change log), and
// over every key of this node on the first pass and whenever the log no
// longer reaches back: O(changes), not O(fleet), in steady state.

// ownKeyFix is one correction of this node's allocation keys.
type ownKeyFix struct {
	key, why string
	rewrite  *model.Allocation // this node's own record to write back
	remove   *allocRef         // a key of an allocation this node does not have
}

// checkOwnKeys finds this node's allocation keys whose value is not this
// node's and corrects them: a known allocation's record is written again
// from the node's state, an unknown allocation's key is removed.
func (a *Agent) checkOwnKeys(src echoSource, view *fleet.View) {
	if a.cfg.Allocs == nil || src == nil {
		return
	}
	prefix := a.nodeID + "."
	var keys []string
	full := a.ownKeysGen == 0
	if !full {
		changes, complete := src.ChangesSince(a.ownKeysGen, view.Generation)
		if !complete {
			full = true
		}
		for _, c := range changes {
			if c.Kind != fleet.KindAllocs {
				continue
			}
			if c.Key == "" && !c.Filters {
				full = true // the bucket pulled whole
				break
			}
			if strings.HasPrefix(c.Key, prefix) {
				keys = append(keys, c.Key)
			}
		}
	}
	if full {
		// Every key under this node's prefix, and the key of every
		// allocation it has (one the view lacks was removed, or lost with
		// the bucket).
		seen := map[string]bool{}
		keys = keys[:0]
		for k := range view.Allocs.All() {
			if strings.HasPrefix(k, prefix) {
				keys = append(keys, k)
				seen[k] = true
			}
		}
		a.mu.Lock()
		for _, r := range a.runners {
			al := r.Snapshot()
			if k := wanted.AllocKey(a.nodeID, al.Namespace, al.JobID, al.ID); !seen[k] {
				keys = append(keys, k)
			}
		}
		for _, t := range a.terminal {
			if k := wanted.AllocKey(a.nodeID, t.Namespace, t.JobID, t.ID); !seen[k] {
				keys = append(keys, k)
			}
		}
		a.mu.Unlock()
	}
	a.ownKeysGen = view.Generation
	var fixes []ownKeyFix
	for _, k := range keys {
		st, ok := view.Allocs.Get(k)
		if !ok {
			st = wanted.AllocState{Key: k, Absent: true} // not in the view at all
		}
		if f, ok := a.ownKeyFix(k, st); ok {
			fixes = append(fixes, f)
		}
	}
	for _, f := range fixes {
		switch {
		case f.rewrite != nil:
			a.log.Warn("this node's allocation key holds a record it did not write: written again from this node's state",
				"key", f.key, "why", f.why)
			a.writer.enqueue(f.rewrite)
		case f.remove != nil:
			a.log.Warn("this node's allocation key names an allocation it does not have: removed", "key", f.key, "why", f.why)
			a.writer.forget(*f.remove)
		}
		a.mu.Lock()
		a.status.ForeignWrites++
		a.mu.Unlock()
	}
}

// ownKeyFix decides one key of this node (st is the view's state of it).
// A key whose write or removal by this node is queued or in flight is left
// alone: the writer's next write is this node's answer anyway.
func (a *Agent) ownKeyFix(key string, st wanted.AllocState) (ownKeyFix, bool) {
	_, ns, job, id, ok := wanted.ParseAllocKeyFull(key)
	if !ok {
		return ownKeyFix{}, false
	}
	acked, busy := a.writer.keyState(id)
	if busy {
		return ownKeyFix{}, false
	}
	a.mu.Lock()
	var mine *model.Allocation
	if r := a.runners[id]; r != nil {
		mine = r.Snapshot()
	} else if t := a.terminal[id]; t != nil {
		mine = t
	}
	a.mu.Unlock()
	switch {
	case mine == nil && !st.Absent:
		return ownKeyFix{key: key, why: fmt.Sprintf("revision %d; no such allocation on this node", st.Revision),
			remove: &allocRef{namespace: ns, job: job, id: id}}, true
	case mine == nil:
		return ownKeyFix{}, false
	case st.Absent:
		return ownKeyFix{key: key, why: fmt.Sprintf("removed at revision %d while this node has the allocation", st.Revision), rewrite: mine}, true
	case acked > 0 && st.Revision > acked:
		// A revision after this node's last write of the key: someone
		// else's write, whatever it holds.
		return ownKeyFix{key: key, why: fmt.Sprintf("revision %d after this node's last write (revision %d)", st.Revision, acked), rewrite: mine}, true
	case acked == 0 && st.Value != nil:
		// Nothing written since this agent started: the value must be
		// what this node's state says (a write while it was down, or
		// before this agent's first write of it, is compared).
		if d := allocDiverges(st.Value, mine); d != "" {
			return ownKeyFix{key: key, why: fmt.Sprintf("revision %d: %s", st.Revision, d), rewrite: mine}, true
		}
	}
	return ownKeyFix{}, false
}

// allocDiverges names the first field in which the record kv, read from
// the bucket, says something else than this node's own record mine: the
// fields readers act on (status, version, deployment health).
func allocDiverges(kv, mine *model.Allocation) string {
	switch {
	case kv.ID != mine.ID || kv.NodeID != mine.NodeID:
		return fmt.Sprintf("names allocation %s on node %s", kv.ID, kv.NodeID)
	case kv.DesiredStatus != mine.DesiredStatus:
		return fmt.Sprintf("desired status %s, this node's %s", kv.DesiredStatus, mine.DesiredStatus)
	case kv.ClientStatus != mine.ClientStatus:
		return fmt.Sprintf("client status %s, this node's %s", kv.ClientStatus, mine.ClientStatus)
	case kv.JobVersion != mine.JobVersion:
		return fmt.Sprintf("job version %d, this node's %d", kv.JobVersion, mine.JobVersion)
	case kv.DeploymentID != mine.DeploymentID:
		return fmt.Sprintf("deployment %q, this node's %q", kv.DeploymentID, mine.DeploymentID)
	case healthOf(kv) != healthOf(mine):
		return fmt.Sprintf("deployment health %s, this node's %s", healthOf(kv), healthOf(mine))
	}
	return ""
}

func healthOf(a *model.Allocation) string {
	switch {
	case a.DeploymentStatus.IsHealthy():
		return "healthy"
	case a.DeploymentStatus.IsUnhealthy():
		return "unhealthy"
	}
	return "unset"
}
