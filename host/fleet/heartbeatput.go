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
		oldAt, at, ok := heartbeatTimes(raw, e.Value)
		if !ok || !oldAt.Equal(prev.Value.HeartbeatAt) {
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

// heartbeatTimes returns the heartbeat times written in old and new,
// provided the two are the same bytes but for the string value of their one
// heartbeat field (and each holds the field exactly once). Every watcher
// reads every node's heartbeat with it, so it reads each byte about twice
// (the first field found in new, the prefixes compared up to it, the
// suffixes compared and searched for a second field) rather than counting
// and finding the field in both whole records again.
//
// Why that is "exactly once" in both: new has no field before i (Index),
// and old's bytes up to the time are new's; after the time's closing quote
// both hold the same suffix, searched here (old, the bytes last accepted by
// the strict decode, cannot hold a repeated key: the search is a guard);
// inside the time there is no quote (the time ends at the first), so no
// field starts there; and a field starting at the time's opening quote (the
// field's one overlap with itself) would make the time the text
// "heartbeat_at", which does not parse.
func heartbeatTimes(old, new []byte) (oldAt, newAt time.Time, ok bool) {
	i := bytes.Index(new, heartbeatField)
	if i < 0 {
		return oldAt, newAt, false
	}
	start := i + len(heartbeatField)
	if len(old) < start || !bytes.Equal(old[:start], new[:start]) {
		return oldAt, newAt, false
	}
	n := bytes.IndexByte(new[start:], '"')
	m := bytes.IndexByte(old[start:], '"')
	if n < 0 || m < 0 || !bytes.Equal(new[start+n:], old[start+m:]) || bytes.Contains(new[start+n:], heartbeatField) {
		return oldAt, newAt, false
	}
	if oldAt, ok = quotedTime(old[start-1 : start+m+1]); !ok {
		return oldAt, newAt, false
	}
	newAt, ok = quotedTime(new[start-1 : start+n+1])
	return oldAt, newAt, ok
}

// quotedTime parses a JSON string without escapes as the decoder parses a
// time.Time (its own UnmarshalJSON).
func quotedTime(quoted []byte) (time.Time, bool) {
	var t time.Time
	if bytes.IndexByte(quoted, '\\') >= 0 || t.UnmarshalJSON(quoted) != nil {
		return time.Time{}, false
	}
	return t, true
}
