package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// newDeploymentCmd is `hivelet deployment list|status|promote|fail|pause|resume`
// (docs/rollout.md).
//
// Exit codes: 0 done; 1 NATS unreachable, or the action was refused (the
// core's reason is printed); 2 bad input (usage, unknown or ambiguous
// deployment).
func newDeploymentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deployment",
		Short: "Show deployments (one per job version) and steer their rollout: promote, pause, resume, fail",
	}
	cmd.AddCommand(newDeploymentListCmd(), newDeploymentStatusCmd(), newDeploymentPromoteCmd(),
		newDeploymentActionCmd("fail", "Mark a deployment failed (auto_revert groups: revert pending to the newest stable version)"),
		newDeploymentActionCmd("pause", "Pause a running deployment: no update slot is taken until resumed"),
		newDeploymentActionCmd("resume", "Resume a paused deployment: its deadlines move by the time paused"))
	return cmd
}

type deploymentRow struct {
	d   *model.Deployment
	rev uint64
}

func loadDeployments(cmd *cobra.Command, o *clusterOpts) ([]deploymentRow, []wanted.Rejection, error) {
	ctx, cancel := signalContext()
	defer cancel()
	conn, st, err := o.openCluster(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	if st.Deployments == nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "hivelet: "+wanted.QuietNoBucket.Message())
		return nil, nil, nil
	}
	states, rejected, err := st.ListDeployments(ctx)
	if err != nil {
		return nil, nil, failed("%v", err)
	}
	rows := make([]deploymentRow, 0, len(states))
	for _, s := range states {
		rows = append(rows, deploymentRow{s.Value, s.Revision})
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i].d, rows[j].d
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.JobID != b.JobID {
			return a.JobID < b.JobID
		}
		return a.JobVersion < b.JobVersion
	})
	return rows, rejected, nil
}

func warnRejected(w io.Writer, rejected []wanted.Rejection) {
	for _, r := range rejected {
		fmt.Fprintf(w, "hivelet: skipped undecodable deployment %s (revision %d): %s\n", r.Key, r.Revision, r.Reason)
	}
}

func newDeploymentListCmd() *cobra.Command {
	var o clusterOpts
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List deployments",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rows, rejected, err := loadDeployments(cmd, &o)
			if err != nil {
				return err
			}
			warnRejected(cmd.ErrOrStderr(), rejected)
			out := cmd.OutOrStdout()
			if o.namespace != "" {
				kept := rows[:0]
				for _, r := range rows {
					if r.d.Namespace == o.namespace || (o.namespace == wanted.DefaultNamespace && r.d.Namespace == "") {
						kept = append(kept, r)
					}
				}
				rows = kept
			}
			if asJSON {
				ds := make([]*model.Deployment, 0, len(rows))
				for _, r := range rows {
					ds = append(ds, r.d)
				}
				return writeJSONOut(out, ds)
			}
			if len(rows) == 0 {
				fmt.Fprintln(out, "No deployments")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tJOB\tVERSION\tSTATUS\tDESCRIPTION")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", short(r.d.ID), r.d.JobID, r.d.JobVersion, r.d.Status, r.d.StatusDescription)
			}
			return tw.Flush()
		},
	}
	o.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// findDeployment resolves a deployment ID, unique ID prefix, "<job>" (its
// newest version) or "<job>@<version>".
func findDeployment(rows []deploymentRow, arg, namespace string) (deploymentRow, error) {
	inNS := func(d *model.Deployment) bool {
		return namespace == "" || d.Namespace == namespace || (namespace == wanted.DefaultNamespace && d.Namespace == "")
	}
	if job, ver, ok := strings.Cut(arg, "@"); ok {
		v, err := strconv.ParseUint(ver, 10, 64)
		if err != nil {
			return deploymentRow{}, badInput(fmt.Errorf("%q: version %q is not a number", arg, ver))
		}
		for _, r := range rows {
			if r.d.JobID == job && r.d.JobVersion == v && inNS(r.d) {
				return r, nil
			}
		}
		return deploymentRow{}, badInput(fmt.Errorf("no deployment of job %s version %d", job, v))
	}
	var byID []deploymentRow
	var newest *deploymentRow
	for i, r := range rows {
		if r.d.ID == arg {
			return r, nil
		}
		if strings.HasPrefix(r.d.ID, arg) {
			byID = append(byID, r)
		}
		if r.d.JobID == arg && inNS(r.d) && (newest == nil || r.d.JobVersion > newest.d.JobVersion) {
			newest = &rows[i]
		}
	}
	switch {
	case len(byID) == 1:
		return byID[0], nil
	case len(byID) > 1:
		ids := make([]string, len(byID))
		for i, r := range byID {
			ids[i] = r.d.ID
		}
		return deploymentRow{}, badInput(fmt.Errorf("%q matches %d deployments: %s", arg, len(byID), strings.Join(ids, ", ")))
	case newest != nil:
		return *newest, nil
	}
	return deploymentRow{}, badInput(fmt.Errorf("no deployment with ID, ID prefix or job %q", arg))
}

