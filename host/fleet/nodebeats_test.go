package fleet

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// A snapshot keeps the nodes' heartbeats beside their records
// (View.NodeBeats) instead of copying the records after each heartbeat.
// After each of 4,000 random steps (heartbeats, changed records, joins,
// expiries, a view taken or not), every key's NodeState is the source's
// newest state, and its Nodes entry the same but for the heartbeat's own
// fields. Controls: snapshots share one Nodes map across heartbeats, and
// the heartbeats are folded in once they pass one record in eight.
func TestASnapshotKeepsHeartbeatsBesideItsNodeRecordsAndAnswersTheNewestState(t *testing.T) {
	s := NewSource(&Store{}, SourceConfig{})
	ref := bucketRef{kind: KindNodes, name: "t_nodes"}
	discard := slog.New(slog.DiscardHandler)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(7, 9))
	const keys = 64
	rev := uint64(0)
	at := map[string]time.Time{}
	status := map[string]model.NodeStatus{}
	put := func(k string) {
		var n model.Node
		_ = json.Unmarshal(benchNode(k, at[k]), &n)
		if status[k] != "" {
			n.Status = status[k]
		}
		b, _ := json.Marshal(n)
		rev++
		s.apply(ref, wanted.Entry{Key: k, Value: b, Revision: rev, Op: wanted.OpPut, Time: at[k]}, discard)
	}
	for i := range keys {
		k := fmt.Sprintf("n%02d", i)
		at[k] = t0
		put(k)
	}
	shared, folded := 0, 0
	prev := s.View()
	for step := range 4000 {
		k := fmt.Sprintf("n%02d", rng.IntN(keys))
		switch r := rng.IntN(100); {
		case r < 85: // a heartbeat
			at[k] = at[k].Add(time.Duration(1+rng.IntN(10)) * time.Second)
			put(k)
		case r < 92: // the record changed
			status[k] = []model.NodeStatus{model.NodeStatusReady, model.NodeStatusInitializing}[rng.IntN(2)]
			at[k] = at[k].Add(time.Second)
			put(k)
		case r < 96: // an expiry (of a live record: a second one changes nothing)
			if s.nodes.At(k).Absent {
				continue
			}
			rev++
			s.apply(ref, wanted.Entry{Key: k, Revision: rev, Op: wanted.OpPurge, Time: at[k]}, discard)
		default: // back, or a new node
			at[k] = at[k].Add(time.Second)
			put(k)
		}
		if rng.IntN(3) == 0 {
			continue // no snapshot this step
		}
		v := s.View()
		if v.Nodes.Len() > 0 && v.Nodes.p == prev.Nodes.p && len(v.NodeBeats) > 0 {
			shared++
			// The heartbeats are the previous snapshot's and the ones
			// applied since: prev's log, untouched, is a prefix of v's.
			if len(prev.NodeBeats) > len(v.NodeBeats) || (len(prev.NodeBeats) > 0 && !reflect.DeepEqual(prev.NodeBeats, v.NodeBeats[:len(prev.NodeBeats)])) {
				t.Fatalf("step %d: the previous snapshot's heartbeats are not a prefix of this one's: %d then %d", step, len(prev.NodeBeats), len(v.NodeBeats))
			}
		}
		if len(prev.NodeBeats) > len(v.NodeBeats) {
			folded++
		}
		prev = v
		if len(v.NodeBeats) > keys/nodeBeatsShare+1 {
			t.Fatalf("step %d: %d heartbeats beside %d records", step, len(v.NodeBeats), v.Nodes.Len())
		}
		s.mu.Lock()
		truth := map[string]wanted.NodeState{}
		for k, st := range s.nodes.All() {
			truth[k] = st
		}
		s.mu.Unlock()
		newest := map[string]wanted.NodeState{}
		for k, st := range v.NodesNewest() {
			newest[k] = st
		}
		if !reflect.DeepEqual(newest, truth) {
			t.Fatalf("step %d: NodesNewest differs from the source's states", step)
		}
		if v.Nodes.Len() != len(truth) {
			t.Fatalf("step %d: %d records, the source holds %d", step, v.Nodes.Len(), len(truth))
		}
		for k, want := range truth {
			got, ok := v.NodeState(k)
			if !ok || !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d: NodeState(%s) = %+v, want %+v", step, k, got, want)
			}
			base := v.Nodes.At(k)
			if want.Value != nil && base.Value != nil {
				a, b := *base.Value, *want.Value
				a.HeartbeatAt, b.HeartbeatAt = time.Time{}, time.Time{}
				if !reflect.DeepEqual(a, b) || base.Absent != want.Absent || base.Expired != want.Expired || !reflect.DeepEqual(base.Rejection, want.Rejection) {
					t.Fatalf("step %d: Nodes[%s] differs beyond its heartbeat:\n%+v\n%+v", step, k, base, want)
				}
			} else if (want.Value == nil) != (base.Value == nil) || base.Absent != want.Absent {
				t.Fatalf("step %d: Nodes[%s] = %+v, want %+v", step, k, base, want)
			}
			if n := v.Node(want.Key); k == want.Key && n == nil && want.Value != nil {
				t.Fatalf("step %d: Node(%s) nil", step, k)
			}
		}
	}
	if shared == 0 || folded == 0 {
		t.Fatalf("snapshots sharing their records across heartbeats %d, folds %d: the path under test was not taken", shared, folded)
	}
	t.Logf("%d snapshots shared their records across heartbeats, %d folded the heartbeats in", shared, folded)
}

