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
	portSpec = spec{what: "port", attrs: []string{"static", "to"},
		extra: map[string]string{
			"host_network":     "a hivelet node publishes ports on one address (the agent's network.address); there are no named host networks",
			"ignore_collision": "hivelet never gives two allocations of a node the same port",
		}}
)

// network reads a group's network block. The mode defaults to host.
func (p *parser) network(b *hclsyntax.Block, path string) *model.Network {
	n := &model.Network{Mode: model.NetworkHost}
	p.at(path, b.TypeRange)
	if _, ok := p.labels(b, ""); !ok {
		return n
	}
	c := p.content(b.Body, networkSpec)
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
		n.Ports = append(n.Ports, port)
	}
	return n
}
