package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/hivelet/hivelet/host/agent"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// clusterOpts are the flags every fleet-talking job/alloc command takes.
type clusterOpts struct {
	natsURL   string
	tokenFile string
	prefix    string
	namespace string
	timeout   time.Duration
}

func (o *clusterOpts) register(cmd *cobra.Command) {
	def := os.Getenv("HIVELET_NATS_URL")
	if def == "" {
		def = fmt.Sprintf("nats://127.0.0.1:%d", fleet.DefaultNATSPort)
	}
	cmd.Flags().StringVar(&o.natsURL, "nats", def, "NATS server URL(s), comma-separated (env HIVELET_NATS_URL)")
	cmd.Flags().StringVar(&o.tokenFile, "nats-token-file", os.Getenv("HIVELET_NATS_TOKEN_FILE"), "the NATS token file (an agent's <state_dir>/nats.token; found by itself for the agent's user; env HIVELET_NATS_TOKEN_FILE)")
	cmd.Flags().StringVar(&o.prefix, "bucket-prefix", fleet.DefaultPrefix, "KV bucket name prefix")
	cmd.Flags().StringVar(&o.namespace, "namespace", "", "job namespace")
	cmd.Flags().DurationVar(&o.timeout, "request-timeout", 5*time.Second, "deadline of each NATS request")
}

// openCluster connects to NATS (failing fast when nobody answers) and opens
// the buckets that exist.
// withJobFile loads the job file (in the namespace the flags name, if
// any), connects to the cluster and runs fn with the job, a context that
// ends on SIGINT or SIGTERM, and the fleet's store; the connection is
// closed when fn returns. A bad file is bad input (exit 2); an unreachable
// cluster a failure.
func (o *clusterOpts) withJobFile(cmd *cobra.Command, file string, fn func(ctx context.Context, job *model.Job, st *fleet.Store) error) error {
	job, err := loadJobFile(cmd, file)
	if err != nil {
		return err
	}
	if o.namespace != "" {
		job.Namespace = o.namespace
	}
	ctx, cancel := signalContext()
	defer cancel()
	conn, st, err := o.openCluster(ctx)
	if err != nil {
		return failed("%v", err)
	}
	defer conn.Close()
	return fn(ctx, job, st)
}

func (o *clusterOpts) openCluster(ctx context.Context) (*fleet.Conn, *fleet.Store, error) {
	conn, err := o.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	st, err := fleet.OpenStore(ctx, conn, fleet.Names(o.prefix))
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	if st.Jobs == nil {
		conn.Close()
		return nil, nil, fmt.Errorf("the %s bucket does not exist: start `hivelet agent` first (it creates the buckets)", fleet.Names(o.prefix).Jobs)
	}
	return conn, st, nil
}

// signalContext ends on SIGINT/SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// failed marks an operation that ran but did not succeed (exit code 1).
func failed(format string, a ...any) error { return &exitError{code: 1, err: fmt.Errorf(format, a...)} }

// addJobClusterCmds adds the job commands that talk to a running fleet.
//
// Exit codes (scripts may rely on them): 0 the deployment succeeded, or the
// job is placed on every node it should run on (no deployment), or the
// command's read succeeded; 1 the deployment failed or was cancelled, an
// allocation failed, the wait timed out, or NATS could not be reached;
// 2 bad input (usage, unreadable or invalid job file, unknown job).
func addJobClusterCmds(job *cobra.Command) {
	job.AddCommand(newJobRunCmd(), newJobPlanCmd(), newJobStatusCmd(), newJobStopCmd(), newJobHistoryCmd(), newJobRevertCmd())
}

