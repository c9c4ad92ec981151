package fleet

import (
	"iter"
	"maps"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// NodeTally counts a View's node records (Nodes) by what an agent's
// fleet-wide decisions read: how many are live, at which rollout protocol
// levels and heartbeat TTLs, and how many have expired. A Source keeps it
// as it applies records, so a snapshot taken after a node registers costs
// no walk over the fleet (a thousand agents starting made every agent walk
// every record once per registration: quadratic in the fleet per agent).
//
// A heartbeat changes none of it (only a record's heartbeat time moves),
// so it describes Nodes, whose records are as of their last change that
// was not a heartbeat. Immutable once in a View.
type NodeTally struct {
	// Live is the number of records held with a value and not absent.
	Live int
	// Protocols counts the live records by RolloutProtocol.
	Protocols map[int]int
	// TTLs counts the live records by the HeartbeatTTL they were written
	// with.
	TTLs map[model.Duration]int
	// Expired is the number of records gone by expiry while their last
	// value is kept (Absent, applied, Expired set): a loss verdict may be
	// due for each.
	Expired int
}

// NodeLive reports whether st is a live node record: what Live counts.
func NodeLive(st wanted.NodeState) bool { return st.Value != nil && !st.Absent }

// NodeExpired reports whether st is a record gone by expiry with its last
// value kept: what Expired counts.
func NodeExpired(st wanted.NodeState) bool {
	return st.Value != nil && st.Absent && st.Applied != 0 && !st.Expired.IsZero()
}

// count adds st's part to the tally (sign 1) or takes it out (sign -1).
func (t *NodeTally) count(st wanted.NodeState, sign int) {
	switch {
	case NodeLive(st):
		t.Live += sign
		if t.Protocols == nil {
			t.Protocols, t.TTLs = map[int]int{}, map[model.Duration]int{}
		}
		bump(t.Protocols, st.Value.RolloutProtocol, sign)
		bump(t.TTLs, st.Value.HeartbeatTTL, sign)
	case NodeExpired(st):
		t.Expired += sign
	}
}

// bump adds d to m[k], deleting the key at zero so that a tally's keys
// are exactly the values some record has.
func bump[K comparable](m map[K]int, k K, d int) {
	if n := m[k] + d; n != 0 {
		m[k] = n
	} else {
		delete(m, k)
	}
}

// replace moves the tally from a record's state prev (the zero state
// when there was none: it counts for nothing) to next.
func (t *NodeTally) replace(prev, next wanted.NodeState) {
	t.count(prev, -1)
	t.count(next, 1)
}

// clone returns a copy no later change to t reaches.
func (t *NodeTally) clone() NodeTally {
	c := *t
	c.Protocols, c.TTLs = maps.Clone(t.Protocols), maps.Clone(t.TTLs)
	return c
}

// tallyOf counts records whole.
func tallyOf(records iter.Seq2[string, wanted.NodeState]) NodeTally {
	var t NodeTally
	for _, st := range records {
		t.count(st, 1)
	}
	return t
}

// ProtocolsBut yields each rollout protocol level of the live records
// with how many records have it, the record self (when live) left out.
func (t NodeTally) ProtocolsBut(self wanted.NodeState) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		for p, n := range t.Protocols {
			if NodeLive(self) && self.Value.RolloutProtocol == p {
				n--
			}
			if n > 0 && !yield(p, n) {
				return
			}
		}
	}
}
