// Command rfpolicy is a policy module that misbehaves on request, for the
// rollout fault suite (cmd/hivelet/e2e_rollout_faults_test.go): the
// parameter "do" of the canary or completion policy selects the
// misbehaviour; without one (and for "slow", after its work) it answers
// what the built-in rules answer, so a rollout it decides completes.
package main

import (
	"strings"

	"github.com/hivelet/hivelet/policies/rules"
	"github.com/hivelet/hivelet/sdk/policy"
)

// hoard keeps allocations alive so memory really grows.
var hoard [][]byte

// sink keeps the busy loop from being optimised away.
var sink uint64

// misbehave does what do asks that is common to both kinds; it returns
// only for the kinds that answer.
func misbehave(do string) {
	switch do {
	case "panic":
		panic("hostile policy panics")
	case "loop":
		for {
			sink++
		}
	case "hoard":
		for {
			hoard = append(hoard, make([]byte, 1<<20))
		}
	case "print":
		// Floods its output streams (the host caps and drops them).
		line := strings.Repeat("hostile output ", 64)
		for i := 0; i < 200_000; i++ {
			println(line, i)
		}
	case "slow":
		// Well-behaved but slow: milliseconds of work per call, well
		// under the deadline.
		for i := 0; i < 2_000_000; i++ {
			sink += uint64(i) ^ sink>>3
		}
	}
}

// huge is a reason of 2 MiB: more than a NATS message carries by default.
func huge() string { return strings.Repeat("r", 2<<20) }

func canary(in policy.CanaryInput) (policy.CanaryOutput, error) {
	do := in.Params["do"]
	misbehave(do)
	out, err := rules.Percent(in)
	switch do {
	case "unknown":
		return policy.CanaryOutput{NodeIDs: []string{"no-such-node"}, Reason: "unknown node"}, nil
	case "huge":
		out.Reason = huge()
	}
	return out, err
}

func completion(in policy.CompletionInput) (policy.CompletionOutput, error) {
	do := in.Params["do"]
	misbehave(do)
	out, err := rules.CompletionDefault(in)
	switch do {
	case "unknown-decision":
		return policy.CompletionOutput{Decision: 7, Reason: "no such decision"}, nil
	case "revert-without-fail":
		return policy.CompletionOutput{Decision: policy.Succeed, Revert: true, Reason: "revert on success"}, nil
	case "huge":
		out.Reason = huge()
	}
	return out, err
}

func init() {
	policy.RegisterCanary(canary)
	policy.RegisterCompletion(completion)
}

func main() {}
