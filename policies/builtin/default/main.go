// Command default is the built-in `default` policy module: rules.CompletionDefault
// registered with the SDK. Built by `go generate ./policies` into
// policies/builtin/default.wasm and embedded in the agent.
package main

import (
	"github.com/hivelet/hivelet/policies/rules"
	"github.com/hivelet/hivelet/sdk/policy"
)

func init() { policy.RegisterCompletion(rules.CompletionDefault) }

func main() {}
