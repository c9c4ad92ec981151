package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newNodeCmd is a placeholder until its owner lands the real command.
func newNodeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "node",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("the node command is not built yet")
		},
	}
}
