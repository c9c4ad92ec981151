package allocrunner

import (
	"slices"

	"github.com/hivelet/hivelet/host/model"
)

// failureEvents are the task events that say why a task did not run; the
// rest (Restarting, Killing...) say what happened next.
var failureEvents = []string{EventDriverFailure, EventFailedValidation, EventTemplateFailure,
	EventArtifactFailure, EventSetupFailure, EventRecoverFailed}

// IsFailureEvent reports whether an event type says why a task did not
// run (a driver, validation, template, artifact, setup or recovery
// failure).
func IsFailureEvent(typ string) bool { return slices.Contains(failureEvents, typ) }

// tellingIndex is the index of the event of ts that best says why the task
// failed: the last failure event, else the last termination with a
// non-zero exit, else the last event; -1 when there is none.
func tellingIndex(ts *model.TaskState) int {
	if ts == nil || len(ts.Events) == 0 {
		return -1
	}
	for i := len(ts.Events) - 1; i >= 0; i-- {
		if IsFailureEvent(ts.Events[i].Type) {
			return i
		}
	}
	for i := len(ts.Events) - 1; i >= 0; i-- {
		if e := ts.Events[i]; e.Type == EventTerminated && e.Message != "exit code 0" {
			return i
		}
	}
	return len(ts.Events) - 1
}

// TellingEvent is the event of a task that best says why it failed: the
// last failure event, else the last termination with a non-zero exit, else
// the last event. then is the last event ("Type: message") when it is
// another one. ok is false when the task has no event.
func TellingEvent(ts *model.TaskState) (telling model.TaskEvent, then string, ok bool) {
	pick := tellingIndex(ts)
	if pick < 0 {
		return model.TaskEvent{}, "", false
	}
	telling = ts.Events[pick]
	if last := ts.Events[len(ts.Events)-1]; pick != len(ts.Events)-1 {
		then = last.Type
		if last.Message != "" {
			then += ": " + last.Message
		}
	}
	return telling, then, true
}

// ForWire is the allocation as its node writes it to the allocations
// bucket: what plans, health and the fleet's views read, with each task's
// events cut to its telling event and its last (TellingEvent: what `job
// status` and `why` show from the bucket); TaskState.MoreEvents counts what
// was left out, and the node serves the whole history on request. An
// allocation value is delivered to every watcher of the job's allocations,
// on every status change: a task's ten events were most of its bytes.
//
// a is not modified (it may be a runner's shared snapshot); the result
// shares everything but the task states with it.
func ForWire(a *model.Allocation) *model.Allocation {
	if a == nil {
		return nil
	}
	trim := false
	for _, ts := range a.TaskStates {
		if ts != nil && len(ts.Events) > 2 {
			trim = true
			break
		}
	}
	if !trim {
		return a
	}
	c := *a
	c.TaskStates = make(map[string]*model.TaskState, len(a.TaskStates))
	for name, ts := range a.TaskStates {
		if ts == nil || len(ts.Events) <= 2 {
			c.TaskStates[name] = ts
			continue
		}
		t := *ts
		last := len(ts.Events) - 1
		if pick := tellingIndex(ts); pick != last {
			t.Events = []model.TaskEvent{ts.Events[pick], ts.Events[last]}
		} else {
			t.Events = []model.TaskEvent{ts.Events[last]}
		}
		t.MoreEvents = ts.MoreEvents + len(ts.Events) - len(t.Events)
		c.TaskStates[name] = &t
	}
	return &c
}
