package jobspec

import (
	"errors"
	"fmt"
	"slices"
	"sort"

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
