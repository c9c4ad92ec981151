package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hivelet/hivelet/host/agent"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// jobPlan is what `hivelet job plan` prints: the difference between the
// running version and the file's, and what each node's agent would do if
// the file were run now. -json prints it as is.
type jobPlan struct {
	JobID     string `json:"job_id"`
	Namespace string `json:"namespace,omitempty"`
	// Running is the version in force; nil for a new job.
	Running *uint64 `json:"running_version"`
	// Version is the version `job run` would write (Running when the spec
	// is unchanged: nothing would be written).
	Version   uint64                `json:"version"`
	Changed   bool                  `json:"changed"`
	Diff      []Change              `json:"diff"`
	Classes   []classSummary        `json:"classes"`
	Nodes     []agent.NodeDryRun    `json:"nodes"`
	Placement agent.PlacementReport `json:"placement"`
	// Pacing says how the rollout core paces the updates, per group.
	Pacing []string `json:"pacing,omitempty"`
}

// classSummary counts the decisions of the nodes of one node class.
type classSummary struct {
	Class   string         `json:"class"`
	Nodes   int            `json:"nodes"`
	Actions map[string]int `json:"actions"`
}

// actionOrder is the order actions are printed in.
var actionOrder = []string{agent.ActionPlace, agent.ActionUpdate, agent.ActionInPlace, agent.ActionStop, agent.ActionMigrate,
	agent.ActionLost, agent.ActionDisconnect, agent.ActionReconnected, agent.ActionAwaiting, agent.ActionIgnore}

// summarizeByClass counts each class's decisions; classes sorted by name
// ("" first).
func summarizeByClass(runs []agent.NodeDryRun) []classSummary {
	idx := map[string]*classSummary{}
	for _, r := range runs {
		c := idx[r.Class]
		if c == nil {
			c = &classSummary{Class: r.Class, Actions: map[string]int{}}
			idx[r.Class] = c
		}
		c.Nodes++
		for _, e := range r.Entries {
			c.Actions[e.Action]++
		}
	}
	out := make([]classSummary, 0, len(idx))
	for _, c := range idx {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Class < out[j].Class })
	return out
}

// makeJobPlan builds the plan of file job against running (nil: new) on
// view v at server time now. The job's version is set as writeJob would.
func makeJobPlan(job, running *model.Job, floor uint64, v *fleet.View, now time.Time) (*jobPlan, error) {
	p := &jobPlan{JobID: job.ID, Namespace: job.Namespace}
	switch {
	case running == nil:
		job.Version, p.Changed = floor, true
	case model.SameSpec(running, job):
		job.Version = running.Version
	default:
		job.Version, p.Changed = running.Version+1, true
	}
	if running != nil {
		rv := running.Version
		p.Running = &rv
	}
	p.Version = job.Version
	diff, err := jobDiff(running, job)
	if err != nil {
		return nil, err
	}
	p.Diff = diff
	if p.Diff == nil {
		p.Diff = []Change{}
	}
	var allocs []*model.Allocation
	for _, st := range v.Allocs.All() {
		if a := st.Value; a != nil && !st.Absent && a.JobID == job.ID && a.Namespace == job.Namespace {
			allocs = append(allocs, a)
		}
	}
	sort.Slice(allocs, func(i, j int) bool { return allocs[i].ID < allocs[j].ID })
	var deps []*model.Deployment
	for _, st := range v.Deployments.All() {
		if d := st.Value; d != nil && d.JobID == job.ID && d.Namespace == job.Namespace {
			deps = append(deps, d)
		}
	}
	nodes := v.NodeList()
	runs, err := agent.DryRun(agent.DryRunInput{Job: job, Running: running, Nodes: nodes, Allocs: allocs, Deployments: deps, Now: now})
	if err != nil {
		return nil, err
	}
	p.Nodes = runs
	p.Classes = summarizeByClass(runs)
	p.Placement = agent.ExplainPlacement(job, nodes)
	for _, g := range job.Groups {
		if u := g.Update; u != nil && job.Type == model.JobTypeSystem && p.Changed {
			line := fmt.Sprintf("group %s: at most %d node(s) updated at a time", g.Name, u.MaxParallel)
			if u.MaxParallel == 0 {
				line = fmt.Sprintf("group %s: max_parallel 0, every node updates at once, no deployment", g.Name)
			}
			if u.Canary > 0 {
				line += fmt.Sprintf(", canaries first (%d%% of the ready nodes%s)", u.Canary, map[bool]string{true: ", auto-promoted", false: ", then `deployment promote`"}[u.AutoPromote])
			}
			p.Pacing = append(p.Pacing, line)
		}
	}
	return p, nil
}

