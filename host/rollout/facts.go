package rollout

import (
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
)

// Protocol is the fleet rollout protocol level this package implements.
// A record of a higher level holds the job (the agent cannot follow it).
const Protocol = 1

// SummaryProtocol is the level a node advertises (model.Node's
// RolloutProtocol) when its agent, as a steward, writes the rollout
// summary: records stay at Protocol (the summary changes nothing they
// say), and an agent narrows its watches only while every live node is
// at this level, since a narrowed node depends on the steward's summary
// to be admitted.
const SummaryProtocol = 2

// BeatProtocol is the level a node advertises when, besides writing
// summaries, its agent writes its node record with a TTL of its own
// (node.Liveness): a fleet's heartbeat TTL grows with the fleet only
// while every live node is at this level, since the record of a node
// below it lives as long as the bucket's TTL, raised or not.
const BeatProtocol = 3

// AssignProtocol is the level a node advertises when its agent, besides
// the above, reads the slot indices a summary assigns to the waiters it
// admits (model.GroupSummary.Assigned) and, as a steward, writes them: a
// steward assigns only while every live node of the job is at this level,
// since an older agent decodes summaries strictly and would refuse one
// with the field.
const AssignProtocol = 4

// HandoffProtocol is the level a node advertises when its agent, besides
// the above, reads the waiters a summary queues on held slots
// (model.GroupSummary.Next), tells the queued waiter when it releases (or
// reclaims) such a slot, and takes a slot it is told of: a steward queues
// only while every live node is at this level (an older agent decodes
// summaries strictly). The handoff takes the summary's interval out of a
// slot's cycle: the next waiter takes a released slot at once instead of
// at the next summary, up to SummaryEvery later (docs/rollout.md, "The
// rollout summary").
const HandoffProtocol = 5

// Defaults of the protocol (docs/rollout.md).
const (
	// CreateStep and CreateMax: a creator of rank r waits min(r×step, max).
	CreateStep = 20 * time.Millisecond
	CreateMax  = time.Second
	// DeputyStep: deputy k acts on a decision overdue for k×step.
	DeputyStep = 2 * time.Second
	// SlotGrace is added to kill_timeout + healthy_deadline for a slot's TTL.
	SlotGrace = 30 * time.Second
	// DisruptionPercent: no verdicts and no reclaims while more than this
	// share of the job's eligible nodes expired within one node TTL.
	DisruptionPercent = 30
)

// Record is a stored deployment record and its KV revision.
type Record struct {
	D        *model.Deployment `json:"deployment"`
	Revision uint64            `json:"revision"`
	// Rejected is set when the newest value under the key could not be
	// decoded: the agent cannot follow it and holds the job.
	Rejected string `json:"rejected,omitempty"`
}

// Node is what the protocol needs to know of one node.
type Node struct {
	ID string `json:"id"`
	// Live: its heartbeat key is present (its expiry is decided by the NATS
	// server).
	Live bool `json:"live"`
	// Eligible: in the job's scope and not made ineligible or drained by
	// an operator. Eligible live nodes make up the desired totals, the
	// steward's candidates and the disruption guard's base. A node that is
	// merely not ready (a driver briefly unhealthy, initializing) stays
	// eligible: it still owes the rollout its allocations.
	Eligible bool `json:"eligible"`
	// Ready: it may receive placements now (the canary policy's candidates).
	Ready bool `json:"ready"`
	// DownSince is the server time its heartbeat key last expired: while
	// not Live, since when it is down; once back, when it was (a node that
	// expired within one TTL counts for the disruption guard either way).
	DownSince time.Time `json:"down_since,omitzero"`
	// LossRevision is the nodes-bucket revision of that expiry's marker:
	// it names the loss (one verdict per loss).
	LossRevision uint64 `json:"loss_revision,omitempty"`
	// LostSince is the "down since" of the loss verdict in force for this
	// node (zero: none): the server time its heartbeat key expired, kept by
	// the verdict after the expiry's marker is gone. With the group's
	// disconnect.lost_after it decides whether the node's allocations are
	// disconnected or lost.
	LostSince time.Time `json:"lost_since,omitzero"`
	Protocol  int       `json:"protocol,omitempty"`
	// Record is the node's record (the canary policy reads its
	// attributes); optional in fixtures.
	Record *model.Node `json:"record,omitempty"`
}

