package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hivelet/hivelet/host/api"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/rollout"
)

// The operator's rollout actions (docs/rollout.md): `deployment
// promote|fail|pause|resume` and `job revert`. Each is one compare-and-set
// through host/api's Operator, whose body is host/rollout's pure transition
// re-run on the record just read, stamped with the NATS server's clock:
// the HTTP API calls the same functions.
//
// Exit codes: 0 done (or nothing to do); 1 refused by the protocol (the
// core's reason is printed), or NATS unreachable; 2 bad usage, unknown job,
// version or deployment.

// actionErr maps an Operator error to the CLI's exit codes.
func actionErr(what string, err error) error {
	switch {
	case errors.Is(err, api.ErrUnknown), errors.Is(err, api.ErrBadInput):
		return badInput(fmt.Errorf("%s: %w", what, err))
	case errors.Is(err, rollout.ErrRefused):
		return failed("%s: %s", what, strings.TrimPrefix(err.Error(), rollout.ErrRefused.Error()+": "))
	}
	return failed("%s: %v", what, err)
}

// withFleet runs a command against the fleet: a context ended by SIGINT,
// the cluster opened (NATS unreachable is exit code 1), closed after.
func (o *clusterOpts) withFleet(run func(ctx context.Context, st *fleet.Store) error) error {
	ctx, cancel := signalContext()
	defer cancel()
	conn, st, err := o.openCluster(ctx)
	if err != nil {
		return failed("%v", err)
	}
	defer conn.Close()
	return run(ctx, st)
}

// resolveDeployment reads the fleet (kept in sync until ctx ends) and finds
// the deployment arg names in it.
func resolveDeployment(ctx context.Context, st *fleet.Store, o *clusterOpts, arg string) (*fleet.Source, deploymentRow, error) {
	src, err := syncedSource(ctx, st, fleet.SourceConfig{Kinds: rolloutKinds}, syncWithin)
	if err != nil {
		return nil, deploymentRow{}, err
	}
	r, err := findDeployment(rowsOf(src.View()), arg, o.namespace)
	return src, r, err
}

// deploymentAction resolves arg (a job, a deployment ID or prefix, or
// JOB@VERSION) to a record and runs do with an Operator over a synced
// view of the fleet.
func deploymentAction(cmd *cobra.Command, o *clusterOpts, arg, verb string,
	do func(ctx context.Context, op *api.Operator, d *model.Deployment) (*model.Deployment, bool, error)) error {
	return o.withFleet(func(ctx context.Context, st *fleet.Store) error {
		src, r, err := resolveDeployment(ctx, st, o, arg)
		if err != nil {
			return err
		}
		op := &api.Operator{Store: st, View: src, By: "cli"}
		what := fmt.Sprintf("%s deployment %s (job %q version %d)", verb, short(r.d.ID), r.d.JobID, r.d.JobVersion)
		d, changed, err := do(ctx, op, r.d)
		if err != nil {
			return actionErr(what, err)
		}
		out := cmd.OutOrStdout()
		if !changed {
			fmt.Fprintf(out, "deployment %s (job %q version %d): nothing to do, it is %s (%s)\n", short(d.ID), d.JobID, d.JobVersion, d.Status, orDash(d.StatusDescription))
			return nil
		}
		fmt.Fprintf(out, "deployment %s (job %q version %d): %s — %s\n", short(d.ID), d.JobID, d.JobVersion, d.Status, orDash(d.StatusDescription))
		if verb == "failing" && d.Revert != nil {
			fmt.Fprintf(out, "revert: %s\n", rolledBack(d))
		}
		return nil
	})
}

func newDeploymentPromoteCmd() *cobra.Command {
	var o clusterOpts
	var groups []string
	cmd := &cobra.Command{
		Use:   "promote [-group G] JOB|ID|JOB@VERSION",
		Short: "Promote a deployment's canarying groups (refused unless their canaries are healthy)",
		Long: "Promote the canarying groups (all of them, or those named by -group): the rest of the\n" +
			"fleet may then take update slots. The healthy canaries are derived from the allocations,\n" +
			"as every agent derives them; with fewer than desired the promotion is refused with\n" +
			"\"group G has h/n healthy canaries\" (exit code 1).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return deploymentAction(cmd, &o, args[0], "promoting", func(ctx context.Context, op *api.Operator, d *model.Deployment) (*model.Deployment, bool, error) {
				return op.Promote(ctx, d.Namespace, d.JobID, d.JobVersion, groups)
			})
		},
	}
	o.register(cmd)
	cmd.Flags().StringSliceVar(&groups, "group", nil, "promote only this group (repeatable)")
	return cmd
}

// newDeploymentActionCmd is `deployment fail|pause|resume`.
func newDeploymentActionCmd(name, short string) *cobra.Command {
	var o clusterOpts
	verbs := map[string]string{"fail": "failing", "pause": "pausing", "resume": "resuming"}
	cmd := &cobra.Command{
		Use:   name + " JOB|ID|JOB@VERSION",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return deploymentAction(cmd, &o, args[0], verbs[name], func(ctx context.Context, op *api.Operator, d *model.Deployment) (*model.Deployment, bool, error) {
				switch name {
				case "fail":
					return op.Fail(ctx, d.Namespace, d.JobID, d.JobVersion)
				case "pause":
					return op.Pause(ctx, d.Namespace, d.JobID, d.JobVersion)
				}
				return op.Resume(ctx, d.Namespace, d.JobID, d.JobVersion)
			})
		},
	}
	o.register(cmd)
	return cmd
}

func newJobRevertCmd() *cobra.Command {
	var o clusterOpts
	cmd := &cobra.Command{
		Use:   "revert JOB VERSION",
		Short: "Write the spec of an earlier version of a job as its next version (marked as a revert)",
		Long: "Read VERSION of the job as it was submitted (job_versions bucket) and write it as a new\n" +
			"version (the current one + 1), marked as a revert of VERSION, by compare-and-set on the job\n" +
			"key. Its rollout is paced by update slots like any other and skips the canary phase.\n\n" +
			"Exit codes: 0 written; 1 refused (the job already runs that spec) or NATS unreachable;\n" +
			"2 bad usage, unknown job or version.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil {
				return badInput(fmt.Errorf("version %q is not a number\nusage: %s", args[1], cmd.UseLine()))
			}
			return o.withFleet(func(ctx context.Context, st *fleet.Store) error {
				j, err := (&api.Operator{Store: st}).Revert(ctx, o.namespace, args[0], v)
				if err != nil {
					return actionErr(fmt.Sprintf("reverting job %q to version %d", args[0], v), err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "job %q: version %d written (revert of version %d); follow it with: hivelet deployment status -watch %s\n", j.ID, j.Version, v, j.ID)
				return nil
			})
		},
	}
	o.register(cmd)
	return cmd
}
