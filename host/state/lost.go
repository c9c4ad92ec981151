package state

import "fmt"

// Traces is what, outside the store, says whether this node ran
// allocations before: read by the agent's boot path, judged by LostState.
type Traces struct {
	// StoreFresh: this Open created the store (Store.Fresh).
	StoreFresh bool
	// StoreAllocs is how many allocation records the store holds.
	StoreAllocs int
	// NodeIDFile is the node ID file's path if it existed before this
	// start (it is written once, at the node's first start, beside the
	// store), else "".
	NodeIDFile string
	// AllocDirs are the allocation directories found under the node's
	// allocation directory.
	AllocDirs []string
	// PluginSockets are the reattach sockets of driver plugins a previous
	// start left (they outlive the agent by design).
	PluginSockets []string
	// FleetAllocs are the keys of this node's allocations in NATS that are
	// not terminal.
	FleetAllocs []string
}

// LostState says why a store that holds no allocation must not be taken
// for a new node: each reason is one trace of allocations the store has
// forgotten. Starting on it would place them again beside the tasks still
// running, and leak those. No reason: the store is not empty, or nothing
// says the node ran anything.
func LostState(t Traces) []string {
	if t.StoreAllocs > 0 {
		return nil
	}
	var why []string
	if t.StoreFresh && t.NodeIDFile != "" {
		why = append(why, fmt.Sprintf("the node ID file %s predates the store: the store was removed or emptied", t.NodeIDFile))
	}
	if len(t.AllocDirs) > 0 {
		why = append(why, fmt.Sprintf("%d allocation directories remain (%s)", len(t.AllocDirs), firstOf(t.AllocDirs)))
	}
	if t.StoreFresh && len(t.PluginSockets) > 0 {
		why = append(why, fmt.Sprintf("%d driver plugins of an earlier start may still run (%s)", len(t.PluginSockets), firstOf(t.PluginSockets)))
	}
	if len(t.FleetAllocs) > 0 {
		why = append(why, fmt.Sprintf("NATS holds %d live allocations of this node (%s)", len(t.FleetAllocs), firstOf(t.FleetAllocs)))
	}
	return why
}

func firstOf(list []string) string {
	if len(list) == 1 {
		return list[0]
	}
	return list[0] + ", ..."
}
