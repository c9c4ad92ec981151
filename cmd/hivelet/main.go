// Command hivelet is the one binary of the project: the agent daemon, the
// operator CLI (job, node, alloc, deployment, policy, plugin, reconcile), the
// authors' skeletons (policy init, driver init), and, re-executed by the
// plugin manager, the built-in driver plugins.
//
// Each command group lives in its own file of this package and is added to
// the root here. Exit codes: 0 success, 1 operation failed, 2 bad input
// (usage, malformed file or fixture); `job plan` follows Nomad's instead
// (cmd_job_plan.go). What the agent does is in
// docs/lifecycle.md and docs/agent.md; the rules it applies in
// docs/reconciler-rules.md and docs/wanted-state.md.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// exitError carries an exit code out of a command. A quiet one is not
// printed: the code is the answer (job plan's 1, "changes would be made").
type exitError struct {
	code  int
	err   error
	quiet bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// badInput marks an error as the user's input being wrong (exit code 2).
func badInput(err error) error { return &exitError{code: 2, err: err} }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "hivelet",
		Short:         "hivelet: a node agent that converges its node onto jobs declared in NATS JetStream KV",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newAgentCmd(),
		newJobCmd(),
		newNodeCmd(),
		newAllocCmd(),
		newDeploymentCmd(),
		newReconcileCmd(),
		newPolicyCmd(),
		newPluginCmd(),
		newDriverCmd(),
		newVarCmd(),
		newServiceCmd(),
	)
	usageErrors(root)
	return root
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	root := newRootCmd()
	root.SetArgs(goStyleFlags(args))
	if err := root.Execute(); err != nil {
		var ee *exitError
		if errors.As(err, &ee) && ee.quiet {
			return ee.code
		}
		fmt.Fprintln(os.Stderr, "hivelet:", dedupeChain(err.Error()))
		if ee != nil {
			return ee.code
		}
		return 1
	}
	return 0
}
