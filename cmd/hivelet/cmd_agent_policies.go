package main

// The agent's side of the policy engine: the engine is created lazily (only
// once a declared job names a policy: it costs hundreds of MB), every
// module a job names is fetched, verified and compiled off the decision
// path, and a decision whose module is not loaded yet is answered by the
// native default, which says so. Faults become deployment events.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/policies"
)

// lazyPolicies answers with the policy engine for references whose module
// the loader has made available, and with the native defaults otherwise
// (no policy named, engine not loaded, module not fetched yet, policies
// off). It implements reconcile.CanaryChooser and CompletionDecider.
type lazyPolicies struct {
	mu     sync.RWMutex
	eng    *policies.Engine
	loaded map[string]bool // refKey → the engine can answer for it
	start  func()          // asks for the engine to be loaded; nil when policies are off
	once   sync.Once

	// attempted holds the references the loader has tried at least once
	// (loaded, refused, or fetch failed); off is set when no policy will
	// ever load (-no-policies, engine failed). A job naming a reference not
	// yet attempted is held by the agent (Pending), so no stand-in decides
	// in its place while its module is on the way. onSettle kicks a pass.
	attempted map[string]bool
	off       bool
	onSettle  func()
}

// Pending reports whether a policy the job names has not been tried by the
// loader yet (agent.Config.PolicyPending).
func (l *lazyPolicies) Pending(j *model.Job) (bool, string) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.off {
		return false, ""
	}
	for _, r := range jobRefs(j) {
		if !l.attempted[refKey(r)] {
			return true, fmt.Sprintf("policy %q is loading", r.Name)
		}
	}
	return false, ""
}

// settled records that the loader tried ref (nil: policies are off for
// good) and kicks a pass so that jobs held on it go on.
func (l *lazyPolicies) settled(ref *model.PolicyRef) {
	l.mu.Lock()
	changed := false
	if ref == nil {
		changed, l.off = !l.off, true
	} else {
		if l.attempted == nil {
			l.attempted = map[string]bool{}
		}
		changed = !l.attempted[refKey(ref)]
		l.attempted[refKey(ref)] = true
	}
	kick := l.onSettle
	l.mu.Unlock()
	if changed && kick != nil { // only a change can release a held job
		kick()
	}
}

func (l *lazyPolicies) setOnSettle(f func()) {
	l.mu.Lock()
	l.onSettle = f
	l.mu.Unlock()
}

// refKey identifies a reference as loaded: its name and its pin.
func refKey(ref *model.PolicyRef) string {
	return ref.Name + "@" + normDigest(ref.Digest)
}

func normDigest(d string) string {
	return strings.ToLower(strings.TrimPrefix(strings.TrimSpace(d), "sha256:"))
}

func (l *lazyPolicies) set(e *policies.Engine) {
	l.mu.Lock()
	l.eng = e
	l.loaded = map[string]bool{}
	l.mu.Unlock()
}

func (l *lazyPolicies) markLoaded(ref *model.PolicyRef) {
	l.mu.Lock()
	if l.loaded == nil {
		l.loaded = map[string]bool{}
	}
	l.loaded[refKey(ref)] = true
	l.mu.Unlock()
}

