package reconcile

import (
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// Input is the fleet view a reconcile round works from. The CLI reads it
// from a fixture; the daemon builds it from the KV buckets (jobs, nodes,
// allocs, deployments), so that a single node's round still sees the
// fleet-wide facts (canary set, completion on every node).
//
// The reconciler reads Input and never modifies it.
type Input struct {
	Job *model.Job
	// ReadyNodes are the nodes eligible for the job (ready, schedulable,
	// matching datacenters, node pool and constraints). A node that is also
	// listed as not ready or tainted is treated as not ready or tainted.
	ReadyNodes []*model.Node
	// NotReadyNodes are the IDs of nodes in scope but not ready.
	NotReadyNodes []string
	// TaintedNodes maps a down, draining or disconnected node's ID to its
	// record; a nil record means the node is gone.
	TaintedNodes map[string]*model.Node
	// LiveAllocs are the job's non-terminal allocations on any node.
	LiveAllocs []*model.Allocation
	// TerminalAllocs are the latest terminal allocation per (node, name).
	// When several are given for one pair, the newest (ModifyTime, then
	// CreateTime, then ID) is used.
	TerminalAllocs []*model.Allocation
	// Deployment is the job's current deployment, or nil.
	Deployment *model.Deployment
	// Now is the time of the round; the reconciler reads no clock.
	Now time.Time
	// DisconnectHandling turns on disconnected-client handling (a group
	// must also set disconnect.lost_after > 0).
	DisconnectHandling bool
	// Canaries chooses canary nodes; nil means DefaultCanaryChooser.
	Canaries CanaryChooser
}

// Entry is one decision of a plan: an allocation (existing or new) and the
// bucket it went to.
type Entry struct {
	Name   string `json:"name"`
	Group  string `json:"group"`
	NodeID string `json:"node_id"`
	// AllocID is the allocation the decision is about: the live allocation
	// for every rule of the per-allocation table; for a placement, the new
	// allocation's ID; for a sysbatch terminal decision, the terminal one.
	AllocID string `json:"alloc_id"`
	Canary  bool   `json:"canary"`
	// Rule names the rule of docs/reconciler-rules.md that decided: "alloc.1" to
	// "alloc.14" (per live allocation), "name.1" and "name.3" (per required
	// name with no live allocation), "duplicate".
	Rule string `json:"rule"`
	// NewAllocID is the ID of the allocation that replaces AllocID (update,
	// and sysbatch re-runs). Derived, not random: see ids.go.
	NewAllocID string `json:"new_alloc_id,omitempty"`
	// PreviousAllocID is the terminal allocation a placement carries on.
	PreviousAllocID string `json:"previous_alloc_id,omitempty"`
	// JobVersion is the job version the allocation runs (existing) or will
	// run (place, update).
	JobVersion uint64 `json:"job_version"`
	// ClientStatus is the allocation's new client status, when the
	// decision changes it (disconnecting: unknown; lost: lost).
	ClientStatus model.ClientStatus `json:"client_status,omitempty"`
	// State is a transition to append to the allocation's States
	// (disconnecting: client status unknown; reconnecting: the reconnect
	// was seen).
	State *model.AllocState `json:"state,omitempty"`
	// Reason explains a decision that is not obvious from Rule (an update
	// held by a paused deployment, a duplicate stopped).
	Reason string `json:"reason,omitempty"`
}

// Plan is the output of a reconcile round. Every list is sorted by node ID,
// then name, then allocation ID.
type Plan struct {
	Place         []Entry `json:"place"`
	Update        []Entry `json:"update"`
	Migrate       []Entry `json:"migrate"`
	Stop          []Entry `json:"stop"`
	Ignore        []Entry `json:"ignore"`
	Lost          []Entry `json:"lost"`
	Disconnecting []Entry `json:"disconnecting"`
	Reconnecting  []Entry `json:"reconnecting"`
	// AwaitingPromotion lists rule 12's outdated allocations on non-canary
	// nodes: in no bucket, left running until the deployment is promoted.
	AwaitingPromotion []Entry `json:"awaiting_promotion"`

	// Deployment is the job's deployment after this round: a new one
	// (DeploymentCreated), the current one with changed state
	// (DeploymentChanged: canary nodes, desired counts), the current one
	// unchanged, or nil. Status changes are not applied to it: they are in
	// DeploymentUpdates.
	Deployment        *model.Deployment              `json:"deployment"`
	DeploymentCreated bool                           `json:"deployment_created"`
	DeploymentChanged bool                           `json:"deployment_changed"`
	DeploymentUpdates []model.DeploymentStatusUpdate `json:"deployment_updates"`

	// Groups summarises each group of the job, fleet-wide, sorted by name.
	Groups []GroupSummary `json:"groups"`
}

// GroupSummary is the fleet-wide view of one group after the round. It
// feeds the completion policy (see Health) and `hivelet job status`.
type GroupSummary struct {
	Name string `json:"name"`
	// MaxParallel is the group's update.max_parallel: the host takes an
	// update slot from the deployment before acting on an update, so at most
	// this many run at once (0: no deployment, all at once).
	MaxParallel  int `json:"max_parallel"`
	DesiredTotal int `json:"desired_total"`
	// Canary is the canary decision, when the group is canarying.
	Canary *CanaryDecision `json:"canary,omitempty"`
	// UpdatesHeld is why outdated allocations were not updated this round
	// (a paused, pending, initializing or failed deployment), if they were not.
	UpdatesHeld string `json:"updates_held,omitempty"`
	// Left counts what remains to do across all nodes.
	LeftToPlace   int `json:"left_to_place"`
	LeftToUpdate  int `json:"left_to_update"`
	LeftToMigrate int `json:"left_to_migrate"`
	Awaiting      int `json:"awaiting_promotion"`
	// Health counts the group's live allocations of the current job version
	// that stay in place this round.
	Placed          int  `json:"placed"`
	Healthy         int  `json:"healthy"`
	Unhealthy       int  `json:"unhealthy"`
	CanariesHealthy int  `json:"canaries_healthy"`
	Complete        bool `json:"complete"`
}

// CanaryDecision records how a group's canary nodes were settled.
type CanaryDecision struct {
	// Target is ceil(canary% × |ready| / 100).
	Target int `json:"target"`
	// Existing were canary nodes before the round (recorded in the
	// deployment, or carrying a canary allocation of it).
	Existing []string `json:"existing"`
	// Chosen were added this round.
	Chosen []string `json:"chosen"`
	// Nodes is the resulting canary set, recorded in the deployment.
	Nodes []string `json:"nodes"`
	// Reason is the chooser's reason for choosing fewer than asked.
	Reason string `json:"reason,omitempty"`
	// Fallback, when set, says why the chooser's answer was refused and
	// DefaultCanaryChooser's used instead; the host reports it.
	Fallback string `json:"fallback,omitempty"`
}

// Health returns the group summaries in the form the completion policy
// takes.
func (p *Plan) Health() map[string]GroupHealth {
	out := make(map[string]GroupHealth, len(p.Groups))
	for _, g := range p.Groups {
		out[g.Name] = GroupHealth{
			Placed:          g.Placed,
			Healthy:         g.Healthy,
			Unhealthy:       g.Unhealthy,
			Pending:         g.Placed - g.Healthy - g.Unhealthy,
			CanariesHealthy: g.CanariesHealthy,
			Complete:        g.Complete,
		}
	}
	return out
}

// Fixture is the JSON document `hivelet reconcile` reads (docs/reconcile.md).
type Fixture struct {
	// Comment is one sentence: what the fixture must show. The reconciler
	// does not read it; the test of examples/reconcile checks its claim.
	Comment            string                 `json:"comment,omitempty"`
	Job                *model.Job             `json:"job"`
	ReadyNodes         []*model.Node          `json:"ready_nodes"`
	NotReadyNodes      []string               `json:"not_ready_nodes"`
	TaintedNodes       map[string]*model.Node `json:"tainted_nodes"`
	LiveAllocs         []*model.Allocation    `json:"live_allocs"`
	TerminalAllocs     []*model.Allocation    `json:"terminal_allocs"`
	Deployment         *model.Deployment      `json:"deployment"`
	Now                time.Time              `json:"now"`
	DisconnectHandling bool                   `json:"disconnect_handling"`
	// NodeID, when set, runs the single-node entry point for that node.
	NodeID string `json:"node_id,omitempty"`
}

// Input returns the reconciler input of the fixture (default canary chooser).
func (f *Fixture) Input() Input {
	return Input{
		Job:                f.Job,
		ReadyNodes:         f.ReadyNodes,
		NotReadyNodes:      f.NotReadyNodes,
		TaintedNodes:       f.TaintedNodes,
		LiveAllocs:         f.LiveAllocs,
		TerminalAllocs:     f.TerminalAllocs,
		Deployment:         f.Deployment,
		Now:                f.Now,
		DisconnectHandling: f.DisconnectHandling,
	}
}
