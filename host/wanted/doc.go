// Package wanted owns the rules of docs/wanted-state.md: what a value read
// from a NATS JetStream KV bucket means to a host, and — just as important —
// what it does not mean. Every rule is a pure function over plain values; the
// package performs no I/O, reads no clock and logs nothing. host/fleet feeds
// it KV entries and keeps the results in its View; the reconcile loop asks it
// what a job's state orders.
//
// Usage:
//
//	st, eff := wanted.ApplyJob(prev, wanted.Entry{Key: k, Value: v, Revision: r, Op: wanted.OpPut})
//	switch wanted.OrderFor(st) { case wanted.OrderRun: ...; case wanted.OrderStop: ...; case wanted.OrderKeep: ... }
//
// What a declaration does not mean (each enforced by a test named after it):
//   - Absence is not a deletion order: a deleted or purged key, a missing key
//     or a missing bucket leaves the last good job in force and marks it
//     orphaned (OrderKeep). Only a decoded declaration with stop = true
//     (OrderStop) stops anything. TestAbsenceIsNeverADeletionOrder.
//   - An unknown value is not a partial instruction: DecodeJob is closed
//     (unknown field or enum value, wrong type, oversize value, key that does
//     not match the job) and a rejected put keeps the last good version,
//     recording the Rejection. TestARejectedPutKeepsTheLastGoodVersion.
//   - Applying is idempotent by revision: an entry at or below the revision
//     already applied changes nothing (a resumed watch may repeat entries).
//   - A node whose heartbeat entry expired or was purged is down, with its
//     last known record kept.
//   - Fail closed: MayAct refuses to act when the host cannot enumerate what it
//     runs. TestFailClosedWhenTheNodeCannotEnumerateItsTasks.
//   - Ownership of writes: a host writes only its own node record and its own
//     allocations' keys (OwnsAllocKey, OwnsNodeKey).
package wanted
