package policies

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/hivelet/hivelet/host/model"
)

// Options configure an Engine. The zero value is usable: defaults apply.
type Options struct {
	// CacheDir holds wazero's on-disk compilation cache (the agent passes a
	// directory under its state dir). Empty: compile in memory only.
	CacheDir string
	// MemoryLimitPages caps every instance's linear memory, in 64 KiB
	// pages. Default 1024 (64 MiB).
	MemoryLimitPages uint32
	// Deadline bounds one evaluation. Default 100 ms.
	Deadline time.Duration
	// LoadDeadline bounds a module's initialisation, and each of the
	// calls that read what it declares (ABI version, kinds, manifest) at
	// load. Default 2 s.
	LoadDeadline time.Duration
	// OutputLimit bounds what a guest may write to stdout and to stderr per
	// evaluation; the rest is dropped (and the drop logged). Default 4 KiB.
	OutputLimit int
	// ReserveBytes is the initial size passed to a module's optional
	// hivelet_reserve export before its memory is snapshotted, so that
	// evaluations allocate without growing memory. It adapts: when an
	// evaluation grows an instance's memory (which makes it unrestorable),
	// the module's reservation grows for its next instances. The snapshot,
	// and so the restore after each call, is the module's initial memory
	// plus this. Default 512 KiB.
	ReserveBytes int
	// PoolSize bounds the instances kept per module. Default GOMAXPROCS.
	PoolSize int
	// FreshInstances instantiates a module for every evaluation instead of
	// reusing restored instances: slower, kept to measure the difference.
	FreshInstances bool
	// FollowInterval is how often the engine re-resolves the names it
	// follows (name-only references a Store.Ensure loaded) against the
	// object store, in the background, so that a name pushed again reaches
	// every agent (Store.Refresh; the agent may also call that itself).
	// Default 5 s; negative: never (only explicit Refresh calls).
	FollowInterval time.Duration
	// Logger receives faults and guest output. Default slog.Default().
	Logger *slog.Logger
	// Registerer, if set, gets the engine's metrics.
	Registerer prometheus.Registerer
	// OnFault is called with every fault (after logging and counting), for
	// the caller to attach to the deployment as an event. It must not block.
	OnFault func(*Fault)
}

func (o *Options) defaults() {
	if o.MemoryLimitPages == 0 {
		o.MemoryLimitPages = 1024
	}
	if o.Deadline == 0 {
		o.Deadline = 100 * time.Millisecond
	}
	if o.LoadDeadline == 0 {
		o.LoadDeadline = 2 * time.Second
	}
	if o.OutputLimit == 0 {
		o.OutputLimit = 4 << 10
	}
	if o.ReserveBytes == 0 {
		o.ReserveBytes = 512 << 10
	}
	if o.FollowInterval == 0 {
		o.FollowInterval = 5 * time.Second
	}
	if o.PoolSize <= 0 {
		o.PoolSize = runtime.GOMAXPROCS(0)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Engine loads policy modules and evaluates them. It implements
// reconcile.CanaryChooser and reconcile.CompletionDecider: each decision is
// dispatched on the request's PolicyRef to a loaded module, its answer
// validated strictly, and on any fault the native default answers instead.
// Safe for concurrent use.
type Engine struct {
	opts   Options
	rt     wazero.Runtime
	cache  wazero.CompilationCache
	log    *slog.Logger
	faults *prometheus.CounterVec
	evals  *prometheus.CounterVec

	mu       sync.RWMutex
	builtins map[string]*Module // by bare name
	named    map[string]*Module // custom modules by name
	byDigest map[string]*Module
	refused  map[string]*Fault // custom name → why its last load failed
	follow   map[string]bool   // custom names that track the store's current digest

	resets sync.WaitGroup
	// The follower: a goroutine started by the first Store.Ensure of a
	// name-only reference, refreshing followed names through the latest
	// store every FollowInterval until Close.
	followStore atomic.Pointer[Store]
	followOnce  sync.Once
	bgCtx       context.Context
	bgStop      context.CancelFunc
	bg          sync.WaitGroup
	// bufs recycles input encoding buffers.
	bufs sync.Pool
}

// New creates an engine. It compiles nothing: call LoadBuiltins and Load.
func New(ctx context.Context, opts Options) (*Engine, error) {
	opts.defaults()
	e := &Engine{
		opts: opts, log: opts.Logger,
		builtins: map[string]*Module{}, named: map[string]*Module{},
		byDigest: map[string]*Module{}, refused: map[string]*Fault{},
		follow: map[string]bool{},
	}
	e.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	e.bgCtx, e.bgStop = context.WithCancel(context.WithoutCancel(ctx))
	cfg := wazero.NewRuntimeConfigCompiler().
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(opts.MemoryLimitPages)
	if opts.CacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("opening the policy compilation cache %s: %w", opts.CacheDir, err)
		}
		e.cache = cache
		cfg = cfg.WithCompilationCache(cache)
	}
	e.rt = wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := instantiateWASI(ctx, e.rt); err != nil {
		e.rt.Close(ctx)
		return nil, fmt.Errorf("instantiating WASI for policies: %w", err)
	}
	e.faults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hivelet_policy_faults_total",
		Help: "Policy module faults, by decision and fault kind; each fell back to the native default.",
	}, []string{"decision", "kind"})
	e.evals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hivelet_policy_evaluations_total",
		Help: "Policy decisions, by decision and by who answered (module, native default, fallback).",
	}, []string{"decision", "answered_by"})
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{e.faults, e.evals} {
			if err := opts.Registerer.Register(c); err != nil {
				e.rt.Close(ctx)
				return nil, fmt.Errorf("registering policy metrics: %w", err)
			}
		}
	}
	return e, nil
}

