package fleet

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// The fast path makes exactly the record a full decode makes, for a
// heartbeat; and refuses everything else, so that the decode decides.
func TestAHeartbeatPutIsTheRecordADecodeMakesAndNothingElseTakesTheFastPath(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	first := benchNode("n1", t0)
	accepted, ef := wanted.ApplyNode(wanted.NodeState{}, wanted.Entry{Key: "n1", Value: first, Revision: 3, Op: wanted.OpPut, Time: t0})
	if ef != wanted.EffectAccepted {
		t.Fatalf("the first put: %v", ef)
	}
	beat := wanted.Entry{Key: "n1", Value: benchNode("n1", t0.Add(10*time.Second)), Revision: 7, Op: wanted.OpPut, Time: t0.Add(11 * time.Second)}
	fast, ok := heartbeatPut(accepted, first, beat)
	if !ok {
		t.Fatal("a heartbeat did not take the fast path")
	}
	slow, _ := wanted.ApplyNode(accepted, beat)
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("fast path\n%+v\nfull decode\n%+v", fast, slow)
	}
	if !fast.Value.HeartbeatAt.Equal(t0.Add(10*time.Second)) || fast.Revision != 7 || fast.Applied != 7 {
		t.Fatalf("fast path result %+v", fast)
	}
	if accepted.Value.HeartbeatAt != t0 {
		t.Fatal("the fast path modified the record it started from")
	}

	// The very bytes again (the same record re-put, or a heartbeat of a
	// record that carries no time): the same value at the new revision,
	// equal to the full decode.
	timeless := func() []byte {
		var n model.Node
		if err := json.Unmarshal(first, &n); err != nil {
			t.Fatal(err)
		}
		n.HeartbeatAt = time.Time{}
		b, _ := json.Marshal(n)
		return b
	}()
	for _, raw := range [][]byte{first, timeless} {
		held, ef := wanted.ApplyNode(wanted.NodeState{}, wanted.Entry{Key: "n1", Value: raw, Revision: 3, Op: wanted.OpPut, Time: t0})
		if ef != wanted.EffectAccepted {
			t.Fatalf("the first put: %v", ef)
		}
		again := wanted.Entry{Key: "n1", Value: slices.Clone(raw), Revision: 9, Op: wanted.OpPut, Time: t0.Add(time.Minute)}
		fast, ok := heartbeatPut(held, raw, again)
		if !ok {
			t.Fatalf("the same bytes again (%s) did not take the fast path", raw)
		}
		if slow, _ := wanted.ApplyNode(held, again); !reflect.DeepEqual(fast, slow) {
			t.Fatalf("the same bytes again: fast path\n%+v\nfull decode\n%+v", fast, slow)
		}
	}

	// What must be decoded.
	other := func(f func(n *model.Node)) []byte {
		var n model.Node
		if err := json.Unmarshal(beat.Value, &n); err != nil {
			t.Fatal(err)
		}
		f(&n)
		b, _ := json.Marshal(n)
		return b
	}
	withAttr := func(k, v string) func(n *model.Node) {
		return func(n *model.Node) { n.Attributes[k] = v }
	}
	cases := []struct {
		name  string
		prev  wanted.NodeState
		raw   []byte
		entry wanted.Entry
	}{
		{"an attribute changed too", accepted, first, wanted.Entry{Key: "n1", Value: other(withAttr("os.version", "2")), Revision: 8, Op: wanted.OpPut}},
		{"drained", accepted, first, wanted.Entry{Key: "n1", Value: other(func(n *model.Node) { n.Drain = &model.DrainStrategy{} }), Revision: 8, Op: wanted.OpPut}},
		{"an attribute named like the field", accepted, first, wanted.Entry{Key: "n1", Value: other(withAttr("heartbeat_at", "x")), Revision: 8, Op: wanted.OpPut}},
		{"a time that is no time", accepted, first, wanted.Entry{Key: "n1", Value: bytes.Replace(beat.Value, []byte(`"heartbeat_at":"2026`), []byte(`"heartbeat_at":"x026`), 1), Revision: 8, Op: wanted.OpPut}},
		{"an escaped time", accepted, first, wanted.Entry{Key: "n1", Value: bytes.Replace(beat.Value, []byte(`"heartbeat_at":"2`), []byte(`"heartbeat_at":"\u0032`), 1), Revision: 8, Op: wanted.OpPut}},
		{"a repeated revision", accepted, first, wanted.Entry{Key: "n1", Value: beat.Value, Revision: 3, Op: wanted.OpPut}},
		{"a delete", accepted, first, wanted.Entry{Key: "n1", Revision: 8, Op: wanted.OpDelete}},
		{"no bytes held", accepted, nil, beat},
		{"held bytes of another time", accepted, benchNode("n1", t0.Add(time.Hour)), beat},
		{"an absent record (the node back after its expiry)", func() wanted.NodeState { s := accepted; s.Absent = true; return s }(), first, beat},
		{"a rejected newest put", func() wanted.NodeState { s := accepted; s.Rejection = &wanted.Rejection{Reason: "x"}; return s }(), first, beat},
	}
	for _, c := range cases {
		if _, ok := heartbeatPut(c.prev, c.raw, c.entry); ok {
			t.Errorf("%s: took the fast path", c.name)
		}
	}
	// The decode of "an escaped time" reads it as a time (Go 1.27's
	// time.Time.UnmarshalJSON unescapes; 1.26's rejects the record,
	// naming the field): either way the fast path was right to leave it
	// to the decode (control for the case above).
	st, ef := wanted.ApplyNode(accepted, cases[4].entry)
	decoded := ef == wanted.EffectAccepted && !st.Value.HeartbeatAt.IsZero()
	refused := ef != wanted.EffectAccepted && st.Rejection != nil && strings.Contains(st.Rejection.Reason, "heartbeat_at")
	if !decoded && !refused {
		t.Fatalf("the escaped time: %v %+v %+v", ef, st, st.Rejection)
	}
}

