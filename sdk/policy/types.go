package policy

import (
	"strings"
	"time"

	"github.com/hivelet/hivelet/internal/policywire"
)

// ABIVersion is the version of the module ABI this SDK implements
// (docs/policy-abi.md). Version 2 added the completion input's disruption
// and per-group loss counts; an agent implementing version 2 still runs
// modules built for version 1, and refuses any other version.
const ABIVersion = 2

// Node is one eligible node of a canary decision. ID is always sent; Name,
// Datacenter, NodePool and Class only when the policy declared them
// (Fields), otherwise they are empty.
type Node struct {
	ID         string
	Name       string
	Datacenter string
	NodePool   string
	Class      string

	// keys are the attribute and meta keys the agent sent and every node's
	// values for them, shared by the nodes of one input; off is where this
	// node's values start in keys.Vals.
	keys *policywire.Tables
	off  int32
}

func (n *Node) lookup(keys []string, base int, key string) (string, bool) {
	for i, k := range keys {
		if k == key {
			j := int(n.off) + base + i
			return n.keys.Vals[j], n.keys.Has[j]
		}
	}
	return "", false
}

// Attribute returns the node attribute key (e.g. "kernel.name"). A key the
// policy did not declare is reported absent even if the node has it.
func (n *Node) Attribute(key string) (string, bool) {
	if n.keys == nil {
		return "", false
	}
	return n.lookup(n.keys.Attr, 0, key)
}

// Meta returns the node meta key. A key the policy did not declare is
// reported absent.
func (n *Node) Meta(key string) (string, bool) {
	if n.keys == nil {
		return "", false
	}
	return n.lookup(n.keys.Meta, len(n.keys.Attr), key)
}

// NormalizeField turns a node field reference as job files write it into
// the SDK's form: Nomad interpolations "${node.datacenter}",
// "${node.unique.name}", "${node.class}", "${node.pool}", "${attr.K}" and
// "${meta.K}" become "datacenter", "name", "class", "node_pool", "attr.K"
// and "meta.K"; the SDK's own forms are returned unchanged.
func NormalizeField(ref string) string {
	if strings.HasPrefix(ref, "${") && strings.HasSuffix(ref, "}") {
		ref = ref[2 : len(ref)-1]
	}
	switch ref {
	case "node.unique.name":
		return "name"
	case "node.unique.id":
		return "id"
	case "node.pool":
		return "node_pool"
	}
	if r, ok := strings.CutPrefix(ref, "node."); ok {
		return r
	}
	return ref
}

// Field resolves a node field reference: "id", "name", "datacenter",
// "node_pool", "class", "attr.<key>" or "meta.<key>" (or a Nomad
// interpolation of one, see NormalizeField). Policies that let operators
// choose the field by a parameter declare it with FieldFromParam.
func (n *Node) Field(ref string) (string, bool) {
	ref = NormalizeField(ref)
	sent := func(bit byte) bool { return n.keys != nil && n.keys.Fields&bit != 0 }
	switch ref {
	case "id":
		return n.ID, true
	case "name":
		return n.Name, sent(policywire.FieldName)
	case "datacenter":
		return n.Datacenter, sent(policywire.FieldDatacenter)
	case "node_pool":
		return n.NodePool, sent(policywire.FieldNodePool)
	case "class":
		return n.Class, sent(policywire.FieldClass)
	}
	if k, ok := strings.CutPrefix(ref, "meta."); ok {
		return n.Meta(k)
	}
	if k, ok := strings.CutPrefix(ref, "attr."); ok {
		return n.Attribute(k)
	}
	return "", false
}

// FieldGetter resolves a node field reference (as Node.Field takes it)
// once, and returns a function reading that field from a node of this
// input: faster than Node.Field in a loop over many nodes.
func (in *CanaryInput) FieldGetter(ref string) func(n *Node) (string, bool) {
	ref = NormalizeField(ref)
	switch ref {
	case "id", "name", "datacenter", "node_pool", "class":
		return func(n *Node) (string, bool) { return n.Field(ref) }
	}
	var keys []string
	base := 0
	key, ok := strings.CutPrefix(ref, "meta.")
	if len(in.Nodes) > 0 && in.Nodes[0].keys != nil {
		t := in.Nodes[0].keys
		keys = t.Attr
		if ok {
			keys, base = t.Meta, len(t.Attr)
		}
	}
	if !ok {
		if key, ok = strings.CutPrefix(ref, "attr."); !ok {
			return func(*Node) (string, bool) { return "", false }
		}
	}
	for i, k := range keys {
		if k == key {
			j := base + i
			return func(n *Node) (string, bool) {
				if n.keys != in.Nodes[0].keys {
					return n.Field(ref) // a node built elsewhere: resolve it slowly
				}
				return n.keys.Vals[int(n.off)+j], n.keys.Has[int(n.off)+j]
			}
		}
	}
	return func(n *Node) (string, bool) {
		if len(in.Nodes) > 0 && n.keys != in.Nodes[0].keys {
			return n.Field(ref)
		}
		return "", false
	}
}

