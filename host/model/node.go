package model

import (
	"maps"
	"time"
)

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
	// HostVolumes are the directories the node offers to groups' volume
	// blocks, by name (its agent's client { host_volume "name" { } }).
	HostVolumes map[string]HostVolume `json:"host_volumes,omitempty"`
	// HostNetworks are the node's named networks and its address on each
	// (client { host_network "name" { } }), for ports naming one.
	HostNetworks map[string]HostNetwork `json:"host_networks,omitempty"`
	// HeartbeatAt is the time of the node's last heartbeat, as the node saw it.
	HeartbeatAt time.Time `json:"heartbeat_at,omitzero"`
	// HeartbeatTTL is the TTL the record was written with (a per-message
	// TTL, at most the bucket's; 0: written without one, the bucket's
	// applies). The node heartbeats every third of it.
	HeartbeatTTL Duration `json:"heartbeat_ttl,omitempty"`
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
	Detected bool `json:"detected"`
	Healthy  bool `json:"healthy"`
	// HealthDesc is the driver's Fingerprint.Description (sdk/driver): why
	// it is (un)healthy. Its JSON name is "description", as in the SDK;
	// node records written before were named "health_description", which
	// decoding still accepts (UnmarshalJSON).
	HealthDesc string            `json:"description,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

// UnmarshalJSON decodes a driver's fingerprint as strictly as Decode does
// every record, accepting the description under its old name
// "health_description" too (never both): node records persisted in the
// nodes bucket by an older agent carry it, and must stay readable until
// that agent writes its record again.
func (d *DriverInfo) UnmarshalJSON(data []byte) error {
	var w struct {
		Detected    bool              `json:"detected"`
		Healthy     bool              `json:"healthy"`
		Description string            `json:"description,omitempty"`
		OldName     string            `json:"health_description,omitempty"`
		Attributes  map[string]string `json:"attributes,omitempty"`
	}
	if err := Decode(data, &w); err != nil {
		return err
	}
	if w.Description != "" && w.OldName != "" {
		return &DecodeError{Path: "health_description", Reason: `the old name of "description": give one of the two`}
	}
	*d = DriverInfo{Detected: w.Detected, Healthy: w.Healthy, HealthDesc: w.Description + w.OldName, Attributes: w.Attributes}
	return nil
}

// SameButHeartbeat reports whether two records (neither nil) say the same
// but for their heartbeat time: what a heartbeat alone changes. A nil and
// an empty map say the same; times compare as instants. It compares field
// by field (every field but HeartbeatAt: TestSameButHeartbeatSeesEveryField)
// without allocating: it runs per decided job on each pass and per runner
// made, where reflect.DeepEqual allocated ~140 objects per put (500 jobs).
func SameButHeartbeat(a, b *Node) bool {
	if a == b {
		return true
	}
	return a.ID == b.ID && a.Name == b.Name && a.Datacenter == b.Datacenter && a.NodePool == b.NodePool &&
		a.Class == b.Class && a.Status == b.Status && a.Eligibility == b.Eligibility && sameDrain(a.Drain, b.Drain) &&
		maps.Equal(a.Attributes, b.Attributes) && maps.Equal(a.Meta, b.Meta) &&
		maps.EqualFunc(a.Drivers, b.Drivers, DriverInfo.same) &&
		maps.Equal(a.HostVolumes, b.HostVolumes) && maps.Equal(a.HostNetworks, b.HostNetworks) &&
		a.HeartbeatTTL == b.HeartbeatTTL && a.RolloutProtocol == b.RolloutProtocol && a.BootID == b.BootID
}

func sameDrain(a, b *DrainStrategy) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Deadline == b.Deadline && a.Started.Equal(b.Started)
}

func (d DriverInfo) same(e DriverInfo) bool {
	return d.Detected == e.Detected && d.Healthy == e.Healthy && d.HealthDesc == e.HealthDesc &&
		maps.Equal(d.Attributes, e.Attributes)
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
