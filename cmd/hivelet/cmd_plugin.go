package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hivelet/hivelet/plugins/builtin"
	"github.com/hivelet/hivelet/plugins/manager"
	"github.com/hivelet/hivelet/sdk/driver"
)

// newPluginCmd is `hivelet plugin`: list the driver plugins, and (hidden)
// serve a built-in driver, which is how the plugin manager runs built-ins.
func newPluginCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Driver plugins: list what the agent would load",
	}
	cmd.AddCommand(newPluginListCmd(), newPluginServeCmd())
	return cmd
}

type pluginRow struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Path    string `json:"path"`
	SHA256  string `json:"sha256"`
	Pinned  string `json:"pinned,omitempty"`
	Matches *bool  `json:"matches_pin,omitempty"`
}

func newPluginListCmd() *cobra.Command {
	var dir string
	var asJSON bool
	var pins []string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List built-in and external driver plugins with their SHA-256",
		Long: "List the built-in drivers (served by this binary) and the hivelet-driver-* executables\n" +
			"in --plugin-dir, with the SHA-256 to pin in the agent config. --pin NAME=SHA256 checks a pin.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pinMap := map[string]string{}
			for _, p := range pins {
				name, sum, _ := strings.Cut(p, "=")
				if name == "" || sum == "" {
					return badInput(fmt.Errorf("--pin %q: want NAME=SHA256", p))
				}
				pinMap[name] = sum
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("finding this binary: %w", err)
			}
			found, err := manager.Discover(self, builtin.Names(), dir)
			if err != nil {
				return badInput(err)
			}
			rows := make([]pluginRow, 0, len(found))
			for _, p := range found {
				sum, err := manager.FileSHA256(p.Path)
				if err != nil {
					return err
				}
				r := pluginRow{Name: p.Name, Kind: "external", Path: p.Path, SHA256: sum}
				if p.Builtin {
					r.Kind = "builtin"
				}
				if want, ok := pinMap[p.Name]; ok {
					m := want == sum
					r.Pinned, r.Matches = want, &m
				}
				rows = append(rows, r)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tKIND\tSHA256\tPIN\tPATH")
			for _, r := range rows {
				pin := "-"
				if r.Matches != nil {
					pin = "ok"
					if !*r.Matches {
						pin = "MISMATCH"
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Kind, r.SHA256, pin, r.Path)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, r := range rows {
				if r.Matches != nil && !*r.Matches {
					return fmt.Errorf("plugin %s does not match its pin", r.Name)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "plugin-dir", "", "directory of external hivelet-driver-* plugins")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringArrayVar(&pins, "pin", nil, "NAME=SHA256 to check (repeatable)")
	return cmd
}

func newPluginServeCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "serve NAME",
		Short:  "Serve a built-in driver as a go-plugin plugin (run by the plugin manager)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			factory, ok := builtin.Registry()[args[0]]
			if !ok {
				return badInput(fmt.Errorf("no built-in driver named %q (have %v)", args[0], builtin.Names()))
			}
			if os.Getenv(driver.Handshake().MagicCookieKey) == "" {
				return badInput(errors.New("this command is run by the hivelet agent's plugin manager, not by hand"))
			}
			impl, err := factory()
			if err != nil {
				return fmt.Errorf("building driver %s: %w", args[0], err)
			}
			driver.Serve(impl)
			return nil
		},
	}
}
