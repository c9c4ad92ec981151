// Package agent owns the reconcile loop of one node: it restores the node's
// allocations from the local state store and reattaches to their tasks, then,
// on every change of wanted state (jobs, nodes, allocations, deployments,
// driver health), runs the pure reconciler for this node over the fleet view
// and applies the plan through allocation runners, as licensed by the fleet
// rollout core (host/rollout, docs/rollout.md). It writes
// this node's allocations' status to the allocations bucket; the shared
// rollout writes (the deployment record, created once and changed only by
// compare-and-set; the update slots of the rollout bucket; a revert) go
// through a worker that re-runs the core's transition on what each write
// reads. The agent decides no rollout rule itself: read, decide, write.
//
// Invariants:
//   - Restore (and reattach) happens before the first pass; a restart starts
//     no task that was running (TestARestartedAgentReattachesAndStartsNothing).
//   - Fail closed: when the node cannot enumerate what it runs (state store
//     unreadable, a driver its allocations use unreachable) a pass does
//     nothing and says so at error level and in Status
//     (TestAPassFailsClosedWhenTheStateStoreCannotBeRead).
//   - Never two passes at once; a burst of changes makes one pass, not one
//     per change. Every pass logs the same keys ("reconcile pass").
//   - A view change made only of this agent's own writes coming back (its
//     allocation status, a deployment creation a pass planned) makes no
//     pass, and only when that is provable from revisions and content
//     (TestOnlyEchoesSkipsExactlyThisNodesOwnAllocationWrites).
//   - An incremental pass looks again only at the jobs whose inputs changed
//     since the last pass (the fleet's change log, this node's runners, the
//     deployments it wrote) and at those that had not converged; its index
//     of the view equals a rebuild (TestTheIndexKeptByChangesEqualsARebuild).
//     Full passes, on the resync period, look at every job. A runner write
//     that changes nothing a pass reads kicks no pass (planSig).
//   - What diverged is measured against this node's own stored intent (its
//     runners), never against the allocations bucket's copy.
//   - Absence is not a deletion order: only a decoded stop = true, a group
//     removed or a node out of scope stops anything (wanted.OrderFor); a
//     rejected declaration leaves the last good version running, including
//     across a restart (the last good version is kept in the state store).
//   - Errors are per allocation and collected: one allocation that cannot be
//     started or stopped does not stop the pass.
//   - No destructive update without a stored slot for that allocation, no
//     canary without a stored record, nothing at all for a job whose
//     record is newer than the job held here (fleet_test.go: the canary set
//     only until promoted, in-flight at most max_parallel from the drivers'
//     timestamps).
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hivelet/hivelet/host/allocrunner"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	hostnode "github.com/hivelet/hivelet/host/node"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/host/rollout"
	"github.com/hivelet/hivelet/host/state"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/sdk/driver"
)

// ViewSource is the fleet view the loop reconciles against (fleet.Source).
type ViewSource interface {
	Changed() <-chan struct{}
	Synced() <-chan struct{}
	View() *fleet.View
	echoSource
}

// AllocWriter writes this node's allocations' status (fleet.NodeWriter).
type AllocWriter interface {
	PutAlloc(ctx context.Context, a *model.Allocation) (uint64, error)
	// DeleteAlloc removes the key of an allocation this node forgot (an
	// older finished allocation of a name that finished again since).
	DeleteAlloc(ctx context.Context, namespace, jobID, allocID string) error
}

// Metrics receives the loop's figures (*api.Metrics implements it). Every
// method must be cheap and safe for concurrent use.
type Metrics interface {
	// ObserveReconcile records a pass: outcome "ok", "errors" or
	// "failed_closed".
	ObserveReconcile(outcome string, d time.Duration)
	// CountAllocsWith hands over the function that counts this node's
	// allocations by client status; the metric calls it when it is read
	// (a scrape), not the agent on each pass. New calls it once.
	CountAllocsWith(count func() map[string]int)
	SetEnumerationFailed(failed bool)
	// CountPassCause counts one pass of the loop by what made it
	// (Status.PassCauses).
	CountPassCause(cause string)
}

type nopMetrics struct{}

func (nopMetrics) ObserveReconcile(string, time.Duration) {}
func (nopMetrics) CountAllocsWith(func() map[string]int)  {}
func (nopMetrics) SetEnumerationFailed(bool)              {}
func (nopMetrics) CountPassCause(string)                  {}

