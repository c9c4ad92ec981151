package reconcile

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// shuffledFleet is in with its node and allocation lists in a fixed random
// order: the reconciler sorts only what arrives out of order, so this is
// the case where every list must be sorted.
func shuffledFleet(in Input) Input {
	r := rand.New(rand.NewPCG(1, 2))
	return shuffled(in, r)
}

// BenchmarkReconciler is the grid: ReconcileFleet in the steady
// state (every allocation up to date), on update (every allocation one
// version behind: each becomes an update and derives a new ID), and in the
// first round of a 25% canary rollout (2,500 of 10,000 canary updates, the
// rest awaiting promotion), one allocation per node, at 1,000, 10,000 and
// 50,000 nodes; and the steady state with every input list shuffled.
// ns/alloc and cpu-ns/alloc are per allocation.
func BenchmarkReconciler(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprintf("steady/nodes=%d", n), func(b *testing.B) { benchReconcile(b, benchFleetAt(n, 1, 0, 2), "") })
		b.Run(fmt.Sprintf("update/nodes=%d", n), func(b *testing.B) { benchReconcile(b, benchFleet(n, 1, 0), "") })
		b.Run(fmt.Sprintf("canary25/nodes=%d", n), func(b *testing.B) { benchReconcile(b, benchFleet(n, 1, 25), "") })
		b.Run(fmt.Sprintf("steady-shuffled/nodes=%d", n), func(b *testing.B) {
			benchReconcile(b, shuffledFleet(benchFleetAt(n, 1, 0, 2)), "")
		})
	}
}