// A heartbeat moves a snapshot's Generation but not its ChangeGeneration;
// a changed record (the control) and a rejected one move both, and the
// rejection is then in the view's Rejections.
func TestAHeartbeatMovesTheGenerationButNotTheChangeGeneration(t *testing.T) {
	s := NewSource(&Store{}, SourceConfig{})
	ref := bucketRef{kind: KindNodes, name: "t_nodes"}
	discard := slog.New(slog.DiscardHandler)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rev := uint64(0)
	put := func(k string, b []byte) {
		rev++
		s.apply(ref, wanted.Entry{Key: k, Value: b, Revision: rev, Op: wanted.OpPut, Time: t0}, discard)
	}
	put("n1", benchNode("n1", t0))
	v0 := s.View()
	put("n1", benchNode("n1", t0.Add(time.Second))) // a heartbeat
	v1 := s.View()
	if v1.NodesCopy != v0.NodesCopy || v0.NodesCopy == 0 {
		t.Fatalf("after a heartbeat: nodes copy %d → %d; want the records' map kept", v0.NodesCopy, v1.NodesCopy)
	}
	if v1.Generation == v0.Generation || v1.ChangeGeneration != v0.ChangeGeneration {
		t.Fatalf("after a heartbeat: generation %d → %d, change generation %d → %d; want the first moved, the second not",
			v0.Generation, v1.Generation, v0.ChangeGeneration, v1.ChangeGeneration)
	}
	var n model.Node
	_ = json.Unmarshal(benchNode("n1", t0.Add(2*time.Second)), &n)
	n.Status = model.NodeStatusInitializing
	b, _ := json.Marshal(n)
	put("n1", b) // the record changed
	v2 := s.View()
	if v2.NodesCopy == v1.NodesCopy {
		t.Fatalf("control, a changed record: the records' map was kept (nodes copy %d)", v2.NodesCopy)
	}
	if v2.ChangeGeneration == v1.ChangeGeneration || v2.ChangeGeneration != v2.Generation {
		t.Fatalf("control, a changed record: change generation %d → %d (generation %d)", v1.ChangeGeneration, v2.ChangeGeneration, v2.Generation)
	}
	put("n2", []byte(`{"id":"n2","ID":"n2"}`)) // rejected: a key repeated in another case
	v3 := s.View()
	if v3.ChangeGeneration == v2.ChangeGeneration || len(v3.Rejections()) != 1 {
		t.Fatalf("control, a rejected record: change generation %d → %d, rejections %v", v2.ChangeGeneration, v3.ChangeGeneration, v3.Rejections())
	}
}