// Through the source: a heartbeat is applied without a decode and logged as
// heartbeat-only; the next real change is decoded and is not.
func TestTheSourceAppliesHeartbeatsWithoutDecodingAndDecodesChanges(t *testing.T) {
	s := NewSource(&Store{}, SourceConfig{})
	ref := bucketRef{kind: KindNodes, name: "t_nodes"}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s.apply(ref, wanted.Entry{Key: "n1", Value: benchNode("n1", t0), Revision: 1, Op: wanted.OpPut}, nil)
	before := reflect.ValueOf(s.nodes.At("n1").Value.Attributes).Pointer()
	s.apply(ref, wanted.Entry{Key: "n1", Value: benchNode("n1", t0.Add(10*time.Second)), Revision: 2, Op: wanted.OpPut}, nil)
	// Not decoded: the new record shares the decoded maps of the last.
	if after := reflect.ValueOf(s.nodes.At("n1").Value.Attributes).Pointer(); after != before {
		t.Fatal("the heartbeat was decoded again")
	}
	var n model.Node
	_ = json.Unmarshal(benchNode("n1", t0.Add(20*time.Second)), &n)
	n.Status = model.NodeStatusInitializing
	changed, _ := json.Marshal(n)
	s.apply(ref, wanted.Entry{Key: "n1", Value: changed, Revision: 3, Op: wanted.OpPut}, nil)
	ch, _ := s.ChangesSince(0, ^uint64(0))
	if len(ch) != 3 || ch[0].HeartbeatOnly || !ch[1].HeartbeatOnly || ch[2].HeartbeatOnly {
		t.Fatalf("changes %+v: want the first and last decoded, the middle one a heartbeat", ch)
	}
	if v := s.View().Nodes.At("n1").Value; v.Status != model.NodeStatusInitializing || !v.HeartbeatAt.Equal(t0.Add(20*time.Second)) {
		t.Fatalf("the view holds %+v", v)
	}
}

// FuzzHeartbeatPut: whatever bytes arrive after an accepted record, the fast
// path either declines or makes exactly the record the full decode makes.
func FuzzHeartbeatPut(f *testing.F) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	f.Add(benchNode("n1", t0.Add(10*time.Second)))
	f.Add(benchNode("n1", t0.Add(-time.Hour)))
	f.Add(bytes.Replace(benchNode("n1", t0), []byte(`Z"`), []byte(`+01:00"`), 1))
	f.Add(benchNode("n2", t0.Add(time.Second)))
	first := benchNode("n1", t0)
	accepted, _ := wanted.ApplyNode(wanted.NodeState{}, wanted.Entry{Key: "n1", Value: first, Revision: 1, Op: wanted.OpPut})
	f.Fuzz(func(t *testing.T, value []byte) {
		e := wanted.Entry{Key: "n1", Value: value, Revision: 2, Op: wanted.OpPut}
		fast, ok := heartbeatPut(accepted, first, e)
		if !ok {
			return
		}
		slow, ef := wanted.ApplyNode(accepted, e)
		if ef != wanted.EffectAccepted || !reflect.DeepEqual(fast, slow) {
			t.Fatalf("fast path %+v, full decode (%v) %+v", fast, ef, slow)
		}
	})
}

