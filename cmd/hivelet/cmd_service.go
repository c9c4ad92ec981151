package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/services"
)

// newServiceCmd reads the services bucket: the services allocations
// registered while their checks pass.
func newServiceCmd() *cobra.Command {
	o := &clusterOpts{}
	cmd := &cobra.Command{
		Use:   "service",
		Short: "List the services allocations registered (while their checks pass)",
	}
	read := func(cmd *cobra.Command) (map[string][]*model.ServiceRegistration, error) {
		ctx, cancel := signalContext()
		defer cancel()
		conn, err := o.connect(ctx)
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		s, err := services.Open(ctx, conn.JetStream(), o.prefix, o.timeout)
		if err != nil {
			return nil, err
		}
		byName, bad, err := s.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, k := range bad {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: registration %s does not decode; left out\n", k)
		}
		return byName, nil
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "Each service with its instances' count and tags",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			byName, err := read(cmd)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tINSTANCES\tTAGS")
			for _, name := range slices.Sorted(maps.Keys(byName)) {
				var tags []string
				for _, r := range byName[name] {
					for _, t := range r.Tags {
						if !slices.Contains(tags, t) {
							tags = append(tags, t)
						}
					}
				}
				fmt.Fprintf(w, "%s\t%d\t%s\n", name, len(byName[name]), strings.Join(tags, ","))
			}
			return w.Flush()
		},
	}
	var asJSON bool
	info := &cobra.Command{
		Use:   "info NAME",
		Short: "A service's instances: address, node, allocation, tags",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			byName, err := read(cmd)
			if err != nil {
				return err
			}
			regs := byName[args[0]]
			if len(regs) == 0 {
				return failed("no instance of service %q is registered", args[0])
			}
			if asJSON {
				b, err := json.MarshalIndent(regs, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return nil
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ADDRESS\tNODE\tALLOC\tJOB\tTAGS")
			for _, r := range regs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", net.JoinHostPort(r.Address, strconv.Itoa(r.Port)), r.NodeID, r.AllocID, r.JobID, strings.Join(r.Tags, ","))
			}
			return w.Flush()
		},
	}
	info.Flags().BoolVar(&asJSON, "json", false, "print the registrations as JSON")
	for _, c := range []*cobra.Command{list, info} {
		o.register(c)
		cmd.AddCommand(c)
	}
	return cmd
}
