package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// usageErrors makes every usage mistake bad input (exit code 2) that ends
// with the command's usage line: a flag cobra cannot parse, a wrong number
// of arguments, an unknown subcommand (which cobra would answer with the
// help text and exit 0 below the root). A command group given no
// subcommand is no mistake: it prints its help and exits 0.
func usageErrors(root *cobra.Command) {
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return badInput(fmt.Errorf("%w\nusage: %s", err, c.UseLine()))
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
			if c.SuggestionsMinimumDistance <= 0 {
				c.SuggestionsMinimumDistance = 2
			}
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) == 0 {
					return cmd.Help()
				}
				hint := ""
				if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
					hint = fmt.Sprintf(" (did you mean %q?)", s[0])
				}
				var names []string
				for _, sub := range cmd.Commands() {
					if sub.IsAvailableCommand() {
						names = append(names, sub.Name())
					}
				}
				return badInput(fmt.Errorf("unknown command %q for %q%s\nusage: %s COMMAND (one of: %s)",
					args[0], cmd.CommandPath(), hint, cmd.CommandPath(), strings.Join(names, ", ")))
			}
		} else if orig := c.Args; orig != nil {
			c.Args = func(cmd *cobra.Command, args []string) error {
				err := orig(cmd, args)
				var ee *exitError
				if err == nil || errors.As(err, &ee) {
					return err
				}
				return badInput(fmt.Errorf("%w\nusage: %s", err, cmd.UseLine()))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// dedupeChain drops a segment of an error chain ("a: b: c") that only
// repeats the start of the segment before it, as when a caller and its
// callee both say what they were doing: "connecting to NATS at X (is the
// agent running?): connecting to NATS at X: no servers" reads
// "connecting to NATS at X (is the agent running?): no servers".
func dedupeChain(msg string) string {
	var lines []string
	for _, line := range strings.Split(msg, "\n") {
		parts := strings.Split(line, ": ")
		kept := parts[:0:0]
		for i, p := range parts {
			if i > 0 && i < len(parts)-1 && len(kept) > 0 {
				prev := kept[len(kept)-1]
				if strings.HasPrefix(prev, p) || strings.HasPrefix(p, prev) {
					if len(p) > len(prev) {
						kept[len(kept)-1] = p
					}
					continue
				}
			}
			kept = append(kept, p)
		}
		lines = append(lines, strings.Join(kept, ": "))
	}
	return strings.Join(lines, "\n")
}
