package logs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// The details service answers with the node's whole record of an
// allocation it knows, refuses one it does not and a request that could
// not be valid, and is gone after Stop.
func TestTheDetailsServiceAnswersWithTheWholeRecord(t *testing.T) {
	srv := testutil.StartNATS(t, nil)
	nc, client := connect(t, srv), connect(t, srv)
	events := make([]model.TaskEvent, 10)
	for i := range events {
		events[i] = model.TaskEvent{Type: "Restarting", Message: "attempt", Time: time.Unix(int64(1000+i), 0).UTC()}
	}
	held := &model.Allocation{ID: allocID, NodeID: nodeID, JobID: "web", DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning,
		TaskStates: map[string]*model.TaskState{"t": {State: "running", Events: events}}}
	ds, err := ServeDetails(nc, prefix, nodeID, func(id string) (*model.Allocation, bool) {
		if id == allocID {
			return held, true
		}
		return nil, false
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := FetchDetails(context.Background(), client, prefix, nodeID, allocID)
	if err != nil {
		t.Fatal(err)
	}
	if ev := got.TaskStates["t"].Events; len(ev) != 10 || !ev[9].Time.Equal(events[9].Time) {
		t.Fatalf("the node's whole history was not given: %+v", got.TaskStates["t"])
	}
	var re *RemoteError
	other := "1b6b1c2e-5d8a-4b51-9a8e-3f1b2c4d5e6f"
	if _, err := FetchDetails(context.Background(), client, prefix, nodeID, other); !errors.As(err, &re) || re.Code != CodeUnknownAlloc || !strings.Contains(err.Error(), other) {
		t.Fatalf("an allocation the node does not know: %v", err)
	}
	// A name that could not be an allocation ID is refused by the client,
	// and by the server if sent anyway.
	if _, err := FetchDetails(context.Background(), client, prefix, nodeID, "../x"); err == nil || !strings.Contains(err.Error(), "alloc_id") {
		t.Fatalf("a bad ID: %v", err)
	}
	subj, _ := DetailsSubject(prefix, nodeID)
	m, err := client.Request(subj, []byte(`{"alloc_id":"../x"}`), 5*time.Second)
	if err != nil || !strings.Contains(string(m.Data), CodeBadRequest) {
		t.Fatalf("a bad ID sent raw: %v %s", err, m.Data)
	}
	ds.Stop()
	var na *NoAgentError
	if _, err := FetchDetails(context.Background(), client, prefix, nodeID, allocID); !errors.As(err, &na) || !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("after Stop: %v", err)
	}
	if _, err := ServeDetails(nc, "hive.let", nodeID, func(string) (*model.Allocation, bool) { return nil, false }, nil); err == nil || !strings.Contains(err.Error(), `bucket prefix "hive.let"`) {
		t.Fatalf("prefix with a dot: %v", err)
	}
}
