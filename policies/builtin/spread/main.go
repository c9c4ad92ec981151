// Command spread is the built-in `spread` policy module: rules.Spread
// registered with the SDK. Built by `go generate ./policies` into
// policies/builtin/spread.wasm and embedded in the agent.
package main

import (
	"github.com/hivelet/hivelet/policies/rules"
	"github.com/hivelet/hivelet/sdk/policy"
)

func init() { policy.RegisterCanary(rules.Spread, rules.SpreadReads...) }

func main() {}
