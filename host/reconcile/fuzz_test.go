package reconcile

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// FuzzReconcile builds a fleet from the fuzz bytes (genFleet) and checks
// the output properties, that the fleet plan is the union of the node
// plans, that every node's local plan has its whole-fleet buckets, and
// that reversing every input slice does not change the plan's bytes. Seed
// corpus: testdata/fuzz/FuzzReconcile.
//
//	go test -run '^$' -fuzz FuzzReconcile -fuzztime 3m ./host/reconcile
func FuzzReconcile(f *testing.F) {
	for seed := range uint64(8) {
		r := randomFleetBytes(seed)
		f.Add(r)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := genFleet(&bytesrc{b: data})
		p, err := ReconcileFleet(in)
		if err != nil {
			t.Fatalf("ReconcileFleet: %v", err)
		}
		if err := checkProperties(in, p); err != nil {
			t.Fatalf("%v\ninput: %s", err, mustJSON(fixtureOf(in)))
		}
		if err := checkUnion(in, p); err != nil {
			t.Fatalf("%v\ninput: %s", err, mustJSON(fixtureOf(in)))
		}
		if _, _, err := checkLocal(in); err != nil {
			t.Fatalf("%v\ninput: %s", err, mustJSON(fixtureOf(in)))
		}
		rev := in
		rev.ReadyNodes = slices.Clone(in.ReadyNodes)
		slices.Reverse(rev.ReadyNodes)
		rev.LiveAllocs = slices.Clone(in.LiveAllocs)
		slices.Reverse(rev.LiveAllocs)
		rev.TerminalAllocs = slices.Clone(in.TerminalAllocs)
		slices.Reverse(rev.TerminalAllocs)
		rev.NotReadyNodes = slices.Clone(in.NotReadyNodes)
		slices.Reverse(rev.NotReadyNodes)
		p2, err := ReconcileFleet(rev)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(p)
		b, _ := json.Marshal(p2)
		if !bytes.Equal(a, b) {
			t.Fatalf("plan depends on input order\n%s\n%s", a, b)
		}
	})
}

func randomFleetBytes(seed uint64) []byte {
	b := make([]byte, 300)
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}
