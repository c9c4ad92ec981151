package model

import "time"

// Node is one machine running a hivelet agent, as registered in the nodes
// bucket. Attributes and Meta are never nil on a registered node.
type Node struct {
	ID          string                `json:"id"`
	Name        string                `json:"name"`
	Datacenter  string                `json:"datacenter"`
	NodePool    string                `json:"node_pool"`
	Class       string                `json:"class,omitempty"`
	Status      NodeStatus            `json:"status"`
	Eligibility Eligibility           `json:"eligibility"`
	Drain       *DrainStrategy        `json:"drain,omitempty"`
	Attributes  map[string]string     `json:"attributes"`
	Meta        map[string]string     `json:"meta"`
	Drivers     map[string]DriverInfo `json:"drivers,omitempty"`
	// HeartbeatAt is the time of the node's last heartbeat, as the node saw it.
	HeartbeatAt time.Time `json:"heartbeat_at,omitzero"`
	// RolloutProtocol is the highest fleet rollout protocol level the
	// node's agent speaks (0: before fleet rollouts); BootID changes with
	// every start of the agent.
	RolloutProtocol int    `json:"rollout_protocol,omitempty"`
	BootID          string `json:"boot_id,omitempty"`
}

// DrainStrategy records that a node is being drained.
type DrainStrategy struct {
	Deadline Duration  `json:"deadline,omitempty"`
	Started  time.Time `json:"started,omitzero"`
}

// DriverInfo is one driver's fingerprint on a node.
type DriverInfo struct {
	Detected   bool              `json:"detected"`
	Healthy    bool              `json:"healthy"`
	HealthDesc string            `json:"health_description,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

// Ready reports whether the node may receive placements: status ready,
// eligible, and not draining.
func (n *Node) Ready() bool {
	return n != nil && n.Status == NodeStatusReady && n.Eligibility != Ineligible && n.Drain == nil
}

// Tainted reports whether the node is down, disconnected or draining.
func (n *Node) Tainted() bool {
	return n == nil || n.Status == NodeStatusDown || n.Status == NodeStatusDisconnected || n.Drain != nil
}
