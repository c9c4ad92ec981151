package policies

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/policywire"
	"github.com/hivelet/hivelet/sdk/policy"
)

// Manifest is what a canary policy reads from nodes beyond their fixed
// fields, as declared by its hivelet_manifest export (docs/policy-abi.md,
// "Manifest"). The engine sends each node's values for these keys only.
type Manifest struct {
	Lines  []string
	decls  []decl
	fields byte // fixed node fields declared by "field" lines
}

type declKind uint8

const (
	declAttr declKind = iota
	declMeta
	declRef
	declField
)

// fieldBits maps a fixed node field's name to its wire bit.
var fieldBits = map[string]byte{
	"name": policywire.FieldName, "datacenter": policywire.FieldDatacenter,
	"node_pool": policywire.FieldNodePool, "class": policywire.FieldClass,
}

type decl struct {
	kind     declKind
	all      bool   // "*"
	key      string // literal key
	param    string // "$param" form
	fallback string // default after "="
}

const maxManifest = 64 << 10

// parseManifest parses a manifest strictly: an unknown directive or a
// malformed line refuses the module.
func parseManifest(text string) (Manifest, error) {
	if len(text) > maxManifest {
		return Manifest{}, fmt.Errorf("manifest is %d bytes, more than %d", len(text), maxManifest)
	}
	var m Manifest
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		verb, arg, ok := strings.Cut(line, " ")
		arg = strings.TrimSpace(arg)
		if !ok || arg == "" {
			return Manifest{}, fmt.Errorf("manifest line %d %q: want <directive> <argument>", i+1, line)
		}
		var d decl
		switch verb {
		case "attr":
			d.kind = declAttr
		case "meta":
			d.kind = declMeta
		case "ref":
			d.kind = declRef
		case "field":
			for _, f := range strings.Fields(arg) {
				bit, ok := fieldBits[f]
				if !ok {
					return Manifest{}, fmt.Errorf("manifest line %d: unknown node field %q (want name, datacenter, node_pool or class)", i+1, f)
				}
				m.fields |= bit
			}
			m.Lines = append(m.Lines, line)
			continue
		default:
			return Manifest{}, fmt.Errorf("manifest line %d: unknown directive %q (want field, attr, meta or ref)", i+1, verb)
		}
		switch {
		case arg == "*" && d.kind != declRef:
			d.all = true
		case strings.HasPrefix(arg, "$"):
			d.param, d.fallback, _ = strings.Cut(arg[1:], "=")
			if d.param == "" {
				return Manifest{}, fmt.Errorf("manifest line %d %q: empty parameter name", i+1, line)
			}
		case d.kind == declRef:
			return Manifest{}, fmt.Errorf("manifest line %d %q: ref takes a $parameter", i+1, line)
		default:
			d.key = arg
		}
		m.decls = append(m.decls, d)
		m.Lines = append(m.Lines, line)
	}
	return m, nil
}

// keys resolves the manifest against a request's parameters and nodes: the
// attribute and meta key tables to send, sorted and deduplicated.
func (m *Manifest) keys(params map[string]string, nodes []*model.Node) (fields byte, attr, meta []string) {
	fields = m.fields
	for _, d := range m.decls {
		key := d.key
		if d.param != "" {
			key = d.fallback
			if v, ok := params[d.param]; ok {
				key = v
			}
		}
		switch {
		case d.all && d.kind == declAttr:
			for _, n := range nodes {
				for k := range n.Attributes {
					attr = append(attr, k)
				}
			}
		case d.all && d.kind == declMeta:
			for _, n := range nodes {
				for k := range n.Meta {
					meta = append(meta, k)
				}
			}
		case key == "":
		case d.kind == declAttr:
			attr = append(attr, key)
		case d.kind == declMeta:
			meta = append(meta, key)
		case d.kind == declRef:
			key = policy.NormalizeField(key)
			if k, ok := strings.CutPrefix(key, "attr."); ok {
				if k != "" { // "attr." names no key, as an empty attr does
					attr = append(attr, k)
				}
			} else if k, ok := strings.CutPrefix(key, "meta."); ok {
				if k != "" {
					meta = append(meta, k)
				}
			} else {
				fields |= fieldBits[key]
			}
		}
	}
	slices.Sort(attr)
	slices.Sort(meta)
	return fields, slices.Compact(attr), slices.Compact(meta)
}
