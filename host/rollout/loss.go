package rollout

import (
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// Verdict is a loss verdict in force with its KV key and revision.
type Verdict struct {
	Key      string            `json:"key"`
	Revision uint64            `json:"revision"`
	V        model.LossVerdict `json:"verdict"`
}

// VerdictWrite is a loss verdict to create (T13).
type VerdictWrite struct {
	Key string            `json:"key"`
	V   model.LossVerdict `json:"verdict"`
}

// LossDecision is what one agent writes about node losses now.
type LossDecision struct {
	// Writes are the verdicts this agent, the loss steward of each node,
	// creates (once per loss: the key names the expiry's revision).
	Writes []VerdictWrite `json:"writes,omitempty"`
	// Deletes are this node's own verdicts: it is back (T14). Returns,
	// filled by the caller with Returning, are carried out first.
	Deletes []Verdict `json:"deletes,omitempty"`
	Returns []Return  `json:"returns,omitempty"`
	// Disruption is why no verdict is written now, if the guard holds.
	Disruption string `json:"disruption,omitempty"`
}

// Losses decides the loss verdicts (T13, T14) over every node this agent
// knows: the loss steward of node n, the first live node by rendezvous
// hash of n, writes n's verdict once per loss (never during a disruption);
// a node deletes its own verdicts. nodes carry liveness, the server time
// of the last expiry (DownSince) and its revision (LossRevision); now,
// ttl and reconnectedAt are as in Facts.
func Losses(self string, nodes []Node, verdicts []Verdict, now time.Time, ttl time.Duration, reconnectedAt time.Time) LossDecision {
	var dec LossDecision
	all := make([]Node, len(nodes))
	var live []string
	for i, n := range nodes {
		all[i] = n
		all[i].Eligible = true // the guard counts every node here, not a job's
		if n.Live {
			live = append(live, n.ID)
		}
	}
	f := Facts{Nodes: all, Now: now, NodeTTL: ttl, ReconnectedAt: reconnectedAt}
	disrupted, why := f.Disruption()
	if disrupted {
		dec.Disruption = why
	}
	held := map[string]bool{}
	for _, v := range verdicts {
		held[v.Key] = true
		if v.V.Node == self {
			dec.Deletes = append(dec.Deletes, v)
		}
	}
	if disrupted {
		return dec
	}
	for _, n := range nodes {
		if n.Live || n.LossRevision == 0 || n.DownSince.IsZero() || n.ID == self {
			continue
		}
		key := wanted.DownKey(n.ID, n.LossRevision)
		if held[key] {
			continue
		}
		if ranked := RankedNodes("loss\x00"+n.ID, live); len(ranked) > 0 && ranked[0] == self {
			dec.Writes = append(dec.Writes, VerdictWrite{Key: key, V: model.LossVerdict{Node: n.ID, DownSince: n.DownSince, WrittenBy: self}})
		}
	}
	return dec
}

// ReturnAlloc is one live allocation of a node that finds its own loss
// verdict: the allocation, its group as its job version declares it (the
// disconnect block), and the server time of its creation (estimated).
type ReturnAlloc struct {
	Alloc   *model.Allocation
	Group   *model.Group
	Created time.Time
}

// Return is what the returning node does with one of its allocations
// (T14): reconnect it (record that the fleet saw it unknown from Since, and
// that it is back; its tasks keep running) or, when the group allows no
// disconnection that long, stop it as lost (the reconciler then places its
// name again, as on any ready node).
type Return struct {
	AllocID string    `json:"alloc_id"`
	Verdict string    `json:"verdict"`
	Since   time.Time `json:"since"`
	Lost    bool      `json:"lost,omitempty"`
	Why     string    `json:"why"`
}

// Returning decides T14 for the node self's own allocations over its own
// loss verdicts at server time now. An allocation created after the node
// went down, already terminal, or whose return is already recorded (a
// client-status transition to unknown at the verdict's time) is left
// alone, so carrying the returns out again after a crash changes nothing.
// With the group's disconnect.lost_after > 0 and now before DownSince +
// lost_after the allocation reconnects; otherwise (no disconnect block,
// or past it) it is lost: what every other reader derived meanwhile
// (Counts.Lost), as reconcile.md rules 3 and 8 say of a node that came
// back too late or without disconnect handling.
func Returning(self string, verdicts []Verdict, allocs []ReturnAlloc, now time.Time) []Return {
	var out []Return
	done := map[string]bool{}
	for _, v := range verdicts {
		if v.V.Node != self || v.V.DownSince.IsZero() {
			continue
		}
		since := v.V.DownSince
		for _, ra := range allocs {
			a := ra.Alloc
			if a == nil || a.Terminal() || done[a.ID] || ra.Created.After(since) || reconnectRecorded(a, since) {
				continue
			}
			done[a.ID] = true
			var lostAfter time.Duration
			if ra.Group != nil && ra.Group.Disconnect != nil {
				lostAfter = ra.Group.Disconnect.LostAfter.D()
			}
			r := Return{AllocID: a.ID, Verdict: v.Key, Since: since}
			switch {
			case lostAfter <= 0:
				r.Lost = true
				r.Why = "node lost (down since " + since.UTC().Format(time.RFC3339) + ", verdict by " + v.V.WrittenBy + "); its group has no disconnect.lost_after"
			case !now.Before(since.Add(lostAfter)):
				r.Lost = true
				r.Why = "node lost (down since " + since.UTC().Format(time.RFC3339) + ", verdict by " + v.V.WrittenBy + ") for longer than disconnect.lost_after " + lostAfter.String()
			default:
				r.Why = "node reconnected after " + now.Sub(since).Round(time.Second).String() + " down (verdict by " + v.V.WrittenBy + "), within disconnect.lost_after " + lostAfter.String()
			}
			out = append(out, r)
		}
	}
	return out
}

// reconnectRecorded reports whether a's states already hold a transition to
// unknown at since (the node records it at the verdict's own server time).
func reconnectRecorded(a *model.Allocation, since time.Time) bool {
	for _, s := range a.States {
		if s.Field == model.AllocStateClientStatus && s.Value == string(model.ClientUnknown) && s.Time.Equal(since) {
			return true
		}
	}
	return false
}
