package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newDeploymentCmd is a placeholder until its owner lands the real command.
func newDeploymentCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "deployment",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("the deployment command is not built yet")
		},
	}
}