// lines is the plan as text.
func (p *jobPlan) lines(nameOf func(string) string) []string {
	var out []string
	switch {
	case p.Running == nil:
		out = append(out, fmt.Sprintf("job %q is new: `job run` would write version %d", p.JobID, p.Version))
	case !p.Changed:
		out = append(out, fmt.Sprintf("job %q: no change against version %d in force (`job run` would write nothing)", p.JobID, *p.Running))
	default:
		out = append(out, fmt.Sprintf("job %q: version %d in force; `job run` would write version %d", p.JobID, *p.Running, p.Version))
	}
	if p.Running != nil && p.Changed {
		out = append(out, "", "diff against the running version:")
		for _, c := range p.Diff {
			out = append(out, "  "+c.String())
		}
	}
	out = append(out, "", "per node class:")
	if len(p.Classes) == 0 {
		out = append(out, "  no node would run the job")
	}
	for _, c := range p.Classes {
		name := c.Class
		if name == "" {
			name = "(no class)"
		}
		out = append(out, fmt.Sprintf("  %s: %d node(s): %s", name, c.Nodes, actionCounts(c.Actions)))
	}
	if len(p.Nodes) <= perNodeMax {
		out = append(out, "", "per node:")
		for _, n := range p.Nodes {
			if len(n.Entries) == 0 {
				out = append(out, fmt.Sprintf("  %s: nothing to do", nameOf(n.NodeID)))
				continue
			}
			for _, e := range n.Entries {
				l := fmt.Sprintf("  %s: %s %s", nameOf(n.NodeID), e.Action, e.Entry.Name)
				if e.Entry.AllocID != "" && e.Action != agent.ActionPlace {
					l += " (alloc " + short(e.Entry.AllocID) + ")"
				}
				if e.Entry.Reason != "" {
					l += ": " + e.Entry.Reason
				}
				out = append(out, l)
			}
		}
	}
	if pl := placementLines(&model.Job{ID: p.JobID}, p.Placement, nameOf); len(pl) > 0 {
		out = append(out, "")
		out = append(out, pl...)
	}
	if len(p.Pacing) > 0 {
		out = append(out, "", "pacing (the rollout decides when, not whether):")
		for _, l := range p.Pacing {
			out = append(out, "  "+l)
		}
	}
	return out
}

func actionCounts(m map[string]int) string {
	var parts []string
	for _, a := range actionOrder {
		if n := m[a]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", a, n))
		}
	}
	if len(parts) == 0 {
		return "nothing to do"
	}
	return strings.Join(parts, ", ")
}

func newJobPlanCmd() *cobra.Command {
	var o clusterOpts
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "plan FILE",
		Short: "Show what running FILE would change: the diff against the running version and each node's dry run",
		Long: "Parse FILE and compare it with the version of the job in force, then run, on the fleet's live\n" +
			"view (nodes, allocations, deployments), the reconcile round each node's agent would run for\n" +
			"the new version: place, update (destructive), in-place, stop, lost, ignore..., summarised per\n" +
			"node class. Nothing is written. The canary choice is the default policy's.\n\n" +
			"Exit codes, Nomad's (for scripts written for `nomad job plan`): 0 no allocation would be\n" +
			"created or destroyed; 1 some would (a place, update, stop, migrate or lost on some node);\n" +
			"255 the plan could not be computed (unreadable or invalid job file, NATS or the fleet's\n" +
			"state unreadable). A usage mistake exits 2, as with every command.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := runJobPlan(cmd, args[0], &o, asJSON)
			var ee *exitError
			if err != nil && !(errors.As(err, &ee) && ee.quiet) {
				return &exitError{code: planExitError, err: err}
			}
			return err
		},
	}
	o.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan as JSON")
	return cmd
}

// job plan's exit codes, Nomad's.
const (
	planExitChanges = 1
	planExitError   = 255
)

// createsOrDestroys tells whether the plan would create or destroy an
// allocation on some node, the question job plan's exit code answers: an
// in-place update, a node awaiting promotion, one with nothing to do, or a
// new job version that moves no allocation does not.
func (p *jobPlan) createsOrDestroys() bool {
	for _, n := range p.Nodes {
		for _, e := range n.Entries {
			switch e.Action {
			case agent.ActionPlace, agent.ActionUpdate, agent.ActionStop, agent.ActionMigrate, agent.ActionLost:
				return true
			}
		}
	}
	return false
}

// runJobPlan prints the plan of file; a plan that would create or destroy
// allocations is a quiet exit 1.
func runJobPlan(cmd *cobra.Command, file string, o *clusterOpts, asJSON bool) error {
	return o.withJobFile(cmd, file, func(ctx context.Context, job *model.Job, st *fleet.Store) error {
		p, v, err := planOnFleet(ctx, st, job)
		if err != nil {
			return err
		}
		if err := printPlan(cmd.OutOrStdout(), p, v, asJSON); err != nil {
			return err
		}
		if p.createsOrDestroys() {
			return &exitError{code: planExitChanges, err: errors.New("the plan creates or destroys allocations"), quiet: true}
		}
		return nil
	})
}

// planOnFleet reads the running version and the live view and plans job.
func planOnFleet(ctx context.Context, st *fleet.Store, job *model.Job) (*jobPlan, *fleet.View, error) {
	running, rev, err := st.GetJob(ctx, job.Namespace, job.ID)
	switch {
	case errors.Is(err, fleet.ErrNotFound):
		running = nil
	case err != nil && rev == 0:
		return nil, nil, failed("reading job %s: %v", job.ID, err)
	case err != nil:
		running = nil // a rejected declaration: the file would replace it
	}
	floor := uint64(0)
	if running == nil {
		floor = versionFloor(ctx, st, wanted.JobKey(job.Namespace, job.ID), job)
	}
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	src, err := syncedSource(sctx, st, fleet.SourceConfig{Kinds: []string{fleet.KindNodes, fleet.KindAllocs, fleet.KindDeployments}}, syncWithin)
	if err != nil {
		return nil, nil, err
	}
	v := src.View()
	p, err := makeJobPlan(job, running, floor, v, src.ServerNow(time.Now()))
	if err != nil {
		return nil, nil, failed("planning job %s: %v", job.ID, err)
	}
	return p, v, nil
}

func printPlan(out io.Writer, p *jobPlan, v *fleet.View, asJSON bool) error {
	if asJSON {
		b, err := json.MarshalIndent(p, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(b))
		return err
	}
	for _, l := range p.lines(nodeNamer(v)) {
		fmt.Fprintln(out, l)
	}
	return nil
}