// writeJob writes job by compare-and-set: version 0 when new, the current
// version + 1 when the spec changed, nothing when it did not. Every version
// it writes is recorded in the job_versions bucket too (`job revert` reads
// it back), and so is the version in force when nothing changed (recording
// is idempotent: a run that wrote but could not record is repaired by
// running the file again). It returns the version in force and whether it
// wrote.
func writeJob(ctx context.Context, st *fleet.Store, job *model.Job) (uint64, bool, error) {
	key := wanted.JobKey(job.Namespace, job.ID)
	for range 5 {
		cur, rev, err := st.GetJob(ctx, job.Namespace, job.ID)
		var raw []byte
		switch {
		case errors.Is(err, fleet.ErrNotFound):
			job.Version = versionFloor(ctx, st, key, job)
			job.SubmitTime = time.Now().UTC()
			if raw, err = json.Marshal(job); err != nil {
				return 0, false, err
			}
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = st.Jobs.Create(rctx, key, raw)
			cancel()
		case err != nil && rev == 0:
			return 0, false, err
		default:
			// A rejected (malformed) current value still has a revision: a new
			// version replaces it.
			next := uint64(0)
			if cur != nil {
				if model.SameSpec(cur, job) {
					// An earlier run may have written this version and
					// failed to record it (a stream leader lost between
					// the two writes): running the file again records it.
					if perr := st.PutJobVersion(ctx, cur); perr != nil && !errors.Is(perr, fleet.ErrNoBucket) {
						return cur.Version, false, fmt.Errorf("job %s version %d in force, but not recorded for revert: %w", key, cur.Version, perr)
					}
					return cur.Version, false, nil
				}
				next = cur.Version + 1
			} else if hist, herr := jobHistory(ctx, st, key); herr == nil {
				for _, h := range hist {
					if h.job != nil && h.job.Version >= next {
						next = h.job.Version + 1
					}
				}
			}
			job.Version = next
			job.SubmitTime = time.Now().UTC()
			if raw, err = json.Marshal(job); err != nil {
				return 0, false, err
			}
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = st.Jobs.Update(rctx, key, raw, rev)
			cancel()
		}
		if err == nil {
			if perr := st.PutJobVersion(ctx, job); perr != nil && !errors.Is(perr, fleet.ErrNoBucket) {
				return job.Version, true, fmt.Errorf("job %s version %d written, but not recorded for revert: %w", key, job.Version, perr)
			}
			return job.Version, true, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, false, fmt.Errorf("writing job %s: %w", key, err)
		}
		// Another writer got there first: re-read and decide again.
	}
	return 0, false, fmt.Errorf("writing job %s: too many concurrent writers", key)
}

// versionFloor is the version a job gets when its key is absent: 0 for a
// new job, else one above every version still remembered (history of a
// deleted key, deployments of a purged one), so a re-run never reuses the
// version of a finished deployment.
func versionFloor(ctx context.Context, st *fleet.Store, key string, job *model.Job) uint64 {
	next := uint64(0)
	if hist, err := jobHistory(ctx, st, key); err == nil {
		for _, h := range hist {
			if h.job != nil && h.job.Version >= next {
				next = h.job.Version + 1
			}
		}
	}
	if st.Deployments != nil {
		if ds, _, err := st.ListDeployments(ctx); err == nil {
			for _, d := range ds {
				if v := d.Value; v != nil && v.JobID == job.ID && v.Namespace == job.Namespace && v.JobVersion >= next {
					next = v.JobVersion + 1
				}
			}
		}
	}
	return next
}

func newJobRunCmd() *cobra.Command {
	var o clusterOpts
	var detach bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Write a job to the fleet and follow its rollout",
		Long: "Parse FILE, write the job to the jobs bucket (bumping its version when the spec changed,\n" +
			"keeping the previous versions as history), then follow the rollout live: allocations\n" +
			"placed, running and healthy per node, and the deployment's outcome. With a terminal the\n" +
			"display redraws in place; otherwise one plain line per change.\n\n" +
			"Exit codes: 0 deployment successful (or waiting for manual promotion, or job placed on\n" +
			"every node when there is no " +
			"deployment, or -detach); 1 deployment failed or cancelled, an allocation failed, or the\n" +
			"wait timed out; 2 bad input.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.withJobFile(cmd, args[0], func(ctx context.Context, job *model.Job, st *fleet.Store) error {
				version, wrote, err := writeJob(ctx, st, job)
				if err != nil {
					return failed("%v", err)
				}
				out := cmd.OutOrStdout()
				if wrote {
					fmt.Fprintf(out, "job %q: version %d written\n", job.ID, version)
				} else {
					fmt.Fprintf(out, "job %q: unchanged (version %d in force)\n", job.ID, version)
				}
				if detach {
					return nil
				}
				return follow(ctx, st, job, version, out, isTerminal(out), wait)
			})
		},
	}
	o.register(cmd)
	cmd.Flags().BoolVar(&detach, "detach", false, "return once the job is written")
	cmd.Flags().DurationVar(&wait, "timeout", 15*time.Minute, "give up following after this long (exit code 1)")
	return cmd
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// nodeProgress is one node's allocations of the followed version.
type nodeProgress struct {
	Node                                   string
	Placed, Running, Healthy, Unhealthy    int
	Failed, Complete, OldVersion, Awaiting int
}

