package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/vars"
)

// connect dials NATS for a command that needs no job bucket.
func (o *clusterOpts) connect(ctx context.Context) (*fleet.Conn, error) {
	token, from, err := natsToken(o.natsURL, o.tokenFile)
	if err != nil {
		return nil, err
	}
	conn, err := fleet.Connect(ctx, fleet.ConnConfig{URLs: strings.Split(o.natsURL, ","), Token: token, NKeySeedFile: natsNKeySeedFile(), FailFast: true, RequestTimeout: o.timeout, Name: "hivelet-cli"}, nil, nil)
	if err != nil {
		return nil, natsConnectError(o.natsURL, from, err)
	}
	return conn, nil
}

// newVarCmd is the variables store's command group: the values task
// templates read with {{ with nomadVar "PATH" }}.
func newVarCmd() *cobra.Command {
	o := &clusterOpts{}
	cmd := &cobra.Command{
		Use:   "var",
		Short: "Write and read variables, the values task templates read (nomadVar)",
	}
	// withStore checks the path argument (when there is one), opens the
	// store and runs f with it.
	withStore := func(path string, f func(ctx context.Context, s *vars.Store) error) error {
		if path != "" {
			if err := vars.CheckPath(path); err != nil {
				return badInput(err)
			}
		}
		ctx, cancel := signalContext()
		defer cancel()
		conn, err := o.connect(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		s, err := vars.Open(ctx, conn.JetStream(), o.prefix, o.timeout)
		if err != nil {
			return err
		}
		return f(ctx, s)
	}
	put := &cobra.Command{
		Use:   "put PATH KEY=VALUE...",
		Short: "Set a variable's items (replacing what it held); templates reading it render again",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			items := map[string]string{}
			for _, kv := range args[1:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return badInput(fmt.Errorf("item %q: write it as KEY=VALUE", kv))
				}
				items[k] = v
			}
			return withStore(args[0], func(ctx context.Context, s *vars.Store) error {
				if err := s.Put(ctx, args[0], items); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %d item(s) written\n", args[0], len(items))
				return nil
			})
		},
	}
	var asJSON bool
	get := &cobra.Command{
		Use:   "get PATH",
		Short: "Print a variable's items as KEY=VALUE lines (or -json)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(args[0], func(ctx context.Context, s *vars.Store) error {
				items, ok, err := s.Get(ctx, args[0])
				if err != nil {
					return err
				}
				if !ok {
					return failed("variable %s does not exist", args[0])
				}
				if asJSON {
					b, err := json.MarshalIndent(items, "", "  ")
					if err != nil {
						return err
					}
					fmt.Fprintln(cmd.OutOrStdout(), string(b))
					return nil
				}
				for _, k := range slices.Sorted(maps.Keys(items)) {
					fmt.Fprintf(cmd.OutOrStdout(), "%s=%s\n", k, items[k])
				}
				return nil
			})
		},
	}
	get.Flags().BoolVar(&asJSON, "json", false, "print the items as a JSON object")
	list := &cobra.Command{
		Use:   "list [PREFIX]",
		Short: "List the variables' paths, all or those under PREFIX",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore("", func(ctx context.Context, s *vars.Store) error {
				paths, err := s.List(ctx, strings.Join(args, ""))
				if err != nil {
					return err
				}
				for _, p := range paths {
					fmt.Fprintln(cmd.OutOrStdout(), p)
				}
				return nil
			})
		},
	}
	del := &cobra.Command{
		Use:   "delete PATH",
		Short: "Delete a variable",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(args[0], func(ctx context.Context, s *vars.Store) error {
				if err := s.Delete(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: deleted\n", args[0])
				return nil
			})
		},
	}
	for _, c := range []*cobra.Command{put, get, list, del} {
		o.register(c)
		cmd.AddCommand(c)
	}
	return cmd
}