// A snapshot's rejections are walked again only for a kind whose map is
// another: heartbeats and other kinds' changes answer from the memo, and a
// rejection that ends (the record put right) is gone at once.
func TestASnapshotsRejectionsFollowTheRecordsThroughTheMemo(t *testing.T) {
	s := NewSource(&Store{}, SourceConfig{})
	nodes := bucketRef{kind: KindNodes, name: "t_nodes"}
	allocs := bucketRef{kind: KindAllocs, name: "t_allocs"}
	discard := slog.New(slog.DiscardHandler)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rev := uint64(0)
	put := func(ref bucketRef, k string, b []byte) {
		rev++
		s.apply(ref, wanted.Entry{Key: k, Value: b, Revision: rev, Op: wanted.OpPut, Time: t0}, discard)
	}
	put(nodes, "n1", benchNode("n1", t0))
	put(nodes, "n2", []byte(`{"id":"n2","ID":"n2"}`)) // rejected
	v1 := s.View()
	if r := v1.Rejections(); len(r) != 1 || r[0].Key != "n2" {
		t.Fatalf("rejections %v, want n2's", r)
	}
	put(nodes, "n1", benchNode("n1", t0.Add(time.Second)))            // a heartbeat
	put(allocs, "n1.default.web.a1", []byte(`{"id":"a1","ID":"a1"}`)) // another kind, rejected too
	v2 := s.View()
	if v2.Nodes.p != v1.Nodes.p {
		t.Fatal("the heartbeat copied the node records: the memo is not reached")
	}
	if r := v2.Rejections(); len(r) != 2 {
		t.Fatalf("after a heartbeat and a rejected allocation: %v", r)
	}
	var n model.Node
	_ = json.Unmarshal(benchNode("n2", t0), &n)
	b, _ := json.Marshal(n)
	put(nodes, "n2", b) // put right
	if r := s.View().Rejections(); len(r) != 1 || r[0].Key != "n1.default.web.a1" {
		t.Fatalf("after n2 was put right: %v", r)
	}
	if r := v1.Rejections(); len(r) != 1 || r[0].Key != "n2" {
		t.Fatalf("an older snapshot's rejections changed: %v", r)
	}
}