// engineFor returns the engine for a decision naming ref, or nil when the
// native default answers. A decision that names no policy is the built-in
// default, which the native code implements exactly (the policy engine's
// differential tests), so the engine is loaded only once some job names a
// policy. The decision path never compiles or fetches.
func (l *lazyPolicies) engineFor(ref *model.PolicyRef) *policies.Engine {
	if ref == nil {
		return nil
	}
	if l.start != nil {
		l.once.Do(l.start)
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.loaded[refKey(ref)] {
		return nil
	}
	return l.eng
}

func notLoaded(ref *model.PolicyRef) string {
	return fmt.Sprintf("policy %q not loaded yet, native default: ", ref.Name)
}

func (l *lazyPolicies) ChooseCanaries(ctx context.Context, req reconcile.CanaryRequest) (reconcile.CanaryChoice, error) {
	if e := l.engineFor(req.Policy); e != nil {
		return e.ChooseCanaries(ctx, req)
	}
	c, err := reconcile.DefaultCanaryChooser{}.ChooseCanaries(ctx, req)
	if err == nil && req.Policy != nil {
		c.Reason = notLoaded(req.Policy) + c.Reason
	}
	return c, err
}

func (l *lazyPolicies) DecideCompletion(ctx context.Context, in reconcile.CompletionInput) (reconcile.CompletionDecision, error) {
	if e := l.engineFor(in.Policy); e != nil {
		return e.DecideCompletion(ctx, in)
	}
	d, err := reconcile.DefaultCompletion{}.DecideCompletion(ctx, in)
	if err == nil && in.Policy != nil {
		d.Reason = notLoaded(in.Policy) + d.Reason
	}
	return d, err
}

// jobRefs returns the policy references one job names.
func jobRefs(j *model.Job) []*model.PolicyRef {
	var out []*model.PolicyRef
	add := func(u *model.UpdateStrategy) {
		if u == nil {
			return
		}
		for _, r := range []*model.PolicyRef{u.CanaryPolicy, u.CompletionPolicy} {
			if r != nil && r.Name != "" {
				out = append(out, r)
			}
		}
	}
	add(j.Update)
	for _, g := range j.Groups {
		add(g.Update)
	}
	return out
}

// jobPolicyRefs returns the distinct policy references the declared jobs of
// a view name (job and group update blocks), sorted by key.
func jobPolicyRefs(v *fleet.View) []*model.PolicyRef {
	seen := map[string]*model.PolicyRef{}
	for _, st := range v.Jobs.All() {
		if st.Value == nil {
			continue
		}
		for _, r := range jobRefs(st.Value) {
			seen[refKey(r)] = r
		}
	}
	out := make([]*model.PolicyRef, 0, len(seen))
	for _, k := range slices.Sorted(maps.Keys(seen)) {
		out = append(out, seen[k])
	}
	return out
}

// policyLoader follows the declared jobs and makes the modules they name
// available to the engine, creating the engine the first time one does.
type policyLoader struct {
	pol      *lazyPolicies
	opts     policies.Options // CacheDir, limits, Logger, Registerer, OnFault
	store    func(cacheDir string) *policies.Store
	modCache string            // where fetched module bytes are cached
	pins     map[string]string // policy name → hex SHA-256 (policy.pins)
	disabled bool              // -no-policies
	log      *slog.Logger
	kick     chan struct{}

	// loop state (one goroutine)
	eng       *policies.Engine
	engFailed bool
	done      map[string]bool      // refKey → settled (loaded or refused)
	retryAt   map[string]time.Time // refKey → earliest next fetch attempt
	loadTries map[string]int       // refKey → loads stopped at the load deadline so far
	quiet     map[string]string    // refKey → last quiet case logged
	// reads counts run's reads of the jobs; skipped its wakes on a change
	// that left the jobs as they were (it reads nothing more then).
	reads, skipped atomic.Uint64
}

func newPolicyLoader(pol *lazyPolicies, opts policies.Options, store func(string) *policies.Store, modCache string,
	pins map[string]string, disabled bool, log *slog.Logger) *policyLoader {
	np := map[string]string{}
	for k, v := range pins {
		np[k] = normDigest(v)
	}
	l := &policyLoader{pol: pol, opts: opts, store: store, modCache: modCache, pins: np, disabled: disabled, log: log,
		kick: make(chan struct{}, 1), done: map[string]bool{}, retryAt: map[string]time.Time{}, loadTries: map[string]int{},
		quiet: map[string]string{}}
	if !disabled {
		pol.start = func() {
			select {
			case l.kick <- struct{}{}:
			default:
			}
		}
	}
	return l
}

// maxLoadTries is how many times a module whose initialisation ran past
// the load deadline is loaded again before it is taken as refused (a
// quarter of an hour of waits).
const maxLoadTries = 8

// run loads what the declared jobs name until ctx ends, then closes the
// engine. It wakes on every change of the view, on a kick, and every 5 s
// (to retry fetches that failed: a module pushed after the job). Woken by
// a change that left the jobs as they were (an allocation's status, a
// deployment, a node: most of what an agent hears), it reads nothing more:
// the jobs name the same modules.
func (l *policyLoader) run(ctx context.Context, src *fleet.Source) {
	ch, cancel := src.Subscribe()
	defer cancel()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	defer func() {
		if l.eng != nil {
			l.pol.set(nil)
			l.eng.Close(context.Background())
		}
	}()
	for {
		v := src.View()
		l.sync(ctx, jobPolicyRefs(v))
		l.reads.Add(1)
		jobs := v.Jobs // as read
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				if !src.View().Jobs.Same(jobs) {
					break wait
				}
				l.skipped.Add(1)
			case <-l.kick:
				break wait
			case <-tick.C:
				break wait
			}
		}
	}
}

