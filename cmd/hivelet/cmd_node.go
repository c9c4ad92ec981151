package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/wait"
)

// newNodeCmd is `hivelet node`: status, drain and eligibility. These talk to
// NATS directly. Drain and eligibility write the operator's intent to the
// node-intents bucket; only the owning agent writes its node record, merging
// the intent on its next heartbeat.
//
// Exit codes: 0 done; 1 NATS unreachable or the wait for the node to apply
// the intent timed out; 2 bad input (usage, unknown or ambiguous node).
func newNodeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Show nodes and change their drain and eligibility",
	}
	cmd.AddCommand(newNodeStatusCmd(), newNodeDrainCmd(), newNodeEligibilityCmd())
	return cmd
}

// fleetSnapshot pulls the buckets of cfg once (syncedSource) and returns
// the view; the source stops with it.
func fleetSnapshot(ctx context.Context, st *fleet.Store, cfg fleet.SourceConfig, timeout time.Duration) (*fleet.View, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	src, err := syncedSource(sctx, st, cfg, timeout)
	if err != nil {
		return nil, err
	}
	return src.View(), nil
}

// resolveNode finds a node by ID, unique ID prefix, or unique name. With
// allowUnknown an exact ID-shaped argument that matches nothing is returned
// as is (an intent may be written for a node that is down).
func resolveNode(v *fleet.View, arg string, allowUnknown bool) (string, error) {
	var byPrefix, byName []string
	for _, n := range v.NodeList() {
		if n.ID == arg {
			return n.ID, nil
		}
		if strings.HasPrefix(n.ID, arg) {
			byPrefix = append(byPrefix, n.ID)
		}
		if n.Name == arg {
			byName = append(byName, n.ID)
		}
	}
	for _, ids := range [][]string{byPrefix, byName} {
		if len(ids) == 1 {
			return ids[0], nil
		}
		if len(ids) > 1 {
			return "", badInput(fmt.Errorf("%q matches %d nodes: %s", arg, len(ids), strings.Join(ids, ", ")))
		}
	}
	if allowUnknown && len(arg) >= 32 && wanted.ValidToken(arg) {
		return arg, nil
	}
	return "", badInput(fmt.Errorf("no node with ID, ID prefix or name %q", arg))
}

