package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/policies"
	"github.com/hivelet/hivelet/policies/build"
)

// policyFlags are shared by the policy subcommands.
type policyFlags struct {
	cacheDir     string
	natsURL      string
	tokenFile    string
	bucket       string
	loadDeadline time.Duration
}

func newPolicyCmd() *cobra.Command {
	f := &policyFlags{}
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Build, inspect, evaluate, test, benchmark and distribute WASM rollout policies",
		Long: `Rollout policies are WASM modules (docs/policy-abi.md) that choose canary nodes
or decide when a deployment is complete. FILE is a .wasm path or a built-in
policy by name: builtin:percent, builtin:spread, builtin:rendezvous,
builtin:labelled, builtin:default, builtin:quorum.`,
	}
	defaultCache := ""
	if d, err := os.UserCacheDir(); err == nil {
		defaultCache = filepath.Join(d, "hivelet", "wazero")
	}
	cmd.PersistentFlags().StringVar(&f.cacheDir, "cache-dir", defaultCache, "wazero compilation cache directory (empty: none)")
	cmd.PersistentFlags().StringVar(&f.natsURL, "nats", "nats://127.0.0.1:4222", "NATS URL (push, list)")
	cmd.PersistentFlags().StringVar(&f.tokenFile, "nats-token-file", os.Getenv("HIVELET_NATS_TOKEN_FILE"), "the NATS token file (found by itself for the agent's user; env HIVELET_NATS_TOKEN_FILE)")
	cmd.PersistentFlags().StringVar(&f.bucket, "bucket", policies.DefaultBucket, "JetStream object store bucket of policy modules")
	cmd.PersistentFlags().DurationVar(&f.loadDeadline, "load-deadline", 2*time.Second,
		"bound on a module's initialisation (the agent's default; raise it on a loaded machine)")
	cmd.AddCommand(newPolicyInitCmd(), newPolicyBuildCmd(), newPolicyInspectCmd(f), newPolicyEvalCmd(f), newPolicyTestCmd(f),
		newPolicyBenchCmd(f), newPolicyPushCmd(f), newPolicyListCmd(f))
	return cmd
}

func newPolicyBuildCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "build DIR",
		Short: "Build the Go policy package in DIR into a reproducible WASM module",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				return badInput(fmt.Errorf("%s is not a directory", dir))
			}
			if out == "" {
				abs, _ := filepath.Abs(dir)
				out = filepath.Join(dir, filepath.Base(abs)+".wasm")
			}
			if err := build.Module(cmd.Context(), dir, out); err != nil {
				return err
			}
			b, err := os.ReadFile(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "built %s (%d bytes, sha256 %s)\n", out, len(b), policies.Digest(b))
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "output file (default DIR/<dir name>.wasm)")
	return cmd
}

// readModule reads FILE or a built-in's embedded module.
func readModule(file string) ([]byte, error) {
	if strings.HasPrefix(file, policies.BuiltinPrefix) {
		b, ok := policies.BuiltinWasm(file)
		if !ok {
			return nil, badInput(fmt.Errorf("no built-in policy %q (have %s)", file, strings.Join(policies.BuiltinNames(), ", ")))
		}
		return b, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, badInput(err)
	}
	return b, nil
}

// withModule compiles FILE in a fresh engine and runs fn with it. A module
// refused at load is bad input.
func withModule(ctx context.Context, f *policyFlags, opts policies.Options, file string, fn func(*policies.Engine, *policies.Module) error) error {
	wasm, err := readModule(file)
	if err != nil {
		return err
	}
	opts.CacheDir = f.cacheDir
	opts.LoadDeadline = f.loadDeadline
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	e, err := policies.New(ctx, opts)
	if err != nil {
		return err
	}
	defer e.Close(context.Background())
	m, err := e.Compile(ctx, file, wasm)
	if err != nil {
		return badInput(fmt.Errorf("loading %s: %w", file, err))
	}
	return fn(e, m)
}

