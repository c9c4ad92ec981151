package allocrunner

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

func wireEvents(types ...string) []model.TaskEvent {
	out := make([]model.TaskEvent, len(types))
	for i, typ := range types {
		out[i] = model.TaskEvent{Type: typ, Message: "m" + typ, Time: time.Unix(int64(1000+i), 0).UTC()}
	}
	return out
}

// The bucket's copy of an allocation keeps each task's telling and last
// events, counts what it left out, and leaves the runner's record as it
// was.
func TestForWireKeepsTheTellingAndTheLastEventOfEachTask(t *testing.T) {
	a := &model.Allocation{ID: "a1", JobID: "web", TaskStates: map[string]*model.TaskState{
		// A failure, then what came after it: the failure tells why.
		"web": {State: "pending", Restarts: 3, Events: wireEvents(EventReceived, EventStarted, EventDriverFailure, EventRestarting, EventKilling, EventRestarting)},
		// A task that runs: its last event is all it needs.
		"side": {State: "running", Events: wireEvents(EventReceived, "Task Setup", EventStarted)},
		// Two events are kept as they are.
		"log": {State: "running", Events: wireEvents(EventReceived, EventStarted)},
	}}
	before, _ := json.Marshal(a)
	w := ForWire(a)
	after, _ := json.Marshal(a)
	if string(before) != string(after) {
		t.Fatalf("ForWire changed the runner's record:\n%s\n%s", before, after)
	}
	web := w.TaskStates["web"]
	if len(web.Events) != 2 || web.Events[0].Type != EventDriverFailure || web.Events[1].Type != EventRestarting || web.MoreEvents != 4 || web.Restarts != 3 {
		t.Fatalf("web on the wire: %+v", web)
	}
	if tell, then, _ := TellingEvent(web); tell.Type != EventDriverFailure || then != EventRestarting+": m"+EventRestarting {
		t.Fatalf("the bucket's copy no longer tells why: %v, then %q", tell, then)
	}
	if side := w.TaskStates["side"]; len(side.Events) != 1 || side.Events[0].Type != EventStarted || side.MoreEvents != 2 {
		t.Fatalf("side on the wire: %+v", side)
	}
	if w.TaskStates["log"] != a.TaskStates["log"] {
		t.Fatal("a task with two events was copied, not shared")
	}
	// Trimmed again (a copy read back and written), the count adds up.
	if again := ForWire(&model.Allocation{TaskStates: map[string]*model.TaskState{"web": {Events: append(wireEvents(EventStarted), web.Events...), MoreEvents: web.MoreEvents}}}); again.TaskStates["web"].MoreEvents != 5 {
		t.Fatalf("more events after a second trim: %d", again.TaskStates["web"].MoreEvents)
	}
	// An allocation with nothing to trim is the same record.
	small := &model.Allocation{ID: "a2", TaskStates: map[string]*model.TaskState{"t": {Events: wireEvents(EventStarted)}}}
	if ForWire(small) != small || ForWire(nil) != nil {
		t.Fatal("nothing to trim, yet copied")
	}
	// The compact value is what it should be: smaller.
	full, _ := json.Marshal(a)
	wire, _ := json.Marshal(w)
	if len(wire) >= len(full) {
		t.Fatalf("the wire copy is %d bytes, the full one %d", len(wire), len(full))
	}
	if !reflect.DeepEqual(w.TaskStates["web"].Events[0], a.TaskStates["web"].Events[2]) {
		t.Fatal("the telling event was altered")
	}
}