// runProgress is what `job run` shows and decides on; progressOf is pure.
type runProgress struct {
	Nodes      []nodeProgress
	Deployment *model.Deployment
	// Fleet is the deployment's fleet aggregate (rollout.md, "What the
	// CLI shows"), when the version has a record.
	Fleet *fleetAggregate
	// Target is how many nodes should run the job (ready, in scope).
	Target int
	Done   bool
	OK     bool
	Reason string
	// RevertPending: the deployment failed and its revert is not written
	// yet (follow waits revertGrace for it).
	RevertPending bool
}

// perNodeMax: above this many nodes `job run` prints the aggregate alone.
const perNodeMax = 20

// recordGrace is how long after a version's last placement `job run` waits
// for the deployment record the version's update strategy asks for before
// it takes the version for one without a record (a re-placement of a
// version that already ran).
const recordGrace = 10 * time.Second

// expectsRecord reports whether a version of job gets a deployment record:
// a job with a group whose update strategy (model.EffectiveUpdate; a
// sysbatch job has none) has a max_parallel above zero.
func expectsRecord(job *model.Job) bool {
	if job.Stop {
		return false
	}
	for _, g := range job.Groups {
		if u := model.EffectiveUpdate(job, g); u != nil && u.MaxParallel > 0 {
			return true
		}
	}
	return false
}

// progressOf is the rollout of job's version in view v at server time now.
func progressOf(job *model.Job, version uint64, v *fleet.View, now time.Time, nodeTTL time.Duration) runProgress {
	var r runProgress
	perNode := map[string]*nodeProgress{}
	get := func(id string) *nodeProgress {
		p := perNode[id]
		if p == nil {
			p = &nodeProgress{Node: id}
			perNode[id] = p
		}
		return p
	}
	target := 0
	for _, n := range v.NodeList() {
		if agent.PlacesOn(job, n) {
			target++
			get(n.ID)
		}
	}
	r.Target = target
	anyFailed := ""
	var newest time.Time // the version's last placement
	for _, st := range v.Allocs.All() {
		a := st.Value
		if a == nil || st.Absent || a.JobID != job.ID || a.Namespace != job.Namespace {
			continue
		}
		p := get(a.NodeID)
		if a.JobVersion != version {
			if !a.Terminal() {
				p.OldVersion++
			}
			continue
		}
		if a.DesiredStatus != model.DesiredRun {
			continue
		}
		p.Placed++
		if a.CreateTime.After(newest) {
			newest = a.CreateTime
		}
		switch a.ClientStatus {
		case model.ClientRunning:
			p.Running++
		case model.ClientFailed, model.ClientLost:
			p.Failed++
			anyFailed = fmt.Sprintf("allocation %s on node %s %s: %s", short(a.ID), a.NodeID, a.ClientStatus, a.ClientDescription)
		case model.ClientComplete:
			p.Complete++
		}
		if a.DeploymentStatus.IsHealthy() {
			p.Healthy++
		} else if a.DeploymentStatus.IsUnhealthy() {
			p.Unhealthy++
		}
	}
	ids := make([]string, 0, len(perNode))
	for id := range perNode {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r.Nodes = append(r.Nodes, *perNode[id])
	}
	if d, _, ok := v.Deployment(job.Namespace, job.ID, version); ok {
		r.Deployment = d
		agg := aggregateFromView(d, v, now, nodeTTL)
		r.Fleet = &agg
		r.Done, r.OK, r.Reason, r.RevertPending = agg.Done, agg.Done && agg.Code == 0, agg.Reason, agg.RevertPending
		return r
	}
	if job.Stop {
		return r
	}
	if anyFailed != "" {
		r.Done, r.Reason = true, anyFailed
		return r
	}
	// No deployment (max_parallel 0, sysbatch, or a version that already ran):
	// done when every target node runs (or, sysbatch, finished) the version.
	if target == 0 {
		return r
	}
	if expectsRecord(job) && (newest.IsZero() || now.Sub(newest) < recordGrace) {
		// A version with an update strategy gets a deployment record, a
		// first version too, but it is placed at once, before the record
		// exists: every node may run it before the record is seen, and
		// the rollout is not over then (its health is not yet decided).
		return r
	}
	reached := 0
	groups := 0
	for _, g := range job.Groups {
		groups += g.Count
	}
	for _, p := range r.Nodes {
		okCount := p.Running
		if job.Type == model.JobTypeSysbatch {
			okCount = p.Complete
		}
		if okCount >= groups && p.OldVersion == 0 {
			reached++
		}
	}
	if reached >= target {
		r.Done, r.OK, r.Reason = true, true, fmt.Sprintf("job placed on %d node(s)", reached)
	}
	return r
}