// Config is what an agent needs; every dependency is passed in.
type Config struct {
	// Node returns this node's current record (fingerprint, drivers,
	// eligibility). Its ID is the node ID.
	Node        func() *model.Node
	Source      ViewSource
	Allocs      AllocWriter
	Deployments DeploymentWriter
	Store       *state.Store
	Drivers     allocrunner.Drivers
	// Validate checks a task config against its driver's schema
	// (driver.ValidateConfig).
	Validate  func(*driver.Schema, map[string]any) error
	AllocRoot string
	// Ports is the node's port table, shared by every runner (nil: a group
	// with a network block cannot start here).
	Ports allocrunner.PortTable
	// Vars is the variables store templates read (nil: none).
	Vars allocrunner.Vars
	// Services is where allocations register their services, and Catalog
	// what their templates read of them (nil: none).
	Services   allocrunner.ServiceRegistry
	Catalog    allocrunner.Catalog
	Canaries   reconcile.CanaryChooser     // nil: the reconciler's default
	Completion reconcile.CompletionDecider // nil: reconcile.DefaultCompletion
	Metrics    Metrics
	Logger     *slog.Logger
	Now        func() time.Time
	// Resync is the period of a backstop pass when nothing changed
	// (deadlines, retries); default 5s.
	Resync time.Duration
	// PassCPU measures each pass's CPU time on its own OS thread (Linux:
	// the thread's CPU clock; elsewhere nothing is measured), into
	// Status.PassCPUMS. A pass then holds its thread while it runs. For
	// agents sharing one process (the fleet benchmark's per-agent share
	// of the CPU), where the process's CPU time says nothing of one agent.
	PassCPU bool
	// PolicyPending, when set, reports that a policy the job names is not
	// loaded yet (and not known to have failed). Such a job is held: a pass
	// plans and changes nothing for it, so no canary set and no completion
	// verdict is ever made by a stand-in for the policy the job chose. Its
	// running allocations are untouched. The loader kicks a pass once the
	// policy settles.
	PolicyPending func(*model.Job) (pending bool, why string)
	// ServerNow estimates the NATS server's clock from a local time
	// (fleet.Source.ServerNow); nil: the local clock. Every time the
	// rollout protocol compares across machines is the server's.
	ServerNow func(time.Time) time.Time
	// NodeTTL is the nodes bucket's TTL (the disruption guard's window).
	NodeTTL time.Duration
	// LiveTTL, if set, is the node TTL in force now (node.Liveness.TTL: it
	// grows with the fleet); it replaces NodeTTL as the guard's window.
	LiveTTL func() time.Duration
	// BootID identifies this start of the agent (recorded in its slots).
	BootID string
	// WatchAllAllocs keeps the whole allocations bucket in view, as before
	// the narrowed watches: a Source that can change its filters
	// (fleet.Source) is otherwise told to watch this node's allocations,
	// and each job's on every node only while this node is among the
	// first of its steward or creation ranking (rollout.Watching).
	WatchAllAllocs bool
	// NarrowAbove is the fleet size (live nodes) above which the watch is
	// narrowed; at or below it every node watches every allocation (a
	// small fleet's every node is a steward candidate of most jobs
	// anyway). 0: DefaultNarrowAbove; negative: always narrowed.
	NarrowAbove int
	// StartsFirst is how long the rollout's shared writes (records,
	// transitions, verdicts, slots) wait for this node's driver starts in
	// flight to return before they are made: on a busy node a start's
	// round trip through its plugin shared the two cores with them (and
	// their echoes' passes) and took half again as long. 0:
	// DefaultStartsFirst; negative: no wait.
	StartsFirst time.Duration
}

// DefaultStartsFirst is Config.StartsFirst's default: a bound, for a start
// that takes long (an image pull); a start through a plugin returns in
// about a millisecond.
const DefaultStartsFirst = 20 * time.Millisecond

// DefaultNarrowAbove is Config.NarrowAbove's default.
const DefaultNarrowAbove = 10

// filterSource is a ViewSource whose watch filters can change
// (fleet.Source.SetFilters).
type filterSource interface {
	SetFilters(kind string, filters []string)
}

