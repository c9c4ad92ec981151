// Package fleet owns a host's plumbing to the fleet: the NATS connection
// (one per agent, shared by every consumer), the embedded NATS server of a
// single-node or dev setup, the JetStream KV buckets and their key layout, and
// the Source that keeps a consistent View of the buckets by pulling and
// watching them. What the values mean is host/wanted's business; this package
// moves bytes and keeps revisions.
//
// Usage (what host/agent does):
//
//	emb, _ := fleet.StartEmbedded(ctx, fleet.EmbeddedConfig{StoreDir: dir})    // -dev or no URL
//	conn, _ := fleet.Connect(ctx, fleet.ConnConfig{InProcess: emb.Server()}, log, metrics)
//	conn.SetObserver(metrics)           // when the metrics exist only after Connect
//	st, _ := fleet.EnsureBuckets(ctx, conn, fleet.Names("hivelet"), fleet.BucketOptions{})
//	src := fleet.NewSource(st, fleet.SourceConfig{Log: log, Observer: metrics})
//	go src.Run(ctx)
//	<-src.Synced()                      // the boot pull is complete
//	for range src.Changed() { v := src.View(); ... }   // coalesced signal + snapshot
//	ch, cancel := src.Subscribe()       // a second consumer takes its own signal
//	w := st.ForNode(nodeID)             // the only writer of this node's keys
//	w.PutAlloc(ctx, alloc); st.CreateDeployment(ctx, d); st.UpdateDeployment(ctx, d, rev)
//	conn.JetStream()                    // for the policy engine's object store
//
// Invariants:
//   - Pull and watch, both: every bucket is read whole at boot and again after
//     any lost watch (repair pull), and watched while running. After a NATS
//     server restart the reconnect handler re-creates every watcher with
//     ResumeFromRevision(last+1) (a watch left alone is silent for ~19 s).
//     TestAServerRestartUnderARunningWatcherMissesNothing.
//   - A bucket deleted and created again (its revisions restart at 1) is
//     detected by its stream's creation time and read again whole.
//     TestARecreatedBucketIsReadAgainFromItsFirstRevision.
//   - Entries apply idempotently by revision (wanted.Apply); a watch whose
//     Updates channel closes is logged, counted and replaced by one that
//     resumes after the last applied revision; it is pulled whole instead
//     when its expiry markers may have lapsed (the watch last delivered
//     longer ago than half their TTL) or the bucket was re-created.
//     TestAnEndedWatchIsResumedAfterItsLastRevision,
//     TestAnEndedWatchPullsWholeWhenAMarkerMayHaveExpired.
//   - Every request carries a deadline (ConnConfig.RequestTimeout), the
//     creation of a watch's consumer included. A watch rides the jetstream
//     package's ordered pull consumer (watch.go), not nats.go's KV watch,
//     whose push consumer can crash the process when its creation fails
//     under load. TestAWatchDeliversLastValuesThenAMarkerThenChangesAndStopRemovesItsConsumer.
//   - A node record is written with a per-message TTL of its own, at most
//     the nodes bucket's (PutNodeTTL); the bucket's TTL is raised and
//     lowered only through SetNodeCeiling (node.Liveness decides).
//     TestARecordWrittenWithItsOwnTTLExpiresAtIt.
//   - A host writes only its own node record and allocation keys (NodeWriter
//     refuses others with wanted.ErrNotOwner); deployments change only by
//     compare-and-set, a lost race is reported as ErrLostRace.
//     TestCASRaceBetweenTwoWritersHasExactlyOneWinner.
//   - Every bucket's stream takes at least BucketOptions.MaxWatchers
//     consumers (default 100,000; the server's own default is 1,000 per
//     stream, one per agent). TestABucketTakesMoreWatchersThanTheServersDefaultConsumerLimit.
//   - A snapshot's Nodes hold each record as of its last change that was
//     not a heartbeat; NodeBeats the newer heartbeats, a prefix of a log
//     the source only appends to and snapshots share (NodeState reads
//     both). TestASnapshotKeepsHeartbeatsBesideItsNodeRecordsAndAnswersTheNewestState.
//   - A node record that changed in its heartbeat time alone is applied
//     and logged (ChangesSince) but not signalled (Changed, Subscribe)
//     until a quarter of the change log's worth of them went unsignalled;
//     every other change is signalled at once.
//     TestAHeartbeatAloneIsNotSignalledUntilAQuarterOfTheLogIs.
//   - A View's Maps are never written once made: a Source's next write to
//     a part a snapshot holds goes to a copy of the part (mapBuilder), and
//     a snapshot after one change shares all the parts but that one.
//     TestMapSnapshotsEqualTheRecordsAsTheyStoodAndNeverChange.
//   - No package-level mutable state; the logger and observer are passed in.
//
// The buckets, keys and values it moves are specified in docs/wire-format.md;
// what a host may conclude from them, in docs/wanted-state.md.
package fleet