func (r runProgress) lines(job *model.Job, version uint64) []string {
	var out []string
	head := fmt.Sprintf("job %q version %d: %d node(s) targeted", job.ID, version, r.Target)
	if d := r.Deployment; d != nil {
		head += fmt.Sprintf("; deployment %s %s", short(d.ID), d.Status)
		if d.StatusDescription != "" {
			head += " (" + d.StatusDescription + ")"
		}
	}
	out = append(out, head)
	if r.Fleet != nil && len(r.Nodes) > perNodeMax {
		return append(out, r.Fleet.lines()...)
	}
	for _, p := range r.Nodes {
		line := fmt.Sprintf("  node %s: placed %d, running %d, healthy %d", p.Node, p.Placed, p.Running, p.Healthy)
		if p.Unhealthy > 0 {
			line += fmt.Sprintf(", unhealthy %d", p.Unhealthy)
		}
		if p.Failed > 0 {
			line += fmt.Sprintf(", failed %d", p.Failed)
		}
		if p.Complete > 0 {
			line += fmt.Sprintf(", complete %d", p.Complete)
		}
		if p.OldVersion > 0 {
			line += fmt.Sprintf(", older version %d", p.OldVersion)
		}
		out = append(out, line)
	}
	if r.Fleet != nil {
		out = append(out, r.Fleet.lines()...)
	}
	return out
}

// noNodeGrace is how long `job run` waits for a node that can run the job
// before it says there is none.
const noNodeGrace = 15 * time.Second

// follow watches the buckets and prints the rollout until it is decided.
func follow(ctx context.Context, st *fleet.Store, job *model.Job, version uint64, out io.Writer, tty bool, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// One job's keys, not the fleet's: what this command receives grows
	// with the job, not with everything else the fleet runs.
	// The first read may take a while (a cluster electing leaders), up to
	// followSyncWithin or the command's own timeout, whichever is first.
	src, err := syncedSource(ctx, st, fleet.SourceConfig{Kinds: rolloutKinds, Filters: fleet.JobFilters(job.Namespace, job.ID)}, followSyncWithin)
	if err != nil {
		return err
	}
	began := time.Now()
	return watchOutcome(ctx, src, out, tty, wait, func() (outcome, error) {
		v := src.View()
		r := progressOf(job, version, v, src.ServerNow(time.Now()), st.NodeTTL())
		if r.Target == 0 && r.Deployment == nil && !job.Stop && time.Since(began) > noNodeGrace {
			fmt.Fprintf(out, "==> no ready node runs this job\n")
			printIndented(out, noPlacementLines(job, v))
			return outcome{}, failed("job %s: no ready node matches it", job.ID)
		}
		lines := r.lines(job, version)
		if r.Done && !r.OK {
			lines = append(lines, failureLines(job, version, v)...)
		}
		return outcome{lines: lines, done: r.Done, ok: r.OK, reason: r.Reason, revertPending: r.RevertPending}, nil
	})
}