// Agent is the reconcile loop of one node.
type Agent struct {
	cfg    Config
	log    *slog.Logger
	nodeID string

	nodeFacts nodeFactsCache // the rollout facts' per-node derivations (its own lock)
	// passNode is the node record of the pass under way (set as it
	// starts), which the runners it creates are given (runnerNode).
	passNode atomic.Pointer[model.Node]
	// runnersNode is the node record the runners were last given: while
	// a newer one differs only in its heartbeat time, the next runner
	// shares it (under runnersNodeMu).
	runnersNodeMu sync.Mutex
	runnersNode   *model.Node
	// fleetNodes is, by job key, the node part of the job's last
	// whole-fleet plan input (fleetNodesOf; under passMu).
	fleetNodes map[string]*fleetNodesMemo
	// fleetCountCopy is the View.NodesCopy the fleet was last counted at
	// (fleetCountStale); written by passes only.
	fleetCountCopy uint64
	// nodeExpiredInView: a node other than self was expired with a loss
	// revision when the fleet was last counted (anyNodeExpired); written
	// and read by passes only.
	nodeExpiredInView bool
	// fleetLevel is the lowest rollout protocol level among the live
	// nodes when the fleet was last counted (countFleet; this agent's own
	// level with no other node); passes only.
	fleetLevel int

	mu           sync.Mutex
	runners      map[string]*allocrunner.Runner // live (and recently finished) runners, by alloc ID
	terminal     map[string]*model.Allocation   // finished allocations kept for the reconciler
	stopping     map[string]bool                // stop requested by a pass
	storedRev    map[string]uint64              // job key → revision of the stored last good job
	lastGood     map[string]*state.JobRecord    // job key → last good job from the state store
	jobsToSave   map[string]*state.JobRecord    // queued for the state store
	saveJobs     chan struct{}
	starts       allocrunner.Starts     // this agent's driver starts in flight (StartsFirst)
	rolloutQueue map[string]rolloutWork // job key → newest rollout work
	rolloutWake  chan struct{}
	// sumQueue holds, per job key, the newest rollout summary to write;
	// the summary writer (summaryLoop) takes it. sumLast is the last
	// summary it wrote per job key.
	sumQueue       map[string]*model.RolloutSummary
	sumWake        chan struct{}
	sumLast        map[string]*model.RolloutSummary
	slotsHeld      map[string]heldSlot     // slot key → a slot this agent took that the view may not show yet
	slotsGone      map[string]uint64       // slot key → revision this agent released (hidden until the view catches up)
	slotsReleasing map[string]uint64       // slot key → revision queued for release (hidden from later passes)
	released       map[string]releasedHint // slot key → a release its holder told this node of (handoff.go)
	// slotsToCheck are slot keys a summary lists as held by this node
	// that its memory does not hold (a take whose answer was lost): the
	// rollout writer reads each and adopts one this boot took
	// (checkOwnSlots); ownSlotsSeen remembers the summary each was last
	// checked for, so that one summary asks once.
	slotsToCheck   map[string]bool
	ownSlotsSeen   map[string]time.Time
	firstSeen      map[string]time.Time            // "<job key>@<version>" → when first planned (the creator's rank delay)
	dueSince       map[string]map[string]time.Time // job key → steward duty → when first due here (deputies)
	versions       map[string]*model.Job           // job_versions key → recorded version (immutable, cached)
	reconnectedAt  time.Time                       // server time of the last reconnect to NATS (the disruption guard)
	lossWork       *rollout.LossDecision           // the last pass's loss verdicts, for the worker
	bootID         string
	depWritten     map[string]map[string]writtenDep // job key → deployment ID → as this agent last wrote it
	sumWritten     map[string]*model.RolloutSummary // job key → the rollout summary this agent last wrote (until the view shows it)
	watchJobs      map[string]bool                  // job key → this node watches the job's allocations on every node (under passMu)
	aheadJobs      map[string]bool                  // job key → it does so only for the next version's ranking (rollout.WatchRoles; under passMu)
	watchFilters   []string                         // the allocation filters last set, nil: the whole bucket (under passMu)
	slotJobs       map[string]bool                  // job key → this narrowed node watches the job's update slots (under passMu)
	slotsChecked   map[string]bool                  // job key → a pass has seen the job's slots whole since the start (under passMu)
	rolloutFilters []string                         // the rollout-bucket filters last set, nil: the whole bucket (under passMu)
	narrowNow      bool                             // the allocation watch is narrowed (under passMu)
	fleetFacts     hostnode.FleetFacts              // the fleet as the last pass counted it (under mu)
	allocKick      map[string]uint64                // alloc ID → planSig of its last write that kicked a pass
	driverUse      map[string]int                   // driver name → tasks of live runners using it
	rejectionsGen  uint64                           // view generation status.Rejections was computed from
	ownJobs        map[string]map[string]struct{}   // job key → IDs of this node's allocations (runners and finished)
	ownOrder       map[string][]string              // job key → those IDs by name, then ID (ownOf's order), when known
	ownEpoch       uint64                           // bumped by every add to or removal from ownJobs
	ownDirty       map[string]bool                  // job keys whose allocations here, or deployments written by this agent, changed since the last pass
	index          viewIndex                        // the pass's index of the view (under passMu)
	restoreErr     error
	status         Status

	// allocsWide, rolloutWide: narrowed, but the kind is watched whole
	// for its many per-job filters (manyJobFilters; under passMu).
	allocsWide, rolloutWide bool
	// deputyLast: the jobs whose other nodes' changes this node decides
	// on a timer (an idle deputy, a steward under the handoff, a waiter
	// that watches only for the next version), as last decided, with that
	// decision (other nodes' changes wait for its next timed one; under
	// passMu).
	deputyLast map[string]deputyDecision
	// paced is deputyLast as the last pass left it, each job with the
	// time of its next timed decision: Run's wait reads it (waitsUntil)
	// while no pass holds passMu. pacedDirty are the jobs whose entry in
	// deputyLast changed since it was published (setDeputy, dropDeputy);
	// pacedOffset is the wall clock less the agent's when its base was
	// built, pacedAhead whether that build held aheadJobs (notePaced).
	paced       atomic.Pointer[pacedJobs]
	pacedDirty  map[string]bool
	pacedOffset time.Duration
	pacedAhead  bool

	passMu    sync.Mutex
	kick      chan struct{}
	kickWhy   atomic.Pointer[string] // the cause of the last kick (Status.PassCauses)
	wakes     map[string]*jobWake    // job key → its one pending wake-up (wakeFor; under mu)
	writer    *statusWriter
	bg        sync.WaitGroup
	opCtx     context.Context // for stops and writes started by passes
	opStop    context.CancelFunc
	passSeq   uint64
	decisions uint64            // Status.Decisions (passMu)
	lastSig   map[string]uint64 // job key → signature when it last converged (passMu)
	// unsettled are the jobs the last pass looked at that did not converge
	// (not in lastSig): with the changed ones, all an incremental pass
	// looks at (nil until a pass has walked every job; passMu). visited is
	// that pass's scratch set.
	unsettled, visited map[string]struct{}
	// cutChecked is the source generation up to which the pass under way
	// has looked for a new declaration (declarationWaiting; passMu).
	cutChecked uint64
	// retryAt: when a job waiting on the clock is planned again. A job
	// whose only work left is a wait (Decision.RetryIn: a summary held
	// back, a creator's delay) or the completion verdict keeps its
	// signature in lastSig until then; an idle deputy's decision put off
	// (deputyLast) is made then. The first pass at or after it forgets
	// the signature (passMu).
	retryAt map[string]time.Time
	// runnersDone counts the runners whose Done closed (their OnDone);
	// collectedDone is its value when a pass last walked the runners for
	// finished ones, and doneUnfinished whether that walk left a runner
	// done but not terminal (detached) (passMu). A pass walks them only
	// when one of these says it may find something, or on a full pass.
	runnersDone    atomic.Uint64
	collectedDone  uint64
	doneUnfinished bool
	// pruned is when a pass last walked the job-keyed maps above for
	// gone jobs' keys (passMu).
	pruned pruneMark

	echoes ownEchoes // this agent's own writes, to recognise their echo
	// ownKeysGen is the view generation checkOwnKeys last read (0: none:
	// the first pass checks every key of this node).
	ownKeysGen uint64
	// localPlans counts the plans made from this node's allocations and
	// the job's record alone (reconcile.ReconcileLocal).
	localPlans atomic.Uint64
}