// sync makes every reference in refs available, as far as it can now.
func (l *policyLoader) sync(ctx context.Context, refs []*model.PolicyRef) {
	if len(refs) == 0 {
		return
	}
	if l.disabled {
		l.pol.settled(nil)
		for _, r := range refs {
			l.quietOnce(r, wanted.QuietNotConfigured, "policies are disabled (-no-policies): the native defaults decide")
		}
		return
	}
	if l.eng == nil {
		if l.engFailed {
			return
		}
		start := time.Now()
		eng, err := policies.New(ctx, l.opts)
		if err != nil {
			l.engFailed = true
			l.log.Error("policy engine unavailable; the native defaults decide", "err", err)
			l.pol.settled(nil)
			return
		}
		l.eng = eng
		l.pol.set(eng)
		l.log.Info("policy engine ready", "load_ms", time.Since(start).Milliseconds())
	}
	for _, r := range refs {
		k := refKey(r)
		if l.done[k] || time.Now().Before(l.retryAt[k]) {
			continue
		}
		ectx, cancel := context.WithTimeout(ctx, time.Minute) // a fetch never hangs the loader
		err := l.ensure(ectx, r)
		cancel()

		f, fault := policies.AsFault(err)
		if fault && f.Kind == policies.FaultDeadline && ctx.Err() != nil {
			return // the agent is stopping: the load was cut short, not slow
		}
		if fault && f.Kind == policies.FaultDeadline && l.loadTries[k] < maxLoadTries {
			// Its initialisation ran past the load deadline: on a busy
			// machine (an agent starting beside everything else a boot
			// starts) that passes, where a trap or a missing export does
			// not. Tried again after 5 s, the wait doubling to 5 min,
			// maxLoadTries times; meanwhile the native default decides,
			// saying so, as for a module not fetched yet.
			l.loadTries[k]++
			wait := min(5*time.Second<<(l.loadTries[k]-1), 5*time.Minute)
			l.retryAt[k] = time.Now().Add(wait)
			l.pol.settled(r)
			l.log.Warn("policy module's initialisation passed the load deadline; retrying",
				"policy", r.Name, "attempt", l.loadTries[k], "retry_in", wait, "err", err)
			continue
		}
		if err == nil || fault {
			// Loaded, or refused: either way the engine answers for it
			// (a refused module makes every decision fall back, reported).
			delete(l.loadTries, k)
			l.done[k] = true
			l.pol.markLoaded(r)
			l.pol.settled(r) // after markLoaded: a held job resumes on the module
			if err == nil {
				l.log.Info("policy module loaded", "policy", r.Name, "policy_digest", normDigest(r.Digest))
			}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		l.retryAt[k] = time.Now().Add(5 * time.Second)
		// Not fetchable now (not pushed yet, NATS trouble): the job is no
		// longer held; the native default decides, saying so, until a retry
		// loads the module.
		l.pol.settled(r)
		switch {
		case errors.Is(err, jetstream.ErrBucketNotFound), errors.Is(err, jetstream.ErrStreamNotFound):
			l.quietOnce(r, wanted.QuietNoBucket, "no policy module has been pushed (bucket "+policies.DefaultBucket+" does not exist); the native default decides until it is")
		case errors.Is(err, jetstream.ErrObjectNotFound):
			l.quietOnce(r, wanted.QuietNoKey, "the policy is not in bucket "+policies.DefaultBucket+"; the native default decides until it is pushed")
		default:
			l.log.Warn("fetching policy module failed; retrying", "policy", r.Name, "err", err)
		}
	}
}

func (l *policyLoader) quietOnce(r *model.PolicyRef, q wanted.Quiet, detail string) {
	k := refKey(r)
	if l.quiet[k] == q.String() {
		return
	}
	l.quiet[k] = q.String()
	l.log.Info(q.Message(), "quiet", q.String(), "policy", r.Name, "detail", detail)
}

// pin returns the configured SHA-256 for a reference's name, if any.
func (l *policyLoader) pin(r *model.PolicyRef) string {
	if p, ok := l.pins[r.Name]; ok {
		return p
	}
	return l.pins[strings.TrimPrefix(r.Name, policies.BuiltinPrefix)]
}

// ensure fetches, verifies and compiles the module r names. A nil error or
// a *policies.Fault settles the reference; another error is retried.
func (l *policyLoader) ensure(ctx context.Context, r *model.PolicyRef) error {
	e := l.eng
	st := l.store(l.modCache)
	pin := l.pin(r)
	if pin == "" {
		return st.Ensure(ctx, e, r)
	}
	// Pinned by the configuration: the module must have that SHA-256,
	// whatever the job says.
	bare := strings.TrimPrefix(r.Name, policies.BuiltinPrefix)
	builtinWasm, isBuiltin := policies.BuiltinWasm(bare)
	var wasm []byte
	if strings.HasPrefix(r.Name, policies.BuiltinPrefix) {
		if !isBuiltin {
			return e.EnsureBuiltin(ctx, r.Name) // its error names the unknown built-in
		}
		wasm = builtinWasm
	} else {
		b, _, err := st.Fetch(ctx, r.Name, r.Digest)
		switch {
		case err == nil:
			wasm = b
		case isBuiltin && r.Digest == "" && (errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrObjectNotFound)):
			wasm = builtinWasm
		default:
			return err
		}
	}
	if got := policies.Digest(wasm); got != pin {
		l.log.Error("policy module refused: its SHA-256 is not the one policy.pins requires",
			"policy", r.Name, "policy_digest", got, "pinned", pin)
		// Load records the refusal, so decisions naming it fall back and
		// report why.
		_, err := e.Load(ctx, r.Name, pin, wasm)
		return err
	}
	if strings.HasPrefix(r.Name, policies.BuiltinPrefix) || (isBuiltin && policies.Digest(builtinWasm) == pin) {
		return e.EnsureBuiltin(ctx, bare)
	}
	_, err := e.Load(ctx, r.Name, pin, wasm)
	return err
}

