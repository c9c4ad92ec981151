package rollout

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hivelet/hivelet/host/model"
)

// queueSlots gives the same order, assignment and queues as the plain
// search it replaced (queueSlotsByScan, below: each waiter looked up again
// for each slot), on random summaries: held slots anywhere below and
// beyond max_parallel, a previous summary that assigned and queued some
// of the waiters (some gone since, some at indices held now or out of
// range), and waiters it never listed.
func TestQueueSlotsMatchesTheScanItReplaced(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for round := range 3000 {
		maxP := 1 + r.IntN(8)
		var slots []Slot
		for i := range maxP + 3 {
			if r.IntN(3) == 0 {
				slots = append(slots, Slot{Slot: model.Slot{Group: "g", Index: i, Holder: fmt.Sprintf("h%d", i), OldAlloc: fmt.Sprintf("o%d", i)}})
			}
		}
		if r.IntN(4) == 0 {
			slots = append(slots, Slot{Slot: model.Slot{Group: "other", Index: 0, Holder: "x"}})
		}
		var ws []model.SummaryWaiter
		for i := range r.IntN(3 * maxP) {
			ws = append(ws, model.SummaryWaiter{Node: fmt.Sprintf("n%d", i), Alloc: fmt.Sprintf("a%d", i)})
		}
		var prev *model.GroupSummary
		if r.IntN(4) != 0 {
			// The previous summary: some of these waiters and some gone, in
			// another order, assigned and queued at random indices.
			pw := slices.Clone(ws)
			for i := range r.IntN(4) {
				pw = append(pw, model.SummaryWaiter{Node: fmt.Sprintf("g%d", i), Alloc: fmt.Sprintf("gone%d", i)})
			}
			r.Shuffle(len(pw), func(i, j int) { pw[i], pw[j] = pw[j], pw[i] })
			pw = pw[:r.IntN(len(pw)+1)]
			prev = &model.GroupSummary{Waiting: pw}
			na := r.IntN(len(pw) + 1)
			for range na {
				prev.Assigned = append(prev.Assigned, r.IntN(maxP+2)-1)
			}
			for range r.IntN(len(pw) - na + 1) {
				prev.Next = append(prev.Next, r.IntN(maxP+2)-1)
			}
		}
		o1, a1, n1 := queueSlots(slots, "g", maxP, slices.Clone(ws), prev)
		o2, a2, n2 := queueSlotsByScan(slots, "g", maxP, slices.Clone(ws), prev)
		if !slices.Equal(o1, o2) || !slices.Equal(a1, a2) || !slices.Equal(n1, n2) {
			t.Fatalf("round %d (max_parallel %d, slots %+v, waiting %v, prev %+v):\n got %v %v %v\nwant %v %v %v",
				round, maxP, slots, ws, prev, o1, a1, n1, o2, a2, n2)
		}
	}
}

// queueSlotsByScan is queueSlots as first written, kept as the reference:
// it looks each waiter up in the previous summary again for every slot it
// queues on (quadratic in max_parallel).
func queueSlotsByScan(slots []Slot, name string, maxP int, waiting []model.SummaryWaiter, prev *model.GroupSummary) (order []model.SummaryWaiter, assigned, next []int) {
	held, _, _ := groupSlots(slots, name)
	free, n := freeIndices(held, maxP)
	n = min(n, len(waiting))
	// was is each waiter's place in prev: its index, and 0 when prev
	// assigned it, else its depth in the index's queue (1 or 2).
	type place struct{ idx, depth int }
	was := map[string]place{}
	for a, idx := range assignedByAlloc(prev) {
		was[a] = place{idx, 0}
	}
	for a, q := range queuedByAlloc(prev) {
		was[a] = place{q.Index, q.Depth}
	}
	used := make([]bool, len(waiting))
	taken := map[int]bool{}
	var admitted []int // positions in waiting
	admit := func(i, idx int) {
		used[i], taken[idx] = true, true
		admitted = append(admitted, i)
		assigned = append(assigned, idx)
	}
	for depth := 0; depth <= 2; depth++ {
		for i, w := range waiting {
			if len(admitted) == n {
				break
			}
			if p, ok := was[w.Alloc]; ok && p.depth == depth && p.idx >= 0 && p.idx < maxP && !held[p.idx] && !taken[p.idx] && !used[i] {
				admit(i, p.idx)
			}
		}
	}
	for i := range waiting {
		if len(admitted) == n {
			break
		}
		if used[i] {
			continue
		}
		k := slices.IndexFunc(free, func(fi int) bool { return !taken[fi] })
		if k < 0 {
			break
		}
		admit(i, free[k])
	}
	var first, second []int // positions in waiting, by position in next
	if len(held) <= maxP {
		for i := 0; i < maxP; i++ {
			if held[i] {
				next = append(next, i)
			}
		}
		next = append(next, assigned...)
		// claim gives queue place k of index h to the waiter prev had
		// closest to the head of h's queue (at depth >= from), if any.
		claim := func(h, from int) int {
			best, bestDepth := -1, 3
			for i, w := range waiting {
				if p, ok := was[w.Alloc]; ok && !used[i] && p.idx == h && p.depth >= from && p.depth < bestDepth {
					best, bestDepth = i, p.depth
				}
			}
			return best
		}
		fill := func() int { return slices.Index(used, false) }
		for k, h := range next {
			i := claim(h, 1)
			if i < 0 {
				i = fill()
			}
			if i < 0 {
				next = next[:k]
				break
			}
			used[i] = true
			first = append(first, i)
		}
		for _, h := range next {
			i := claim(h, 2)
			if i < 0 {
				i = fill()
			}
			if i < 0 {
				break
			}
			used[i] = true
			second = append(second, i)
		}
	}
	order = make([]model.SummaryWaiter, 0, len(waiting))
	for _, part := range [][]int{admitted, first, second} {
		for _, i := range part {
			order = append(order, waiting[i])
		}
	}
	for i, w := range waiting {
		if !used[i] {
			order = append(order, w)
		}
	}
	return order, assigned, next
}