func newPolicyInspectCmd(f *policyFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect FILE",
		Short: "Show a module's kinds, ABI version, digest, size and what it reads from nodes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withModule(cmd.Context(), f, policies.Options{}, args[0], func(_ *policies.Engine, m *policies.Module) error {
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "policy:      %s\n", m.Name)
				fmt.Fprintf(w, "kinds:       %s\n", m.Kinds)
				fmt.Fprintf(w, "abi version: %d\n", m.ABI)
				fmt.Fprintf(w, "sha256:      %s\n", m.Digest)
				fmt.Fprintf(w, "size:        %d bytes\n", m.Size)
				fmt.Fprintf(w, "imports:     %d (%s)\n", len(m.Imports), importModules(m.Imports))
				if len(m.Manifest.Lines) == 0 {
					fmt.Fprintln(w, "reads:       node IDs only")
				} else {
					fmt.Fprintf(w, "reads:       node IDs and\n")
					for _, l := range m.Manifest.Lines {
						fmt.Fprintf(w, "             %s\n", l)
					}
				}
				return nil
			})
		},
	}
}

func importModules(imports []string) string {
	var mods []string
	for _, i := range imports {
		mod, _, _ := strings.Cut(i, ".")
		mods = append(mods, mod)
	}
	slices.Sort(mods)
	mods = slices.Compact(mods)
	if len(mods) == 0 {
		return "none"
	}
	return strings.Join(mods, ", ")
}

func readEvalInput(path string) (policies.EvalInput, error) {
	var in policies.EvalInput
	data, err := readFileOrStdin(path)
	if err != nil {
		return in, badInput(err)
	}
	if err := policies.DecodeStrict(data, &in); err != nil {
		return in, badInput(fmt.Errorf("reading %s: %w", path, err))
	}
	if err := in.Validate(); err != nil {
		return in, badInput(fmt.Errorf("reading %s: %w", path, err))
	}
	return in, nil
}

func readFileOrStdin(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

func newPolicyEvalCmd(f *policyFlags) *cobra.Command {
	var input string
	var deadline time.Duration
	cmd := &cobra.Command{
		Use:   "eval FILE --input IN.json",
		Short: "Evaluate a module on one input: decision, reason, time (a fault exits 1)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if input == "" {
				return badInput(fmt.Errorf("--input is required"))
			}
			in, err := readEvalInput(input)
			if err != nil {
				return err
			}
			return withModule(cmd.Context(), f, policies.Options{Deadline: deadline}, args[0], func(_ *policies.Engine, m *policies.Module) error {
				out, err := m.Eval(cmd.Context(), in)
				if err != nil {
					return badInput(err)
				}
				w := cmd.OutOrStdout()
				if out.Fault != nil {
					fmt.Fprintf(w, "fault:    %s\nreason:   %s\ntime:     %s\n", out.Fault.Kind, out.Fault.Reason, out.Took)
					return fmt.Errorf("the policy faulted: %w", out.Fault)
				}
				if in.Canary != nil {
					fmt.Fprintf(w, "canaries: %s\n", strings.Join(out.Got.NodeIDs, " "))
				} else {
					fmt.Fprintf(w, "decision: %s\n", out.Got.Decision)
					if out.Got.Revert {
						fmt.Fprintln(w, "revert:   true")
					}
				}
				fmt.Fprintf(w, "reason:   %s\ntime:     %s\n", out.Reason, out.Took)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&input, "input", "", "input JSON file ({\"canary\": ...} or {\"completion\": ...}; - for stdin)")
	cmd.Flags().DurationVar(&deadline, "deadline", 100*time.Millisecond, "per-call deadline")
	return cmd
}

func newPolicyTestCmd(f *policyFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "test FILE CASES.json",
		Short: "Run a table of inputs and expected answers; exit 1 with a diff on any mismatch",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[1])
			if err != nil {
				return badInput(err)
			}
			var cf policies.CaseFile
			if err := policies.DecodeStrict(data, &cf); err != nil {
				return badInput(fmt.Errorf("reading %s: %w", args[1], err))
			}
			if len(cf.Cases) == 0 {
				return badInput(fmt.Errorf("%s has no cases", args[1]))
			}
			for i := range cf.Cases {
				if err := cf.Cases[i].Input.Validate(); err != nil {
					return badInput(fmt.Errorf("case %q: %w", cf.Cases[i].Name, err))
				}
			}
			return withModule(cmd.Context(), f, policies.Options{}, args[0], func(_ *policies.Engine, m *policies.Module) error {
				w := cmd.OutOrStdout()
				failed := 0
				for _, c := range cf.Cases {
					out, err := m.Eval(cmd.Context(), c.Input)
					if err != nil {
						return badInput(fmt.Errorf("case %q: %w", c.Name, err))
					}
					diff := c.Want.Check(out)
					status := "ok  "
					if len(diff) > 0 {
						status = "FAIL"
						failed++
					}
					fmt.Fprintf(w, "%s %-40s %10s  %s\n", status, c.Name, out.Took.Round(time.Microsecond), out.Reason)
					for _, d := range diff {
						fmt.Fprintf(w, "       %s\n", d)
					}
				}
				fmt.Fprintf(w, "%d of %d cases passed\n", len(cf.Cases)-failed, len(cf.Cases))
				if failed > 0 {
					return fmt.Errorf("%d of %d cases failed", failed, len(cf.Cases))
				}
				return nil
			})
		},
	}
}