// Slot is a held update slot with its KV revision and the server time of
// its take.
type Slot struct {
	Key      string     `json:"key"`
	Revision uint64     `json:"revision"`
	Time     time.Time  `json:"time,omitzero"`
	Slot     model.Slot `json:"slot"`
}

// Facts are the inputs of one decision for one job on one node. The loop
// builds them from its view of the buckets and its own memory; Decide reads
// them and never modifies them.
type Facts struct {
	// Self is this node's ID; BootID its agent's boot.
	Self   string `json:"self"`
	BootID string `json:"boot_id,omitempty"`
	// Job is the job in force on this node (its version is what this node
	// believes is current).
	Job *model.Job `json:"job"`
	// Records are the job's deployment records, every version held.
	Records []Record `json:"records"`
	// Allocs are the job's allocations on every node (this node's from its
	// own memory, the others' as they reported them).
	Allocs []*model.Allocation `json:"allocs"`
	// Nodes are the nodes in the job's scope and those carrying its
	// allocations.
	Nodes []Node `json:"nodes"`
	// Slots are the job's held update slots (any version).
	Slots []Slot `json:"slots"`
	// OwnSlotsOnly: Slots holds only this node's own slots, from its own
	// memory (a narrowed node that does not watch the job's slot keys).
	// Admission then counts the other nodes' slots from Summary.
	OwnSlotsOnly bool `json:"own_slots_only,omitempty"`
	// Narrow: Allocs holds this node's allocations only (it does not
	// watch the job's allocations on the other nodes, Watching). Then the
	// admission order comes from Summary, and the fleet-wide duties
	// (creating the record, the steward's) are left to the nodes that
	// watch.
	Narrow bool `json:"narrow,omitempty"`
	// Summary is the job's stored rollout summary, if any (of any
	// deployment: it is used only when it names the record's).
	Summary *model.RolloutSummary `json:"summary,omitempty"`
	// Released are the slots whose release this node was told of since
	// its summary was written (model.SlotReleased: the holder's hint to
	// the waiter the summary queued on the slot), by key: the holder whose
	// take was released. Admission counts a summary's slot at such a key,
	// held by that holder, as free (admissionSlots). Only a take rests on
	// it, which is still a create-if-absent of the key (I5).
	Released map[string]string `json:"released,omitempty"`
	// Plan is the reconciler's plan for this node, made with the record of
	// the job's version as its deployment (or none).
	Plan *reconcile.Plan `json:"plan"`
	// InPlace names the allocations of Plan.Update this node can update
	// without restarting their tasks (no slot needed).
	InPlace map[string]bool `json:"in_place,omitempty"`
	// FailedHere names allocations whose restart policy gave up on this
	// node at the job's version: their names are not placed again here.
	FailedHere map[string]bool `json:"failed_here,omitempty"`
	// Now is the server time (estimated by the loop from the server
	// timestamps of the entries it receives).
	Now time.Time `json:"now"`
	// FleetProtocol is the lowest rollout protocol level among the live
	// nodes of the whole fleet, also those outside the job's scope, which
	// read its summary too (0: not known; Nodes then tell).
	FleetProtocol int `json:"fleet_protocol,omitempty"`
	// NodeTTL is the nodes bucket's TTL (the disruption guard's window).
	NodeTTL time.Duration `json:"node_ttl,omitempty"`
	// ReconnectedAt is the server time of this agent's last reconnect to
	// NATS (or of a leader change it saw); the disruption guard holds for
	// one TTL after it.
	ReconnectedAt time.Time `json:"reconnected_at,omitzero"`
	// SinceSeen is how long this agent has seen the job's version without a
	// record (the creator's rank delay counts from it).
	SinceSeen time.Duration `json:"since_seen,omitempty"`
	// Overdue is how long each steward duty (by Duty.Key) has been due on
	// this agent; a deputy acts once it is overdue long enough.
	Overdue map[string]time.Duration `json:"overdue,omitempty"`
	// Nonce is a fresh random token for the writes of this decision.
	Nonce string `json:"nonce,omitempty"`

	// Index, if set, is NewNodeIndex(Nodes) for this very slice, kept
	// by a caller that decides on one node list for many passes (it is
	// ignored for any other slice).
	Index *NodeIndex `json:"-"`

	// Indexes of Nodes and Allocs, each group's allocations (groupAllocs)
	// and the groups' waiters ranked over Slots (slotWaiters), built on
	// first use by the decision that owns this copy of the facts (never
	// shared between goroutines, and the fields they derive from never
	// changed while it is in use).
	nodeIdx     map[string]int
	allocIdx    map[string]*model.Allocation
	waitersMemo map[waitersKey][]waiter
	groupMemo   map[groupKey][]*model.Allocation
}

