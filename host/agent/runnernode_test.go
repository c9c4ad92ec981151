package agent

import (
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// TestRunnersShareTheNodeRecordWhileOnlyItsHeartbeatMoves: the node
// function builds a fresh record at every call, as the agent's does. New
// runners are given one record while the node changes only its heartbeat
// time, inside a pass (the pass's record) or outside one; a record that
// changes anything else (an attribute, the drain) is given to the runners
// made after it, and the earlier runners keep what they were given.
func TestRunnersShareTheNodeRecordWhileOnlyItsHeartbeatMoves(t *testing.T) {
	beat := time.Unix(1000, 0)
	attr := "v1"
	var drain *model.DrainStrategy
	built := 0
	a := &Agent{cfg: Config{Node: func() *model.Node {
		built++
		beat = beat.Add(time.Second)
		n := nodeRecord("n1")
		n.Attributes["custom"] = attr
		n.HeartbeatAt = beat
		n.Drain = drain
		return n
	}}}
	first := a.runnerNode()
	for i := range 5 {
		if n := a.runnerNode(); n != first {
			t.Fatalf("runner %d outside a pass got a record of its own (heartbeat %s)", i, n.HeartbeatAt)
		}
	}
	// Inside a pass: the pass's record (built at its start), which is the
	// shared one when only its heartbeat moved.
	pass := a.cfg.Node()
	a.passNode.Store(pass)
	before := built
	for i := range 5 {
		if n := a.runnerNode(); n != first {
			t.Fatalf("runner %d in a pass got a record of its own", i)
		}
	}
	if built != before {
		t.Fatalf("the runners of a pass built %d node records; they take the pass's", built-before)
	}
	if a.passNode.Load() != first {
		t.Fatal("the pass's later runners do not find the shared record at once")
	}
	a.passNode.Store(nil)

	// A change beyond the heartbeat: later runners get the new record.
	attr = "v2"
	changed := a.runnerNode()
	if changed == first || changed.Attributes["custom"] != "v2" {
		t.Fatalf("after an attribute changed a runner got %v", changed.Attributes["custom"])
	}
	if first.Attributes["custom"] != "v1" {
		t.Fatal("the earlier runners' record was changed")
	}
	if n := a.runnerNode(); n != changed {
		t.Fatal("the changed record is not shared by the runners after it")
	}
	drain = &model.DrainStrategy{}
	if n := a.runnerNode(); n == changed || n.Drain == nil {
		t.Fatal("a drain set on the node did not reach the next runner's record")
	}
}

// statusMetrics keeps the allocations counter the agent hands over, and
// calls it as a scrape would.
type statusMetrics struct {
	nopMetrics
	mu    sync.Mutex
	count func() map[string]int
}

func (m *statusMetrics) CountAllocsWith(count func() map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count = count
}

func (m *statusMetrics) get() map[string]int {
	m.mu.Lock()
	count := m.count
	m.mu.Unlock()
	if count == nil {
		return nil
	}
	return count()
}

// TestTheAllocationsMetricCountsLiveAndFinishedAllocationsByStatus: the
// metric, read as a scrape reads it, counts this node's live runners and its finished
// allocations by client status, as Allocs lists them.
func TestTheAllocationsMetricCountsLiveAndFinishedAllocationsByStatus(t *testing.T) {
	w := newWorld(t)
	m := &statusMetrics{}
	n := w.newNodeWith("node-a", nil, "", 500*time.Millisecond, func(n *node) { n.metrics = m })
	defer n.stop(true)
	web := mockJob("web", 0, nil)
	web.Groups[0].Count = 3
	web.Groups[0].Update.MaxParallel = 0
	w.putJob(web)
	batch := mockJob("batch", 1, map[string]any{"run_for": "20ms"})
	batch.Type = model.JobTypeSysbatch
	batch.Groups[0].Update = nil
	batch.Groups[0].Count = 2
	w.putJob(batch)
	want := map[string]int{"running": 3, "complete": 2}
	testutil.Eventually(t, 15*time.Second, "the metric at 3 running and 2 complete", func() bool {
		return maps.Equal(m.get(), want)
	})
	// The metric says what Allocs says.
	got := map[string]int{}
	for _, a := range n.agent.Allocs() {
		got[string(a.ClientStatus)]++
	}
	if !maps.Equal(got, want) {
		t.Fatalf("Allocs by status %v, the metric %v", got, m.get())
	}
}