// Close waits for pending instance restores and releases every module.
func (e *Engine) Close(ctx context.Context) error {
	e.bgStop()
	e.bg.Wait()
	e.resets.Wait()
	err := e.rt.Close(ctx)
	if e.cache != nil {
		err = errors.Join(err, e.cache.Close(ctx))
	}
	return err
}

// Digest returns the hex SHA-256 of wasm.
func Digest(wasm []byte) string {
	s := sha256.Sum256(wasm)
	return hex.EncodeToString(s[:])
}

// Compile compiles and validates wasm without registering it under a name
// (the CLI's inspect, eval and bench use it). It is the only place the
// engine compiles; decisions never do.
func (e *Engine) Compile(ctx context.Context, name string, wasm []byte) (*Module, error) {
	m := &Module{Name: name, Digest: Digest(wasm), Size: len(wasm), engine: e}
	m.reserve.Store(int64(e.opts.ReserveBytes))
	m.inputCap.Store(64 << 10)
	fault := func(f *Fault) *Fault {
		f.Decision, f.Policy, f.Digest = "load", name, m.Digest
		return f
	}
	// Mutable globals are exported under reserved names so that instances
	// can restore them; a module whose tables or segments can change runs
	// on fresh instances (wasmscan.go).
	shape, scanErr := scanModule(wasm)
	code := wasm
	if scanErr == nil {
		if code, scanErr = exportGlobals(wasm, shape.mutableGlobals); scanErr != nil {
			code = wasm
		}
	}
	compiled, err := e.rt.CompileModule(ctx, code)
	if err == nil && scanErr != nil {
		compiled.Close(ctx)
		err = scanErr
		return nil, fault(&Fault{Kind: FaultLoad, Reason: "inspecting the module: " + err.Error(), Err: err})
	}
	if err != nil {
		if isMemoryLimitError(err) {
			return nil, fault(&Fault{Kind: FaultMemory, Reason: "compiling: " + err.Error(), Err: err})
		}
		return nil, fault(&Fault{Kind: FaultLoad, Reason: "compiling: " + err.Error(), Err: err})
	}
	m.compiled = compiled
	m.fresh = shape.fresh
	for _, g := range shape.mutableGlobals {
		m.globals = append(m.globals, globalExportPrefix+strconv.FormatUint(uint64(g), 10))
	}
	for _, f := range compiled.ImportedFunctions() {
		mod, n, _ := f.Import()
		m.Imports = append(m.Imports, mod+"."+n)
	}
	exports := compiled.ExportedFunctions()
	want := func(name string, params, results []api.ValueType) error {
		d, ok := exports[name]
		if !ok {
			return fmt.Errorf("the module lacks the export %s", name)
		}
		if !equalTypes(d.ParamTypes(), params) || !equalTypes(d.ResultTypes(), results) {
			return fmt.Errorf("export %s has type %v -> %v, want %v -> %v", name, d.ParamTypes(), d.ResultTypes(), params, results)
		}
		return nil
	}
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	if err := want(exportABIVersion, nil, []api.ValueType{i32}); err != nil {
		compiled.Close(ctx)
		return nil, fault(&Fault{Kind: FaultMissingExport, Reason: err.Error() + " (is it a hivelet policy module?)"})
	}
	if _, ok := compiled.ExportedMemories()[exportMemory]; !ok {
		compiled.Close(ctx)
		return nil, fault(&Fault{Kind: FaultMissingExport, Reason: "the module exports no memory named \"memory\""})
	}
	inst, err := m.instantiate(ctx)
	if err != nil {
		compiled.Close(ctx)
		f, _ := AsFault(err)
		return nil, fault(f)
	}
	discard := func() { inst.mod.Close(ctx); compiled.Close(ctx) }
	// The ABI version, kinds and manifest are read as part of loading the
	// module: under the load deadline, as its initialisation is (the
	// per-call deadline is an evaluation's; a Go guest's first call into
	// a fresh instance once took longer than it on a loaded machine).
	call := func(fn string) (uint64, error) {
		cctx, cancel := context.WithTimeout(ctx, e.opts.LoadDeadline)
		defer cancel()
		r, err := inst.mod.ExportedFunction(fn).Call(cctx)
		if err != nil {
			return 0, m.callFault(err, inst, "calling "+fn)
		}
		return r[0], nil
	}
	abi, err := call(exportABIVersion)
	if err != nil {
		discard()
		f, _ := AsFault(err)
		return nil, fault(f)
	}
	m.ABI = uint32(abi)
	if m.ABI < MinABIVersion || m.ABI > ABIVersion {
		discard()
		return nil, fault(&Fault{Kind: FaultABIVersion, Reason: fmt.Sprintf("the module declares policy ABI version %d; this hivelet implements versions %d to %d", m.ABI, MinABIVersion, ABIVersion)})
	}
	checks := []struct {
		name     string
		params   []api.ValueType
		results  []api.ValueType
		required bool
	}{
		{exportKinds, nil, []api.ValueType{i32}, true},
		{exportManifest, nil, []api.ValueType{i64}, true},
		{exportAlloc, []api.ValueType{i32}, []api.ValueType{i32}, true},
	}
	for _, c := range checks {
		if err := want(c.name, c.params, c.results); err != nil {
			discard()
			return nil, fault(&Fault{Kind: FaultMissingExport, Reason: err.Error()})
		}
	}
	kinds, err := call(exportKinds)
	if err != nil {
		discard()
		f, _ := AsFault(err)
		return nil, fault(f)
	}
	m.Kinds = Kind(int32(kinds))
	if m.Kinds&^(KindCanary|KindCompletion) != 0 || m.Kinds == 0 {
		discard()
		return nil, fault(&Fault{Kind: FaultLoad, Reason: fmt.Sprintf("the module declares kinds %s; want canary, completion or both", m.Kinds)})
	}
	for _, k := range []struct {
		kind Kind
		name string
	}{{KindCanary, exportCanary}, {KindCompletion, exportCompletion}} {
		if m.Kinds&k.kind == 0 {
			continue
		}
		if err := want(k.name, []api.ValueType{i32, i32}, []api.ValueType{i64}); err != nil {
			discard()
			return nil, fault(&Fault{Kind: FaultMissingExport, Reason: err.Error() + " (declared kind " + k.kind.String() + ")"})
		}
	}
	packed, err := call(exportManifest)
	if err != nil {
		discard()
		f, _ := AsFault(err)
		return nil, fault(f)
	}
	text, ok := inst.mem.Read(uint32(packed>>32), uint32(packed))
	if !ok || len(text) > maxManifest {
		discard()
		return nil, fault(&Fault{Kind: FaultLoad, Reason: "the manifest is out of bounds or too large"})
	}
	m.Manifest, err = parseManifest(string(text))
	if err != nil {
		discard()
		return nil, fault(&Fault{Kind: FaultLoad, Reason: err.Error()})
	}
	m.idle = make(chan *instance, e.opts.PoolSize)
	m.freed = make(chan struct{}, 1)
	m.live.Store(1)
	if m.fresh != "" {
		e.log.Info("policy module has state a restore cannot reset; every evaluation instantiates it afresh",
			"policy", name, "policy_digest", m.Digest, "reason", m.fresh)
	}
	if m.freshOnly() || !inst.restore() {
		inst.mod.Close(ctx)
		m.live.Store(0)
	} else {
		m.idle <- inst
	}
	return m, nil
}

func equalTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// LoadBuiltins compiles every embedded built-in policy, concurrently. With
// a warm compilation cache this is a daemon restart's cost; see
// BENCHMARKS.md.
func (e *Engine) LoadBuiltins(ctx context.Context) error {
	names := BuiltinNames()
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.EnsureBuiltin(ctx, name)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// EnsureBuiltin compiles one built-in policy (name with or without the
// "builtin:" prefix) unless it is loaded already.
func (e *Engine) EnsureBuiltin(ctx context.Context, name string) error {
	name = strings.TrimPrefix(name, BuiltinPrefix)
	e.mu.RLock()
	_, ok := e.builtins[name]
	e.mu.RUnlock()
	if ok {
		return nil
	}
	wasm, found := BuiltinWasm(name)
	if !found {
		return fmt.Errorf("no built-in policy %q", name)
	}
	m, err := e.Compile(ctx, BuiltinPrefix+name, wasm)
	if err != nil {
		return fmt.Errorf("loading built-in policy %s: %w", name, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.builtins[name]; !ok {
		e.builtins[name] = m
		e.byDigest[m.Digest] = m
	}
	return nil
}

// Load compiles a custom module and makes it the one named name (a later
// Load of the same name replaces it; decisions pinned to the older digest
// still find it). digest, if not empty, must match the bytes. A module that
// fails to load is reported, and decisions naming it fall back with the
// load's reason. The bare names of the built-in policies are reserved
// (they always mean the built-in): loading a custom module under one is
// refused. A name loaded through Load is the caller's to keep current
// (Store.Refresh does not move it).
func (e *Engine) Load(ctx context.Context, name, digest string, wasm []byte) (*Module, error) {
	m, err := e.load(ctx, name, digest, wasm)
	if err != nil {
		return nil, err
	}
	e.point(name, m, false)
	return m, nil
}

// load verifies and compiles a custom module and registers it by digest,
// without making it the current module of any name.
func (e *Engine) load(ctx context.Context, name, digest string, wasm []byte) (*Module, error) {
	if got := Digest(wasm); digest != "" && !strings.EqualFold(strings.TrimPrefix(digest, "sha256:"), got) {
		f := &Fault{Kind: FaultDigestMismatch, Decision: "load", Policy: name, Digest: got,
			Reason: fmt.Sprintf("the module's SHA-256 is %s, pinned %s", got, digest)}
		e.refuse(name, f)
		return nil, f
	}
	if _, reserved := builtinKinds[name]; reserved {
		f := &Fault{Kind: FaultLoad, Decision: "load", Policy: name, Digest: Digest(wasm),
			Reason: fmt.Sprintf("%q is the name of a built-in policy, reserved for it: a custom module must have another name", name)}
		e.refuse(name, f)
		return nil, f
	}
	e.mu.RLock()
	m := e.byDigest[Digest(wasm)]
	e.mu.RUnlock()
	if m != nil {
		return m, nil
	}
	m, err := e.Compile(ctx, name, wasm)
	if err != nil {
		f, _ := AsFault(err)
		e.refuse(name, f)
		return nil, err
	}
	e.mu.Lock()
	if prev := e.byDigest[m.Digest]; prev != nil {
		// Another load of the same bytes won the race.
		e.mu.Unlock()
		m.close(ctx)
		return prev, nil
	}
	e.byDigest[m.Digest] = m
	e.mu.Unlock()
	return m, nil
}

// point makes m the current module of name. follow records whether the
// name tracks the object store's current digest (Store.Ensure of a
// name-only reference) or was set by the caller (Load).
func (e *Engine) point(name string, m *Module, follow bool) {
	e.mu.Lock()
	e.named[name] = m
	if follow {
		e.follow[name] = true
	} else {
		delete(e.follow, name)
	}
	delete(e.refused, name)
	e.mu.Unlock()
}

// Current returns the digest of the module name currently resolves to
// (custom or built-in), or "" if none is loaded.
func (e *Engine) Current(name string) string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if _, ok := builtinKinds[strings.TrimPrefix(name, BuiltinPrefix)]; ok || strings.HasPrefix(name, BuiltinPrefix) {
		if m := e.builtins[strings.TrimPrefix(name, BuiltinPrefix)]; m != nil {
			return m.Digest
		}
		return ""
	}
	if m := e.named[name]; m != nil {
		return m.Digest
	}
	return ""
}

func (e *Engine) refuse(name string, f *Fault) {
	e.mu.Lock()
	e.refused[name] = f
	e.mu.Unlock()
	e.report(f)
}

// resolve finds the module a reference names, for a kind of decision.
func (e *Engine) resolve(ref *model.PolicyRef, kind Kind) (*Module, *Fault) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	name := ref.Name
	var m *Module
	switch {
	case ref.Digest != "":
		m = e.byDigest[strings.ToLower(strings.TrimPrefix(ref.Digest, "sha256:"))]
	case strings.HasPrefix(name, BuiltinPrefix):
		m = e.builtins[strings.TrimPrefix(name, BuiltinPrefix)]
	default:
		// A built-in's bare name is reserved: it always means the
		// built-in, never a pushed module.
		if _, reserved := builtinKinds[name]; reserved {
			m = e.builtins[name]
		} else {
			m = e.named[name]
		}
	}
	if m == nil {
		if f, ok := e.refused[name]; ok {
			return nil, &Fault{Kind: f.Kind, Policy: name, Digest: f.Digest, Reason: "refused at load: " + f.Reason}
		}
		reason := "no module of that name is loaded"
		if ref.Digest != "" {
			reason = "no module with digest " + ref.Digest + " is loaded"
		}
		return nil, &Fault{Kind: FaultNotLoaded, Policy: name, Reason: reason}
	}
	if m.Kinds&kind == 0 {
		return nil, &Fault{Kind: FaultNotLoaded, Policy: name, Digest: m.Digest, Reason: "the module implements " + m.Kinds.String() + ", not " + kind.String()}
	}
	return m, nil
}

// WASI errnos the overrides return.
const (
	wasiEBADF   = 8
	wasiENOTSUP = 58
)

// instantiateWASI instantiates wazero's WASI preview 1 for policies, with
// the two calls that change an instance's file descriptor table replaced:
// fd_close and fd_renumber would let a module close or move its stdout or
// stderr and see the difference in its next evaluation (the restore does
// not cover host-side state). A policy instance has no descriptors but
// 0-2 (no preopens, no sockets), so both answer ENOTSUP for those and
// EBADF otherwise, and change nothing. Every other WASI call a policy can
// make is stateless here: clocks and randomness are pinned per evaluation,
// fd_fdstat_set_flags is a no-op on the stdio writers, and path_open and
// sock_accept have nothing to open.
func instantiateWASI(ctx context.Context, rt wazero.Runtime) (api.Closer, error) {
	b := rt.NewHostModuleBuilder(wasi_snapshot_preview1.ModuleName)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	stdio := func(fd uint64) bool { return uint32(fd) <= 2 }
	i32 := api.ValueTypeI32
	b.NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
			errno := uint64(wasiEBADF)
			if stdio(stack[0]) {
				errno = wasiENOTSUP
			}
			stack[0] = errno
		}), []api.ValueType{i32}, []api.ValueType{i32}).
		WithParameterNames("fd").Export("fd_close")
	b.NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
			errno := uint64(wasiEBADF)
			if stdio(stack[0]) && stdio(stack[1]) {
				errno = wasiENOTSUP
			}
			stack[0] = errno
		}), []api.ValueType{i32, i32}, []api.ValueType{i32}).
		WithParameterNames("fd", "to").Export("fd_renumber")
	return b.Instantiate(ctx)
}
