package main

import "github.com/spf13/cobra"

// addJobClusterCmds adds the job commands that talk to a running fleet
// (run, status, stop, history). Placeholder until the agent work lands.
func addJobClusterCmds(*cobra.Command) {}
