package model

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

func TestDeploymentEventsKeepOnlyTheLastMaxAndDoNotAliasTheInput(t *testing.T) {
	var evs []DeploymentEvent
	for i := range MaxDeploymentEvents + 3 {
		evs = AppendDeploymentEvent(evs, DeploymentEvent{Kind: EventPolicyFault, Message: fmt.Sprint(i)})
	}
	if len(evs) != MaxDeploymentEvents {
		t.Fatalf("kept %d events, want %d", len(evs), MaxDeploymentEvents)
	}
	if evs[0].Message != "3" || evs[len(evs)-1].Message != fmt.Sprint(MaxDeploymentEvents+2) {
		t.Fatalf("kept %q..%q, want the last ones", evs[0].Message, evs[len(evs)-1].Message)
	}
	// Control: below the cap nothing is dropped.
	short := AppendDeploymentEvent([]DeploymentEvent{{Message: "a"}}, DeploymentEvent{Message: "b"})
	if len(short) != 2 || short[0].Message != "a" {
		t.Fatalf("below the cap: %+v", short)
	}
	base := make([]DeploymentEvent, 1, 4)
	base[0].Message = "x"
	_ = AppendDeploymentEvent(base, DeploymentEvent{Message: "y"})
	if base[:2][1].Message == "y" {
		t.Fatal("AppendDeploymentEvent wrote into the caller's backing array")
	}
}

func TestADeploymentWithEventsRoundTripsThroughStrictDecode(t *testing.T) {
	d := Deployment{ID: "d1", JobID: "j", Status: DeploymentRunning, TaskGroups: map[string]*DeploymentState{},
		Events: []DeploymentEvent{{Time: time.Unix(100, 0).UTC(), Kind: EventPolicyFault, Message: "trap"}}}
	b, err := json.Marshal(&d)
	if err != nil {
		t.Fatal(err)
	}
	var got Deployment
	if err := Decode(b, &got); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	if len(got.Events) != 1 || got.Events[0] != d.Events[0] {
		t.Fatalf("events after a round trip: %+v", got.Events)
	}
}
