package config

import (
	"fmt"
	"net"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// validate checks the client block: each host volume has an absolute path
// and a unique name, each host network a unique name, a CIDR that parses
// and at least one of cidr and interface, each error at its position.
func (c *Client) validate(f *hcl.File, filename string) hcl.Diagnostics {
	if c == nil {
		return nil
	}
	var diags hcl.Diagnostics
	bad := func(rng *hcl.Range, summary, format string, args ...any) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: rng})
	}
	seen := map[string]int{}
	for _, v := range c.HostVolumes {
		nth := seen[v.Name]
		at := func(attr string) *hcl.Range { return labelledAttr(f, filename, "host_volume", v.Name, nth, attr) }
		if nth > 0 {
			bad(at(""), "duplicate host volume", "client.host_volume %q is declared twice", v.Name)
		}
		seen[v.Name]++
		if !filepath.IsAbs(v.Path) {
			bad(at("path"), "invalid host volume path", "client.host_volume %q: path = %q: want an absolute directory of this node", v.Name, v.Path)
		}
	}
	seen = map[string]int{}
	for _, n := range c.HostNetworks {
		nth := seen[n.Name]
		at := func(attr string) *hcl.Range { return labelledAttr(f, filename, "host_network", n.Name, nth, attr) }
		if nth > 0 {
			bad(at(""), "duplicate host network", "client.host_network %q is declared twice", n.Name)
		}
		seen[n.Name]++
		if n.CIDR == "" && n.Interface == "" {
			bad(at(""), "incomplete host network", "client.host_network %q: give cidr, interface or both (the node's address on the network is found by them)", n.Name)
		}
		if n.CIDR != "" {
			if _, _, err := net.ParseCIDR(n.CIDR); err != nil {
				bad(at("cidr"), "invalid cidr", "client.host_network %q: cidr = %q: want a network such as \"10.0.0.0/8\"", n.Name, n.CIDR)
			}
		}
	}
	return diags
}

// labelledAttr is where the nth (from 0) client { <typ> "<label>" { attr
// = ... } } is written: the attribute, else the block, else the file's
// start (a JSON file: its positions are not looked up).
func labelledAttr(f *hcl.File, filename, typ, label string, nth int, attr string) *hcl.Range {
	start := &hcl.Range{Filename: filename, Start: hcl.Pos{Line: 1, Column: 1}}
	body, ok := f.Body.(*hclsyntax.Body)
	if !ok {
		return start
	}
	for _, cb := range body.Blocks {
		if cb.Type != "client" {
			continue
		}
		for _, b := range cb.Body.Blocks {
			if b.Type != typ || len(b.Labels) != 1 || b.Labels[0] != label {
				continue
			}
			if nth > 0 {
				nth--
				continue
			}
			if a, ok := b.Body.Attributes[attr]; ok {
				r := a.SrcRange
				return &r
			}
			r := b.DefRange()
			return &r
		}
	}
	return start
}
