package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newAllocCmd is a placeholder until its owner lands the real command.
func newAllocCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "alloc",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("the alloc command is not built yet")
		},
	}
}
