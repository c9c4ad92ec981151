package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/hivelet/hivelet/host/allocrunner"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/logs"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/wait"
)

// AttrAllocDir is the node attribute through which an agent publishes its
// allocation directory (in dev mode a temporary one): what to pass to
// `alloc logs -alloc-dir` on that machine when its agent is down.
const AttrAllocDir = "unique.hivelet.alloc_dir"

// newAllocCmd is `hivelet alloc`: status and logs of one allocation.
func newAllocCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "alloc",
		Short: "Inspect allocations: status and task logs",
	}
	cmd.AddCommand(newAllocStatusCmd(), newAllocLogsCmd())
	return cmd
}

// findAlloc finds an allocation by ID or unique ID prefix, with its node.
func findAlloc(ctx context.Context, st *fleet.Store, prefix string) (*model.Allocation, *model.Node, error) {
	if st.Allocs == nil {
		return nil, nil, failed("the allocations bucket does not exist")
	}
	v, err := fleetSnapshot(ctx, st, fleet.SourceConfig{Kinds: []string{fleet.KindAllocs, fleet.KindNodes}}, syncWithin)
	if err != nil {
		return nil, nil, err
	}
	var matches []*model.Allocation
	for _, s := range v.Allocs.All() {
		if a := s.Value; a != nil && !s.Absent && strings.HasPrefix(a.ID, prefix) {
			matches = append(matches, a)
		}
	}
	switch len(matches) {
	case 0:
		return nil, nil, badInput(fmt.Errorf("no allocation with ID %q", prefix))
	case 1:
		return matches[0], v.Node(matches[0].NodeID), nil
	}
	ids := make([]string, len(matches))
	for i, a := range matches {
		ids[i] = a.ID
	}
	sort.Strings(ids)
	return nil, nil, badInput(fmt.Errorf("prefix %q matches %d allocations: %s", prefix, len(ids), strings.Join(ids, ", ")))
}

func newAllocStatusCmd() *cobra.Command {
	var o clusterOpts
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Show an allocation (ID or unique prefix): status, health, tasks and their events",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := signalContext()
			defer cancel()
			conn, st, err := o.openCluster(ctx)
			if err != nil {
				return failed("%v", err)
			}
			defer conn.Close()
			a, _, err := findAlloc(ctx, st, args[0])
			if err != nil {
				return err
			}
			a, note := withDetails(ctx, conn.NATS(), o.prefix, a, o.timeout)
			printAlloc(cmd.OutOrStdout(), a)
			if note != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), note)
			}
			return nil
		},
	}
	o.register(cmd)
	return cmd
}

// detailsWithin bounds the request for an allocation's whole record: the
// bucket's compact copy is printed without it.
const detailsWithin = 5 * time.Second

// withDetails is a, the allocations bucket's compact copy, with its tasks'
// whole event histories asked of its node's agent when the copy leaves
// events out (allocrunner.ForWire). When the agent does not answer, a is
// returned as read, with a note saying what is missing and why.
func withDetails(ctx context.Context, nc *nats.Conn, prefix string, a *model.Allocation, timeout time.Duration) (*model.Allocation, string) {
	more := 0
	for _, ts := range a.TaskStates {
		if ts != nil {
			more += ts.MoreEvents
		}
	}
	if more == 0 {
		return a, ""
	}
	within := detailsWithin
	if timeout > 0 && timeout < within {
		within = timeout
	}
	rctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	full, err := logs.FetchDetails(rctx, nc, prefix, a.NodeID, a.ID)
	if err != nil {
		return a, fmt.Sprintf("%d earlier task events are held by the agent of node %s, which did not give them: %v", more, a.NodeID, err)
	}
	// The record read from the bucket, with the node's task histories:
	// the node is the single writer of both, and its own copy is never
	// older than what it wrote.
	c := *a
	c.TaskStates = full.TaskStates
	return &c, ""
}

func printAlloc(out io.Writer, a *model.Allocation) {
	health := "-"
	if a.DeploymentStatus.IsHealthy() {
		health = "true"
	} else if a.DeploymentStatus.IsUnhealthy() {
		health = "false"
	}
	fmt.Fprintf(out, "ID             = %s\nName           = %s\nNode           = %s\nJob            = %s (version %d)\nGroup          = %s\n"+
		"Desired        = %s %s\nClient status  = %s %s\nDeployment     = %s\nHealthy        = %s\nCanary         = %v\nPrevious alloc = %s\nCreated        = %s\nModified       = %s\n",
		a.ID, a.Name, a.NodeID, a.JobID, a.JobVersion, a.TaskGroup, a.DesiredStatus, a.DesiredDescription, a.ClientStatus, a.ClientDescription,
		a.DeploymentID, health, a.DeploymentStatus.IsCanary(), a.PreviousAllocation, a.CreateTime.Format(time.RFC3339), a.ModifyTime.Format(time.RFC3339))
	names := make([]string, 0, len(a.TaskStates))
	for n := range a.TaskStates {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ts := a.TaskStates[n]
		fmt.Fprintf(out, "\nTask %q is %q (restarts %d, failed %v)\n", n, ts.State, ts.Restarts, ts.Failed)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "Time\tType\tDescription")
		for i := len(ts.Events) - 1; i >= 0; i-- {
			e := ts.Events[i]
			fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Time.Format(time.RFC3339), e.Type, e.Message)
		}
		tw.Flush()
		if ts.MoreEvents > 0 {
			fmt.Fprintf(out, "(%d earlier events not shown)\n", ts.MoreEvents)
		}
	}
}

