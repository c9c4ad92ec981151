package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// newDeploymentCmd is `hivelet deployment list|status`, reading the
// deployments bucket.
//
// Exit codes: 0 read done; 1 NATS unreachable; 2 bad input (unknown or
// ambiguous deployment).
func newDeploymentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deployment",
		Short: "Show deployments (one per job version) from the deployments bucket",
	}
	cmd.AddCommand(newDeploymentListCmd(), newDeploymentStatusCmd())
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

func newDeploymentStatusCmd() *cobra.Command {
	var o clusterOpts
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status ID|JOB|JOB@VERSION",
		Short: "Show one deployment: status, per-group progress, canary nodes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rows, rejected, err := loadDeployments(cmd, &o)
			if err != nil {
				return err
			}
			warnRejected(cmd.ErrOrStderr(), rejected)
			r, err := findDeployment(rows, args[0], o.namespace)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSONOut(out, struct {
					Deployment *model.Deployment `json:"deployment"`
					Revision   uint64            `json:"revision"`
				}{r.d, r.rev})
			}
			printDeployment(out, r.d, r.rev)
			return nil
		},
	}
	o.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

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
	row("KV Revision", strconv.FormatUint(rev, 10))
	tw.Flush()
	fmt.Fprintln(w, "\nDeployed")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tPROMOTED\tDESIRED CANARIES\tDESIRED\tPLACED\tHEALTHY\tUNHEALTHY\tPROGRESS DEADLINE")
	for _, name := range sortedKeys(d.TaskGroups) {
		g := d.TaskGroups[name]
		if g == nil {
			continue
		}
		deadline := "-"
		if !g.RequireProgressBy.IsZero() {
			deadline = g.RequireProgressBy.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%d\t%d\t%d\t%s\n", name, g.Promoted, g.DesiredCanaries, g.DesiredTotal,
			g.PlacedAllocs, g.HealthyAllocs, g.UnhealthyAllocs, deadline)
	}
	tw.Flush()
	for _, name := range sortedKeys(d.TaskGroups) {
		if g := d.TaskGroups[name]; g != nil && len(g.CanaryNodes) > 0 {
			fmt.Fprintf(w, "Canary nodes of %s: %s\n", name, strings.Join(g.CanaryNodes, ", "))
		}
	}
}