// NewNode builds a node for native tests of a policy. Its attributes and
// meta are all visible, as if the policy had declared every key.
func NewNode(id, name, datacenter, nodePool, class string, attributes, meta map[string]string) Node {
	t := &policywire.Tables{Fields: policywire.FieldAll}
	for k, v := range attributes {
		t.Attr = append(t.Attr, k)
		t.Vals = append(t.Vals, v)
		t.Has = append(t.Has, true)
	}
	for k, v := range meta {
		t.Meta = append(t.Meta, k)
		t.Vals = append(t.Vals, v)
		t.Has = append(t.Has, true)
	}
	return Node{ID: id, Name: name, Datacenter: datacenter, NodePool: nodePool, Class: class, keys: t}
}

// CanaryInput is the input of a canary decision.
type CanaryInput struct {
	JobID        string
	JobVersion   uint64
	DeploymentID string
	Group        string
	// Percent is the group's update.canary; Count is how many more canary
	// nodes are asked for (the existing ones are already kept).
	Percent int
	Count   int
	// Params are the job's parameters for this policy.
	Params map[string]string
	// Nodes are the eligible nodes (ready, not yet canaries), sorted by ID.
	Nodes []Node
	// Existing are the node IDs already chosen as canaries, sorted.
	Existing []string
}

// Param returns the parameter key, or def when it is not set.
func Param(params map[string]string, key, def string) string {
	if v, ok := params[key]; ok {
		return v
	}
	return def
}

// CanaryOutput is the answer of a canary decision: at most Count IDs of
// eligible nodes, no duplicates. Fewer than Count requires a Reason.
type CanaryOutput struct {
	NodeIDs []string
	Reason  string
}

// CompletionInput is the input of a completion decision.
type CompletionInput struct {
	DeploymentID string
	JobID        string
	JobVersion   uint64
	// Status is the deployment's status ("running", "paused", ...).
	Status string
	// Disruption, when not empty, says why the agent's disruption guard
	// holds: many of the job's nodes expired at once, or the asking agent
	// just reconnected. The counts of Groups then describe the nodes still
	// alive, not the rollout, and are no evidence for a verdict: the
	// built-in rules continue (neither fail nor succeed) while it is set.
	Disruption string
	// Now is the time of the decision; the module's wall clock reads it too.
	Now    time.Time
	Params map[string]string
	// Groups are the deployment's groups, sorted by name.
	Groups []Group
}

// Group is one group's deployment state and allocation health summary.
type Group struct {
	Name              string
	DesiredTotal      int
	DesiredCanaries   int
	AutoRevert        bool
	AutoPromote       bool
	Promoted          bool
	ProgressDeadline  time.Duration
	RequireProgressBy time.Time // zero: no deadline set
	Placed            int
	Healthy           int
	Unhealthy         int
	Pending           int
	CanariesHealthy   int
	// LostInFlight counts replacements whose node was lost in the middle
	// of them (its slot still held by an expired node, or an allocation at
	// the deployment's version with no health verdict on an expired node).
	// The rollout goes on without them; the built-in quorum policy can fail
	// a deployment that loses too many (max_lost_in_flight).
	LostInFlight int
	// Lost and Disconnected count the group's allocations on nodes with a
	// loss verdict: lost once the group's disconnect.lost_after has passed
	// since the node went down (at once without one), disconnected before.
	Lost         int
	Disconnected int
	// Complete reports that nothing is left to place, migrate or update for
	// the group on any node.
	Complete bool
}

// Decision is a completion verdict.
type Decision uint8

// The completion verdicts, with their wire values.
const (
	Continue Decision = 0
	Promote  Decision = 1
	Succeed  Decision = 2
	Fail     Decision = 3
)

// String returns the verdict's name as the agent spells it.
func (d Decision) String() string { return policywire.Decision(d).String() }

// ParseDecision is the inverse of Decision.String.
func ParseDecision(s string) (Decision, bool) {
	for d := Continue; d <= Fail; d++ {
		if d.String() == s {
			return d, true
		}
	}
	return 0, false
}

// CompletionOutput is the answer of a completion decision. Revert is only
// allowed with Fail.
type CompletionOutput struct {
	Decision Decision
	Revert   bool
	Reason   string
}