// faultEvents records policy faults as deployment events, off the decision
// path: OnFault only queues.
type faultEvents struct {
	ch    chan *policies.Fault
	src   *fleet.Source
	store interface {
		ModifyDeployment(ctx context.Context, namespace, jobID string, version uint64, attempts int,
			decide func(cur model.Deployment) (*model.Deployment, error)) (*model.Deployment, uint64, error)
	}
	log *slog.Logger
}

func newFaultEvents(src *fleet.Source, store *fleet.Store, log *slog.Logger) *faultEvents {
	return &faultEvents{ch: make(chan *policies.Fault, 64), src: src, store: store, log: log}
}

// OnFault is the engine's hook: it must not block.
func (f *faultEvents) OnFault(ft *policies.Fault) {
	if ft.DeploymentID == "" {
		return // a load: logged and counted by the engine; the decisions that follow carry the deployment
	}
	c := *ft
	select {
	case f.ch <- &c:
	default:
		f.log.Warn("policy fault not recorded on its deployment: queue full", "deployment_id", ft.DeploymentID, "policy", ft.Policy)
	}
}

// faultMessage is the event text: stable for one fault, so a fault repeated
// by every pass is recorded once in a row.
func faultMessage(ft *policies.Fault) string {
	d := ft.Digest
	if len(d) > 12 {
		d = d[:12]
	}
	if d == "" {
		d = "unknown"
	}
	reason, _, _ := strings.Cut(ft.Reason, "\n") // a trap's reason goes on with the wasm stack
	return fmt.Sprintf("policy %q (sha256:%s) %s fault in the %s decision: %s; the native default decided",
		ft.Policy, d, ft.Kind, ft.Decision, reason)
}

func (f *faultEvents) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ft := <-f.ch:
			if err := f.record(ctx, ft); err != nil {
				f.log.Warn("recording a policy fault on its deployment", "deployment_id", ft.DeploymentID, "err", err)
			}
		}
	}
}

// await returns the deployment with the given ID once the view holds it:
// a canary decision is made in the pass that creates its deployment.
func (f *faultEvents) await(ctx context.Context, id string, within time.Duration) (*model.Deployment, error) {
	ch, cancel := f.src.Subscribe()
	defer cancel()
	timeout := time.NewTimer(within)
	defer timeout.Stop()
	for {
		for _, st := range f.src.View().Deployments.All() {
			if st.Value != nil && st.Value.ID == id {
				return st.Value, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout.C:
			return nil, fmt.Errorf("deployment %s did not appear in the view within %v", id, within)
		case <-ch:
		}
	}
}

func (f *faultEvents) record(ctx context.Context, ft *policies.Fault) error {
	dep, err := f.await(ctx, ft.DeploymentID, 30*time.Second)
	if err != nil {
		return err
	}
	ev := model.DeploymentEvent{Time: time.Now().UTC(), Kind: model.EventPolicyFault, Message: faultMessage(ft)}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, _, err = f.store.ModifyDeployment(cctx, dep.Namespace, dep.JobID, dep.JobVersion, 0, func(cur model.Deployment) (*model.Deployment, error) {
		if n := len(cur.Events); n > 0 && cur.Events[n-1].Kind == ev.Kind && cur.Events[n-1].Message == ev.Message {
			return nil, nil // the same fault again: recorded already
		}
		cur.Events = model.AppendDeploymentEvent(cur.Events, ev)
		cur.ModifyTime = ev.Time
		return &cur, nil
	})
	if err != nil {
		return fmt.Errorf("adding a policy fault event to deployment %s: %w", ft.DeploymentID, err)
	}
	f.log.Info("policy fault recorded on the deployment", "deployment_id", ft.DeploymentID, "job", dep.JobID,
		"policy", ft.Policy, "policy_digest", ft.Digest, "kind", string(ft.Kind))
	return nil
}

// policyOptions are the engine options the agent configuration gives.
func policyOptions(timeout time.Duration, memMB int, cacheDir string, reg prometheus.Registerer, log *slog.Logger, onFault func(*policies.Fault)) policies.Options {
	return policies.Options{CacheDir: cacheDir, Deadline: timeout, MemoryLimitPages: uint32(memMB) * 16, // 64 KiB pages
		Registerer: reg, Logger: log, OnFault: onFault}
}
