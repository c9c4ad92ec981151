package jobspec

import (
	"errors"
	"fmt"
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
	return out
}