// outcome is one evaluation of a followed rollout.
type outcome struct {
	lines         []string
	done, ok      bool
	reason        string
	revertPending bool
}

// watchOutcome redraws eval's lines on every change (and every second:
// deadlines count down) until eval says done, then lets the last statuses
// arrive (a failure's pending revert for up to revertGrace), prints the
// reason and returns nil (ok) or an exit-1 error.
func watchOutcome(ctx context.Context, src *fleet.Source, out io.Writer, tty bool, wait time.Duration, eval func() (outcome, error)) error {
	prev := ""
	drawn := 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var settle <-chan time.Time // after the outcome: let the allocations' last status arrive
	var pendingSince time.Time
	graced := func() (outcome, error) {
		r, err := eval()
		if err == nil && r.done && r.revertPending {
			if pendingSince.IsZero() {
				pendingSince = time.Now()
			}
			r.done = time.Since(pendingSince) >= revertGrace
		}
		return r, err
	}
	for {
		r, err := graced()
		if err != nil {
			return err
		}
		if r.done && settle == nil {
			settle = time.After(500 * time.Millisecond)
		}
		printLines(out, r.lines, prev, tty, drawn)
		drawn, prev = len(r.lines), strings.Join(r.lines, "\n")
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return failed("gave up after %s without an outcome", wait)
			}
			return failed("interrupted; the job stays written and the agents keep converging")
		case <-src.Changed():
		case <-tick.C:
		case <-settle:
			r, err = graced()
			if err != nil {
				return err
			}
			if !r.done { // a pending revert settled meanwhile, or the view moved on
				settle = nil
				continue
			}
			printLines(out, r.lines, prev, tty, drawn)
			fmt.Fprintf(out, "==> %s\n", r.reason)
			if r.ok {
				return nil
			}
			return failed("%s", r.reason)
		}
	}
}

