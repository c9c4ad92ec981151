package main

import (
	"fmt"

	"github.com/hivelet/hivelet/host/allocrunner"
	"github.com/hivelet/hivelet/host/config"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/ports"
)

// AttrNetworkAddress is the node attribute naming the address the node
// publishes its allocations' ports on (Nomad's attribute of that name), so
// a constraint or a task can read it as ${attr.unique.network.ip-address}.
const AttrNetworkAddress = allocrunner.AttrNetworkAddress

// newPortTable builds the node's port table from the agent's network block:
// ports are published on network.address (dev: 127.0.0.1; otherwise, when
// unset, ports.DefaultAddress), or on a host network's address for a port
// naming one, dynamic ones come from the configured range, skipping
// reserved ports and ports another process already listens on.
func newPortTable(rc *config.Resolved, networks map[string]model.HostNetwork) (*ports.Table, error) {
	addr := rc.NetworkAddress
	if addr == "" {
		addr = ports.DefaultAddress()
	}
	byName := map[string]string{}
	for name, n := range networks {
		byName[name] = n.Address
	}
	return ports.New(ports.Config{Address: addr, MinDynamic: rc.MinDynamicPort, MaxDynamic: rc.MaxDynamicPort,
		Reserved: rc.ReservedPorts, Networks: byName, InUse: ports.Listenable(addr)})
}

// clientResources are the host volumes and host networks of the agent's
// client block as the node's record advertises them: each host network
// with the node's address on it, found among ifaces (an address that
// cannot be found fails the start, naming the network).
func clientResources(c *config.Client, ifaces func() ([]ports.Interface, error)) (map[string]model.HostVolume, map[string]model.HostNetwork, error) {
	if c == nil {
		return nil, nil, nil
	}
	var vols map[string]model.HostVolume
	for _, v := range c.HostVolumes {
		if vols == nil {
			vols = map[string]model.HostVolume{}
		}
		vols[v.Name] = model.HostVolume{Path: v.Path, ReadOnly: v.ReadOnly}
	}
	if len(c.HostNetworks) == 0 {
		return vols, nil, nil
	}
	list, err := ifaces()
	if err != nil {
		return nil, nil, err
	}
	nets := map[string]model.HostNetwork{}
	for _, n := range c.HostNetworks {
		addr, err := ports.HostNetworkAddress(list, n.CIDR, n.Interface)
		if err != nil {
			return nil, nil, fmt.Errorf("client.host_network %q: %w", n.Name, err)
		}
		nets[n.Name] = model.HostNetwork{CIDR: n.CIDR, Interface: n.Interface, Address: addr}
	}
	return vols, nets, nil
}
