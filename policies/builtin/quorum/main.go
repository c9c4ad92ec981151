// Command quorum is the built-in `quorum` policy module: rules.Quorum
// registered with the SDK. Built by `go generate ./policies` into
// policies/builtin/quorum.wasm and embedded in the agent.
package main

import (
	"github.com/hivelet/hivelet/policies/rules"
	"github.com/hivelet/hivelet/sdk/policy"
)

func init() { policy.RegisterCompletion(rules.Quorum) }

func main() {}