// printLines redraws (terminal) or prints the changed lines (plain).
func printLines(out io.Writer, lines []string, prev string, tty bool, drawn int) {
	text := strings.Join(lines, "\n")
	if text == prev {
		return
	}
	if tty && drawn > 0 {
		fmt.Fprintf(out, "\x1b[%dA\x1b[J", drawn)
	}
	if tty || prev == "" {
		fmt.Fprintln(out, text)
		return
	}
	old := strings.Split(prev, "\n")
	for i, l := range lines {
		if i >= len(old) || old[i] != l {
			fmt.Fprintln(out, l)
		}
	}
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func newJobStatusCmd() *cobra.Command {
	var o clusterOpts
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Show a job's version, deployment and allocations",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := signalContext()
			defer cancel()
			conn, st, err := o.openCluster(ctx)
			if err != nil {
				return failed("%v", err)
			}
			defer conn.Close()
			job, rev, err := st.GetJob(ctx, o.namespace, args[0])
			if errors.Is(err, fleet.ErrNotFound) {
				return badInput(fmt.Errorf("no job %q", args[0]))
			}
			out := cmd.OutOrStdout()
			if err != nil {
				if rev == 0 {
					return failed("%v", err)
				}
				fmt.Fprintf(out, "job %q: the newest declaration (revision %d) is REJECTED: %v\n", args[0], rev, err)
				return failed("job %s is rejected", args[0])
			}
			v, err := fleetSnapshot(ctx, st, fleet.SourceConfig{Kinds: []string{fleet.KindNodes, fleet.KindAllocs, fleet.KindDeployments},
				Filters: fleet.JobFilters(job.Namespace, job.ID)}, syncWithin)
			if err != nil {
				return err
			}
			status := "running"
			if job.Stop {
				status = "stopped"
			}
			fmt.Fprintf(out, "ID         = %s\nType       = %s\nVersion    = %d\nStatus     = %s\nSubmitted  = %s\nRevision   = %d\n",
				job.ID, job.Type, job.Version, status, job.SubmitTime.Format(time.RFC3339), rev)
			if d, _, ok := v.Deployment(job.Namespace, job.ID, job.Version); ok {
				fmt.Fprintf(out, "\nLatest deployment %s: %s (%s)\n", short(d.ID), d.Status, d.StatusDescription)
				names := make([]string, 0, len(d.TaskGroups))
				for n := range d.TaskGroups {
					names = append(names, n)
				}
				sort.Strings(names)
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "Group\tDesired\tCanaries\tPromoted")
				for _, n := range names {
					g := d.TaskGroups[n]
					fmt.Fprintf(tw, "%s\t%d\t%d\t%v\n", n, g.DesiredTotal, g.DesiredCanaries, g.Promoted)
				}
				tw.Flush()
			}
			statusWhy(out, job, v)
			var allocs []*model.Allocation
			for _, s := range v.Allocs.All() {
				if a := s.Value; a != nil && !s.Absent && a.JobID == job.ID && a.Namespace == job.Namespace {
					allocs = append(allocs, a)
				}
			}
			sort.Slice(allocs, func(i, j int) bool {
				if allocs[i].NodeID != allocs[j].NodeID {
					return allocs[i].NodeID < allocs[j].NodeID
				}
				return allocs[i].CreateTime.After(allocs[j].CreateTime)
			})
			fmt.Fprintln(out, "\nAllocations")
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNode\tGroup\tVersion\tDesired\tStatus\tHealthy\tModified")
			for _, a := range allocs {
				h := "-"
				if a.DeploymentStatus.IsHealthy() {
					h = "true"
				} else if a.DeploymentStatus.IsUnhealthy() {
					h = "false"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", short(a.ID), a.NodeID, a.TaskGroup, a.JobVersion, a.DesiredStatus, a.ClientStatus, h, a.ModifyTime.Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	o.register(cmd)
	return cmd
}

func newJobStopCmd() *cobra.Command {
	var o clusterOpts
	var purge, detach bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "stop ID",
		Short: "Stop a job (a new version with stop = true); -purge also removes its key once stopped",
		Long: "Write a new version of the job with stop = true and wait until no allocation of it runs.\n" +
			"Absence is never a deletion order, so -purge removes the job's key (and its history)\n" +
			"only after every allocation stopped; an agent that was away keeps the stop it last knew.\n\n" +
			"Exit codes: 0 stopped (and purged); 1 timed out or failed; 2 unknown job.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := signalContext()
			defer cancel()
			conn, st, err := o.openCluster(ctx)
			if err != nil {
				return failed("%v", err)
			}
			defer conn.Close()
			job, _, err := st.GetJob(ctx, o.namespace, args[0])
			if errors.Is(err, fleet.ErrNotFound) {
				return badInput(fmt.Errorf("no job %q", args[0]))
			}
			if err != nil {
				return failed("%v", err)
			}
			out := cmd.OutOrStdout()
			if !job.Stop {
				job.Stop = true
				version, _, err := writeJob(ctx, st, job)
				if err != nil {
					return failed("%v", err)
				}
				fmt.Fprintf(out, "job %q: version %d (stop) written\n", job.ID, version)
			} else {
				fmt.Fprintf(out, "job %q: already stopped (version %d)\n", job.ID, job.Version)
			}
			if detach && !purge {
				return nil
			}
			if err := waitStopped(ctx, st, job, out, wait); err != nil {
				return err
			}
			if purge {
				key := wanted.JobKey(job.Namespace, job.ID)
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				defer rcancel()
				if err := st.Jobs.Purge(rctx, key); err != nil {
					return failed("purging job %s: %v", key, err)
				}
				fmt.Fprintf(out, "job %q purged\n", job.ID)
			}
			return nil
		},
	}
	o.register(cmd)
	cmd.Flags().BoolVar(&purge, "purge", false, "remove the job's key once every allocation stopped")
	cmd.Flags().BoolVar(&detach, "detach", false, "return once the stop is written (not with -purge)")
	cmd.Flags().DurationVar(&wait, "timeout", 5*time.Minute, "give up waiting after this long (exit code 1)")
	return cmd
}

