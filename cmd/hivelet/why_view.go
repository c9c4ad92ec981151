package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/hivelet/hivelet/host/agent"
	"github.com/hivelet/hivelet/host/allocrunner"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
)

// This file is "the operator sees why": what `job run` and `job status`
// print when a job places on fewer nodes than the fleet has (which filter
// excluded how many nodes) and when a deployment fails (each failing
// allocation's node and the task event that tells why). The lines are
// pure functions of the fleet's view, tested on fixtures in
// why_view_test.go.

// maxNamedNodes: an exclusion names its nodes up to this many.
const maxNamedNodes = 3

// placementLines explains report: how many of the fleet's nodes run the
// job, and for each filter how many nodes it excluded. No lines when every
// node runs it.
func placementLines(job *model.Job, r agent.PlacementReport, nameOf func(string) string) []string {
	if len(r.Excluded) == 0 {
		return nil
	}
	out := []string{fmt.Sprintf("job %q places on %d of %d node(s):", job.ID, len(r.Eligible), r.Nodes)}
	for _, e := range r.Excluded {
		line := fmt.Sprintf("  %d node(s) excluded by %s: %s", len(e.Nodes), e.Filter, e.What)
		if e.Hint != "" {
			line += " (" + e.Hint + ")"
		}
		var names []string
		for i, id := range e.Nodes {
			if i == maxNamedNodes {
				names = append(names, fmt.Sprintf("and %d more", len(e.Nodes)-maxNamedNodes))
				break
			}
			names = append(names, nameOf(id))
		}
		out = append(out, line+" ["+strings.Join(names, ", ")+"]")
	}
	return out
}

// explainView is placementLines on a fleet view.
func explainView(job *model.Job, v *fleet.View) []string {
	return placementLines(job, agent.ExplainPlacement(job, v.NodeList()), nodeNamer(v))
}

// nodeNamer names a node by its name and short ID when it has a name.
func nodeNamer(v *fleet.View) func(string) string {
	return func(id string) string {
		if n := v.Node(id); n != nil && n.Name != "" && n.Name != id {
			return n.Name + " (" + short(id) + ")"
		}
		return id
	}
}

// failingAllocs are the allocations of job's version that failed, were
// lost or were found unhealthy, ordered by node.
func failingAllocs(job *model.Job, version uint64, v *fleet.View) []*model.Allocation {
	var out []*model.Allocation
	for _, st := range v.Allocs.All() {
		a := st.Value
		if a == nil || st.Absent || a.JobID != job.ID || a.Namespace != job.Namespace || a.JobVersion != version {
			continue
		}
		if a.ClientStatus == model.ClientFailed || a.ClientStatus == model.ClientLost || a.DeploymentStatus.IsUnhealthy() {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].NodeID != out[j].NodeID {
			return out[i].NodeID < out[j].NodeID
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// failureLines shows each failing allocation of job's version: its node,
// its status and, per task that has one, the event that tells why.
func failureLines(job *model.Job, version uint64, v *fleet.View) []string {
	allocs := failingAllocs(job, version, v)
	if len(allocs) == 0 {
		return nil
	}
	name := nodeNamer(v)
	out := []string{fmt.Sprintf("failing allocations of version %d:", version)}
	for _, a := range allocs {
		status := string(a.ClientStatus)
		if a.DeploymentStatus.IsUnhealthy() {
			status += ", unhealthy"
		}
		line := fmt.Sprintf("  alloc %s on node %s: %s", short(a.ID), name(a.NodeID), status)
		if a.ClientDescription != "" {
			line += " (" + a.ClientDescription + ")"
		}
		out = append(out, line)
		tasks := make([]string, 0, len(a.TaskStates))
		for t := range a.TaskStates {
			tasks = append(tasks, t)
		}
		sort.Strings(tasks)
		for _, t := range tasks {
			ts := a.TaskStates[t]
			e, then, ok := allocrunner.TellingEvent(ts)
			if !ok || (!ts.Failed && ts.State == "running" && !allocrunner.IsFailureEvent(e.Type) && e.Type != allocrunner.EventTerminated) {
				continue
			}
			l := fmt.Sprintf("    task %s: %s", t, e.Type)
			if e.Message != "" {
				l += ": " + e.Message
			}
			if then != "" {
				l += " (then " + then + ")"
			}
			out = append(out, l)
		}
	}
	return out
}

// noPlacementLines is why no node runs job: the exclusions, or that the
// fleet has no node at all.
func noPlacementLines(job *model.Job, v *fleet.View) []string {
	if len(v.NodeList()) == 0 {
		return []string{"the fleet has no registered node: start an agent (hivelet agent -dev)"}
	}
	return explainView(job, v)
}

// printIndented prints lines under a "==>" line.
func printIndented(out io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(out, "    "+l)
	}
}

// statusWhy is the part of `job status` that says why: the nodes the job
// does not place on, and, when its version's deployment failed or an
// allocation of it failed, what each failing allocation's tasks last said.
func statusWhy(out io.Writer, job *model.Job, v *fleet.View) {
	if !job.Stop {
		if lines := noPlacementOr(job, v); len(lines) > 0 {
			fmt.Fprintln(out, "\nPlacement")
			printIndented(out, lines)
		}
	}
	if lines := failureLines(job, job.Version, v); len(lines) > 0 {
		fmt.Fprintln(out, "\nFailures")
		printIndented(out, lines)
	}
}

// noPlacementOr is noPlacementLines when nothing places, else the
// exclusions (if any).
func noPlacementOr(job *model.Job, v *fleet.View) []string {
	for _, n := range v.NodeList() {
		if agent.PlacesOn(job, n) {
			return explainView(job, v)
		}
	}
	return noPlacementLines(job, v)
}
