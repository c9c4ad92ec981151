package fleet

import (
	"bytes"
	"time"

	"github.com/hivelet/hivelet/host/wanted"
)

// heartbeatField is how a node record's heartbeat time is written
// (model.Node.HeartbeatAt through encoding/json).
var heartbeatField = []byte(`"heartbeat_at":"`)

// heartbeatPut applies a put of a node record that differs from the bytes
// last accepted under its key (raw) only in its heartbeat time: what every
// watcher of the nodes bucket receives from every node each heartbeat
// period. The result is the record wanted.ApplyNode would make of those
// bytes — the strict decode of bytes that differ from accepted ones in one
// time string, parsed here by the decoder's own time.Time.UnmarshalJSON —
// without decoding the record again. It refuses (false, the caller decodes)
// whatever is not plainly that: any other difference, a heartbeat field not
// found exactly once in both, an old time that is not the held value's, a
// record absent or rejected, an entry at or below the applied revision.
//
// A put of the very bytes last accepted (a heartbeat of a record that
// carries no time, or the same record written again) is applied the same
// way: the decode of the same bytes is the same value.
func heartbeatPut(prev wanted.NodeState, raw []byte, e wanted.Entry) (wanted.NodeState, bool) {
	if e.Op != wanted.OpPut || e.Revision == 0 || e.Revision <= prev.Applied || raw == nil ||
		prev.Value == nil || prev.Absent || prev.Rejection != nil {
		return prev, false
	}
	v := prev.Value
	if !bytes.Equal(raw, e.Value) {
		if prev.Value.HeartbeatAt.IsZero() {
			return prev, false
		}
		oldAt, ok := heartbeatTime(raw, e.Value, true)
		if !ok || !oldAt.Equal(prev.Value.HeartbeatAt) {
			return prev, false
		}
		at, ok := heartbeatTime(e.Value, raw, false)
		if !ok {
			return prev, false
		}
		c := *prev.Value // the maps are shared: a view's values are never modified
		c.HeartbeatAt = at
		v = &c
	}
	next := prev
	next.Key = e.Key
	next.Value = v
	next.Revision = e.Revision
	next.Applied = e.Revision
	if !e.Time.IsZero() {
		next.Time = e.Time
	}
	return next, true
}

// heartbeatTime returns the heartbeat time written in a, provided a and b
// are the same bytes but for the string value of their one heartbeat field
// (compare: check that; it is symmetric, so one call with it suffices).
func heartbeatTime(a, b []byte, compare bool) (time.Time, bool) {
	i := bytes.Index(a, heartbeatField)
	if i < 0 || bytes.Count(a, heartbeatField) != 1 {
		return time.Time{}, false
	}
	start := i + len(heartbeatField)
	n := bytes.IndexByte(a[start:], '"')
	if n < 0 {
		return time.Time{}, false
	}
	if compare {
		j := bytes.Index(b, heartbeatField)
		if j != i || bytes.Count(b, heartbeatField) != 1 || !bytes.Equal(a[:i], b[:i]) {
			return time.Time{}, false
		}
		m := bytes.IndexByte(b[start:], '"')
		if m < 0 || !bytes.Equal(a[start+n:], b[start+m:]) {
			return time.Time{}, false
		}
	}
	quoted := a[start-1 : start+n+1]
	if bytes.IndexByte(quoted, '\\') >= 0 {
		return time.Time{}, false
	}
	var t time.Time
	if err := t.UnmarshalJSON(quoted); err != nil {
		return time.Time{}, false
	}
	return t, true
}
