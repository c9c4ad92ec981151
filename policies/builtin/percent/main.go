// Command percent is the built-in `percent` policy module: rules.Percent
// registered with the SDK. Built by `go generate ./policies` into
// policies/builtin/percent.wasm and embedded in the agent.
package main

import (
	"github.com/hivelet/hivelet/policies/rules"
	"github.com/hivelet/hivelet/sdk/policy"
)

func init() { policy.RegisterCanary(rules.Percent) }

func main() {}
