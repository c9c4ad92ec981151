package main

import (
	"github.com/hivelet/hivelet/host/allocrunner"
	"github.com/hivelet/hivelet/host/config"
	"github.com/hivelet/hivelet/host/ports"
)

// AttrNetworkAddress is the node attribute naming the address the node
// publishes its allocations' ports on (Nomad's attribute of that name), so
// a constraint or a task can read it as ${attr.unique.network.ip-address}.
const AttrNetworkAddress = allocrunner.AttrNetworkAddress

// newPortTable builds the node's port table from the agent's network block:
// ports are published on network.address (dev: 127.0.0.1; otherwise, when
// unset, ports.DefaultAddress), dynamic ones come from the configured range,
// skipping reserved ports and ports another process already listens on.
func newPortTable(rc *config.Resolved) (*ports.Table, error) {
	addr := rc.NetworkAddress
	if addr == "" {
		addr = ports.DefaultAddress()
	}
	return ports.New(ports.Config{Address: addr, MinDynamic: rc.MinDynamicPort, MaxDynamic: rc.MaxDynamicPort,
		Reserved: rc.ReservedPorts, InUse: ports.Listenable(addr)})
}