// TestAHeartbeatPutAgreesWithTheDecodeOnRandomRecords holds the fast path
// to the full decode on random pairs of held and new records: heartbeats
// with times in other forms (offsets, fractions, none), records whose other
// fields changed too, a second "heartbeat_at" in an attribute's key or
// value, bytes changed, inserted or cut around the field: whatever the fast
// path takes, the decode makes the same. Control: it takes many, and leaves
// many that the decode accepts.
func TestAHeartbeatPutAgreesWithTheDecodeOnRandomRecords(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(21, seed))
	t.Logf("seed %d", seed)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	times := func() time.Time {
		at := t0.Add(time.Duration(r.IntN(1e6)) * time.Millisecond)
		switch r.IntN(4) {
		case 0:
			at = at.In(time.FixedZone("", 3600*(r.IntN(5)-2)))
		case 1:
			at = at.Add(time.Duration(r.IntN(1e9)))
		}
		return at
	}
	record := func(id string, at time.Time) []byte {
		raw := benchNode(id, at)
		switch r.IntN(8) {
		case 0: // another attribute
			raw = bytes.Replace(raw, []byte(`"rack":"r1"`), []byte(`"rack":"r2"`), 1)
		case 1: // the field's name as an attribute's key or in a value
			raw = bytes.Replace(raw, []byte(`"rack":"r1"`), []byte([]string{`"heartbeat_at":"r1"`, `"rack":"\"heartbeat_at\":\""`, `"rack":"heartbeat_at"`}[r.IntN(3)]), 1)
		}
		return raw
	}
	mutate := func(b []byte) []byte {
		b = slices.Clone(b)
		i := bytes.Index(b, heartbeatField)
		if i < 0 || r.IntN(2) == 0 {
			return b
		}
		at := i + r.IntN(len(heartbeatField)+40) - 5 // around the field and its time
		if at < 0 || at >= len(b) {
			return b
		}
		switch r.IntN(4) {
		case 0:
			b[at] = `"\:0Z+-.x9 ,}`[r.IntN(13)]
		case 1:
			b = slices.Insert(b, at, `"\:0Z+-.x9 ,}`[r.IntN(13)])
		case 2:
			b = slices.Delete(b, at, at+1)
		default:
			b = b[:at]
		}
		return b
	}
	count := map[string]int{}
	const pairs = 5000
	for range pairs {
		held := record("n1", times())
		if r.IntN(10) == 0 {
			held = bytes.Replace(held, []byte(`"heartbeat_at":"`), []byte(`"heartbeat_x":"`), 1)
		}
		prev, ef := wanted.ApplyNode(wanted.NodeState{}, wanted.Entry{Key: "n1", Value: held, Revision: 1, Op: wanted.OpPut})
		if ef != wanted.EffectAccepted {
			count["held record refused"]++
			continue
		}
		next := mutate(record("n1", times()))
		e := wanted.Entry{Key: "n1", Value: next, Revision: 2, Op: wanted.OpPut, Time: t0}
		fast, ok := heartbeatPut(prev, held, e)
		slow, ef := wanted.ApplyNode(prev, e)
		switch {
		case ok && (ef != wanted.EffectAccepted || !reflect.DeepEqual(fast, slow)):
			t.Fatalf("held %s\nnew  %s\nfast path %+v\nfull decode (%v) %+v", held, next, fast, ef, slow)
		case ok:
			count["fast"]++
		case ef == wanted.EffectAccepted:
			count["decoded"]++
		default:
			count["refused"]++
		}
	}
	t.Logf("%v", count)
	if count["fast"] < pairs/5 || count["decoded"] < pairs/10 || count["refused"] < pairs/100 {
		t.Fatalf("control: %v", count)
	}
}