// Counts are a group's rollout counts, derived from the allocations and
// slots (never stored as shared counters).
type Counts struct {
	// Desired is count × the eligible live nodes.
	Desired int `json:"desired"`
	// Placed, Healthy, Unhealthy, Pending: live allocations of the
	// deployment's version (Unhealthy also counts finished ones of the
	// deployment that ended unhealthy).
	Placed    int `json:"placed"`
	Healthy   int `json:"healthy"`
	Unhealthy int `json:"unhealthy"`
	Pending   int `json:"pending"`
	// Outdated counts live allocations of older versions on live nodes.
	Outdated int `json:"outdated"`
	// DesiredCanaries is the record's; CanariesHealthy are healthy
	// allocations of the version on the canary nodes.
	DesiredCanaries int `json:"desired_canaries"`
	CanariesHealthy int `json:"canaries_healthy"`
	// InFlight counts the job group's held slots (every version);
	// ExpiredHolders those whose holder's node expired. Holders are their
	// nodes, sorted by slot index.
	InFlight       int      `json:"in_flight"`
	ExpiredHolders int      `json:"expired_holders,omitempty"`
	Holders        []string `json:"holders,omitempty"`
	// LostInFlight counts the nodes that went away in the middle of their
	// replacement: holding a slot of the group, or carrying an allocation
	// at the deployment's version without a health verdict, while not live.
	// The rollout goes on without them; the completion policy may count
	// them (quorum).
	LostInFlight int `json:"lost_in_flight"`
	// Lost and Disconnected count the job's live allocations of the group
	// on nodes that are not live: lost once a loss verdict is in force and
	// the group's disconnect.lost_after (none: at once) has passed since
	// the node went down; disconnected (status unknown) before that, or
	// while no verdict is written yet. Their nodes, sorted, in LostNodes
	// and DisconnectedNodes.
	Lost              int      `json:"lost,omitempty"`
	Disconnected      int      `json:"disconnected,omitempty"`
	LostNodes         []string `json:"lost_nodes,omitempty"`
	DisconnectedNodes []string `json:"disconnected_nodes,omitempty"`
	MaxParallel       int      `json:"max_parallel"`
	// Waiting counts outdated allocations that may take a slot now
	// (canary nodes only, before promotion).
	Waiting int `json:"waiting"`
	// Canarying: the group has canaries and is not promoted.
	Canarying bool `json:"canarying"`
	// Complete is positive evidence that the group is done: nothing
	// outdated left on any live node, nothing in flight, not canarying, and
	// at least Desired (> 0) healthy allocations of the version.
	Complete bool `json:"complete"`
	// UnhealthyNodes names the nodes of unhealthy allocations (sorted).
	UnhealthyNodes []string `json:"unhealthy_nodes,omitempty"`
}
