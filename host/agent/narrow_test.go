package agent

import (
	"testing"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/rollout"
	"github.com/hivelet/hivelet/host/wanted"
)

// filterOnly is a ViewSource that can change its filters (nothing else of
// it is called here).
type filterOnly struct{ ViewSource }

func (filterOnly) SetFilters(string, []string) {}

// The watch is narrowed only above the fleet size asked for, and only
// while every live node writes rollout summaries: a narrowed node would
// never be admitted by a steward that writes none. A node that is down
// does not count.
func TestNarrowingWaitsForTheFleetSizeAndForEveryLiveNodeToWriteSummaries(t *testing.T) {
	view := func(nodes map[string]int, down ...string) *fleet.View {
		v := &fleet.View{Nodes: map[string]wanted.NodeState{}}
		for id, level := range nodes {
			v.Nodes[id] = wanted.NodeState{Value: &model.Node{ID: id, RolloutProtocol: level}}
		}
		for _, id := range down {
			st := v.Nodes[id]
			st.Absent = true
			v.Nodes[id] = st
		}
		return v
	}
	cur := rollout.SummaryProtocol
	for _, c := range []struct {
		name   string
		above  int
		all    bool
		nodes  map[string]int
		down   []string
		narrow bool
	}{
		{"every node writes summaries, always narrowed", -1, false, map[string]int{"n1": cur, "n2": cur}, nil, true},
		{"an older live node", -1, false, map[string]int{"n1": cur, "n2": 1}, nil, false},
		{"an older node that is down", -1, false, map[string]int{"n1": cur, "n2": 1}, []string{"n2"}, true},
		{"a fleet at the limit", 2, false, map[string]int{"n1": cur, "n2": cur}, nil, false},
		{"a fleet above the limit", 1, false, map[string]int{"n1": cur, "n2": cur}, nil, true},
		{"told to watch everything", -1, true, map[string]int{"n1": cur, "n2": cur}, nil, false},
	} {
		a := &Agent{cfg: Config{Source: filterOnly{}, NarrowAbove: c.above, WatchAllAllocs: c.all}, nodeID: "n1"}
		a.decideNarrowing(view(c.nodes, c.down...))
		if a.narrowNow != c.narrow {
			t.Errorf("%s: narrowed %v, want %v", c.name, a.narrowNow, c.narrow)
		}
	}
	// Control: a source that cannot filter is never narrowed.
	a := &Agent{cfg: Config{Source: struct{ ViewSource }{}, NarrowAbove: -1}, nodeID: "n1"}
	a.decideNarrowing(view(map[string]int{"n1": cur, "n2": cur}))
	if a.narrowNow {
		t.Error("a source without filters narrowed")
	}
}
