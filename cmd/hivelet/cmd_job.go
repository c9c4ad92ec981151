package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newJobCmd is a placeholder until its owner lands the real command.
func newJobCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "job",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("the job command is not built yet")
		},
	}
}
