package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
)

// newReconcileCmd is the reconciler's dry run: one fixture in, one plan out
// (docs/reconcile.md).
func newReconcileCmd() *cobra.Command {
	var file string
	var withRollout bool
	cmd := &cobra.Command{
		Use:   "reconcile [-rollout] -f FIXTURE",
		Short: "Print, as JSON, what the reconciler would do for a fixture (a dry run; - reads stdin)",
		Long: "Reads one JSON fixture (job, ready_nodes, not_ready_nodes, tainted_nodes, live_allocs,\n" +
			"terminal_allocs, deployment, now, disconnect_handling, optional node_id) and prints the plan:\n" +
			"the eight buckets, awaiting_promotion, the resulting deployment and the status updates.\n" +
			"With -rollout the fixture holds raw fleet facts instead (job, records, allocs, nodes with\n" +
			"liveness, slots, self, now) and the output is the node's plan and the rollout core's\n" +
			"decision: transitions, slot takes, releases, reclaims, stops, places, held entries with\n" +
			"reasons, the steward, whether a verdict is wanted, a hold (examples/rollout).\n" +
			"See docs/reconcile.md. A malformed fixture exits with code 2.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return badInput(errors.New("reconcile: -f FIXTURE is required (- for stdin)"))
			}
			var data []byte
			var err error
			if file == "-" {
				data, err = io.ReadAll(cmd.InOrStdin())
			} else {
				data, err = os.ReadFile(file)
			}
			if err != nil {
				return badInput(fmt.Errorf("reading fixture: %w", err))
			}
			run := reconcileFixture
			if withRollout {
				run = reconcileRolloutFixture
			}
			out, err := run(data)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "fixture file (JSON), or - for stdin")
	cmd.Flags().BoolVar(&withRollout, "rollout", false, "the fixture holds fleet facts: print the plan and the rollout core's decision")
	return cmd
}

// reconcileFixture decodes a fixture strictly and returns the plan as
// indented JSON with a trailing newline. Decoding and input errors are bad
// input (exit code 2).
func reconcileFixture(data []byte) ([]byte, error) {
	var fx reconcile.Fixture
	if err := model.Decode(data, &fx); err != nil {
		return nil, badInput(fmt.Errorf("decoding fixture: %w", err))
	}
	if fx.Job == nil {
		return nil, badInput(errors.New("decoding fixture: job: missing"))
	}
	if fx.Now.IsZero() {
		return nil, badInput(errors.New("decoding fixture: now: missing (RFC 3339 time)"))
	}
	var plan *reconcile.Plan
	var err error
	if fx.NodeID != "" {
		plan, err = reconcile.ReconcileNode(fx.Input(), fx.NodeID)
	} else {
		plan, err = reconcile.ReconcileFleet(fx.Input())
	}
	if err != nil {
		return nil, badInput(err)
	}
	out, err := json.MarshalIndent(plan, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding plan: %w", err)
	}
	return append(out, '\n'), nil
}
