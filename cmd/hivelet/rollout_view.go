package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/api"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/rollout"
	"github.com/hivelet/hivelet/host/wanted"
)

// The fleet aggregate of one deployment (docs/rollout.md, "What the CLI
// shows"): `job run` and `deployment status` print it from the same pure
// function, fleetAggregate, over the same facts (api.FleetFacts), so their
// counts are the ones every agent derives (rollout.Derive) and never the
// record's stored counters.

// fewNodes: up to this many canary nodes are named.
const fewNodes = 5

// revertGrace is how long `job run` and `deployment status -watch` wait,
// after a failure, for the pending revert to be written before exiting.
const revertGrace = 30 * time.Second

// groupAggregate is one group's line of the aggregate.
type groupAggregate struct {
	Name   string                `json:"name"`
	Counts rollout.Counts        `json:"counts"`
	State  model.DeploymentState `json:"state"`
	// Unhealthy are "node: reason" of the version's unhealthy allocations.
	Unhealthy []string `json:"unhealthy,omitempty"`
	// DeadlineIn is the time left before require_progress_by (server time;
	// negative once passed); DeadlineSet says the clock runs.
	DeadlineIn  time.Duration `json:"deadline_in,omitempty"`
	DeadlineSet bool          `json:"deadline_set"`
}

// fleetAggregate is what the CLI shows of one deployment and the exit code
// it implies.
type fleetAggregate struct {
	Deployment *model.Deployment `json:"deployment"`
	Groups     []groupAggregate  `json:"groups"`
	Steward    string            `json:"steward,omitempty"`
	// Lost are the job's nodes whose heartbeat key is gone, "node (down
	// 2m0s)".
	Lost       []string                `json:"lost,omitempty"`
	Disruption string                  `json:"disruption,omitempty"`
	Events     []model.DeploymentEvent `json:"events,omitempty"`
	// Done: the command may exit, with Code (0 or 1) and Reason.
	Done   bool   `json:"done"`
	Code   int    `json:"code"`
	Reason string `json:"reason,omitempty"`
	// RevertPending: failed, and the revert is not written yet.
	RevertPending bool `json:"revert_pending,omitempty"`
}

// lastEvents is how many of the record's events are shown.
const lastEvents = 3

// promoteCommand is the exact command that promotes d.
func promoteCommand(d *model.Deployment) string {
	c := "hivelet deployment promote"
	if d.Namespace != "" && d.Namespace != wanted.DefaultNamespace {
		c += " -namespace " + d.Namespace
	}
	return c + " " + d.JobID
}

// aggregateOf derives the aggregate of record d from the fleet facts f.
func aggregateOf(d *model.Deployment, f *rollout.Facts) fleetAggregate {
	agg := fleetAggregate{Deployment: d}
	counts := rollout.Derive(d, f)
	if ranked := rollout.RankedNodes(d.ID, f.LiveEligible()); len(ranked) > 0 {
		agg.Steward = ranked[0]
	}
	if on, why := f.Disruption(); on {
		agg.Disruption = why
	}
	for _, n := range f.Nodes {
		if n.Live {
			continue
		}
		s := n.ID
		var notes []string
		if !n.DownSince.IsZero() && !f.Now.IsZero() {
			notes = append(notes, "down "+f.Now.Sub(n.DownSince).Round(time.Second).String())
		}
		if n.LostSince.IsZero() {
			notes = append(notes, "no loss verdict yet")
		} else {
			notes = append(notes, "loss verdict")
		}
		agg.Lost = append(agg.Lost, s+" ("+strings.Join(notes, ", ")+")")
	}
	if n := len(d.Events); n > lastEvents {
		agg.Events = d.Events[n-lastEvents:]
	} else {
		agg.Events = d.Events
	}
	allHealthy, needsManual := true, false
	var nobody []string // canarying groups whose canary policy chose no node, with its reason
	for _, name := range sortedKeys(d.TaskGroups) {
		st := d.TaskGroups[name]
		if st == nil {
			continue
		}
		g := groupAggregate{Name: name, Counts: counts[name], State: *st}
		if g.Counts.MaxParallel == 0 && f.Job != nil {
			// A record written before it carried max_parallel: the job's.
			for _, jg := range f.Job.Groups {
				if jg.Name == name && jg.Update != nil {
					g.Counts.MaxParallel = jg.Update.MaxParallel
				}
			}
		}
		for _, a := range f.Allocs {
			if a.TaskGroup != name || a.JobVersion != d.JobVersion || !a.DeploymentStatus.IsUnhealthy() {
				continue
			}
			why := a.ClientDescription
			if why == "" {
				why = "client status " + string(a.ClientStatus)
			}
			g.Unhealthy = append(g.Unhealthy, a.NodeID+": "+why)
		}
		slices.Sort(g.Unhealthy)
		if !st.RequireProgressBy.IsZero() {
			g.DeadlineSet, g.DeadlineIn = true, st.RequireProgressBy.Sub(f.Now)
		}
		if g.Counts.Canarying {
			allHealthy = allHealthy && g.Counts.CanariesHealthy >= st.DesiredCanaries
			needsManual = needsManual || !st.AutoPromote
			if len(st.CanaryNodes) == 0 {
				nobody = append(nobody, fmt.Sprintf("group %s's canary policy %s chose no canary node (%s)", name, orDash(st.CanaryPolicy), orDash(st.CanaryReason)))
			}
		}
		agg.Groups = append(agg.Groups, g)
	}
	switch d.Status {
	case model.DeploymentSuccessful:
		agg.Done, agg.Code, agg.Reason = true, 0, "deployment successful"
	case model.DeploymentFailed:
		agg.Done, agg.Code = true, 1
		agg.Reason = "deployment failed: " + d.StatusDescription + "; " + rolledBack(d)
		agg.RevertPending = d.Revert != nil && d.Revert.Status == model.RevertPending
	case model.DeploymentCancelled:
		agg.Done, agg.Code = true, 1
		agg.Reason = "deployment cancelled: " + d.StatusDescription
	case model.DeploymentRunning:
		switch {
		case needsManual && allHealthy && len(nobody) > 0:
			agg.Done, agg.Code = true, 0
			agg.Reason = strings.Join(nobody, "; ") + "; waiting for manual promotion: " + promoteCommand(d)
		case needsManual && allHealthy:
			agg.Done, agg.Code = true, 0
			agg.Reason = "canaries healthy; waiting for manual promotion: " + promoteCommand(d)
		}
	}
	return agg
}

