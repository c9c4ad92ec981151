package policies

import (
	"slices"

	"github.com/hivelet/hivelet/host/reconcile"
)

// NativeCanary is the built-in default canary choice in native Go, the
// fallback of every canary decision: the first Count eligible nodes in node
// ID order (docs/reconciler-rules.md, "Canary nodes"). It is written independently
// of the WASM `percent` module; TestWasmPercentAgreesWithNativeDefault
// compares them on a generated corpus.
func NativeCanary(req reconcile.CanaryRequest) reconcile.CanaryChoice {
	ids := make([]string, len(req.Eligible))
	for i, n := range req.Eligible {
		ids[i] = n.ID
	}
	slices.Sort(ids)
	n := min(max(req.Count, 0), len(ids))
	choice := reconcile.CanaryChoice{NodeIDs: ids[:n:n], Reason: "first eligible nodes by node ID"}
	if n < req.Count {
		choice.Reason = "fewer eligible nodes than canaries asked for"
	}
	return choice
}

// NativeCompletion is the built-in default completion decision in native
// Go, the fallback of every completion decision: reconcile.DecideDefault,
// the one implementation the agent uses too. TestWasmDefaultCompletionAgreesWithNativeDefault
// compares the WASM `default` module with it on a generated corpus.
func NativeCompletion(in reconcile.CompletionInput) reconcile.CompletionDecision {
	return reconcile.DecideDefault(in)
}
