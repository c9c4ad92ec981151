package policy_test

import (
	"fmt"
	"time"

	"github.com/hivelet/hivelet/sdk/policy"
)

// onlyMarked is a canary policy: nodes whose meta "canary" is "true", in
// the order the agent sends them (sorted by ID), at most Count of them.
func onlyMarked(in policy.CanaryInput) (policy.CanaryOutput, error) {
	var ids []string
	for i := range in.Nodes {
		if v, _ := in.Nodes[i].Meta("canary"); v == "true" && len(ids) < in.Count {
			ids = append(ids, in.Nodes[i].ID)
		}
	}
	out := policy.CanaryOutput{NodeIDs: ids, Reason: "nodes marked canary=true"}
	if len(ids) < in.Count {
		out.Reason = fmt.Sprintf("only %d nodes are marked canary=true", len(ids))
	}
	return out, nil
}

// A canary policy is a plain function; test it natively by calling it.
// In the module, register it from init with what it reads:
//
//	func init() { policy.RegisterCanary(onlyMarked, policy.Meta("canary")) }
func ExampleRegisterCanary() {
	in := policy.CanaryInput{Count: 2, Nodes: []policy.Node{
		policy.NewNode("a", "", "dc1", "", "", nil, map[string]string{"canary": "true"}),
		policy.NewNode("b", "", "dc1", "", "", nil, nil),
		policy.NewNode("c", "", "dc2", "", "", nil, map[string]string{"canary": "true"}),
	}}
	out, _ := onlyMarked(in)
	fmt.Println(out.NodeIDs, out.Reason)
	// Output: [a c] nodes marked canary=true
}

// A completion policy decides from per-group health; this one promotes as
// soon as half of the canaries are healthy.
func ExampleRegisterCompletion() {
	halfway := func(in policy.CompletionInput) (policy.CompletionOutput, error) {
		for _, g := range in.Groups {
			if g.Unhealthy > 0 {
				return policy.CompletionOutput{Decision: policy.Fail, Revert: g.AutoRevert, Reason: "unhealthy in " + g.Name}, nil
			}
			if g.DesiredCanaries > 0 && !g.Promoted && 2*g.CanariesHealthy >= g.DesiredCanaries {
				return policy.CompletionOutput{Decision: policy.Promote, Reason: "half the canaries are healthy"}, nil
			}
		}
		return policy.CompletionOutput{Decision: policy.Continue, Reason: "waiting"}, nil
	}
	out, _ := halfway(policy.CompletionInput{Now: time.Unix(0, 0), Groups: []policy.Group{{Name: "web", DesiredCanaries: 4, CanariesHealthy: 2}}})
	fmt.Println(out.Decision, "-", out.Reason)
	// Output: promote - half the canaries are healthy
}
