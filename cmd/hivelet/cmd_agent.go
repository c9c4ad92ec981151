package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newAgentCmd is a placeholder until its owner lands the real command.
func newAgentCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "agent",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("the agent command is not built yet")
		},
	}
}
