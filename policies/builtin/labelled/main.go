// Command labelled is the built-in `labelled` policy module: rules.Labelled
// registered with the SDK. Built by `go generate ./policies` into
// policies/builtin/labelled.wasm and embedded in the agent.
package main

import (
	"github.com/hivelet/hivelet/policies/rules"
	"github.com/hivelet/hivelet/sdk/policy"
)

func init() { policy.RegisterCanary(rules.Labelled, rules.LabelledReads...) }

func main() {}