// rolledBack says where a failed deployment rolled back to, or why it did
// not.
func rolledBack(d *model.Deployment) string {
	r := d.Revert
	if r == nil {
		return "not rolled back (no group has auto_revert)"
	}
	switch r.Status {
	case model.RevertPending:
		return fmt.Sprintf("rolling back to version %d (pending: the steward writes it)", r.ToVersion)
	case model.RevertDone:
		return fmt.Sprintf("rolled back to the spec of version %d as version %d", r.ToVersion, r.AsVersion)
	case model.RevertAbandoned:
		return "revert abandoned: " + r.Reason
	}
	return "not rolled back: " + r.Reason
}

// lines renders the aggregate.
func (agg fleetAggregate) lines() []string {
	d := agg.Deployment
	out := []string{fmt.Sprintf("deployment %s (job %q version %d): %s — %s", short(d.ID), d.JobID, d.JobVersion, d.Status, orDash(d.StatusDescription))}
	for _, g := range agg.Groups {
		c, st := g.Counts, g.State
		line := fmt.Sprintf("  group %s: ", g.Name)
		switch {
		case len(st.CanaryNodes) > 0:
			line += fmt.Sprintf("canaries %d/%d healthy", c.CanariesHealthy, st.DesiredCanaries)
			if len(st.CanaryNodes) <= fewNodes {
				line += " on " + strings.Join(st.CanaryNodes, ", ")
			} else {
				line += fmt.Sprintf(" on %d nodes", len(st.CanaryNodes))
			}
		case st.CanaryPolicy != "":
			line += "canaries: none chosen"
		default:
			line += "canaries: none"
		}
		if st.CanaryPolicy != "" {
			line += fmt.Sprintf(" (canary policy %s: %s)", st.CanaryPolicy, orDash(st.CanaryReason))
		}
		out = append(out, line)
		promoted := "no"
		switch {
		case st.Promoted:
			promoted = "yes, by " + orDash(st.PromotedBy)
		case !c.Canarying:
			promoted = "not needed"
		}
		line = fmt.Sprintf("    promoted %s; updated %d/%d (healthy %d); in flight %d/%d", promoted, c.Placed, c.Desired, c.Healthy, c.InFlight, c.MaxParallel)
		if len(c.Holders) > 0 {
			line += " (" + strings.Join(c.Holders, ", ") + ")"
		}
		line += fmt.Sprintf("; waiting %d; outdated %d", c.Waiting, c.Outdated)
		if c.LostInFlight > 0 {
			line += fmt.Sprintf("; %d in flight on lost nodes", c.LostInFlight)
		}
		out = append(out, line)
		if c.Lost+c.Disconnected > 0 {
			out = append(out, fmt.Sprintf("    allocations lost %d%s; disconnected %d%s", c.Lost, nodeList(c.LostNodes), c.Disconnected, nodeList(c.DisconnectedNodes)))
		}
		if c.Unhealthy > 0 {
			out = append(out, fmt.Sprintf("    unhealthy %d: %s", c.Unhealthy, strings.Join(g.Unhealthy, "; ")))
		}
		line = "    progress deadline: "
		switch {
		case st.ProgressDeadline <= 0:
			line += "none"
		case d.Status == model.DeploymentPaused:
			line += "stopped while paused"
		case !g.DeadlineSet:
			line += "not started (starts at the first slot taken, or once placed when nothing is replaced)"
		case g.DeadlineIn >= 0:
			line += "in " + g.DeadlineIn.Round(time.Second).String()
		default:
			line += "passed " + (-g.DeadlineIn).Round(time.Second).String() + " ago"
		}
		out = append(out, line)
	}
	if len(agg.Lost) > 0 {
		out = append(out, "  lost/disconnected: "+strings.Join(agg.Lost, ", "))
	} else {
		out = append(out, "  lost/disconnected: none")
	}
	out = append(out, "  steward: "+orDash(agg.Steward))
	if agg.Disruption != "" {
		out = append(out, "  disruption guard holds: "+agg.Disruption)
	}
	if len(agg.Events) > 0 {
		out = append(out, "  last events:")
		for _, e := range agg.Events {
			out = append(out, fmt.Sprintf("    %s %s: %s", e.Time.UTC().Format(time.TimeOnly), e.Kind, e.Message))
		}
	}
	return out
}

