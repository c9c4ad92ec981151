// Command rendezvous is the built-in `rendezvous` policy module: rules.Rendezvous
// registered with the SDK. Built by `go generate ./policies` into
// policies/builtin/rendezvous.wasm and embedded in the agent.
package main

import (
	"github.com/hivelet/hivelet/policies/rules"
	"github.com/hivelet/hivelet/sdk/policy"
)

func init() { policy.RegisterCanary(rules.Rendezvous) }

func main() {}