// New builds an agent; call Restore, then Run.
func New(cfg Config) (*Agent, error) {
	if cfg.Node == nil || cfg.Source == nil || cfg.Store == nil || cfg.Drivers == nil {
		return nil, errors.New("agent: Node, Source, Store and Drivers are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = nopMetrics{}
	}
	if cfg.Completion == nil {
		cfg.Completion = reconcile.DefaultCompletion{}
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 5 * time.Second
	}
	n := cfg.Node()
	if n == nil || n.ID == "" {
		return nil, errors.New("agent: node record without an ID")
	}
	opCtx, opStop := context.WithCancel(context.Background())
	a := &Agent{
		cfg:            cfg,
		log:            cfg.Logger.With("node_id", n.ID),
		nodeID:         n.ID,
		runners:        map[string]*allocrunner.Runner{},
		terminal:       map[string]*model.Allocation{},
		stopping:       map[string]bool{},
		storedRev:      map[string]uint64{},
		lastGood:       map[string]*state.JobRecord{},
		jobsToSave:     map[string]*state.JobRecord{},
		saveJobs:       make(chan struct{}, 1),
		rolloutQueue:   map[string]rolloutWork{},
		slotsHeld:      map[string]heldSlot{},
		slotsGone:      map[string]uint64{},
		slotsReleasing: map[string]uint64{},
		slotsToCheck:   map[string]bool{},
		ownSlotsSeen:   map[string]time.Time{},
		firstSeen:      map[string]time.Time{},
		dueSince:       map[string]map[string]time.Time{},
		versions:       map[string]*model.Job{},
		bootID:         cfg.BootID,
		lastSig:        map[string]uint64{},
		visited:        map[string]struct{}{},
		retryAt:        map[string]time.Time{},
		depWritten:     map[string]map[string]writtenDep{},
		sumWritten:     map[string]*model.RolloutSummary{},
		watchJobs:      map[string]bool{},
		aheadJobs:      map[string]bool{},
		deputyLast:     map[string]deputyDecision{},
		pacedDirty:     map[string]bool{},
		slotJobs:       map[string]bool{},
		slotsChecked:   map[string]bool{},
		allocKick:      map[string]uint64{},
		driverUse:      map[string]int{},
		ownJobs:        map[string]map[string]struct{}{},
		ownDirty:       map[string]bool{},
		released:       map[string]releasedHint{},
		rolloutWake:    make(chan struct{}, 1),
		sumQueue:       map[string]*model.RolloutSummary{},
		sumWake:        make(chan struct{}, 1),
		sumLast:        map[string]*model.RolloutSummary{},
		kick:           make(chan struct{}, 1),
		wakes:          map[string]*jobWake{},
		opCtx:          opCtx,
		opStop:         opStop,
	}
	a.writer = newStatusWriter(cfg.Allocs, a.log)
	a.writer.written = a.echoes.add
	a.echoes.writing = func(id string) bool { _, busy := a.writer.keyState(id); return busy }
	a.echoes.nodePrefix = n.ID + "."
	// The whole bucket until a pass has counted the fleet (a large
	// fleet's agent pulls every allocation once, at its start), unless
	// told to narrow whatever the size.
	a.narrowNow = a.filtered() && cfg.NarrowAbove < 0
	a.setFilters()
	cfg.Metrics.CountAllocsWith(a.countByStatus)
	return a, nil
}

// NodeID is this node's ID.
func (a *Agent) NodeID() string { return a.nodeID }

// Kick asks for a pass; bursts coalesce into one.
func (a *Agent) Kick() { a.KickFor("kick") }

// KickFor is Kick, with why: the pass's cause in Status.PassCauses (of a
// burst, the last one's).
func (a *Agent) KickFor(why string) {
	a.kickWhy.Store(&why)
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// runnerNode is the node record a new runner is given (what its tasks'
// environment and mounts read): the pass's own, or outside a pass a fresh
// one. A runner only reads it, so runners share one record while the node
// changes nothing but its heartbeat time: a node running a thousand
// allocations holds one copy of its attributes, not one per runner
// (BENCHMARKS.md, "Agent memory per allocation in dev mode").
func (a *Agent) runnerNode() *model.Node {
	n := a.passNode.Load()
	if n == nil {
		n = a.cfg.Node()
	}
	a.runnersNodeMu.Lock()
	defer a.runnersNodeMu.Unlock()
	if p := a.runnersNode; p != nil && (p == n || model.SameButHeartbeat(p, n)) {
		a.passNode.CompareAndSwap(n, p) // the pass's next runners find it at once
		return p
	}
	a.runnersNode = n
	return n
}

func (a *Agent) newRunner(alloc *model.Allocation, job *model.Job, handles map[string]*driver.TaskHandle) *allocrunner.Runner {
	return allocrunner.New(allocrunner.Config{
		Alloc:     alloc,
		Job:       job,
		Node:      a.runnerNode(),
		Drivers:   a.cfg.Drivers,
		Validate:  a.cfg.Validate,
		Starts:    &a.starts,
		Store:     a.cfg.Store,
		AllocRoot: a.cfg.AllocRoot,
		Handles:   handles,
		Ports:     a.cfg.Ports,
		Vars:      a.cfg.Vars,
		Services:  a.cfg.Services,
		Catalog:   a.cfg.Catalog,
		OnUpdate:  a.onAllocUpdate,
		OnDone:    func() { a.runnersDone.Add(1) },
		Logger:    a.cfg.Logger,
		Now:       a.cfg.Now,
	})
}

func (a *Agent) onAllocUpdate(al *model.Allocation) {
	a.writer.enqueue(al)
	s := planSig(al)
	a.mu.Lock()
	prev, seen := a.allocKick[al.ID]
	if _, live := a.runners[al.ID]; live {
		// Only while it is a runner: a stopped runner reports once more
		// after its goroutines end, and a pass may have collected it
		// meanwhile (collectFinished drops its record; kept here, the
		// record would stay for the agent's life).
		a.allocKick[al.ID] = s
	}
	a.ownDirty[wanted.JobKey(al.Namespace, al.JobID)] = true
	a.mu.Unlock()
	if !seen || prev != s {
		a.KickFor(kickOwnStatus)
	}
}

// useDriversLocked counts (delta 1) or uncounts (-1) the drivers of a
// runner's tasks, so that the fail-closed check asks only the drivers in use
// without walking every runner on every pass. A runner's drivers never
// change: an in-place update keeps its tasks.
func (a *Agent) useDriversLocked(job *model.Job, group string, delta int) {
	g := groupOf(job, group)
	if g == nil {
		return
	}
	for _, t := range g.Tasks {
		if a.driverUse[t.Driver] += delta; a.driverUse[t.Driver] <= 0 {
			delete(a.driverUse, t.Driver)
		}
	}
}

// planSig summarises what of one of this node's allocations a reconcile
// pass and the deployment worker read (its status, intent, deployment
// standing, version, place). A runner write that changes none of it (a task
// event, a restart count, a task's start time) kicks no pass: every pass
// would find the same plan. Such a write still moves the allocation's
// ModifyTime, so the next pass that runs for any reason reconciles the job.
func planSig(al *model.Allocation) uint64 {
	h := hashString(string(al.ClientStatus) + "|" + string(al.DesiredStatus) + "|" + al.DeploymentID + "|" + al.Name + "|" + al.TaskGroup + "|" + al.NodeID)
	h ^= mix(al.JobVersion)
	if ds := al.DeploymentStatus; ds != nil {
		v := uint64(1)
		if ds.Canary {
			v |= 2
		}
		if ds.Healthy != nil {
			v |= 4
			if *ds.Healthy {
				v |= 8
			}
		}
		h ^= mix(v) * 3
	}
	if m := al.DesiredTransition.Migrate; m != nil {
		h ^= mix(5) * 7
		if *m {
			h ^= mix(6) * 7
		}
	}
	return h
}

// Restore loads every allocation from the state store and reattaches to the
// tasks of those whose intent is run (RecoverTask, never StartTask). It must
// run before the first pass. An unreadable store is returned and also makes
// every pass fail closed until a later Restore succeeds.
func (a *Agent) Restore(ctx context.Context) error {
	recs, err := a.cfg.Store.Allocs()
	if err == nil {
		var jobs map[string]*state.JobRecord
		jobs, err = a.cfg.Store.Jobs()
		if err == nil {
			a.mu.Lock()
			for _, r := range jobs {
				k := wanted.JobKey(r.Job.Namespace, r.Job.ID)
				a.lastGood[k] = r
				a.storedRev[k] = r.Revision
			}
			a.mu.Unlock()
		}
	}
	if err != nil {
		a.mu.Lock()
		a.restoreErr = err
		a.mu.Unlock()
		a.log.Error("restoring state: the node cannot enumerate its allocations; failing closed", "err", err)
		return fmt.Errorf("restoring state: %w", err)
	}
	reattached, finished := 0, 0
	for _, r := range recs {
		al := r.Alloc
		a.mu.Lock()
		_, known := a.runners[al.ID]
		_, knownDone := a.terminal[al.ID]
		a.mu.Unlock()
		if known || knownDone {
			continue // restored by an earlier, partly failed Restore
		}
		if al.ClientStatus.Terminal() || r.Job == nil {
			a.mu.Lock()
			a.terminal[al.ID] = al
			a.ownJobAddLocked(wanted.JobKey(al.Namespace, al.JobID), al.ID)
			a.mu.Unlock()
			finished++
			continue
		}
		handles, err := a.cfg.Store.Handles(al.ID)
		if err != nil {
			a.mu.Lock()
			a.restoreErr = err
			a.mu.Unlock()
			return fmt.Errorf("restoring handles of %s: %w", al.ID, err)
		}
		run := a.newRunner(al, r.Job, handles)
		a.mu.Lock()
		a.runners[al.ID] = run
		a.useDriversLocked(r.Job, al.TaskGroup, 1)
		a.ownJobAddLocked(wanted.JobKey(al.Namespace, al.JobID), al.ID)
		a.mu.Unlock()
		run.Run()
		reattached++
		if r.Intent == model.DesiredStop {
			a.stopAsync(run, "stop in progress before the agent restarted")
		}
	}
	a.mu.Lock()
	a.restoreErr = nil
	a.mu.Unlock()
	a.log.Info("restored state", "allocs_reattached", reattached, "allocs_finished", finished)
	return nil
}

// kickCoalesce is how long a kick for this node's own work waits for the
// next one before its pass: the rollout loop's writes made ("kick: rollout
// writes made") and a change of an allocation's status here ("kick: an
// allocation's status here") come in bursts after a start (the running
// record, the deployment's creation, its clock, the health, the summary),
// and each made a pass of its own: 4.9 passes per put in the back-to-back
// put → start benchmark at 500 jobs, 1.9 with them coalesced (BENCHMARKS.md).
// Any other cause (a declaration, another node's change, a timer, the
// resync) passes at once and takes the waiting kicks with it.
const kickCoalesce = time.Millisecond

// The causes of the kicks that wait kickCoalesce.
const (
	kickOwnStatus     = "kick: an allocation's status here"
	kickRolloutWrites = "kick: rollout writes made"
)

// coalescedKick reports whether a kick of this cause waits kickCoalesce.
func coalescedKick(cause string) bool { return cause == kickOwnStatus || cause == kickRolloutWrites }

// Run runs the loop until ctx ends: it waits for the fleet view's first
// complete pull, then passes on every change. It returns ctx's error.
func (a *Agent) Run(ctx context.Context) error {
	defer a.listenReleases()()
	a.bg.Add(4)
	go func() {
		defer a.bg.Done()
		a.writer.run(a.opCtx)
	}()
	go func() {
		defer a.bg.Done()
		a.rolloutLoop(a.opCtx)
	}()
	go func() {
		defer a.bg.Done()
		a.summaryLoop(a.opCtx)
	}()
	go func() {
		defer a.bg.Done()
		a.saveJobsLoop(a.opCtx)
	}()
	select {
	case <-a.cfg.Source.Synced():
	case <-ctx.Done():
		return ctx.Err()
	}
	tick := time.NewTicker(a.cfg.Resync)
	defer tick.Stop()
	full := true
	cause := "start"
	for {
		began := time.Now()
		a.countCause(cause)
		a.pass(ctx, full)
		full = false
		// Changes that can wait (waitsUntil: other nodes' records, and
		// other nodes' allocations and slots of jobs decided on a timer)
		// wait for due.
		var due *time.Timer
		var dueC <-chan time.Time
		var dueAt time.Time
		dueWhy := ""
		var coalesce <-chan time.Time // kicks for own work wait for it (kickCoalesce)
	wait:
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-coalesce:
				break wait
			case <-a.kick:
				cause = "kick"
				if p := a.kickWhy.Load(); p != nil {
					cause = *p
				}
				if coalescedKick(cause) {
					if coalesce == nil {
						coalesce = time.After(kickCoalesce)
					}
					continue
				}
				break wait
			case <-a.cfg.Source.Changed():
				echoes, why := a.echoes.onlyEchoes(a.cfg.Source)
				if echoes {
					continue // only this agent's own writes came back
				}
				now := time.Now()
				if at, what, ok := a.echoes.waitsUntil(a.cfg.Source, a.nodeID, began.Add(nodeChangeEvery), a.paced.Load(), now); ok && at.After(now) {
					if due == nil || at.Before(dueAt) {
						if due != nil {
							due.Stop()
						}
						due = time.NewTimer(at.Sub(now))
						dueC, dueAt, dueWhy = due.C, at, what
					}
					continue // read by the pass then
				}
				cause = "change: " + why
				break wait
			case <-dueC:
				cause = dueWhy
				break wait
			case <-tick.C:
				full = true
				cause = "resync"
				break wait
			}
		}
		if due != nil {
			due.Stop()
		}
	}
}