func newAllocLogsCmd() *cobra.Command {
	var o clusterOpts
	var followLogs, stderr bool
	var allocDir string
	var tail int64
	cmd := &cobra.Command{
		Use:   "logs [-f] [-stderr] [-tail N] ID [TASK]",
		Short: "Print a task's stdout (or -stderr), fetched over NATS from the agent of its node",
		Long: "Print a task's output. The CLI asks the agent of the node that runs the allocation,\n" +
			"over NATS (request/reply on <bucket-prefix>.logs.<node-id>), so it works from any machine\n" +
			"that reaches the fleet's NATS. ID is an allocation ID or a unique prefix; TASK may be left\n" +
			"out when the group has one task. -f keeps printing new output until interrupted or the\n" +
			"allocation finishes; -tail N starts N bytes before the end.\n\n" +
			"-alloc-dir DIR reads the files directly from DIR/<alloc-id>/alloc/logs on this machine\n" +
			"instead, DIR being the agent's alloc_dir (for a node whose agent is down; each node\n" +
			"publishes its alloc_dir as the attribute " + AttrAllocDir + ").\n\n" +
			"Exit codes: 0 printed (or -f interrupted); 1 the agent did not answer, the file could not be\n" +
			"read, NATS unreachable; 2 no such allocation or task, bad flags.",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tail < 0 {
				return badInput(fmt.Errorf("-tail %d: the number of bytes must not be negative", tail))
			}
			ctx, cancel := signalContext()
			defer cancel()
			conn, st, err := o.openCluster(ctx)
			if err != nil {
				return failed("%v", err)
			}
			defer conn.Close()
			a, _, err := findAlloc(ctx, st, args[0])
			if err != nil {
				return err
			}
			task := ""
			if len(args) == 2 {
				task = args[1]
			} else {
				if len(a.TaskStates) != 1 {
					names := make([]string, 0, len(a.TaskStates))
					for t := range a.TaskStates {
						names = append(names, t)
					}
					sort.Strings(names)
					return badInput(fmt.Errorf("allocation %s has %d tasks (%s): name one", short(a.ID), len(names), strings.Join(names, ", ")))
				}
				for t := range a.TaskStates {
					task = t
				}
			}
			if _, ok := a.TaskStates[task]; !ok && len(a.TaskStates) > 0 {
				return badInput(fmt.Errorf("allocation %s has no task %q", short(a.ID), task))
			}
			if allocDir != "" {
				stdoutPath, stderrPath := allocrunner.LogPaths(filepath.Join(allocDir, a.ID), task)
				path := stdoutPath
				if stderr {
					path = stderrPath
				}
				return printLog(ctx, cmd.OutOrStdout(), path, followLogs, tail)
			}
			req := logs.Request{AllocID: a.ID, Task: task, Stderr: stderr, Offset: -tail}
			err = logs.Copy(ctx, conn.NATS(), o.prefix, a.NodeID, req, cmd.OutOrStdout(),
				logs.CopyOptions{Follow: followLogs, Notices: cmd.ErrOrStderr(), Timeout: o.timeout})
			return logsError(err, a)
		},
	}
	o.register(cmd)
	cmd.Flags().BoolVarP(&followLogs, "follow", "f", false, "keep printing new output")
	cmd.Flags().BoolVar(&stderr, "stderr", false, "print stderr instead of stdout")
	cmd.Flags().Int64Var(&tail, "tail", 0, "start this many bytes before the end (0: from the start)")
	cmd.Flags().StringVar(&allocDir, "alloc-dir", "", "the agent's alloc_dir on this machine: read the files there instead of asking the agent")
	return cmd
}

// logsError gives a logs.Copy error its exit code: the agent refusing the
// task or the request is bad input; everything else failed.
func logsError(err error, a *model.Allocation) error {
	var re *logs.RemoteError
	var na *logs.NoAgentError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &re) && (re.Code == logs.CodeUnknownTask || re.Code == logs.CodeBadRequest):
		return badInput(err)
	case errors.As(err, &na):
		return failed("%v; on that machine, -alloc-dir DIR reads the files directly", err)
	}
	return failed("logs of allocation %s: %v", short(a.ID), err)
}

// printLog copies a log file of this machine (-alloc-dir): from tail bytes
// before its end when tail > 0, and with follow, on until ctx ends.
func printLog(ctx context.Context, out io.Writer, path string, followLogs bool, tail int64) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && !followLogs {
		if _, derr := os.Stat(filepath.Dir(path)); derr == nil {
			return nil // the allocation is here and has written nothing yet
		}
	}
	if errors.Is(err, os.ErrNotExist) && followLogs {
		for errors.Is(err, os.ErrNotExist) {
			if !wait.For(ctx, 250*time.Millisecond) {
				return nil
			}
			f, err = os.Open(path)
		}
	}
	if err != nil {
		return failed("reading log %s (-alloc-dir must be the allocation directory of this machine's agent): %v", path, err)
	}
	defer f.Close()
	if tail > 0 {
		if st, err := f.Stat(); err == nil && st.Size() > tail {
			if _, err := f.Seek(st.Size()-tail, io.SeekStart); err != nil {
				return failed("reading log %s: %v", path, err)
			}
		}
	}
	for {
		if _, err := io.Copy(out, f); err != nil {
			return failed("reading log %s: %v", path, err)
		}
		if !followLogs || !wait.For(ctx, 250*time.Millisecond) {
			return nil
		}
	}
}