func newPolicyBenchCmd(f *policyFlags) *cobra.Command {
	var nodes, groups, n int
	var deadline time.Duration
	cmd := &cobra.Command{
		Use:   "bench FILE",
		Short: "Measure a module's per-call latency (median, p99) and throughput against the native default",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if nodes < 0 || groups < 0 || n <= 0 {
				return badInput(fmt.Errorf("--nodes, --groups must be >= 0 and --n > 0"))
			}
			return withModule(cmd.Context(), f, policies.Options{Deadline: deadline}, args[0], func(_ *policies.Engine, m *policies.Module) error {
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "%s (sha256 %.12s), deadline %s, %d calls each\n", m.Name, m.Digest, deadline, n)
				tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "decision\tinput\twasm median\twasm p99\tnative median\tnative p99\twasm throughput")
				if m.Kinds&policies.KindCanary != 0 {
					req := syntheticCanary(nodes, m.Name)
					wm, wp, err := measure(n, func() error { _, err := m.Canary(cmd.Context(), req); return err })
					if err != nil {
						return err
					}
					nm, np, _ := measure(n, func() error { policies.NativeCanary(req); return nil })
					rate := throughput(n, 2, func() error { _, err := m.Canary(cmd.Context(), req); return err })
					fmt.Fprintf(tw, "canary\t%d nodes\t%s\t%s\t%s\t%s\t%.0f evals/s (2 goroutines)\n", nodes, wm, wp, nm, np, rate)
				}
				if m.Kinds&policies.KindCompletion != 0 {
					in := syntheticCompletion(groups, m.Name)
					wm, wp, err := measure(n, func() error { _, err := m.Completion(cmd.Context(), in); return err })
					if err != nil {
						return err
					}
					nm, np, _ := measure(n, func() error { policies.NativeCompletion(in); return nil })
					rate := throughput(n, 2, func() error { _, err := m.Completion(cmd.Context(), in); return err })
					fmt.Fprintf(tw, "completion\t%d groups\t%s\t%s\t%s\t%s\t%.0f evals/s (2 goroutines)\n", groups, wm, wp, nm, np, rate)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().IntVar(&nodes, "nodes", 1000, "eligible nodes of the canary input")
	cmd.Flags().IntVar(&groups, "groups", 10, "groups of the completion input")
	cmd.Flags().IntVar(&n, "n", 200, "calls per measurement")
	cmd.Flags().DurationVar(&deadline, "deadline", 100*time.Millisecond, "per-call deadline (enforced)")
	return cmd
}

// measure runs fn n times and returns the median and p99 latency.
func measure(n int, fn func() error) (time.Duration, time.Duration, error) {
	d := make([]time.Duration, n)
	for i := range d {
		start := time.Now()
		if err := fn(); err != nil {
			return 0, 0, err
		}
		d[i] = time.Since(start)
	}
	slices.Sort(d)
	return d[n/2], d[min(n-1, n*99/100)], nil
}

// throughput runs fn n times from g goroutines and returns calls per
// second (failed calls count: they took their time too).
func throughput(n, g int, fn func() error) float64 {
	var wg sync.WaitGroup
	start := time.Now()
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; j < n; j += g {
				_ = fn()
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

// syntheticCanary is a canary request over n nodes in 3 datacenters, each
// with 5 attributes and 3 meta keys, asking for 10%.
func syntheticCanary(n int, name string) reconcile.CanaryRequest {
	nodes := make([]*model.Node, n)
	for i := range nodes {
		nodes[i] = &model.Node{
			ID: fmt.Sprintf("node-%06d", i), Name: fmt.Sprintf("host-%d", i), Datacenter: fmt.Sprintf("dc%d", i%3),
			NodePool: "default", Status: model.NodeStatusReady,
			Attributes: map[string]string{"kernel.name": "linux", "cpu.arch": "amd64", "os.name": "debian",
				"unique.hostname": fmt.Sprintf("host-%d", i), "driver.docker": "1"},
			Meta: map[string]string{"rack": fmt.Sprintf("r%d", i%7), "canary": fmt.Sprint(i%10 == 3), "team": "web"},
		}
	}
	return reconcile.CanaryRequest{JobID: "web", JobVersion: 2, DeploymentID: "d-bench", Group: "web",
		Percent: 10, Count: (n + 9) / 10, Eligible: nodes, Policy: &model.PolicyRef{Name: name}}
}

// syntheticCompletion is a running deployment of g groups, all progressing.
func syntheticCompletion(g int, name string) reconcile.CompletionInput {
	now := time.Unix(1_800_000_000, 0)
	d := &model.Deployment{ID: "d-bench", JobID: "web", JobVersion: 2, Status: model.DeploymentRunning, TaskGroups: map[string]*model.DeploymentState{}}
	in := reconcile.CompletionInput{Deployment: d, Groups: map[string]reconcile.GroupHealth{}, Now: now, Policy: &model.PolicyRef{Name: name}}
	for i := range g {
		n := fmt.Sprintf("group-%02d", i)
		d.TaskGroups[n] = &model.DeploymentState{DesiredTotal: 100, ProgressDeadline: model.Duration(10 * time.Minute), RequireProgressBy: now.Add(time.Minute)}
		in.Groups[n] = reconcile.GroupHealth{Placed: 100, Healthy: 90, Pending: 10}
	}
	return in
}

// connectJetStream connects to the NATS server at url.
func connectJetStream(url, tokenFile string) (*nats.Conn, jetstream.JetStream, error) {
	token, from, err := natsToken(url, tokenFile)
	if err != nil {
		return nil, nil, err
	}
	opts := []nats.Option{nats.Name("hivelet policy"), nats.Timeout(5 * time.Second)}
	if token != "" {
		opts = append(opts, nats.Token(token))
	}
	if f := natsNKeySeedFile(); f != "" {
		o, err := nats.NkeyOptionFromSeed(f)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the NKey seed %s: %w", f, err)
		}
		opts = append(opts, o)
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, natsConnectError(url, from, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("opening JetStream at %s: %w", url, err)
	}
	return nc, js, nil
}

func newPolicyPushCmd(f *policyFlags) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "push FILE --name N",
		Short: "Validate a module and push it to the fleet's policy bucket under name N",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return badInput(fmt.Errorf("--name is required"))
			}
			if strings.HasPrefix(args[0], policies.BuiltinPrefix) {
				return badInput(fmt.Errorf("built-in policies are in every agent already"))
			}
			return withModule(cmd.Context(), f, policies.Options{}, args[0], func(_ *policies.Engine, m *policies.Module) error {
				wasm, err := readModule(args[0])
				if err != nil {
					return err
				}
				nc, js, err := connectJetStream(f.natsURL, f.tokenFile)
				if err != nil {
					return err
				}
				defer nc.Close()
				ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
				defer cancel()
				sp, err := policies.NewStore(js, f.bucket, "").Push(ctx, name, wasm)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "pushed %s: %s, %d bytes, sha256 %s\n", sp.Name, m.Kinds, sp.Size, sp.Digest)
				fmt.Fprintf(cmd.OutOrStdout(), "pin it in a job's update block: canary_policy %q { digest = \"sha256:%s\" }\n", sp.Name, sp.Digest)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "policy name jobs refer to")
	return cmd
}

func newPolicyListCmd(f *policyFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the built-in policies and the modules in the fleet's policy bucket",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSHA256\tSIZE\tMODIFIED\t")
			for _, n := range policies.BuiltinNames() {
				b, _ := policies.BuiltinWasm(n)
				fmt.Fprintf(tw, "%s%s\t%.16s\t%d\t%s\t\n", policies.BuiltinPrefix, n, policies.Digest(b), len(b), "(embedded)")
			}
			nc, js, err := connectJetStream(f.natsURL, f.tokenFile)
			if err != nil {
				tw.Flush()
				return err
			}
			defer nc.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			defer cancel()
			list, err := policies.NewStore(js, f.bucket, "").List(ctx)
			if err != nil {
				tw.Flush()
				return err
			}
			for _, p := range list {
				fmt.Fprintf(tw, "%s\t%.16s\t%d\t%s\t\n", p.Name, p.Digest, p.Size, p.Modified.UTC().Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
}
