// Command canarymeta is a complete custom canary policy, the worked example
// of examples/policies/README.md: canaries only on nodes whose meta
// "canary" is "true", spread across datacenters.
//
// Build it into a module and try it:
//
//	hivelet policy build examples/policies/canarymeta
//	hivelet policy test examples/policies/canarymeta/canarymeta.wasm examples/policies/canarymeta/cases.json
package main

import (
	"slices"
	"strconv"

	"github.com/hivelet/hivelet/sdk/policy"
)

func init() {
	// Declare what the policy reads: the agent sends each node's ID, its
	// datacenter and its meta "canary", nothing else.
	policy.RegisterCanary(choose, policy.Fields("datacenter"), policy.Meta("canary"))
}

// main is required by package main; the agent never calls it.
func main() {}

// choose takes marked nodes round robin over datacenters (in sorted order),
// nodes in ID order within a datacenter. When fewer nodes are marked than
// canaries are asked for, it answers fewer and says why: the rollout then
// waits for an operator rather than canarying on unmarked nodes.
func choose(in policy.CanaryInput) (policy.CanaryOutput, error) {
	byDC := map[string][]string{}
	var dcs []string
	marked := 0
	for i := range in.Nodes {
		n := &in.Nodes[i]
		if v, _ := n.Meta("canary"); v != "true" {
			continue
		}
		if _, ok := byDC[n.Datacenter]; !ok {
			dcs = append(dcs, n.Datacenter)
		}
		byDC[n.Datacenter] = append(byDC[n.Datacenter], n.ID)
		marked++
	}
	slices.Sort(dcs)
	want := min(in.Count, marked)
	ids := make([]string, 0, want)
	for round := 0; len(ids) < want; round++ {
		for _, dc := range dcs {
			if round < len(byDC[dc]) && len(ids) < want {
				ids = append(ids, byDC[dc][round])
			}
		}
	}
	reason := "marked nodes spread over " + strconv.Itoa(len(dcs)) + " datacenters"
	if len(ids) < in.Count {
		reason = "only " + strconv.Itoa(marked) + " nodes have meta canary=true; " + strconv.Itoa(in.Count) + " canaries asked for"
	}
	return policy.CanaryOutput{NodeIDs: ids, Reason: reason}, nil
}
