package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newPluginCmd is a placeholder until its owner lands the real command.
func newPluginCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "plugin",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("the plugin command is not built yet")
		},
	}
}
