package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newReconcileCmd is a placeholder until its owner lands the real command.
func newReconcileCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "reconcile",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("the reconcile command is not built yet")
		},
	}
}