// rowsOf are the view's deployment records, as loadDeployments returns
// them.
func rowsOf(v *fleet.View) []deploymentRow {
	var rows []deploymentRow
	for _, st := range v.Deployments.All() {
		if st.Value != nil && !st.Absent {
			rows = append(rows, deploymentRow{st.Value, st.Revision})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].d.ID < rows[j].d.ID })
	return rows
}

func newDeploymentStatusCmd() *cobra.Command {
	var o clusterOpts
	var asJSON, watch bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "status [-watch] ID|JOB|JOB@VERSION",
		Short: "Show one deployment: status and the fleet aggregate derived from the allocations and slots",
		Long: "Show one deployment: its record, and per group the counts every agent derives from the\n" +
			"allocations, nodes and update slots (canaries healthy, promoted, updated/total, in flight\n" +
			"with the slot holders, waiting, unhealthy, the progress deadline), the lost nodes, the\n" +
			"steward and the last events (docs/rollout.md). -watch follows it until it is decided.\n\n" +
			"Exit codes: 0 read done (-watch: successful, or healthy canaries waiting for manual\n" +
			"promotion); 1 NATS unreachable (-watch: failed or cancelled, or the wait timed out);\n" +
			"2 bad input (unknown or ambiguous deployment).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.withFleet(func(ctx context.Context, st *fleet.Store) error {
				if watch {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, wait)
					defer cancel()
				}
				return deploymentStatus(ctx, cmd.OutOrStdout(), st, &o, args[0], asJSON, watch, wait)
			})
		},
	}
	o.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (the record and its fleet aggregate)")
	cmd.Flags().BoolVar(&watch, "watch", false, "follow the deployment until it is decided")
	cmd.Flags().DurationVar(&wait, "timeout", 15*time.Minute, "with -watch: give up after this long (exit code 1)")
	return cmd
}

// deploymentStatus prints (or, watching, follows) the deployment arg names.
func deploymentStatus(ctx context.Context, out io.Writer, st *fleet.Store, o *clusterOpts, arg string, asJSON, watch bool, wait time.Duration) error {
	src, r, err := resolveDeployment(ctx, st, o, arg)
	if err != nil {
		return err
	}
	current := func() (deploymentRow, fleetAggregate) {
		v := src.View()
		d, rev, ok := v.Deployment(r.d.Namespace, r.d.JobID, r.d.JobVersion)
		if !ok {
			d, rev = r.d, r.rev
		}
		return deploymentRow{d, rev}, aggregateFromView(d, v, src.ServerNow(time.Now()), st.NodeTTL())
	}
	row, agg := current()
	if asJSON {
		return writeJSONOut(out, struct {
			Deployment *model.Deployment `json:"deployment"`
			Revision   uint64            `json:"revision"`
			Fleet      fleetAggregate    `json:"fleet"`
		}{row.d, row.rev, agg})
	}
	if !watch {
		printDeployment(out, row.d, row.rev)
		for _, l := range agg.lines() {
			fmt.Fprintln(out, l)
		}
		return nil
	}
	return watchOutcome(ctx, src, out, isTerminal(out), wait, func() (outcome, error) {
		_, agg := current()
		return outcome{lines: agg.lines(), done: agg.Done, ok: agg.Done && agg.Code == 0, reason: agg.Reason, revertPending: agg.RevertPending}, nil
	})
}

// printDeployment prints the record's own fields (the counts are derived:
// see fleetAggregate).
func printDeployment(w io.Writer, d *model.Deployment, rev uint64) {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t= %s\n", k, v) }
	row("ID", d.ID)
	row("Job ID", d.JobID)
	row("Job Version", strconv.FormatUint(d.JobVersion, 10))
	row("Namespace", orDash(d.Namespace))
	row("Status", string(d.Status))
	row("Description", orDash(d.StatusDescription))
	if !d.CreateTime.IsZero() {
		row("Created", d.CreateTime.Format(time.RFC3339))
	}
	if !d.ModifyTime.IsZero() {
		row("Modified", d.ModifyTime.Format(time.RFC3339))
	}
	if d.RevertOf != nil {
		row("Revert of", strconv.FormatUint(*d.RevertOf, 10))
	}
	if d.Revert != nil {
		row("Revert", rolledBack(d))
	}
	row("KV Revision", strconv.FormatUint(rev, 10))
	tw.Flush()
	fmt.Fprintln(w)
}
