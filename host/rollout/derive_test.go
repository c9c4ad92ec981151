package rollout

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hivelet/hivelet/host/model"
)

// rendezvousReference is Rendezvous as first written, over hash/fnv: the
// order every agent of a fleet must agree on, whatever its version. What
// it checks is the written-out FNV-1a.
func rendezvousReference(key, node string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(node))
	return splitmixFinal(h.Sum64()) // the finaliser is shared; pinnedRendezvous guards it
}

func randomName(rng *rand.Rand) string {
	b := make([]byte, rng.IntN(24))
	for i := range b {
		b[i] = byte(rng.IntN(256)) // any byte, NULs and non-ASCII included
	}
	return string(b)
}

// The written-out FNV-1a is the hash/fnv one, for any key and node; and a
// pinned value guards against both changing together.
func TestRendezvousIsFNV1aWithTheSplitmixFinaliser(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for i := 0; i < 20000; i++ {
		key, node := randomName(rng), randomName(rng)
		if got, want := Rendezvous(key, node), rendezvousReference(key, node); got != want {
			t.Fatalf("Rendezvous(%q, %q) = %#x, want %#x", key, node, got, want)
		}
	}
	if got := Rendezvous("", ""); got != rendezvousReference("", "") {
		t.Fatalf("empty key and node: %#x", got)
	}
	if got, want := Rendezvous("3f2c-deployment", "node-017"), uint64(pinnedRendezvous); got != want {
		t.Fatalf("pinned value changed: %#x, want %#x (every agent of a fleet must rank alike)", got, want)
	}
}

// rankAndFirst answers what the full ranking would: self's index (-1 when
// absent) and the first ID, duplicates and empty lists included.
func TestRankAndFirstAgreeWithTheSortedRanking(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 1))
	for i := 0; i < 5000; i++ {
		n := rng.IntN(40)
		ids := make([]string, n)
		for j := range ids {
			ids[j] = fmt.Sprintf("node-%02d", rng.IntN(50))
		}
		key := fmt.Sprintf("dep-%d", rng.IntN(1000))
		self := fmt.Sprintf("node-%02d", rng.IntN(50))
		ranked := RankedNodes(key, ids)
		wantFirst := ""
		if len(ranked) > 0 {
			wantFirst = ranked[0]
		}
		rank, first := rankAndFirst(key, ids, self)
		if want := slices.Index(ranked, self); rank != want || first != wantFirst {
			t.Fatalf("key %s ids %v self %s: rank %d first %q, want %d %q", key, ids, self, rank, first, want, wantFirst)
		}
	}
}

// pinnedRendezvous is rendezvousReference("3f2c-deployment", "node-017").
const pinnedRendezvous = 0xd299e3b7aeefc6c8

// BenchmarkStewardRank: a pass's question of the steward ranking over 1,000
// nodes (who is first, where this node stands), by sorting the fleet as
// before and by one counting pass.
// go test -run '^$' -bench StewardRank ./host/rollout/
func BenchmarkStewardRank(b *testing.B) {
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("node-%04d", i)
	}
	const key = "3f2c-deployment"
	b.Run("sorted", func(b *testing.B) {
		for b.Loop() {
			ranked := RankedNodes(key, ids)
			if slices.Index(ranked, "node-0500") < 0 || ranked[0] == "" {
				b.Fatal("not ranked")
			}
		}
	})
	b.Run("counted", func(b *testing.B) {
		for b.Loop() {
			if r, first := rankAndFirst(key, ids, "node-0500"); r < 0 || first == "" {
				b.Fatal("not ranked")
			}
		}
	})
}

// A job declared without a namespace and declared again with "default" is
// one job (wanted.JobKey): its allocations of either spelling are counted
// and ranked for the record of the other. Control: another namespace's
// allocation of the same job ID is neither.
func TestAnEmptyNamespaceIsTheDefaultOne(t *testing.T) {
	w := newWorld(4, 1, 0)
	d := w.record(func(d *model.Deployment) { d.Namespace = "default" })
	w.job.Namespace = "default"
	w.allocs[3].Namespace = "other" // not this job's
	f := w.facts(t, w.stewardOf(t))
	c := Derive(d, &f)["g"]
	if c.Outdated != 3 || c.Waiting != 3 {
		t.Fatalf("counts %+v: want the 3 allocations of namespace \"\" outdated and waiting", c)
	}
	ws := f.waiters(d, "g", map[string]bool{})
	if len(ws) != 3 || slices.ContainsFunc(ws, func(x waiter) bool { return x.id == w.allocs[3].ID }) {
		t.Fatalf("waiters %+v: want the 3 of namespace \"\", not the other namespace's", ws)
	}
}
