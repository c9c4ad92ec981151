// Package node owns this host's identity in the fleet: its persistent node
// ID, its fingerprint (OS, architecture, CPU, memory, kernel, hostname and the
// drivers' own fingerprints), the node record built from them and the
// operator's intent, and the registration and heartbeat that keep the record
// alive in the nodes bucket, with a TTL that grows with the fleet (Liveness).
//
// Usage (what host/agent does):
//
//	id, _ := node.LoadOrCreateID(stateDir, dev)
//	attrs, _ := node.Fingerprint(node.ProcFS("/proc"))
//	hb := node.NewHeartbeater(node.HeartbeatConfig{Period: ttl / 3}, store.ForNode(id), func() *model.Node {
//		return node.Build(id, cfg, attrs, drivers.DriverFingerprints(), view.Intent(id))
//	}, log)
//	go hb.Run(ctx)     // register with jittered retry, then heartbeat
//	go node.FollowIntent(ctx, src, id, hb) // drain/eligibility reach the record at once
//	hb.Poke()          // push the record now (driver health changed)
//
// Invariants:
//   - The node ID is persisted in the state directory (mode 0600) and never
//     changes; dev mode uses a fresh one and persists nothing.
//     TestTheNodeIDSurvivesARestartButNotInDevMode.
//   - A built record always has non-nil Attributes and Meta, a name (hostname,
//     else the ID), datacenter (dc1) and node pool (default).
//   - Only the owning agent writes its node record: operator drain and
//     eligibility arrive as an Intent (wanted.MergeIntent).
//   - Registration errors are not logged during the grace period; the first
//     heartbeat is staggered within one period.
//   - A write waits for its answer a quarter of the planned period (at least
//     WriteTimeout); after a failed one the record is read back, and a write
//     that landed after all is not made again while the record would change
//     only its heartbeat time. TestAHeartbeatWhoseAnswerWasLostButLandedIsNotWrittenAgain,
//     TestAHeartbeatWritesDeadlineFitsItsPeriod.
//   - With a Liveness plan, the record's TTL is node_ttl until the fleet is
//     counted and while any live node writes no TTL of its own; past that it
//     doubles with the fleet (BeatTTL: at most BeatWritesPerSecond heartbeats
//     a second fleet-wide), is never written above the bucket's TTL, and the
//     bucket's TTL is raised before a longer one is written and lowered one
//     halving at a time, never below what a live record says it needs.
//     TestTheCeilingIsRaisedOnlyWhenEveryLiveNodeWritesItsOwnTTL,
//     TestTheCeilingIsLoweredOneHalvingAtATimeOnceNoRecordNeedsIt.
//
// The node record is specified in docs/wire-format.md ("Nodes"); registration
// and heartbeat in the agent's start, in docs/lifecycle.md.
package node