func newNodeStatusCmd() *cobra.Command {
	var o clusterOpts
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [ID]",
		Short: "List nodes, or show one node (ID, unique ID prefix, or name) in detail",
		Long: "List every node the nodes bucket knows (a node whose heartbeat expired shows as down\n" +
			"until its expiry marker is gone), or show one node with its drivers, attributes, meta,\n" +
			"operator intent and allocations.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := signalContext()
			defer cancel()
			conn, st, err := o.openCluster(ctx)
			if err != nil {
				return err
			}
			defer conn.Close()
			v, err := fleetSnapshot(ctx, st, fleet.SourceConfig{Kinds: []string{fleet.KindNodes, fleet.KindIntents, fleet.KindAllocs}}, max(syncWithin, 2*o.timeout))
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(args) == 0 {
				nodes := v.NodeList()
				if asJSON {
					return writeJSONOut(out, nodes)
				}
				printNodeList(out, nodes)
				return nil
			}
			id, err := resolveNode(v, args[0], false)
			if err != nil {
				return err
			}
			n := v.Node(id)
			if asJSON {
				return writeJSONOut(out, struct {
					Node        *model.Node         `json:"node"`
					Intent      wanted.Intent       `json:"intent"`
					Allocations []*model.Allocation `json:"allocations"`
				}{n, v.Intent(id), v.AllocsOf(id)})
			}
			printNode(out, n, v.Intent(id), v.AllocsOf(id), time.Now())
			return nil
		},
	}
	o.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func writeJSONOut(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func drainText(n *model.Node) string {
	if n.Drain == nil {
		return "false"
	}
	if n.Drain.Deadline > 0 {
		return "true (deadline " + time.Duration(n.Drain.Deadline).String() + ")"
	}
	return "true"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printNodeList(w io.Writer, nodes []*model.Node) {
	if len(nodes) == 0 {
		fmt.Fprintln(w, "No nodes registered")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tDC\tPOOL\tCLASS\tSTATUS\tELIGIBILITY\tDRAIN")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%v\n", short(n.ID), n.Name, n.Datacenter, n.NodePool,
			orDash(n.Class), n.Status, n.Eligibility, n.Drain != nil)
	}
	tw.Flush()
}

func printNode(w io.Writer, n *model.Node, in wanted.Intent, allocs []*model.Allocation, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t= %s\n", k, v) }
	row("ID", n.ID)
	row("Name", n.Name)
	row("Datacenter", n.Datacenter)
	row("Node Pool", n.NodePool)
	row("Class", orDash(n.Class))
	row("Status", string(n.Status))
	row("Eligibility", string(n.Eligibility))
	row("Drain", drainText(n))
	if !n.HeartbeatAt.IsZero() {
		row("Last Heartbeat", fmt.Sprintf("%s (%s ago)", n.HeartbeatAt.Format(time.RFC3339), now.Sub(n.HeartbeatAt).Round(time.Second)))
	}
	intent := "none"
	if in.Eligibility != "" || in.Drain != nil {
		intent = fmt.Sprintf("eligibility=%s drain=%v", orDash(string(in.Eligibility)), in.Drain != nil)
	}
	row("Operator Intent", intent)
	tw.Flush()

	namedTable(w, "Drivers", "NAME\tDETECTED\tHEALTHY\tDESCRIPTION", n.Drivers, func(d model.DriverInfo) string {
		return fmt.Sprintf("%v\t%v\t%s", d.Detected, d.Healthy, orDash(d.HealthDesc))
	})
	namedTable(w, "Host Volumes", "NAME\tPATH\tREAD ONLY", n.HostVolumes, func(v model.HostVolume) string {
		return fmt.Sprintf("%s\t%v", v.Path, v.ReadOnly)
	})
	namedTable(w, "Host Networks", "NAME\tADDRESS\tCIDR\tINTERFACE", n.HostNetworks, func(hn model.HostNetwork) string {
		return fmt.Sprintf("%s\t%s\t%s", hn.Address, orDash(hn.CIDR), orDash(hn.Interface))
	})
	for _, sec := range []struct {
		title string
		m     map[string]string
	}{{"Attributes", n.Attributes}, {"Meta", n.Meta}} {
		if len(sec.m) == 0 {
			continue
		}
		fmt.Fprintln(w, "\n"+sec.title)
		tw = tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
		for _, k := range sortedKeys(sec.m) {
			fmt.Fprintf(tw, "%s\t= %s\n", k, sec.m[k])
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "\nAllocations")
	if len(allocs) == 0 {
		fmt.Fprintln(w, "No allocations")
		return
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tJOB\tVERSION\tGROUP\tDESIRED\tSTATUS")
	for _, a := range allocs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", short(a.ID), a.JobID, a.JobVersion, a.TaskGroup, a.DesiredStatus, a.ClientStatus)
	}
	tw.Flush()
}

// namedTable writes, when m has entries, a blank line, title, and a table
// of header and one row per entry in name order: the name, then row's
// tab-separated columns.
func namedTable[V any](w io.Writer, title, header string, m map[string]V, row func(V) string) {
	if len(m) == 0 {
		return
	}
	fmt.Fprintln(w, "\n"+title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, name := range sortedKeys(m) {
		fmt.Fprintf(tw, "%s\t%s\n", name, row(m[name]))
	}
	tw.Flush()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// intentChange writes a change to a node's operator intent and optionally
// waits until the owning agent's record reflects it.
func intentChange(cmd *cobra.Command, o *clusterOpts, arg string, within time.Duration,
	change func(*wanted.Intent), applied func(*model.Node) bool, what string) error {
	ctx, cancel := signalContext()
	defer cancel()
	conn, st, err := o.openCluster(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if st.Intents == nil {
		return failed("the %s bucket does not exist: start an agent of this version first", st.Names().Intents)
	}
	v, err := fleetSnapshot(ctx, st, fleet.SourceConfig{Kinds: []string{fleet.KindNodes}}, max(syncWithin, 2*o.timeout))
	if err != nil {
		return err
	}
	id, err := resolveNode(v, arg, true)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	if _, _, err := st.ModifyIntent(ctx, id, func(in *wanted.Intent) {
		change(in)
		in.UpdatedAt = now
	}); err != nil {
		return failed("%v", err)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "Node %s: %s (intent written; the agent applies it with its next heartbeat)\n", short(id), what)
	if within <= 0 {
		return nil
	}
	deadline := time.Now().Add(within)
	for {
		n, _, err := st.GetNode(ctx, id)
		if err == nil && applied(n) {
			fmt.Fprintf(out, "Node %s: applied by the agent\n", short(id))
			return nil
		}
		if time.Now().After(deadline) {
			if errors.Is(err, fleet.ErrNotFound) {
				return failed("node %s has no live record (down?): the intent stays and applies when it returns", short(id))
			}
			return failed("node %s did not apply the intent within %s", short(id), within)
		}
		if !wait.For(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}

func newNodeDrainCmd() *cobra.Command {
	var o clusterOpts
	var enable, disable, keepIneligible bool
	var deadline, wait time.Duration
	cmd := &cobra.Command{
		Use:   "drain -enable|-disable [-deadline d] ID",
		Short: "Drain a node (its system-job allocations stop, it becomes ineligible) or end a drain",
		Long: "Write the operator's drain intent for a node (ID, unique ID prefix, or name). The owning\n" +
			"agent merges it into its node record on its next heartbeat; the reconcilers then stop the\n" +
			"node's system-job allocations, respecting the deadline. -disable ends the drain and makes\n" +
			"the node eligible again unless -keep-ineligible.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if enable == disable {
				return badInput(errors.New("node drain: give exactly one of -enable and -disable"))
			}
			if deadline < 0 {
				return badInput(errors.New("node drain: -deadline must not be negative"))
			}
			if enable {
				return intentChange(cmd, &o, args[0], wait, func(in *wanted.Intent) {
					in.Drain = &model.DrainStrategy{Deadline: model.Duration(deadline), Started: time.Now().UTC()}
				}, func(n *model.Node) bool { return n.Drain != nil }, "drain enabled")
			}
			return intentChange(cmd, &o, args[0], wait, func(in *wanted.Intent) {
				in.Drain = nil
				if keepIneligible {
					in.Eligibility = model.Ineligible
				} else {
					in.Eligibility = ""
				}
			}, func(n *model.Node) bool { return n.Drain == nil }, "drain disabled")
		},
	}
	o.register(cmd)
	cmd.Flags().BoolVar(&enable, "enable", false, "start draining the node")
	cmd.Flags().BoolVar(&disable, "disable", false, "stop draining the node")
	cmd.Flags().DurationVar(&deadline, "deadline", time.Hour, "how long the drain may take before remaining allocations are stopped")
	cmd.Flags().BoolVar(&keepIneligible, "keep-ineligible", false, "with -disable: leave the node ineligible")
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait this long for the agent to apply the intent (0: do not wait)")
	return cmd
}

func newNodeEligibilityCmd() *cobra.Command {
	var o clusterOpts
	var enable, disable bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "eligibility -enable|-disable ID",
		Short: "Make a node eligible or ineligible for new placements",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if enable == disable {
				return badInput(errors.New("node eligibility: give exactly one of -enable and -disable"))
			}
			want := model.Eligible
			if disable {
				want = model.Ineligible
			}
			return intentChange(cmd, &o, args[0], wait, func(in *wanted.Intent) {
				in.Eligibility = want
			}, func(n *model.Node) bool { return n.Eligibility == want }, "eligibility "+string(want))
		},
	}
	o.register(cmd)
	cmd.Flags().BoolVar(&enable, "enable", false, "make the node eligible")
	cmd.Flags().BoolVar(&disable, "disable", false, "make the node ineligible")
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait this long for the agent to apply the intent (0: do not wait)")
	return cmd
}
