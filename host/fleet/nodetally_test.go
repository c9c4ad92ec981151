package fleet

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// sameTally reports whether two tallies count the same (a map emptied by
// deletes and one never made are the same count).
func sameTally(a, b NodeTally) bool {
	return a.Live == b.Live && a.Expired == b.Expired && maps.Equal(a.Protocols, b.Protocols) && maps.Equal(a.TTLs, b.TTLs)
}

// The tally a Source keeps as it applies node records is the count of its
// snapshot's records made whole, after each of 5,000 random steps:
// registrations at mixed protocol levels and TTLs, heartbeats, changes of
// level and TTL, deletes, expiries (a purge with the server's time),
// returns, rejected puts, and a bucket re-created (every record's applied
// revision forgotten, so no expiry counts). Controls: the snapshots share
// the parts of Nodes a change did not touch, and a snapshot taken before a
// change keeps its own count.
func TestTheSourcesNodeTallyIsTheCountOfItsSnapshotsRecords(t *testing.T) {
	s := NewSource(&Store{}, SourceConfig{})
	ref := bucketRef{kind: KindNodes, name: "t_nodes"}
	discard := slog.New(slog.DiscardHandler)
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(11, 3))
	rev := uint64(0)
	type rec struct {
		level int
		ttl   time.Duration
		at    time.Time
	}
	recs := map[string]rec{}
	put := func(k string, r rec) {
		var n model.Node
		if err := json.Unmarshal(benchNode(k, r.at), &n); err != nil {
			t.Fatal(err)
		}
		n.RolloutProtocol, n.HeartbeatTTL = r.level, model.Duration(r.ttl)
		b, _ := json.Marshal(n)
		rev++
		s.apply(ref, wanted.Entry{Key: k, Value: b, Revision: rev, Op: wanted.OpPut, Time: r.at}, discard)
		recs[k] = r
	}
	var kept []struct {
		v    *View
		want NodeTally
	}
	sharedParts, checked := 0, 0
	prev := s.View()
	for step := range 5000 {
		k := fmt.Sprintf("n%03d", rng.IntN(300))
		r, known := recs[k]
		now := t0.Add(time.Duration(step) * time.Second)
		switch op := rng.IntN(100); {
		case op < 50 && known: // a heartbeat
			r.at = now
			put(k, r)
		case op < 75: // a registration, or a change of level or TTL
			put(k, rec{level: 1 + rng.IntN(4), ttl: time.Duration(1+rng.IntN(3)) * 10 * time.Second, at: now})
		case op < 85 && known: // an expiry: the server's purge, with its time
			rev++
			s.apply(ref, wanted.Entry{Key: k, Revision: rev, Op: wanted.OpPurge, Time: now}, discard)
		case op < 92 && known: // an operator's delete
			rev++
			s.apply(ref, wanted.Entry{Key: k, Revision: rev, Op: wanted.OpDelete, Time: now}, discard)
		case op < 96: // a record that does not decode: rejected, the last good one kept
			rev++
			s.apply(ref, wanted.Entry{Key: k, Value: []byte(`{"id": 7}`), Revision: rev, Op: wanted.OpPut, Time: now}, discard)
		case op == 99 && rng.IntN(10) == 0: // the bucket re-created
			s.mu.Lock()
			s.forgetAppliedLocked(KindNodes)
			s.mu.Unlock()
		}
		if rng.IntN(4) == 0 {
			continue // several changes in one snapshot
		}
		v := s.View()
		checked++
		want := tallyOf(v.Nodes.All())
		if got := v.Tally(); !sameTally(got, want) {
			t.Fatalf("step %d: the source's tally %+v, a count of its records %+v", step, got, want)
		}
		if v.Nodes.p != nil && prev.Nodes.p != nil && v.Nodes.p != prev.Nodes.p {
			for i := range mapShards {
				if v.Nodes.p.id[i] != 0 && v.Nodes.p.id[i] == prev.Nodes.p.id[i] {
					sharedParts++
				}
			}
		}
		prev = v
		if step%500 == 0 {
			kept = append(kept, struct {
				v    *View
				want NodeTally
			}{v, want})
		}
	}
	for i, k := range kept {
		if got := k.v.Tally(); !sameTally(got, k.want) {
			t.Fatalf("snapshot %d: its tally changed after it was taken: %+v, was %+v", i, got, k.want)
		}
	}
	if checked < 3000 || sharedParts == 0 {
		t.Fatalf("%d snapshots checked, %d parts shared between successive ones", checked, sharedParts)
	}
	t.Logf("%d snapshots checked; %d parts shared between successive snapshots", checked, sharedParts)
}
