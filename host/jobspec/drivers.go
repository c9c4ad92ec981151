package jobspec

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/sdk/driver"
)

// driverProblem is a task config its driver would refuse (an error), or a
// driver name that is a near miss of a known one (a warning: it may be a
// third-party plugin of the nodes), at the JSON path of the task field.
type driverProblem struct {
	path, message string
	warning       bool
}

// checkDrivers checks each task against the schemas of the drivers the
// caller knows (the built-in ones): the config as the driver will check it
// at start, and a driver name that is not known but close to one that is
// (dokcer), which is warned about: it may still be a third-party plugin of
// the nodes (exec2), as may any other name, and the nodes decide.
func checkDrivers(job *model.Job, schemas map[string]*driver.Schema) []driverProblem {
	if len(schemas) == 0 {
		return nil
	}
	known := make([]string, 0, len(schemas))
	for n := range schemas {
		known = append(known, n)
	}
	sort.Strings(known)
	var out []driverProblem
	for gi, g := range job.Groups {
		for ti, t := range g.Tasks {
			if g == nil || t == nil || t.Driver == "" {
				continue
			}
			tp := fmt.Sprintf("groups[%d].tasks[%d]", gi, ti)
			schema, ok := schemas[t.Driver]
			if !ok {
				if hint := suggest(t.Driver, known); hint != "" && !slices.Contains(known, t.Driver) {
					out = append(out, driverProblem{tp + ".driver", fmt.Sprintf("driver %q is not a built-in driver%s; only a node with a plugin of that name can run the task", t.Driver, hint), true})
				}
				continue
			}
			cfg := t.Config
			if cfg == nil {
				cfg = map[string]any{}
			}
			convertConfig(schema, cfg)
			if t.Driver == "docker" {
				out = append(out, dockerPortLabels(tp, g, cfg)...)
			}
			err := driver.ValidateConfig(schema, cfg)
			var ce *driver.ConfigError
			if !errors.As(err, &ce) {
				continue
			}
			for _, fe := range ce.Fields {
				out = append(out, driverProblem{tp + ".config", fmt.Sprintf("%s config: %s: %s", t.Driver, fe.Path, fe.Message), false})
			}
		}
	}
	return out
}

// dockerPortLabels refuses a docker ports entry that is not a port label of
// the group's network, as the driver would at start, naming the labels the
// group has.
func dockerPortLabels(tp string, g *model.Group, cfg map[string]any) []driverProblem {
	list, _ := cfg["ports"].([]any)
	var labels []string
	if g.Network != nil {
		for _, p := range g.Network.Ports {
			labels = append(labels, p.Label)
		}
	}
	var out []driverProblem
	for i, l := range list {
		s, ok := l.(string)
		if !ok || slices.Contains(labels, s) {
			continue
		}
		has := ": the group has no network block with ports"
		if len(labels) > 0 {
			quoted := make([]string, len(labels))
			for j, l := range labels {
				quoted[j] = strconv.Quote(l)
			}
			has = ", which has " + strings.Join(quoted, ", ") + suggest(s, labels)
		}
		out = append(out, driverProblem{tp + ".config", fmt.Sprintf("docker config: ports[%d]: %q is not a port label of the group's network%s", i, s, has), false})
	}
	// port_map { label = 80 } (the older docker syntax) names labels too.
	pm, _ := cfg["port_map"].(map[string]any)
	if l, ok := cfg["port_map"].([]any); ok && len(l) == 1 {
		pm, _ = l[0].(map[string]any)
	}
	for _, k := range slices.Sorted(maps.Keys(pm)) {
		if !slices.Contains(labels, k) {
			out = append(out, driverProblem{tp + ".config", fmt.Sprintf("docker config: port_map.%s: %q is not a port label of the group's network%s", k, k, labelsHint(k, labels)), false})
		}
	}
	return out
}

// labelsHint is ", which has ..." (with a suggestion) or ": the group has
// no network block with ports".
func labelsHint(s string, labels []string) string {
	if len(labels) == 0 {
		return ": the group has no network block with ports"
	}
	quoted := make([]string, len(labels))
	for j, l := range labels {
		quoted[j] = strconv.Quote(l)
	}
	return ", which has " + strings.Join(quoted, ", ") + suggest(s, labels)
}

// convertConfig converts the values of a task's driver config to the
// types its driver's schema declares, where the conversion is exact, as
// Nomad's HCL decoding of a driver config does (cty's conversions): the
// text "true" or "false" for a bool (privileged = "true"), a numeric text
// for a number, and a number or bool for a string (also inside string
// lists and maps). A value it cannot convert, and every value still
// holding an interpolation for the node, is left as written: the schema
// check then says what is wrong with it.
func convertConfig(schema *driver.Schema, cfg map[string]any) {
	if schema == nil {
		return
	}
	for k, v := range cfg {
		f := schema.Fields[k]
		if f == nil {
			continue
		}
		cfg[k] = convertValue(f, v)
	}
}

func convertValue(f *driver.Field, v any) any {
	switch f.Type {
	case driver.TypeBool:
		if s, ok := v.(string); ok {
			if b, err := strconv.ParseBool(s); err == nil && (s == "true" || s == "false") {
				return b
			}
		}
	case driver.TypeNumber:
		if s, ok := v.(string); ok && !strings.Contains(s, "${") {
			if n, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
				return n
			}
		}
	case driver.TypeString:
		return scalarText(v)
	case driver.TypeStringList:
		if l, ok := v.([]any); ok {
			for i, e := range l {
				l[i] = scalarText(e)
			}
		}
	case driver.TypeStringMap:
		m, ok := v.(map[string]any)
		if l, isList := v.([]any); isList && len(l) == 1 {
			m, ok = l[0].(map[string]any) // written as a block
		}
		if ok {
			for k, e := range m {
				m[k] = scalarText(e)
			}
		}
	case driver.TypeObjectList:
		if l, ok := v.([]any); ok {
			for _, e := range l {
				if m, ok := e.(map[string]any); ok {
					convertConfig(f.Elem, m)
				}
			}
		}
	}
	return v
}

// scalarText is a number or bool as the text cty converts it to; anything
// else as it is.
func scalarText(v any) any {
	switch x := v.(type) {
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return v
}
