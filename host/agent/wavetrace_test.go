package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// waveTrace follows one job's update slots and rollout summaries as the
// fleet benchmark runs (a watch of its own on the rollout bucket, server
// timestamps), so that a slow rollout says which leg of a slot's round
// trip is slow: a release until a summary shows the slot free (the
// steward), that summary until the slot is taken (the waiters), the take
// until the task starts, the start until the allocation is healthy, and
// healthy until the release (the holder).
type waveTrace struct {
	mu     sync.Mutex
	events []waveEvent
	stop   func()
}

type waveEvent struct {
	at   time.Time // the server's timestamp of the entry
	key  string
	del  bool
	slot *model.Slot
	sum  *model.RolloutSummary
}

// traceWaves starts following job's slots and summary in the world's
// rollout bucket, from now on.
func traceWaves(ctx context.Context, kv jetstream.KeyValue, namespace, job string) (*waveTrace, error) {
	w, err := kv.WatchFiltered(ctx, []string{wanted.SlotPrefix(namespace, job) + ">", wanted.SummaryKey(namespace, job)}, jetstream.UpdatesOnly())
	if err != nil {
		return nil, err
	}
	t := &waveTrace{}
	done := make(chan struct{})
	t.stop = sync.OnceFunc(func() { _ = w.Stop(); <-done })
	go func() {
		defer close(done)
		for e := range w.Updates() {
			if e == nil {
				continue
			}
			ev := waveEvent{at: e.Created(), key: e.Key(), del: e.Operation() != jetstream.KeyValuePut}
			if !ev.del {
				if strings.HasPrefix(e.Key(), "sum.") {
					var s model.RolloutSummary
					if json.Unmarshal(e.Value(), &s) == nil {
						ev.sum = &s
					}
				} else {
					var s model.Slot
					if json.Unmarshal(e.Value(), &s) == nil {
						ev.slot = &s
					}
				}
			}
			t.mu.Lock()
			t.events = append(t.events, ev)
			t.mu.Unlock()
		}
	}()
	return t, nil
}

// report is the legs' medians and 90th percentiles for version v's slots
// of group, with the starts and health times read from the recorder and
// the agents' allocations.
func (t *waveTrace) report(v uint64, group string, maxParallel int, starts map[string]time.Time, healthy map[string]time.Time) string {
	t.stop()
	t.mu.Lock()
	evs := slices.Clone(t.events)
	t.mu.Unlock()
	var sums []waveEvent
	held := map[string]*model.Slot{} // key → slot held
	type take struct {
		at   time.Time
		slot *model.Slot
	}
	var takes []take
	var releases []waveEvent // with slot = the released holding
	for _, e := range evs {
		switch {
		case strings.HasPrefix(e.key, "sum."):
			if e.sum != nil && e.sum.JobVersion == v {
				sums = append(sums, e)
			}
		case e.del:
			if s := held[e.key]; s != nil {
				releases = append(releases, waveEvent{at: e.at, key: e.key, slot: s})
				delete(held, e.key)
			}
		case e.slot != nil && e.slot.JobVersion == v && e.slot.Group == group:
			held[e.key] = e.slot
			takes = append(takes, take{e.at, e.slot})
		}
	}
	// seenFree is when the first summary after at no longer listed slot
	// index i as held by holder.
	seenFree := func(at time.Time, i int, holder string) (time.Time, bool) {
		for _, s := range sums {
			if s.at.Before(at) {
				continue
			}
			g := s.sum.Groups[group]
			if g == nil || !slices.Contains(g.Slots, model.SummarySlot{Index: i, Holder: holder}) {
				return s.at, true
			}
		}
		return time.Time{}, false
	}
	var steward, admit, toStart, toHealthy, toRelease, gaps []time.Duration
	for _, r := range releases {
		free, ok := seenFree(r.at, r.slot.Index, r.slot.Holder)
		if !ok {
			continue
		}
		steward = append(steward, free.Sub(r.at))
		for _, tk := range takes {
			if tk.slot.Index == r.slot.Index && tk.at.After(r.at) {
				admit = append(admit, tk.at.Sub(free))
				gaps = append(gaps, tk.at.Sub(r.at))
				break
			}
		}
	}
	for _, tk := range takes {
		st, ok := starts[tk.slot.Holder]
		if !ok {
			continue
		}
		toStart = append(toStart, st.Sub(tk.at))
		if h, ok := healthy[tk.slot.Holder]; ok {
			toHealthy = append(toHealthy, h.Sub(st))
			for _, r := range releases {
				if r.slot.Holder == tk.slot.Holder && r.slot.NewAlloc == tk.slot.NewAlloc {
					toRelease = append(toRelease, r.at.Sub(h))
					break
				}
			}
		}
	}
	var every, writeLag []time.Duration
	var free, listed []int // per summary: slots it shows free, waiters it lists
	for i, sm := range sums {
		if g := sm.sum.Groups[group]; g != nil {
			free = append(free, maxParallel-len(g.Slots))
			listed = append(listed, len(g.Waiting))
		}
		writeLag = append(writeLag, sm.at.Sub(sm.sum.Time))
		if i > 0 {
			every = append(every, sm.at.Sub(sums[i-1].at))
		}
	}
	q := func(name string, ds []time.Duration) string {
		if len(ds) == 0 {
			return name + " -"
		}
		slices.Sort(ds)
		at := func(p float64) time.Duration {
			return ds[min(len(ds)-1, int(p*float64(len(ds))))].Round(10 * time.Millisecond)
		}
		return fmt.Sprintf("%s %v/%v (n %d)", name, at(0.5), at(0.9), len(ds))
	}
	return fmt.Sprintf("v%d slot round trips, median/p90: %s; %s; %s; %s; %s; %s; %s; %d takes, %d releases, %d summaries",
		v, q("release→summary shows it free", steward), q("→taken", admit), q("release→taken", gaps),
		q("take→start", toStart), q("start→healthy", toHealthy), q("healthy→release", toRelease),
		q("between summaries", every), len(takes), len(releases), len(sums)) + "; " + q("summary derived→stored", writeLag) +
		fmt.Sprintf("; free slots per summary %v, waiters listed %v", free, listed)
}

// stewards are the nodes that wrote the summaries traced, in order of
// their first summary.
func (t *waveTrace) stewards() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, e := range t.events {
		if e.sum != nil && !slices.Contains(out, e.sum.Steward) {
			out = append(out, e.sum.Steward)
		}
	}
	return out
}