// Shutdown ends the agent's work. With stopTasks (dev mode) every
// allocation is stopped; otherwise runners detach and the tasks keep running
// for the next agent to reattach. Pending status writes are flushed within
// ctx.
func (a *Agent) Shutdown(ctx context.Context, stopTasks bool) {
	a.passMu.Lock()
	defer a.passMu.Unlock()
	a.mu.Lock()
	runners := a.runnerListLocked()
	a.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if stopTasks {
				if err := r.Stop(ctx, "agent shut down in dev mode"); err != nil {
					a.log.Error("stopping allocation at shutdown", "alloc_id", r.ID(), "err", err)
				}
			} else {
				r.Detach()
			}
		}()
	}
	wg.Wait()
	a.writer.flush(ctx)
	a.opStop()
	a.bg.Wait()
}

// Status is what the agent reports through the API.
type Status struct {
	NodeID string `json:"node_id"`
	// FailedClosed is set while passes refuse to act, with the reason.
	FailedClosed string    `json:"failed_closed,omitempty"`
	LastPass     time.Time `json:"last_pass,omitzero"`
	LastPassMS   float64   `json:"last_pass_ms"`
	Passes       uint64    `json:"passes"`
	// Decisions counts the jobs decided over all passes (planned and
	// judged by the rollout core); a job a pass skips because its inputs
	// did not change since it converged is not one.
	Decisions uint64 `json:"decisions"`
	// PassMS is the wall time of every pass so far, in all; PassCPUMS
	// their CPU time on their thread (measured with Config.PassCPU only).
	PassMS    float64 `json:"pass_ms_total"`
	PassCPUMS float64 `json:"pass_cpu_ms_total,omitempty"`
	// PassCauses counts the passes of the loop by what made each: a
	// change read from the fleet view (its kind, and for allocations
	// whose), a kick (and its source), a timer, the resync period.
	PassCauses map[string]uint64 `json:"pass_causes,omitempty"`
	LastCounts Counts            `json:"last_counts"`
	// Errors are the per-allocation errors of the last pass.
	Errors []string `json:"errors,omitempty"`
	// HandoffsSent counts the release hints this agent sent to the waiter
	// a summary queued on a slot it released or reclaimed; HandoffsHeard
	// those it was sent; HandoffTakes its slot takes made on a hint (the
	// slot handoff, rollout.HandoffProtocol).
	HandoffsSent  uint64 `json:"handoffs_sent,omitempty"`
	HandoffsHeard uint64 `json:"handoffs_heard,omitempty"`
	HandoffTakes  uint64 `json:"handoff_takes,omitempty"`
	// HandoffWaitMS sums, over the takes made on a hint, the time from
	// the hint's arrival to the take's Create (this node's pass and its
	// rollout writer ahead of it).
	HandoffWaitMS float64 `json:"handoff_wait_ms,omitempty"`
	// DeploymentErrors are the errors of the last deployment writes.
	DeploymentErrors []string `json:"deployment_errors,omitempty"`
	// Orphaned are job keys whose key vanished while allocations run.
	Orphaned   []string           `json:"orphaned,omitempty"`
	Rejections []wanted.Rejection `json:"rejections,omitempty"`
	// ForeignWrites counts this node's allocation keys found holding what
	// it did not write, and corrected (since the agent started).
	ForeignWrites uint64 `json:"foreign_writes,omitempty"`
	// LocalPlans counts the plans made from this node's allocations and the
	// job's record alone, without the fleet view (reconcile.ReconcileLocal).
	LocalPlans uint64 `json:"local_plans"`
	// RolloutWrites are the shared rollout writes this agent made, by kind
	// (transition, create with its canary choice, release, take, verdict,
	// summary): how many, and how long they took. All but the summaries
	// are made one after the other by one worker, so their times add up to
	// how late the last of a pass's writes lands; summaries have a writer
	// of their own.
	RolloutWrites map[string]WriteTimes `json:"rollout_writes,omitempty"`
}

