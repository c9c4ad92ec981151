package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/hivelet/hivelet/host/agent"
	"github.com/hivelet/hivelet/host/api"
	"github.com/hivelet/hivelet/host/config"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/logs"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/node"
	"github.com/hivelet/hivelet/host/ports"
	fleetrollout "github.com/hivelet/hivelet/host/rollout"
	"github.com/hivelet/hivelet/host/services"
	"github.com/hivelet/hivelet/host/state"
	"github.com/hivelet/hivelet/host/vars"
	"github.com/hivelet/hivelet/internal/wait"
	"github.com/hivelet/hivelet/plugins/builtin"
	"github.com/hivelet/hivelet/plugins/docker"
	execdriver "github.com/hivelet/hivelet/plugins/exec"
	"github.com/hivelet/hivelet/plugins/manager"
	"github.com/hivelet/hivelet/policies"
	"github.com/hivelet/hivelet/sdk/driver"
)

func newAgentCmd() *cobra.Command {
	var dev bool
	var cfgPath, stateDir, logLevel string
	var noPolicies, acceptLostState bool
	cmd := &cobra.Command{
		Use:   "agent [-dev] [-config FILE]",
		Short: "Run the node agent: converge this node onto the jobs declared in NATS JetStream KV",
		Long: "Run the agent. With -dev (or no nats.urls configured) it starts an embedded NATS server\n" +
			"with JetStream on loopback (port 4222, or a free one if taken in -dev) that the CLI and\n" +
			"other agents can use. It loads the driver plugins (the built-in docker, exec and mock\n" +
			"drivers are this binary re-executed), restores and reattaches to the tasks it ran before,\n" +
			"registers the node, serves the HTTP API on 127.0.0.1:4646, and converges.\n\n" +
			"SIGINT/SIGTERM: a normal shutdown leaves the tasks running for the next start to\n" +
			"reattach; -dev stops them and removes its temporary directories. SIGHUP: rescan the\n" +
			"plugin directory and load the driver plugins added since start.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signalContext()
			defer cancel()
			return runAgent(ctx, agentOpts{dev: dev, cfgPath: cfgPath, stateDir: stateDir, logLevel: logLevel, noPolicies: noPolicies, acceptLostState: acceptLostState})
		},
	}
	cmd.Flags().BoolVar(&dev, "dev", false, "development mode: embedded NATS, temporary state, tasks stopped on exit")
	cmd.Flags().StringVar(&cfgPath, "config", "", "agent configuration file (HCL or JSON)")
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "state directory (overrides the configuration)")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().BoolVar(&noPolicies, "no-policies", false, "do not load the WASM policy engine (built-in native defaults decide)")
	cmd.Flags().BoolVar(&acceptLostState, "accept-lost-state", false, "start although the state store is empty while this node's files or NATS say it ran allocations (their tasks are not reattached and may run twice)")
	return cmd
}

type agentOpts struct {
	dev                         bool
	cfgPath, stateDir, logLevel string
	noPolicies                  bool
	// acceptLostState starts on an empty store despite traces of a lost
	// one (checkLostState).
	acceptLostState bool
}

// driverHealth follows every driver's fingerprint stream and keeps the
// latest as the node record's driver info.
type driverHealth struct {
	mu     sync.Mutex
	infos  map[string]model.DriverInfo
	onDiff func()
}

func (d *driverHealth) DriverFingerprints() map[string]model.DriverInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.infos)
}

func (d *driverHealth) set(name string, info model.DriverInfo) {
	d.mu.Lock()
	old, had := d.infos[name]
	d.infos[name] = info
	d.mu.Unlock()
	if !had || old.Healthy != info.Healthy || old.Detected != info.Detected || !maps.Equal(old.Attributes, info.Attributes) {
		if d.onDiff != nil {
			d.onDiff()
		}
	}
}

