// Package reconcile owns the pure node reconciler of docs/reconciler-rules.md: given
// a job, the fleet's nodes, allocations and current deployment, it decides
// what each node must place, update, migrate, stop, ignore, mark lost,
// disconnect or reconnect, which nodes are canaries, and what happens to the
// job's deployment.
//
// One per-node core ((*fleet).node) serves three entry points:
// ReconcileFleet (every node: the CLI's dry run), ReconcileNode (one node,
// from the same fleet view, because some facts are fleet-wide: the canary
// set, whether a deployment is wanted, and completion, which is counted on
// every node) and ReconcileLocal (one node from its own allocations and the
// deployment record: the same buckets at a cost that does not grow with the
// fleet; it refuses with ErrFleetFactsNeeded rather than guess a canary set
// the record does not hold yet). TestFleetPlanIsTheUnionOfNodePlans and
// TestLocalPlanMatchesTheFleetViewForEveryNode enforce that they agree.
//
// Invariants:
//   - Pure: no clock (the caller passes Now), no randomness, no I/O, no
//     goroutines. New allocation and deployment IDs are derived from their
//     inputs by hashing (ids.go), never drawn at random.
//     TestPlanBytesDoNotDependOnInputOrder shuffles every input slice and map
//     100 times and compares the JSON bytes of the plan.
//   - Every live allocation lands in at most one bucket (or in
//     AwaitingPromotion); every required name on a ready node lands in
//     exactly one bucket, except rule 12's wait, which is listed in
//     AwaitingPromotion. The property tests and FuzzReconcile enforce both.
//   - A canary chooser's answer is validated; a bad answer is replaced by
//     DefaultCanaryChooser's and the fallback is reported in the plan.
//   - The reconciler never emits a status update for a deployment it does
//     not keep, and creates at most one deployment per (job, version).
package reconcile
