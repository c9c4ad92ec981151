package policies_test

import (
	"context"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/policies"
)

// The agent creates one engine at start, with the compilation cache under
// its state directory, its metrics registry and a fault hook; loads the
// policies its jobs name (Store.Ensure does that for pushed ones), and hands
// the engine to the reconciler as its CanaryChooser and CompletionDecider.
func Example() {
	ctx := context.Background()
	stateDir, _ := os.MkdirTemp("", "hivelet-state-")
	defer os.RemoveAll(stateDir)
	e, err := policies.New(ctx, policies.Options{
		CacheDir:   stateDir + "/wazero",
		Registerer: prometheus.NewRegistry(),
		OnFault:    func(f *policies.Fault) { fmt.Println("deployment event:", f) },
	})
	if err != nil {
		panic(err)
	}
	defer e.Close(ctx)
	if err := e.EnsureBuiltin(ctx, "spread"); err != nil {
		panic(err)
	}
	var chooser reconcile.CanaryChooser = e
	var nodes []*model.Node
	for i, dc := range []string{"dc1", "dc1", "dc2", "dc2", "dc3"} {
		nodes = append(nodes, &model.Node{ID: fmt.Sprintf("n%d", i), Datacenter: dc})
	}
	choice, _ := chooser.ChooseCanaries(context.Background(), reconcile.CanaryRequest{
		DeploymentID: "d1", Count: 3, Eligible: nodes,
		Policy: &model.PolicyRef{Name: "spread", Params: map[string]string{"attribute": "datacenter"}},
	})
	fmt.Println(choice.NodeIDs, choice.Reason)

	// A policy the agent does not have: the native default answers and
	// the fault is reported.
	choice, _ = chooser.ChooseCanaries(context.Background(), reconcile.CanaryRequest{
		DeploymentID: "d1", Count: 2, Eligible: nodes, Policy: &model.PolicyRef{Name: "missing"},
	})
	fmt.Println(choice.NodeIDs)
	// Output:
	// [n0 n2 n4] spread across 3 values of datacenter
	// deployment event: policy "missing": not_loaded fault: no module of that name is loaded
	// [n0 n1]
}
