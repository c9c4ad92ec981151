package agent

import (
	"fmt"
	"sort"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
)

// Dry-run actions: what a node's agent would do with one allocation.
const (
	ActionPlace       = "place"
	ActionUpdate      = "update"   // destructive: stop, then place the new version
	ActionInPlace     = "in-place" // the allocation takes the new version without a restart
	ActionStop        = "stop"
	ActionMigrate     = "migrate"
	ActionIgnore      = "ignore"
	ActionAwaiting    = "awaiting promotion"
	ActionLost        = "lost"
	ActionDisconnect  = "disconnecting"
	ActionReconnected = "reconnecting"
)

// DryRunEntry is one decision of a node's dry run.
type DryRunEntry struct {
	Action string          `json:"action"`
	Entry  reconcile.Entry `json:"entry"`
}

// NodeDryRun is what one node's agent would decide for a job on its next
// pass, from the fleet's live view.
type NodeDryRun struct {
	NodeID  string        `json:"node_id"`
	Name    string        `json:"name"`
	Class   string        `json:"class"`
	Entries []DryRunEntry `json:"entries"`
}

// DryRunInput is the fleet's live view a dry run reads: the job as it
// would be written, the version in force (nil: a new job), every node,
// every allocation of the job and its deployments.
type DryRunInput struct {
	Job         *model.Job
	Running     *model.Job
	Nodes       []*model.Node
	Allocs      []*model.Allocation
	Deployments []*model.Deployment
	Now         time.Time
}

// DryRun runs, for every node in the job's scope or holding one of its
// allocations, the reconcile round that node's agent would run for the
// job: the same input (buildInput, with the node as self and its
// allocations as its own) and the same reconciler, with the default canary
// choice. An update is in place when the agent would do it in place (the
// tasks' shape is unchanged, tasksEqual), destructive otherwise. A down
// node's allocations get the fleet's decision for them (lost,
// disconnecting), under that node. DryRun is pure; the rollout core's
// pacing (max_parallel slots, canaries before the rest) decides when each
// update happens, not whether.
func DryRun(in DryRunInput) ([]NodeDryRun, error) {
	if in.Job == nil {
		return nil, fmt.Errorf("dry run: no job")
	}
	nodes := append([]*model.Node(nil), in.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	byNode := map[string][]*model.Allocation{}
	for _, a := range in.Allocs {
		if a != nil && a.JobID == in.Job.ID && a.Namespace == in.Job.Namespace {
			byNode[a.NodeID] = append(byNode[a.NodeID], a)
		}
	}
	runningGroups := map[string]*model.Group{}
	if in.Running != nil {
		for _, g := range in.Running.Groups {
			runningGroups[g.Name] = g
		}
	}
	newGroups := map[string]*model.Group{}
	for _, g := range in.Job.Groups {
		newGroups[g.Name] = g
	}
	allocByID := map[string]*model.Allocation{}
	for _, a := range in.Allocs {
		if a != nil {
			allocByID[a.ID] = a
		}
	}
	inPlace := func(e reconcile.Entry) bool {
		a := allocByID[e.AllocID]
		if a == nil || in.Running == nil || a.JobVersion != in.Running.Version {
			return false
		}
		return tasksEqual(runningGroups[e.Group], newGroups[e.Group])
	}
	out := make([]NodeDryRun, 0, len(nodes))
	nodeOf := func(id string) *NodeDryRun {
		out = append(out, NodeDryRun{NodeID: id, Entries: []DryRunEntry{}})
		return &out[len(out)-1]
	}
	for _, n := range nodes {
		if n == nil {
			continue
		}
		if !inScope(in.Job, n) && len(byNode[n.ID]) == 0 {
			continue
		}
		var others []*model.Allocation
		for id, as := range byNode {
			if id != n.ID {
				others = append(others, as...)
			}
		}
		sort.Slice(others, func(i, j int) bool { return others[i].ID < others[j].ID })
		input := buildInput(in.Job, n, byNode[n.ID], fleetFacts{Nodes: nodes, OtherAllocs: others, Deployments: in.Deployments}, in.Now, nil)
		plan, err := reconcile.ReconcileNode(input, n.ID)
		if err != nil {
			return nil, fmt.Errorf("dry run on node %s: %w", n.ID, err)
		}
		// Each node's round decides its own allocations only: a down
		// node's (lost, disconnecting) are what the fleet decides for it,
		// from the same input with the node as the one planned.
		nd := nodeOf(n.ID)
		add := func(action string, es []reconcile.Entry) {
			for _, e := range es {
				if e.NodeID != n.ID {
					continue
				}
				a := action
				if action == ActionUpdate && inPlace(e) {
					a = ActionInPlace
				}
				nd.Entries = append(nd.Entries, DryRunEntry{Action: a, Entry: e})
			}
		}
		add(ActionPlace, plan.Place)
		add(ActionUpdate, plan.Update)
		add(ActionStop, plan.Stop)
		add(ActionMigrate, plan.Migrate)
		add(ActionIgnore, plan.Ignore)
		add(ActionAwaiting, plan.AwaitingPromotion)
		add(ActionLost, plan.Lost)
		add(ActionDisconnect, plan.Disconnecting)
		add(ActionReconnected, plan.Reconnecting)
	}
	names := map[string]*model.Node{}
	for _, n := range nodes {
		names[n.ID] = n
	}
	for i := range out {
		if n := names[out[i].NodeID]; n != nil {
			out[i].Name, out[i].Class = n.Name, n.Class
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out, nil
}