func waitStopped(ctx context.Context, st *fleet.Store, job *model.Job, out io.Writer, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	src, err := syncedSource(ctx, st, fleet.SourceConfig{Kinds: []string{fleet.KindAllocs}, Filters: fleet.JobFilters(job.Namespace, job.ID)}, followSyncWithin)
	if err != nil {
		return err
	}
	last := -1
	for {
		live := 0
		for _, s := range src.View().Allocs.All() {
			if a := s.Value; a != nil && !s.Absent && a.JobID == job.ID && a.Namespace == job.Namespace && !a.ClientStatus.Terminal() {
				live++
			}
		}
		if live != last {
			fmt.Fprintf(out, "job %q: %d allocation(s) still running\n", job.ID, live)
			last = live
		}
		if live == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return failed("gave up waiting for job %s to stop: %d allocation(s) still running", job.ID, live)
		case <-src.Changed():
		case <-time.After(time.Second):
		}
	}
}

type historyEntry struct {
	revision uint64
	op       string
	created  time.Time
	job      *model.Job
	err      error
}

func jobHistory(ctx context.Context, st *fleet.Store, key string) ([]historyEntry, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	entries, err := st.Jobs.History(rctx, key)
	if err != nil {
		return nil, err
	}
	var out []historyEntry
	for _, e := range entries {
		h := historyEntry{revision: e.Revision(), op: strings.ToLower(e.Operation().String()), created: e.Created()}
		if e.Operation() == jetstream.KeyValuePut {
			h.op = "put"
			h.job, h.err = wanted.DecodeJob(key, e.Value())
		}
		out = append(out, h)
	}
	return out, nil
}

// stableVersions reads the job's deployment records and returns, per
// version, its Stable column: "yes" when its deployment succeeded (a
// revert target, rollout.StableVersion), its status otherwise, "-" with
// no deployment.
func stableVersions(ctx context.Context, st *fleet.Store, namespace, jobID string) func(uint64) string {
	status := map[uint64]model.DeploymentStatus{}
	if st.Deployments != nil {
		if ds, _, err := st.ListDeployments(ctx); err == nil {
			for _, d := range ds {
				if v := d.Value; v != nil && v.JobID == jobID && wanted.JobKey(v.Namespace, v.JobID) == wanted.JobKey(namespace, jobID) {
					status[v.JobVersion] = v.Status
				}
			}
		}
	}
	return func(v uint64) string {
		s, ok := status[v]
		switch {
		case !ok:
			return "-"
		case s == model.DeploymentSuccessful:
			return "yes"
		}
		return "no (" + string(s) + ")"
	}
}

func newJobHistoryCmd() *cobra.Command {
	var o clusterOpts
	cmd := &cobra.Command{
		Use:   "history ID",
		Short: "List the versions of a job kept in the jobs bucket (newest last), which are stable, which are reverts",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := signalContext()
			defer cancel()
			conn, st, err := o.openCluster(ctx)
			if err != nil {
				return failed("%v", err)
			}
			defer conn.Close()
			hist, err := jobHistory(ctx, st, wanted.JobKey(o.namespace, args[0]))
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				return badInput(fmt.Errorf("no job %q", args[0]))
			}
			if err != nil {
				return failed("reading history of %s: %v", args[0], err)
			}
			stable := stableVersions(ctx, st, o.namespace, args[0])
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "Revision\tOp\tVersion\tStop\tStable\tSubmitted\tNote")
			for _, h := range hist {
				switch {
				case h.job != nil:
					note := ""
					if h.job.RevertOf != nil {
						note = fmt.Sprintf("revert of version %d", *h.job.RevertOf)
					}
					fmt.Fprintf(tw, "%d\t%s\t%d\t%v\t%s\t%s\t%s\n", h.revision, h.op, h.job.Version, h.job.Stop, stable(h.job.Version), h.job.SubmitTime.Format(time.RFC3339), note)
				case h.err != nil:
					fmt.Fprintf(tw, "%d\t%s\t-\t-\t-\t%s\trejected: %v\n", h.revision, h.op, h.created.Format(time.RFC3339), h.err)
				default:
					fmt.Fprintf(tw, "%d\t%s\t-\t-\t-\t%s\t\n", h.revision, h.op, h.created.Format(time.RFC3339))
				}
			}
			return tw.Flush()
		},
	}
	o.register(cmd)
	return cmd
}
