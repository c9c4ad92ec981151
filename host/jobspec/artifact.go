package jobspec

import (
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/hivelet/hivelet/host/model"
)

var artifactSpec = spec{what: "artifact",
	attrs:  []string{"source", "destination", "mode", "options", "headers"},
	blocks: []string{"options", "headers"},
	extra: map[string]string{
		"chown": "downloaded files belong to the agent's user",
	}}

// artifact reads one artifact block. What the source, destination and
// options may be is checked by the model's validation, at the positions
// recorded here.
func (p *parser) artifact(b *hclsyntax.Block, path string) (model.Artifact, bool) {
	var a model.Artifact
	p.at(path, b.TypeRange)
	if _, ok := p.labels(b, ""); !ok {
		return a, false
	}
	c := p.content(b.Body, artifactSpec)
	for _, f := range []struct {
		name string
		dst  *string
	}{{"source", &a.Source}, {"destination", &a.Destination}} {
		p.at(path+"."+f.name, b.TypeRange)
		if at := c.attrs[f.name]; at != nil {
			*f.dst, _ = p.str(at, path+"."+f.name)
		}
	}
	if at := c.attrs["mode"]; at != nil {
		m, _ := p.str(at, path+".mode")
		a.Mode = model.ArtifactMode(m)
	}
	a.Options = p.strMap(c, "options", path+".options")
	for k := range a.Options {
		p.at(path+".options."+k, p.pos[path+".options"])
	}
	a.Headers = p.strMap(c, "headers", path+".headers")
	return a, true
}
