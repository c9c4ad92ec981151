package jobspec

import (
	"fmt"

	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/hivelet/hivelet/host/model"
)

var (
	volumeSpec = spec{what: "volume", attrs: []string{"type", "source", "read_only"},
		extra: map[string]string{
			"access_mode":     "it is a CSI volume's option, and hivelet has no CSI support (host volumes only)",
			"attachment_mode": "it is a CSI volume's option, and hivelet has no CSI support (host volumes only)",
			"per_alloc":       "it is a CSI volume's option, and hivelet has no CSI support (host volumes only)",
			"mount_options":   "it is a CSI volume's option, and hivelet has no CSI support (host volumes only)",
			"sticky":          "hivelet keeps no volume claims: a host volume is the node's directory",
		}}
	volumeMountSpec = spec{what: "volume_mount", attrs: []string{"volume", "destination", "read_only", "propagation_mode"},
		extra: map[string]string{
			"selinux_label": "hivelet sets no SELinux labels on mounts",
		}}
)

// volume reads a group's volume block: a host volume of the node, by the
// name its agent configuration gives it (source). A CSI volume is refused:
// hivelet runs no CSI plugins.
func (p *parser) volume(b *hclsyntax.Block, path string) (model.Volume, bool) {
	var v model.Volume
	p.at(path, b.TypeRange)
	name, ok := p.labels(b, "volume name")
	if !ok {
		return v, false
	}
	v.Name = name
	if len(b.LabelRanges) > 0 {
		p.at(path+".name", b.LabelRanges[0])
	}
	c := p.content(b.Body, volumeSpec)
	p.at(path+".type", b.TypeRange)
	p.at(path+".source", b.TypeRange)
	if a := c.attrs["type"]; a != nil {
		t, good := p.str(a, path+".type")
		switch {
		case !good:
			return v, false
		case t == "csi":
			p.errorf(a.Expr.Range(), `volume type "csi" is not supported by hivelet: it runs no CSI plugins; use type = "host" with a host_volume of the node's agent configuration`)
			return v, false
		case t != string(model.VolumeHost):
			p.errorf(a.Expr.Range(), `volume type %q is not one of "host", "csi"%s`, t, suggest(t, []string{"host", "csi"}))
			return v, false
		}
		v.Type = model.VolumeType(t)
	} else {
		p.errorf(b.TypeRange, `volume %q needs a type: type = "host" (a host_volume of the node's agent configuration)`, name)
		return v, false
	}
	if a := c.attrs["source"]; a != nil {
		v.Source, _ = p.str(a, path+".source")
	}
	if a := c.attrs["read_only"]; a != nil {
		v.ReadOnly, _ = p.boolean(a, path+".read_only")
	}
	return v, true
}

// volumeMount reads a task's volume_mount block.
func (p *parser) volumeMount(b *hclsyntax.Block, path string) (model.VolumeMount, bool) {
	var m model.VolumeMount
	p.at(path, b.TypeRange)
	if _, ok := p.labels(b, ""); !ok {
		return m, false
	}
	c := p.content(b.Body, volumeMountSpec)
	p.at(path+".volume", b.TypeRange)
	p.at(path+".destination", b.TypeRange)
	if a := c.attrs["volume"]; a != nil {
		m.Volume, _ = p.str(a, path+".volume")
	}
	if a := c.attrs["destination"]; a != nil {
		m.Destination, _ = p.str(a, path+".destination")
	}
	if a := c.attrs["read_only"]; a != nil {
		m.ReadOnly, _ = p.boolean(a, path+".read_only")
	}
	if a := c.attrs["propagation_mode"]; a != nil {
		m.PropagationMode, _ = p.str(a, path+".propagation_mode")
	}
	return m, true
}

// volumes reads every volume block of a group.
func (p *parser) volumes(c content, path string, g *model.Group) {
	for _, vb := range c.blocks["volume"] {
		if v, ok := p.volume(vb, fmt.Sprintf("%s.volumes[%d]", path, len(g.Volumes))); ok {
			g.Volumes = append(g.Volumes, v)
		}
	}
}
