package jobspec

import (
	"fmt"

	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/hivelet/hivelet/host/model"
)

var (
	networkSpec = spec{what: "network", attrs: []string{"mode"}, blocks: []string{"port"},
		extra: map[string]string{
			"dns":      "hivelet sets no DNS options on a group's network; docker tasks take dns settings from the engine",
			"hostname": "hivelet names no group network; a docker task's hostname is the engine's",
			"cni":      "hivelet sets up no CNI networks",
		}}
	// legacyNetworkSpec is a network block inside a task's resources: ports
	// and Nomad's old mbits, no mode (the group's is host).
	legacyNetworkSpec = spec{what: "network", attrs: []string{"mbits"}, blocks: []string{"port"}, extra: networkSpec.extra}
	portSpec          = spec{what: "port", attrs: []string{"static", "to", "host_network"},
		extra: map[string]string{
			"ignore_collision": "hivelet never gives two allocations of a node the same port",
		}}
)

// network reads a group's network block. The mode defaults to host.
func (p *parser) network(b *hclsyntax.Block, path string) *model.Network {
	return p.networkWith(b, path, networkSpec)
}

// taskNetwork reads the network block Nomad once took inside a task's
// resources (deprecated there since Nomad 0.12, still common in job files):
// its ports become the group's network, with a warning, when the group has
// none of its own and no other task gave one; otherwise it is refused with
// where the group's network is. mbits is accepted and ignored.
func (p *parser) taskNetwork(b *hclsyntax.Block, groupPath string, g *model.Group) {
	if g.Network != nil {
		has := "its own network block"
		if p.legacyNetwork == g.Network {
			has = "the network of another task's resources"
		}
		p.errorf(b.TypeRange, "the group has %s already: move these ports into it (a hivelet group has one network, shared by its tasks)", has)
		return
	}
	g.Network = p.networkWith(b, groupPath+".network", legacyNetworkSpec)
	p.legacyNetwork = g.Network
	p.warnf(b.TypeRange, "a network block inside a task's resources is read as the group's network (Nomad deprecated it there; write it in the group)")
}

func (p *parser) networkWith(b *hclsyntax.Block, path string, s spec) *model.Network {
	n := &model.Network{Mode: model.NetworkHost}
	p.at(path, b.TypeRange)
	if _, ok := p.labels(b, ""); !ok {
		return n
	}
	c := p.content(b.Body, s)
	if a := c.attrs["mbits"]; a != nil {
		p.warnf(a.NameRange, "mbits is accepted and ignored: hivelet reserves no network bandwidth")
	}
	if a := c.attrs["mode"]; a != nil {
		if m, ok := p.str(a, path+".mode"); ok {
			p.at(path+".mode", a.Expr.Range())
			switch model.NetworkMode(m) {
			case model.NetworkHost, model.NetworkBridge:
				n.Mode = model.NetworkMode(m)
			default:
				p.errorf(a.Expr.Range(), "network mode %q is not supported by hivelet (allowed: host, bridge; Nomad's cni/<name> and none need CNI, which hivelet does not set up)", m)
			}
		}
	}
	for _, pb := range c.blocks["port"] {
		pp := fmt.Sprintf("%s.ports[%d]", path, len(n.Ports))
		label, ok := p.labels(pb, "port label")
		if !ok {
			continue
		}
		p.at(pp, pb.TypeRange)
		p.at(pp+".label", pb.LabelRanges[0])
		port := model.Port{Label: label}
		pc := p.content(pb.Body, portSpec)
		if a := pc.attrs["static"]; a != nil {
			port.Static, _ = p.integer(a, pp+".static")
		}
		if a := pc.attrs["to"]; a != nil {
			port.To, _ = p.integer(a, pp+".to")
		}
		if a := pc.attrs["host_network"]; a != nil {
			// A named network of the node (its agent's client {
			// host_network }); Nomad's "default" is the node's address.
			if hn, ok := p.str(a, pp+".host_network"); ok && hn != "default" {
				port.HostNetwork = hn
			}
		}
		n.Ports = append(n.Ports, port)
	}
	return n
}