// WriteTimes counts one kind of write and its time.
type WriteTimes struct {
	Count   uint64  `json:"count"`
	TotalMS float64 `json:"total_ms"`
	MaxMS   float64 `json:"max_ms"`
}

// Counts are a pass's numbers, logged with the same keys every time.
type Counts struct {
	Jobs          int `json:"jobs"`
	Place         int `json:"place"`
	Update        int `json:"update"`
	InPlace       int `json:"in_place"`
	Stop          int `json:"stop"`
	Migrate       int `json:"migrate"`
	Lost          int `json:"lost"`
	Disconnecting int `json:"disconnecting"`
	Reconnecting  int `json:"reconnecting"`
	Ignore        int `json:"ignore"`
	Awaiting      int `json:"awaiting_promotion"`
	// Held counts placements not made because the previous allocation of
	// the same version failed here (its restart policy gave up).
	Held int `json:"held"`
	// FenceHeld counts jobs this node plans nothing for: a deployment
	// record newer than its job view, or one it cannot follow (rollout.md I3).
	FenceHeld int `json:"fence_held"`
	// WatchHeld counts jobs this node, a steward or creator candidate,
	// waits on until its pull of the job's allocations on every node is
	// complete (docs/rollout.md, "Who watches what").
	WatchHeld int `json:"watch_held"`
	// Skipped counts jobs an incremental pass left alone: nothing they
	// depend on changed since they last converged.
	Skipped int `json:"skipped"`
	// Deferred counts jobs a pass left to the next one: it gave way to a
	// job's declaration put while it ran (passSlice).
	Deferred int `json:"deferred,omitempty"`
	// PolicyHeld counts jobs held because a policy they name is still
	// loading (Config.PolicyPending).
	PolicyHeld int `json:"policy_held"`
	Errors     int `json:"errors"`
}

