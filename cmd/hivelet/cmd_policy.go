package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newPolicyCmd is a placeholder until its owner lands the real command.
func newPolicyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "policy",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("the policy command is not built yet")
		},
	}
}
