// Command hostile is a policy module that misbehaves on request, for the
// engine's fault tests: the canary parameter "do" (or, for completion, the
// parameter of the same name) selects the misbehaviour.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/hivelet/hivelet/sdk/policy"
)

// calls is state a policy must not be able to keep between evaluations.
var calls int

// hoard keeps allocations alive so memory really grows.
var hoard [][]byte

func canary(in policy.CanaryInput) (policy.CanaryOutput, error) {
	calls++
	ids := func(n int) []string {
		var out []string
		for i := 0; i < n && i < len(in.Nodes); i++ {
			out = append(out, in.Nodes[i].ID)
		}
		return out
	}
	switch in.Params["do"] {
	case "panic":
		panic("hostile policy panics")
	case "loop":
		for {
			calls++
		}
	case "hoard":
		for {
			hoard = append(hoard, make([]byte, 1<<20))
		}
	case "unknown":
		return policy.CanaryOutput{NodeIDs: []string{"no-such-node"}, Reason: "unknown node"}, nil
	case "duplicate":
		return policy.CanaryOutput{NodeIDs: []string{in.Nodes[0].ID, in.Nodes[0].ID}, Reason: "duplicate"}, nil
	case "toomany":
		return policy.CanaryOutput{NodeIDs: ids(in.Count + 1), Reason: "more than asked"}, nil
	case "existing":
		return policy.CanaryOutput{NodeIDs: []string{in.Existing[0]}, Reason: "an existing canary"}, nil
	case "fewer":
		return policy.CanaryOutput{NodeIDs: ids(in.Count - 1)}, nil
	case "state":
		// Answers a different node on every call if its counter survives.
		return policy.CanaryOutput{NodeIDs: []string{in.Nodes[(calls-1)%len(in.Nodes)].ID}, Reason: "calls=" + strconv.Itoa(calls)}, nil
	case "random":
		// Randomness and the wall clock, as the sandbox provides them.
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return policy.CanaryOutput{}, err
		}
		return policy.CanaryOutput{NodeIDs: ids(in.Count), Reason: hex.EncodeToString(b[:]) + " " + time.Now().UTC().Format(time.RFC3339Nano)}, nil
	case "escape":
		// Everything a sandboxed policy must not reach.
		_, errFile := os.ReadFile("/etc/hostname")
		_, errDir := os.ReadDir("/")
		_, errConn := net.Dial("tcp", "127.0.0.1:4222")
		report := "file=" + strconv.FormatBool(errFile == nil) + " dir=" + strconv.FormatBool(errDir == nil) +
			" net=" + strconv.FormatBool(errConn == nil) + " env=" + strconv.Itoa(len(os.Environ())) +
			" args=" + strconv.Itoa(len(os.Args))
		return policy.CanaryOutput{NodeIDs: ids(in.Count), Reason: report}, nil
	case "print":
		for i := 0; i < 1000; i++ {
			println("hostile output line", i)
		}
	}
	return policy.CanaryOutput{NodeIDs: ids(in.Count), Reason: "well behaved; calls=" + strconv.Itoa(calls)}, nil
}

func completion(in policy.CompletionInput) (policy.CompletionOutput, error) {
	switch in.Params["do"] {
	case "unknown-decision":
		return policy.CompletionOutput{Decision: 7, Reason: "no such decision"}, nil
	case "revert-without-fail":
		return policy.CompletionOutput{Decision: policy.Succeed, Revert: true, Reason: "revert on success"}, nil
	case "revert-without-auto-revert":
		return policy.CompletionOutput{Decision: policy.Fail, Revert: true, Reason: "revert although no group asked"}, nil
	case "panic":
		panic("hostile completion panics")
	case "clock":
		return policy.CompletionOutput{Decision: policy.Continue, Reason: time.Now().UTC().Format(time.RFC3339Nano)}, nil
	}
	return policy.CompletionOutput{Decision: policy.Continue, Reason: "well behaved"}, nil
}

func init() {
	policy.RegisterCanary(canary)
	policy.RegisterCompletion(completion)
}

func main() {}
