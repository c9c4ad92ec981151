// Package rollout is the pure core of the fleet rollout protocol
// (docs/rollout.md): given the stored deployment record of
// a job, the derived facts of the fleet (allocations, live nodes, update
// slots) and the server time, it says which record transitions to attempt
// (each a compare-and-set proposal with its precondition re-checked on the
// record the CAS just read) and what this node may do now: create the
// record, take an update slot, stop an outdated allocation it holds a slot
// for, place, release, or wait — with the reason.
//
// It owns the invariants of the protocol:
//
//   - I1 one writer per fact: every count (placed, healthy, canaries, in
//     flight) is derived here from allocations and slots (Derive); the
//     record holds no counter that several agents bump.
//   - I2 act only on what is stored: nothing is licensed by a proposal; a
//     destructive update needs a stored record and a stored slot.
//   - I3 version fence: a record newer than the job held here holds the job
//     (Decision.Hold); only a strictly newer job cancels a record.
//   - I4 monotonic record: every transition function refuses to move a
//     terminal record, un-promote, or change the canary set.
//   - I5 slot bound: slots are indexed 0..max_parallel-1 per job group (the
//     version is not in the key), and admission counts every held slot.
//   - I6 server time: Facts.Now and every stored time are the NATS server's.
//
// It never reads a clock, does I/O, or calls a policy: the loop evaluates
// the canary and completion policies (with a context deadline) and passes
// their answers in (CreateRecord, ApplyVerdict). Same input, same output.
// The tables in rollout_test.go and the fixtures under examples/rollout are
// its tests; `hivelet reconcile -rollout` prints its decision for a fixture.
package rollout