// A heartbeat alone is applied but not signalled (Changed, Subscribe)
// until beatSignalEvery of them have gone unsignalled; every other change
// is signalled at once. Checked, for a run of heartbeats: none signals
// before the bound and the one at the bound does, on both channels; each
// View in between holds the newest heartbeat time; a changed record, a
// new node, an expiry and a heartbeat decoded (not applied from the
// bytes) after a change are signalled or not as they should be; the
// change log holds every heartbeat, and a consumer woken at the bound
// reads them all (the log reaches back to its last read).
func TestAHeartbeatAloneIsNotSignalledUntilAQuarterOfTheLogIs(t *testing.T) {
	s := NewSource(&Store{}, SourceConfig{})
	ref := bucketRef{kind: KindNodes, name: "t_nodes"}
	discard := slog.New(slog.DiscardHandler)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	sub, cancel := s.Subscribe()
	defer cancel()
	rev := uint64(0)
	put := func(k string, b []byte) {
		rev++
		s.apply(ref, wanted.Entry{Key: k, Value: b, Revision: rev, Op: wanted.OpPut, Time: t0}, discard)
	}
	// signalled drains both channels and reports whether each had a value.
	signalled := func() (changed, subscribed bool) {
		select {
		case <-s.Changed():
			changed = true
		default:
		}
		select {
		case <-sub:
			subscribed = true
		default:
		}
		return changed, subscribed
	}
	put("n1", benchNode("n1", t0))
	put("n2", benchNode("n2", t0))
	if c, u := signalled(); !c || !u {
		t.Fatalf("new nodes: signalled %v to Changed, %v to the subscriber; want both", c, u)
	}
	read := s.Generation() // what a consumer woken now has read
	at := t0
	for i := 1; i < beatSignalEvery; i++ {
		at = at.Add(time.Second)
		put([]string{"n1", "n2"}[i%2], benchNode([]string{"n1", "n2"}[i%2], at))
		if c, u := signalled(); c || u {
			t.Fatalf("heartbeat %d of %d: signalled (Changed %v, subscriber %v)", i, beatSignalEvery, c, u)
		}
		if i%97 == 0 {
			if st, ok := s.View().NodeState([]string{"n1", "n2"}[i%2]); !ok || !st.Value.HeartbeatAt.Equal(at) {
				t.Fatalf("heartbeat %d: the view's heartbeat time %v, want %v", i, st.Value.HeartbeatAt, at)
			}
		}
	}
	at = at.Add(time.Second)
	put("n1", benchNode("n1", at)) // the bound
	if c, u := signalled(); !c || !u {
		t.Fatalf("heartbeat %d: signalled %v to Changed, %v to the subscriber; want both at the bound", beatSignalEvery, c, u)
	}
	changes, complete := s.ChangesSince(read, s.Generation())
	if !complete || len(changes) != beatSignalEvery {
		t.Fatalf("a consumer woken at the bound reads %d changes (complete %v), want the %d heartbeats", len(changes), complete, beatSignalEvery)
	}
	for _, c := range changes {
		if !c.HeartbeatOnly {
			t.Fatalf("change %+v: not a heartbeat", c)
		}
	}
	// After a signal the count starts again.
	at = at.Add(time.Second)
	put("n2", benchNode("n2", at))
	if c, u := signalled(); c || u {
		t.Fatalf("a heartbeat after the bound's signal: signalled (Changed %v, subscriber %v)", c, u)
	}
	// Controls: a changed record, an expiry and a new node are signalled.
	var n model.Node
	_ = json.Unmarshal(benchNode("n1", at.Add(time.Second)), &n)
	n.Status = model.NodeStatusInitializing
	b, _ := json.Marshal(n)
	put("n1", b)
	if c, u := signalled(); !c || !u {
		t.Fatalf("a changed record: signalled %v to Changed, %v to the subscriber; want both", c, u)
	}
	rev++
	s.apply(ref, wanted.Entry{Key: "n2", Revision: rev, Op: wanted.OpPurge, Time: t0}, discard)
	if c, u := signalled(); !c || !u {
		t.Fatalf("an expiry: signalled %v to Changed, %v to the subscriber; want both", c, u)
	}
	put("n3", benchNode("n3", t0))
	if c, u := signalled(); !c || !u {
		t.Fatalf("a new node: signalled %v to Changed, %v to the subscriber; want both", c, u)
	}
	// A heartbeat whose bytes differ from the last accepted beyond the
	// time (here: its fields reordered, so it is decoded) is a heartbeat
	// still, and not signalled.
	_ = json.Unmarshal(benchNode("n3", t0.Add(time.Second)), &n)
	var m map[string]any
	raw, _ := json.Marshal(n)
	_ = json.Unmarshal(raw, &m)
	reordered, _ := json.Marshal(m) // map keys sorted: another field order
	before := s.NodeApplies().DecodedBeats
	put("n3", reordered)
	if s.NodeApplies().DecodedBeats != before+1 {
		t.Fatalf("the reordered heartbeat was not decoded (decoded beats %d → %d): the case is not tested", before, s.NodeApplies().DecodedBeats)
	}
	if c, u := signalled(); c || u {
		t.Fatalf("a decoded heartbeat: signalled (Changed %v, subscriber %v)", c, u)
	}
}
