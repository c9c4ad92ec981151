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
	// Deletes are this node's own verdicts: it is back (T14).
	Deletes []Verdict `json:"deletes,omitempty"`
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
