package main

import (
	"context"
	"testing"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
)

func TestThePolicyEngineLoadsOnlyWhenAJobNamesAPolicy(t *testing.T) {
	starts := 0
	l := &lazyPolicies{start: func() { starts++ }}
	d := &model.Deployment{ID: "d", Status: model.DeploymentRunning, TaskGroups: map[string]*model.DeploymentState{"g": {DesiredTotal: 1}}}
	dec, err := l.DecideCompletion(context.Background(), reconcile.CompletionInput{Deployment: d, Groups: map[string]reconcile.GroupHealth{"g": {Placed: 1, Healthy: 1, Complete: true}}})
	if err != nil || dec.Decision != reconcile.DecisionSucceed {
		t.Fatalf("native default: %+v %v", dec, err)
	}
	if _, err := l.ChooseCanaries(context.Background(), reconcile.CanaryRequest{Count: 0}); err != nil {
		t.Fatal(err)
	}
	if starts != 0 {
		t.Fatalf("the engine was loaded for decisions naming no policy (%d)", starts)
	}
	// Control: a decision naming a policy starts the load, once, and is
	// answered natively until the engine is ready.
	ref := &model.PolicyRef{Name: "quorum"}
	for range 3 {
		dec, err = l.DecideCompletion(context.Background(), reconcile.CompletionInput{Deployment: d, Policy: ref, Groups: map[string]reconcile.GroupHealth{"g": {Placed: 1, Healthy: 1, Complete: true}}})
		if err != nil || dec.Decision != reconcile.DecisionSucceed {
			t.Fatalf("before the engine is ready: %+v %v", dec, err)
		}
	}
	if starts != 1 {
		t.Fatalf("engine load started %d times, want 1", starts)
	}
}
