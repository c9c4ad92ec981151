package rollout

// The former ways admission read its slots, the steward's assignment and
// a narrowed node's waiters, kept as references for TestAdmissionReadsTheSlotsAsTheCollectionsDid:
// admit now reads them without making them (admissionGroup, assignedTo,
// queuedAs).

import (
	"slices"
	"strconv"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// assignedSlots are the slot indices the summary of record d assigns in
// group name, by allocation ID (nil when it assigns none: an older
// steward's summary, or none admitted).
func (f *Facts) assignedSlots(d *model.Deployment, name string) map[string]int {
	s := f.Summary
	if s == nil || s.DeploymentID != d.ID {
		return nil
	}
	return assignedByAlloc(s.Groups[name])
}

// queuedSlots are the places the summary of record d queues waiters of
// group name at, by allocation ID (nil when none).
func (f *Facts) queuedSlots(d *model.Deployment, name string) map[string]Queued {
	s := f.Summary
	if s == nil || s.DeploymentID != d.ID {
		return nil
	}
	return queuedByAlloc(s.Groups[name])
}

// admissionSlots are the slots admission counts for record d: f.Slots,
// or, when they are this node's own only (OwnSlotsOnly), those plus the
// slots that d's summary lists at the indices this node's memory does not
// hold (one it released and the summary still shows is counted until the
// next summary: a delay, never an extra take). A stale summary only delays
// an admission or costs a lost Create: the bound is the keys' (I5).
func (f *Facts) admissionSlots(d *model.Deployment) []Slot {
	if !f.OwnSlotsOnly {
		return f.Slots
	}
	s := f.Summary
	if s == nil || s.DeploymentID != d.ID {
		return f.Slots
	}
	mine := map[string]bool{}
	for _, sl := range f.Slots {
		mine[sl.Slot.Group+"\x00"+strconv.Itoa(sl.Slot.Index)] = true
	}
	n := len(f.Slots)
	for _, g := range s.Groups {
		if g != nil {
			n += len(g.Slots)
		}
	}
	out := append(make([]Slot, 0, n), f.Slots...)
	for _, name := range slices.Sorted(mapsKeys(s.Groups)) {
		g := s.Groups[name]
		if g == nil {
			continue
		}
		for _, sl := range g.Slots {
			if mine[name+"\x00"+strconv.Itoa(sl.Index)] {
				continue
			}
			out = append(out, Slot{Key: wanted.SlotKey(d.Namespace, d.JobID, name, sl.Index),
				Slot: model.Slot{Namespace: d.Namespace, JobID: d.JobID, Group: name, Index: sl.Index, Holder: sl.Holder}})
		}
	}
	return out
}

// groupSlots reads the group's held slots: their indexes, the old
// allocations they replace, and their holders by slot index.
func groupSlots(slots []Slot, group string) (held map[int]bool, holding map[string]bool, holders []string) {
	held, holding = map[int]bool{}, holdingOf(slots, group)
	var hs []Slot
	for _, s := range slots {
		if s.Slot.Group == group {
			held[s.Slot.Index] = true
			hs = append(hs, s)
		}
	}
	slices.SortFunc(hs, func(a, b Slot) int { return a.Slot.Index - b.Slot.Index })
	for _, s := range hs {
		holders = append(holders, s.Slot.Holder)
	}
	return held, holding, holders
}

// asMap is the set as the map admission used to make of it (heldOf).
func (h heldSet) asMap() map[int]bool {
	m := map[int]bool{}
	for i, ok := range h.at {
		if ok {
			m[i] = true
		}
	}
	for _, i := range h.far {
		m[i] = true
	}
	return m
}

// summaryWaiters are the waiters of a node without the fleet's
// allocations, made: the list summaryRank ranks in (a waiter's place in it
// and its length are summaryRank's answer).
func (f *Facts) summaryWaiters(d *model.Deployment, name string, holding map[string]bool) []waiter {
	s := f.Summary
	if s == nil || s.DeploymentID != d.ID || s.Groups[name] == nil {
		return nil
	}
	listed := f.summaryListed(s, d, name)
	ws := make([]waiter, 0, len(listed))
	for _, w := range listed {
		if f.stillWaiting(d, w, holding) {
			ws = append(ws, waiter{node: w.Node, id: w.Alloc})
		}
	}
	return ws
}

// freeIndices is heldSet.free over a map of the held indices, as the
// steward's summary and admission counted them before the set (the
// reference the set is compared with).
func freeIndices(held map[int]bool, maxP int) (free []int, n int) {
	for i := 0; i < maxP; i++ {
		if !held[i] {
			free = append(free, i)
		}
	}
	return free, min(max(maxP-len(held), 0), len(free))
}
