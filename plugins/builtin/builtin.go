// Package builtin is the registry of the drivers compiled into the hivelet
// binary. The plugin manager never calls these constructors in the agent's
// process: it re-executes the hivelet binary as `hivelet plugin serve NAME`,
// and that command looks the name up here, so a built-in driver crosses the
// same process boundary as a third-party one.
//
// Adding a built-in driver is one line in Registry.
//
// The built-in drivers are described in docs/drivers.md ("The built-in
// drivers").
package builtin

import (
	"sort"

	"github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/plugins/exec"
	"github.com/hivelet/hivelet/plugins/mock"
	"github.com/hivelet/hivelet/sdk/driver"
)

// Factory builds a driver inside its plugin process.
type Factory func() (driver.Driver, error)

// Registry maps each built-in driver's name to its constructor.
func Registry() map[string]Factory {
	return map[string]Factory{
		mock.Name:   func() (driver.Driver, error) { return mock.New(), nil },
		exec.Name:   func() (driver.Driver, error) { return exec.NewFromEnv() },
		docker.Name: docker.NewFromEnv,
		RawExec:     newRawExec,
	}
}

// Names lists the built-in drivers an agent runs by default, sorted:
// every one but raw_exec, which the agent's configuration must enable.
func Names() []string {
	var names []string
	for n := range Registry() {
		if n != RawExec {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// EnabledNames is Names, with raw_exec when rawExec is true.
func EnabledNames(rawExec bool) []string {
	names := Names()
	if rawExec {
		names = append(names, RawExec)
		sort.Strings(names)
	}
	return names
}

// Schemas are the config schemas of every built-in driver, raw_exec
// included, without starting any: what `job validate` checks a task's
// config against.
func Schemas() map[string]*driver.Schema {
	return map[string]*driver.Schema{
		mock.Name:   mock.Schema(),
		exec.Name:   exec.Schema(),
		RawExec:     exec.Schema(),
		docker.Name: docker.Schema(),
	}
}