// watch keeps one driver's fingerprint up to date until ctx ends, reopening
// the stream when it ends (a restarted plugin).
func (d *driverHealth) watch(ctx context.Context, m *manager.Manager, name string, log *slog.Logger) {
	for ctx.Err() == nil {
		drv, err := m.Driver(ctx, name)
		var ch <-chan *driver.Fingerprint
		if err == nil {
			ch, err = drv.Fingerprint(ctx)
		}
		if err != nil {
			d.set(name, model.DriverInfo{Detected: false, Healthy: false, HealthDesc: err.Error()})
			log.Warn("driver fingerprint unavailable", "driver", name, "err", err)
		} else {
			for fp := range ch {
				d.set(name, model.DriverInfo{Detected: true, Healthy: fp.Healthy, HealthDesc: fp.Description, Attributes: fp.Attributes})
			}
		}
		wait.For(ctx, 2*time.Second)
	}
}

type agentProviders struct {
	a      *agent.Agent
	self   func() *model.Node
	conn   *fleet.Conn
	src    *fleet.Source
	plugin *manager.Manager
	health *driverHealth
	judge  *healthMonitor
}

func (p agentProviders) Node() *model.Node                { return p.self() }
func (p agentProviders) Allocations() []*model.Allocation { return p.a.Allocs() }
func (p agentProviders) Plugins() any {
	// The API's one casing (docs/api.md): snake_case keys, not the Go
	// field names of manager.Plugin.
	type row struct {
		Name    string           `json:"name"`
		Path    string           `json:"path"`
		Args    []string         `json:"args,omitempty"`
		Builtin bool             `json:"builtin"`
		PID     int              `json:"pid,omitempty"`
		Health  model.DriverInfo `json:"health"`
	}
	infos := p.health.DriverFingerprints()
	out := []row{}
	for _, pl := range p.plugin.Plugins() {
		pid, _ := p.plugin.PID(pl.Name)
		out = append(out, row{Name: pl.Name, Path: pl.Path, Args: pl.Args, Builtin: pl.Builtin, PID: pid, Health: infos[pl.Name]})
	}
	return out
}
func (p agentProviders) Health() api.Health { return p.judge.Health() }

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(s))
	return l, err
}