// rolloutKinds are the buckets the aggregate reads.
var rolloutKinds = []string{fleet.KindJobs, fleet.KindNodes, fleet.KindAllocs, fleet.KindDeployments, fleet.KindRollout}

// syncWithin bounds a command's wait for its first read of the fleet when
// the command has no timeout of its own: long enough for a cluster that is
// electing stream leaders (consumer creations time out and are retried),
// short enough to say so while the operator still waits.
const syncWithin = 20 * time.Second

// followSyncWithin bounds the first read of the commands that wait for an
// outcome with a -timeout of their own (job run, job stop): longer than
// syncWithin, since they wait anyway, yet a bucket that can never be
// pulled (a permission refused) is said within a minute, not at the end of
// a fifteen-minute wait.
const followSyncWithin = time.Minute

// syncedSource starts a Source (cfg: its kinds, and its filters: none for
// whole buckets, fleet.JobFilters for one job's keys) and waits until it
// has pulled every bucket once; it runs until ctx ends. The wait ends with
// ctx, or after within when within > 0; the error then names every bucket
// not pulled yet and why (the error its last attempt failed with).
func syncedSource(ctx context.Context, st *fleet.Store, cfg fleet.SourceConfig, within time.Duration) (*fleet.Source, error) {
	src := fleet.NewSource(st, cfg)
	go func() { _ = src.Run(ctx) }()
	wait, cancel := ctx, context.CancelFunc(func() {})
	if within > 0 {
		wait, cancel = context.WithTimeout(ctx, within)
	}
	defer cancel()
	began := time.Now()
	select {
	case <-src.Synced():
		return src, nil
	case <-wait.Done():
	}
	select {
	case <-src.Synced(): // the pull ended as the wait did
		return src, nil
	default:
	}
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, ctx.Err()
	}
	var why []string
	for kind, stage := range src.Unsynced() {
		why = append(why, fmt.Sprintf("%s (%s)", st.Names().Of(kind), stage))
	}
	slices.Sort(why)
	return nil, failed("reading the fleet's state: not every bucket was pulled within %s: %s",
		time.Since(began).Round(100*time.Millisecond), strings.Join(why, "; "))
}

// aggregateFromView builds the facts of d's job from the view and derives
// its aggregate at server time now.
func aggregateFromView(d *model.Deployment, v *fleet.View, now time.Time, nodeTTL time.Duration) fleetAggregate {
	var job *model.Job
	if st, ok := v.Job(d.Namespace, d.JobID); ok {
		job = st.Value
	}
	f := api.FleetFacts(job, d.Namespace, d.JobID, v, now, nodeTTL)
	return aggregateOf(d, &f)
}

// nodeList is " (a, b)" for a few nodes, "" for none or many.
func nodeList(ids []string) string {
	if len(ids) == 0 || len(ids) > fewNodes {
		return ""
	}
	return " (" + strings.Join(ids, ", ") + ")"
}