// Status returns the agent's status.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.status
	s.NodeID = a.nodeID
	s.Errors = append([]string(nil), s.Errors...)
	s.RolloutWrites = maps.Clone(s.RolloutWrites)
	s.PassCauses = maps.Clone(s.PassCauses)
	return s
}

// countCause counts one pass of the loop made for why (Status.PassCauses).
func (a *Agent) countCause(why string) {
	a.cfg.Metrics.CountPassCause(why)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.status.PassCauses == nil {
		a.status.PassCauses = map[string]uint64{}
	}
	a.status.PassCauses[why]++
}

// timeWrite adds one rollout write of kind, begun at start, to the status.
func (a *Agent) timeWrite(kind string, start time.Time) {
	ms := float64(time.Since(start).Microseconds()) / 1000
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.status.RolloutWrites == nil {
		a.status.RolloutWrites = map[string]WriteTimes{}
	}
	w := a.status.RolloutWrites[kind]
	w.Count++
	w.TotalMS += ms
	w.MaxMS = max(w.MaxMS, ms)
	a.status.RolloutWrites[kind] = w
}

// Allocs returns this node's allocations as it knows them (live runners and
// finished ones), sorted by ID. The values are shared snapshots: callers
// must not modify them.
func (a *Agent) Allocs() []*model.Allocation {
	out := a.ownAllocs()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// AllocDir returns an allocation's directory on this node.
func (a *Agent) AllocDir(allocID string) string {
	a.mu.Lock()
	r := a.runners[allocID]
	a.mu.Unlock()
	if r != nil {
		return r.AllocDir()
	}
	return a.cfg.AllocRoot + "/" + allocID
}

func (a *Agent) stopAsync(r *allocrunner.Runner, reason string) {
	a.mu.Lock()
	if a.stopping[r.ID()] {
		a.mu.Unlock()
		return
	}
	a.stopping[r.ID()] = true
	a.mu.Unlock()
	a.bg.Add(1)
	go func() {
		defer a.bg.Done()
		if err := r.Stop(a.opCtx, reason); err != nil {
			a.log.Error("stopping allocation", "alloc_id", r.ID(), "err", err)
		}
		a.KickFor("kick: an allocation stopped")
	}()
}