func runAgent(ctx context.Context, o agentOpts) (err error) {
	if os.Getenv("GOGC") == "" {
		// A long-lived daemon on small nodes: trade a little GC CPU for a
		// smaller heap (BENCHMARKS.md, "Agent": RSS with GOGC 100 and 50).
		debug.SetGCPercent(50)
	}
	level, lerr := parseLevel(o.logLevel)
	if lerr != nil {
		return badInput(fmt.Errorf("-log-level: %w", lerr))
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg := config.Default()
	if o.cfgPath != "" {
		if cfg, err = config.Load(o.cfgPath); err != nil {
			return badInput(err)
		}
	}
	stateDir := o.stateDir
	if o.dev && stateDir == "" {
		tmp, err := os.MkdirTemp("", "hivelet-dev-")
		if err != nil {
			return fmt.Errorf("creating the dev state directory: %w", err)
		}
		stateDir = tmp
		defer func() {
			if rerr := os.RemoveAll(tmp); rerr != nil {
				log.Warn("removing the dev state directory", "dir", tmp, "err", rerr)
			}
		}()
	}
	rc, err := cfg.Resolve(o.dev, stateDir)
	if err != nil {
		return badInput(err)
	}
	if err := os.MkdirAll(rc.StateDir, 0o700); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	if err := os.MkdirAll(rc.AllocDir, 0o755); err != nil {
		return fmt.Errorf("creating allocation directory: %w", err)
	}
	if err := traversableAllocDir(rc.StateDir, rc.AllocDir, log); err != nil {
		return err
	}
	if err := os.MkdirAll(rc.PluginDir, 0o755); err != nil {
		return fmt.Errorf("creating plugin directory: %w", err)
	}
	allocRoot, _ := filepath.Abs(rc.AllocDir)
	hostVolumes, hostNetworks, err := clientResources(rc.Client, ports.SystemInterfaces)
	if err != nil {
		return badInput(err)
	}
	portTable, err := newPortTable(rc, hostNetworks)
	if err != nil {
		return badInput(err)
	}

	store, err := state.Open(rc.StateDir, time.Second)
	if err != nil {
		return err
	}
	defer store.Close()
	traces, err := localTraces(store, rc, allocRoot, o.dev)
	if err != nil {
		return err
	}
	nodeID, err := node.LoadOrCreateIDAs(rc.StateDir, rc.NodeID, o.dev)
	if err != nil {
		return err
	}
	agentLog := log // the agent adds node_id itself
	log = log.With("node_id", nodeID)
	log.Info("agent starting", "state_dir", rc.StateDir, "alloc_dir", allocRoot, "dev", o.dev)

	// NATS: embedded (dev, or no URL configured) or the configured servers.
	var conn *fleet.Conn
	if rc.Embedded {
		token, err := embeddedToken(rc, log)
		if err != nil {
			return err
		}
		emb, err := fleet.StartEmbedded(ctx, embeddedConfig(rc, nodeID, token, o.dev, log))
		if err != nil {
			return fmt.Errorf("starting the embedded NATS server: %w", err)
		}
		defer emb.Shutdown()
		log.Info("embedded NATS server ready", "url", emb.ClientURL())
		defer publishToken(emb, token, log)() // the copy goes with the server
		if err := waitEmbeddedJetStream(ctx, emb, rc, token, log); err != nil {
			return err
		}
		if emb.Port() != fleet.DefaultNATSPort {
			log.Warn("the CLI dials port 4222 by default: point it here", "hint", "export HIVELET_NATS_URL="+emb.ClientURL())
		}
		conn, err = fleet.Connect(ctx, fleet.ConnConfig{InProcess: emb.Server(), Token: token, RequestTimeout: rc.RequestTimeout}, log, nil)
		if err != nil {
			return err
		}
	} else {
		n := rc.NATS
		var token string
		if n.TokenFile != "" {
			if token, err = fleet.ReadToken(n.TokenFile); err != nil {
				return fmt.Errorf("nats.token_file: %w", err)
			}
		}
		conn, err = fleet.Connect(ctx, fleet.ConnConfig{URLs: n.URLs, CredsFile: n.CredsFile, NKeySeedFile: n.NKeySeedFile, Token: token,
			CAFile: n.CAFile, CertFile: n.CertFile, KeyFile: n.KeyFile, RequestTimeout: rc.RequestTimeout}, log, nil)
		if err != nil {
			return err
		}
	}
	defer conn.Close()

	reg := prometheus.NewRegistry()
	metrics := api.NewMetrics(reg)
	conn.SetObserver(metrics) // hivelet_nats_connection_state, from now on
	fstore, err := atBoot(ctx, log, "fleet buckets", func() (*fleet.Store, error) {
		return fleet.EnsureBuckets(ctx, conn, fleet.Names(rc.BucketPrefix), fleet.BucketOptions{Replicas: rc.Replicas, NodeTTL: rc.NodeTTL})
	})
	if err != nil {
		return err
	}
	if !o.dev {
		if err := checkLostState(ctx, traces, fstore.ForNode(nodeID), store.Path(), o.acceptLostState, log); err != nil {
			return err
		}
	}
	varStore, err := atBoot(ctx, log, "variables bucket", func() (*vars.Store, error) {
		return vars.Ensure(ctx, conn.JetStream(), rc.BucketPrefix, rc.Replicas, rc.RequestTimeout)
	})
	if err != nil {
		return err
	}
	svcStore, err := atBoot(ctx, log, "services bucket", func() (*services.Store, error) {
		return services.Ensure(ctx, conn.JetStream(), rc.BucketPrefix, rc.Replicas, rc.RequestTimeout)
	})
	if err != nil {
		return err
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	// The buckets this agent created at its start are created again when
	// the source finds one missing (a NATS server back with an empty store).
	recreate := func(ctx context.Context) error {
		if _, err := fleet.EnsureBuckets(ctx, conn, fleet.Names(rc.BucketPrefix), fleet.BucketOptions{Replicas: rc.Replicas, NodeTTL: rc.NodeTTL}); err != nil {
			return err
		}
		if _, err := vars.Ensure(ctx, conn.JetStream(), rc.BucketPrefix, rc.Replicas, rc.RequestTimeout); err != nil {
			return err
		}
		_, err := services.Ensure(ctx, conn.JetStream(), rc.BucketPrefix, rc.Replicas, rc.RequestTimeout)
		return err
	}
	src := fleet.NewSource(fstore, fleet.SourceConfig{Log: log, Observer: metrics, Recreate: recreate})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { defer bg.Done(); _ = src.Run(runCtx) }()

	// Driver plugins: built-ins are this binary re-executed.
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the hivelet binary: %w", err)
	}
	pins := map[string]string{}
	for _, p := range rc.Plugins {
		if p.SHA256 != "" {
			pins[p.Name] = p.SHA256
		}
	}
	plugins, err := manager.New(manager.Config{SelfExe: self, Builtins: builtin.EnabledNames(rc.RawExec), PluginDir: rc.PluginDir,
		StateDir: filepath.Join(rc.StateDir, "plugins-run"), Checksums: pins, Store: store, Logger: log,
		Env: pluginEnv(rc), OnRestart: metrics.PluginRestarted})
	if err != nil {
		return err
	}

	// Policies (canary and completion decisions): the engine is created the
	// first time a declared job names a policy (hundreds of MB: idle nodes
	// never pay it); every module a job names is fetched from the policy
	// bucket over the shared connection, verified (the job's digest, the
	// configuration's pins), cached and compiled off the decision path.
	// Until then, and for jobs naming none, the native defaults decide.
	pol := &lazyPolicies{}
	cacheDir := filepath.Join(rc.StateDir, "policy-cache")
	if rc.Policy != nil && rc.Policy.CacheDir != "" {
		cacheDir = rc.Policy.CacheDir
	} else if o.dev {
		if uc, err := os.UserCacheDir(); err == nil {
			cacheDir = filepath.Join(uc, "hivelet", "policy-cache") // survives dev runs
		}
	}
	var policyPins map[string]string
	if rc.Policy != nil {
		policyPins = rc.Policy.Pins
	}
	events := newFaultEvents(src, fstore, log)
	loader := newPolicyLoader(pol, policyOptions(rc.PolicyTimeout, rc.PolicyMemMB, cacheDir, reg, log, events.OnFault),
		func(dir string) *policies.Store {
			return policies.NewStore(conn.JetStream(), policies.DefaultBucket, dir)
		},
		filepath.Join(cacheDir, "modules"), policyPins, o.noPolicies, log)
	bg.Add(2)
	go func() { defer bg.Done(); loader.run(runCtx, src) }()
	go func() { defer bg.Done(); events.run(runCtx) }()

	attrs, ferr := node.Fingerprint(node.ProcFS("/proc"), hostname())
	if ferr != nil {
		log.Warn("fingerprint incomplete", "err", ferr)
	}
	ncfg := node.Config{Name: rc.Name, Datacenter: rc.Datacenter, NodePool: rc.NodePool, Class: rc.NodeClass, Meta: rc.Meta, Hostname: hostname()}
	health := &driverHealth{infos: map[string]model.DriverInfo{}}
	bootID := newBootID()
	buildNode := func() *model.Node {
		n := node.Build(nodeID, ncfg, attrs, health.DriverFingerprints(), src.View().Intent(nodeID), time.Now())
		n.Attributes[AttrAllocDir] = allocRoot
		n.Attributes[AttrNetworkAddress] = portTable.Address()
		n.HostVolumes, n.HostNetworks = hostVolumes, hostNetworks
		n.RolloutProtocol, n.BootID = fleetrollout.HandoffProtocol, bootID
		return n
	}
	// The heartbeat's TTL grows with the fleet the agent counts (its
	// passes run before the first heartbeat after registration).
	var counted atomic.Pointer[agent.Agent]
	live := &node.Liveness{Base: rc.NodeTTL, Ceiling: fstore, Log: log, Fleet: func() node.FleetFacts {
		if a := counted.Load(); a != nil {
			return a.Fleet()
		}
		return node.FleetFacts{}
	}}
	hb := node.NewHeartbeater(node.HeartbeatConfig{Period: rc.NodeTTL / 3, Observe: metrics.HeartbeatResult, Plan: live.Plan},
		fstore.ForNode(nodeID), buildNode, log)

	a, err := agent.New(agent.Config{
		Node: buildNode, Source: src, Allocs: fstore.ForNode(nodeID), Deployments: fstore, Store: store,
		Drivers: plugins, Validate: driver.ValidateConfig, AllocRoot: allocRoot, Ports: portTable, Vars: varStore, Services: svcStore, Catalog: svcStore,
		Canaries: pol, Completion: pol, Metrics: metrics, Logger: agentLog,
		PolicyPending: pol.Pending,
		ServerNow:     src.ServerNow, NodeTTL: fstore.NodeTTL(), LiveTTL: live.TTL, BootID: bootID,
	})
	if err != nil {
		return err
	}
	counted.Store(a)
	pol.setOnSettle(func() { a.KickFor("kick: a policy loaded") })
	defer conn.OnReconnect(a.NoteReconnect)() // the disruption guard holds for one TTL after a reconnect
	health.onDiff = func() { hb.Poke(); a.KickFor("kick: this node's health changed") }

	// Restore and reattach before anything converges.
	if err := plugins.Load(ctx); err != nil {
		log.Error("loading driver plugins", "err", err)
	}
	for _, p := range plugins.Plugins() {
		bg.Add(1)
		go func() { defer bg.Done(); health.watch(runCtx, plugins, p.Name, log) }()
	}
	bg.Add(1)
	go func() {
		defer bg.Done()
		reloadPluginsOnHUP(runCtx, plugins, log, func(name string) {
			bg.Add(1)
			go func() { defer bg.Done(); health.watch(runCtx, plugins, name, log) }()
		})
	}()
	if err := a.Restore(ctx); err != nil {
		log.Error("restore failed: passes will fail closed until it succeeds", "err", err)
	}
	// Task logs for `hivelet alloc logs` from any machine (host/logs), once
	// the restored allocations are known.
	logSrv, err := logs.Serve(conn.NATS(), rc.BucketPrefix, nodeID, a.AllocFiles, log)
	if err != nil {
		return err
	}
	defer logSrv.Stop()
	// Every event of a task, for `hivelet alloc status` (the allocations
	// bucket carries each task's telling and last events only).
	detailSrv, err := logs.ServeDetails(conn.NATS(), rc.BucketPrefix, nodeID, a.AllocDetails, log)
	if err != nil {
		return err
	}
	defer detailSrv.Stop()
	bg.Add(2)
	go func() { defer bg.Done(); _ = hb.Run(runCtx) }()
	// Drain and eligibility (`hivelet node drain|eligibility`) reach the
	// node record at once, not at the next heartbeat.
	go func() { defer bg.Done(); node.FollowIntent(runCtx, src, nodeID, hb) }()

	apiToken, err := loadAPIToken(rc, log)
	if err != nil {
		return err
	}
	l, err := api.Listen(api.Config{Addr: rc.HTTPAddr, AllowNonLoopback: rc.HTTPAllowNonLoopback, Token: apiToken})
	if err != nil {
		if !o.dev {
			return err
		}
		log.Warn("HTTP API address taken; using a free port", "addr", rc.HTTPAddr, "err", err)
		if l, err = api.Listen(api.Config{Addr: "127.0.0.1:0", Token: apiToken}); err != nil {
			return err
		}
	}
	judge := newHealthMonitor(a, conn, src, hb, store, live.TTL, metrics)
	bg.Add(1)
	go func() { defer bg.Done(); judge.run(runCtx) }()
	prov := agentProviders{a: a, self: buildNode, conn: conn, src: src, plugin: plugins, health: health, judge: judge}
	reg.MustRegister(api.JobCollector{Allocs: prov, View: src})
	h := api.RequireToken(api.NewHandler(api.Providers{Node: prov, Allocs: prov, Jobs: api.JobsFromSource(src), Rejections: api.RejectionsFromSource(src),
		Plugins: prov, Health: prov, Operator: &api.Operator{Store: fstore, View: src, By: "api", JobView: fstore.JobView},
		JobWrites: &api.JobWrites{Writer: apiJobWriter{st: fstore}, Drivers: builtin.Schemas()}}, reg), apiToken)
	if rc.HTTPEnableDebug {
		h = api.WithDebug(h, apiToken)
		log.Info("runtime profiles served under /debug/pprof/ (http.enable_debug)", "addr", rc.HTTPAddr)
	}
	bg.Add(1)
	go func() { defer bg.Done(); _ = api.Serve(runCtx, l, h, log) }()

	// Start-up (plugin launches, the boot pull, compiling templates) leaves
	// garbage the runtime would return to the OS only slowly: return it once
	// the node has settled.
	bg.Add(1)
	go func() {
		defer bg.Done()
		select {
		case <-time.After(10 * time.Second):
			debug.FreeOSMemory()
		case <-runCtx.Done():
		}
	}()

	loopDone := make(chan struct{})
	go func() { defer close(loopDone); _ = a.Run(ctx) }()
	<-ctx.Done()
	<-loopDone
	log.Info("agent shutting down", "stop_tasks", o.dev)
	logSrv.Stop() // followers are told at once; their CLI retries until the next start
	detailSrv.Stop()
	sctx, scancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer scancel()
	a.Shutdown(sctx, o.dev)
	stopRun()
	bg.Wait()
	if o.dev {
		if err := plugins.Kill(); err != nil {
			log.Warn("stopping driver plugins", "err", err)
		}
	} else if err := plugins.Close(); err != nil {
		log.Warn("detaching from driver plugins", "err", err)
	}
	return nil
}

// pluginEnv is the environment the configuration adds to the built-in
// plugins at launch: docker.allow_privileged, docker.allow_caps,
// exec.allow_root, always set explicitly so that a variable inherited by
// the agent cannot grant what the configuration does not.
func pluginEnv(rc *config.Resolved) map[string][]string {
	return map[string][]string{
		"docker": {docker.EnvAllowPrivileged + "=" + strconv.FormatBool(rc.Privileged), docker.EnvAllowCaps + "=" + rc.AllowCaps},
		"exec":   {execdriver.EnvAllowRoot + "=" + strconv.FormatBool(rc.ExecAllowRoot)},
	}
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}

// goStyleFlags lets every command take Nomad/Go-style single-dash long
// flags (`agent -dev`, `job run -detach`) as well as cobra's `--dev`: an
// argument "-name" or "-name=value" whose name is longer than one letter
// becomes "--name...". Arguments after "--" and negative numbers are left
// alone; single-letter flags (-f) keep their shorthand meaning.
func goStyleFlags(args []string) []string {
	out := make([]string, 0, len(args))
	rest := false
	for _, a := range args {
		switch {
		case rest:
		case a == "--":
			rest = true
		case len(a) > 2 && a[0] == '-' && a[1] != '-' && isLetter(a[1]) && isLetter(a[2]):
			a = "-" + a
		}
		out = append(out, a)
	}
	return out
}

func isLetter(b byte) bool { return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') }

// newBootID is a random ID for this start of the agent.
func newBootID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// The heartbeater reads a write whose answer was lost back before it
// writes again (node.Reader); the fleet's node writer is that reader.
var _ node.Reader = (*fleet.NodeWriter)(nil)
