package model

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// NetworkMode is how a group's tasks are networked. "host": the group
// shares the node's network; ports are allocated on the node and each
// driver publishes the ones its task names (docker: ports = ["label"]).
// "bridge": the group's one task gets a network of its own (docker's
// bridge network) with every port of the allocation mapped into it, from
// the port on the node to the label's `to`, as Nomad's bridge mode does;
// the docker driver is the one that can build it, and a group of several
// tasks is refused, since hivelet builds no namespace for them to share
// (Nomad's pause container and CNI).
type NetworkMode string

const (
	NetworkHost   NetworkMode = "host"
	NetworkBridge NetworkMode = "bridge"
)

// NetworkModes lists every NetworkMode value.
var NetworkModes = []NetworkMode{NetworkHost, NetworkBridge}

func (m *NetworkMode) UnmarshalJSON(b []byte) error { return decodeEnum(b, m, NetworkModes) }

// Network is a group's network block: the ports its allocations need on
// the node.
type Network struct {
	Mode  NetworkMode `json:"mode"`
	Ports []Port      `json:"ports,omitempty"`
}

// Port is one labelled port of a group's network. Static 0 means dynamic:
// the node picks a free port from its configured range when it places the
// allocation. To is the port inside the task (docker: the container port);
// 0 means the same number as the port on the node.
type Port struct {
	Label  string `json:"label"`
	Static int    `json:"static,omitempty"`
	To     int    `json:"to,omitempty"`
	// HostNetwork names a host network of the node (Node.HostNetworks):
	// the port is published on the node's address there, and a node
	// without that network does not run the group. "": the node's
	// address (the agent's network.address).
	HostNetwork string `json:"host_network,omitempty"`
}

// AllocatedPort is a port an allocation holds on its node, recorded with the
// allocation when it is placed and kept for its life (across agent
// restarts).
type AllocatedPort struct {
	Label string `json:"label"`
	// Value is the port on the node.
	Value int `json:"value"`
	// To is the port inside the task; 0 means Value.
	To int `json:"to,omitempty"`
	// HostIP is the node address the port is published on.
	HostIP string `json:"host_ip"`
}

// InTask is the port number the task itself listens on.
func (p AllocatedPort) InTask() int {
	if p.To > 0 {
		return p.To
	}
	return p.Value
}

// Addr is host_ip:value, the address the port is reached at from outside
// the task.
func (p AllocatedPort) Addr() string {
	return joinHostPort(p.HostIP, p.Value)
}

func joinHostPort(host string, port int) string {
	for i := 0; i < len(host); i++ {
		if host[i] == ':' {
			return "[" + host + "]:" + strconv.Itoa(port)
		}
	}
	return host + ":" + strconv.Itoa(port)
}

// portLabelRE is what a port label may contain. It becomes part of
// environment variable names (NOMAD_PORT_<label>), with each '-' written
// '_' there (EnvLabel), as Nomad does: "jaeger-thrift" is
// NOMAD_PORT_jaeger_thrift in the task's environment.
var portLabelRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// EnvLabel is a port label as the task's environment variable names carry
// it: '-' is not valid there and becomes '_'.
func EnvLabel(label string) string { return strings.ReplaceAll(label, "-", "_") }

func (v *validator) network(path string, n *Network) {
	if !validEnum(n.Mode, NetworkModes) {
		v.add(join(path, "mode"), "network mode %q is not supported (allowed: %s)", n.Mode, joinEnum(NetworkModes))
	}
	labels := map[string]bool{}
	envLabels := map[string]string{}
	statics := map[int]string{}
	for i, p := range n.Ports {
		pp := fmt.Sprintf("%s.ports[%d]", path, i)
		switch {
		case !portLabelRE.MatchString(p.Label):
			v.add(join(pp, "label"), "port label %q may contain only letters, digits, '_' and '-' (it becomes NOMAD_PORT_<label>, '-' written '_')", p.Label)
		case labels[p.Label]:
			v.add(join(pp, "label"), "duplicate port label %q: labels must be unique within a group's network", p.Label)
		case envLabels[EnvLabel(p.Label)] != "":
			v.add(join(pp, "label"), "port labels %q and %q are the same variable NOMAD_PORT_%s in the task's environment ('-' is written '_'): rename one", envLabels[EnvLabel(p.Label)], p.Label, EnvLabel(p.Label))
		}
		if envLabels[EnvLabel(p.Label)] == "" {
			envLabels[EnvLabel(p.Label)] = p.Label
		}
		labels[p.Label] = true
		if p.Static < 0 || p.Static > 65535 {
			v.add(join(pp, "static"), "static port %d is out of 1..65535", p.Static)
		} else if p.Static > 0 {
			if other, dup := statics[p.Static]; dup {
				v.add(join(pp, "static"), "static port %d is already taken by label %q in this network", p.Static, other)
			}
			statics[p.Static] = p.Label
		}
		if p.To < 0 || p.To > 65535 {
			v.add(join(pp, "to"), "to = %d is out of 1..65535 (0 or absent: the same port as on the node)", p.To)
		}
	}
}

// bridge checks what bridge mode needs: one task, run by the docker driver
// (the driver that gives a task a network of its own).
func (v *validator) bridge(path string, g *Group) {
	if g.Network.Mode != NetworkBridge {
		return
	}
	if len(g.Tasks) != 1 {
		v.add(join(path, "mode"), "network mode \"bridge\" takes a group of one task in hivelet, this one has %d: "+
			"hivelet builds no network namespace for several tasks to share (Nomad's pause container and CNI); use mode = \"host\", or one group per task", len(g.Tasks))
		return
	}
	if d := g.Tasks[0].Driver; d != "docker" {
		v.add(join(path, "mode"), "network mode \"bridge\" needs the docker driver (it gives the task a network of its own); task %s uses %q: use mode = \"host\"", g.Tasks[0].Name, d)
	}
}

// LookupPort returns the allocated port with the label, if any.
func (a *Allocation) LookupPort(label string) (AllocatedPort, bool) {
	for _, p := range a.Ports {
		if p.Label == label {
			return p, true
		}
	}
	return AllocatedPort{}, false
}
