package agent

import (
	"path/filepath"
	"sort"

	"github.com/hivelet/hivelet/host/allocrunner"
	"github.com/hivelet/hivelet/host/model"
)

// AllocFiles tells where an allocation this node knows keeps its files: its
// directory, its task names (the job group's tasks for a live runner, the
// recorded task states for a finished one), and whether it is terminal (its
// tasks have ended and its runner's goroutines returned, so its logs will
// not grow). ok is false for an allocation this node does not know. It is
// a logs.Resolver.
func (a *Agent) AllocFiles(id string) (dir string, tasks []string, terminal bool, ok bool) {
	r, t := a.known(id)
	switch {
	case r != nil:
		snap := r.Snapshot()
		seen := map[string]bool{}
		if job := r.Job(); job != nil {
			if g := job.LookupGroup(snap.TaskGroup); g != nil {
				for _, task := range g.Tasks {
					seen[task.Name] = true
				}
			}
		}
		for name := range snap.TaskStates {
			seen[name] = true
		}
		for name := range seen {
			tasks = append(tasks, name)
		}
		sort.Strings(tasks)
		done := false
		select {
		case <-r.Done():
			done = true
		default:
		}
		return r.AllocDir(), tasks, done && snap.ClientStatus.Terminal(), true
	case t != nil:
		for name := range t.TaskStates {
			tasks = append(tasks, name)
		}
		sort.Strings(tasks)
		return filepath.Join(a.cfg.AllocRoot, id), tasks, true, true
	}
	return "", nil, false, false
}

// AllocDetails is this node's whole record of an allocation it runs or
// ran, with every event of its tasks (the allocations bucket carries a
// compact copy: allocrunner.ForWire); ok is false when the node does not
// know it. What the details service (logs.ServeDetails) answers with.
func (a *Agent) AllocDetails(id string) (*model.Allocation, bool) {
	r, t := a.known(id)
	switch {
	case r != nil:
		return r.Snapshot(), true
	case t != nil:
		return t, true
	}
	return nil, false
}

// known is the runner of allocation id, or its kept finished record (both
// nil: the node does not know it).
func (a *Agent) known(id string) (*allocrunner.Runner, *model.Allocation) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runners[id], a.terminal[id]
}
