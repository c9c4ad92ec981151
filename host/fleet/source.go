package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/wait"
)

// SourceConfig configures a Source.
type SourceConfig struct {
	Log      *slog.Logger
	Observer Observer
	// Kinds limits the buckets watched (KindJobs, ...); default all five.
	Kinds []string
	// Recreate, when set, creates the fleet's buckets again when one this
	// source reads is missing: a NATS server that came back with an empty
	// store, a bucket deleted by hand. The agent, which creates them at its
	// start, passes EnsureBuckets with its options; the new bucket's
	// creation time then makes the epoch check pull it whole (its
	// revisions start again at 1). A CLI leaves it unset: it never creates
	// a fleet's buckets.
	Recreate func(ctx context.Context) error
	// Filters narrows the watch of a kind to the keys matching one of its
	// filters (KV key wildcards: "*" one token, ">" the rest), so that a
	// reader of one job receives that job's changes and not the fleet's
	// (the CLI following one rollout watches "*.<ns>.<job>.*" in the
	// allocations bucket). A kind without filters is watched whole. The
	// View then holds only matching keys; a filtered watch is not checked
	// for stalls against the bucket's last revision, which it may never
	// reach (changes to other keys are not delivered to it).
	Filters map[string][]string
}

// Source keeps a View of the buckets: it pulls each bucket whole at boot and
// after any lost watch, watches it while running, and re-creates its watchers
// from the connection's reconnect handler, resuming after the last revision
// applied. Consumers wait on Changed and read View.
type Source struct {
	st    *Store
	log   *slog.Logger
	obs   Observer
	kinds []string

	// filters are the kinds' current watch filters (under mu; SetFilters
	// changes them); watched, per filtered kind, the filters whose pull is
	// complete; refilter signals a kind's loop to watch its new filters.
	filters  map[string][]string
	watched  map[string][]string
	refilter map[string]chan struct{}
	// widening names the kinds whose filters were removed and whose
	// whole pull is not complete yet (they stay in View.Watched until it
	// is).
	widening map[string]bool

	delivered deliveries // what the watches delivered, by kind

	recreate     func(ctx context.Context) error
	recreateMu   sync.Mutex
	recreatedAt  time.Time // when recreate last succeeded
	recreateErrs int       // failures in a row

	mu    sync.Mutex
	jobs  mapBuilder[wanted.JobState]
	nodes mapBuilder[wanted.NodeState]
	// tally counts nodes' records (View.Tally), kept as they are
	// applied.
	tally NodeTally
	// nodeRaw is, per node key, the bytes of the record last accepted, so
	// that a heartbeat changing nothing else is applied without a decode
	// (heartbeatPut).
	nodeRaw map[string][]byte
	// The records of the buckets but the nodes', made into a View's Maps
	// by snapshots that share what a change did not touch.
	intents mapBuilder[wanted.IntentState]
	allocs  mapBuilder[wanted.AllocState]
	deps    mapBuilder[wanted.DeploymentState]
	slots   mapBuilder[wanted.SlotState]
	downs   mapBuilder[wanted.VerdictState]
	sums    mapBuilder[wanted.SummaryState]
	revs    map[string]uint64
	epochs  map[string]time.Time
	// markerTTL is, per kind, how long its bucket keeps the markers of
	// expired keys (its stream's SubjectDeleteMarkerTTL; 0: none), read
	// with the epoch.
	markerTTL map[string]time.Duration
	synced    map[string]bool
	// stage is, per kind whose boot pull is not complete, where its loop
	// is (and why its last attempt failed): what Unsynced reports.
	stage map[string]string
	// restartWhy counts restarts by "kind/reason" (Restarts sums them by
	// kind).
	restartWhy map[string]uint64
	// resumedAt is, per kind, the local time its watcher was last
	// re-created to resume after an interruption.
	resumedAt map[string]time.Time
	// beats are the node states whose puts were heartbeats alone since
	// the nodes were last copied whole into a snapshot, in the order
	// applied (View.NodeBeats). Only appended to: a snapshot holds a
	// prefix of it, and a fold starts a new one. beatsStale says one was
	// added since the last snapshot.
	beats      []NodeBeat
	beatsStale bool
	// beatsUnsignalled counts the heartbeats applied since the last
	// signal (notify): a heartbeat alone is not signalled until
	// beatSignalEvery of them are.
	beatsUnsignalled int
	// nodeApplies counts the node entries applied, by how (under mu).
	nodeApplies NodeApplies
	// nodesAtStart is the nodes bucket's key count read before the first
	// watches were made (readFleetSize).
	nodesAtStart int
	gen          uint64
	rejected     rejectionsMemo // the snapshots' rejections, by kind (View.Rejections)
	nodesCopy    uint64         // the copies of nodes made into snapshots (View.NodesCopy)
	changeGen    uint64         // gen as of the last change that was not a heartbeat alone (View.ChangeGeneration)
	snap         *View
	prev         *View           // the last snapshot taken, kept for its unchanged maps
	stale        map[string]bool // kinds changed since prev
	changes      changeLog

	// minSkew is the smallest (local receipt time − server timestamp)
	// seen on an entry: local time minus it estimates the server's clock.
	minSkew  time.Duration
	haveSkew bool

	changed    chan struct{}
	subs       map[int]chan struct{}
	nextSub    int
	syncedCh   chan struct{}
	syncedOnce sync.Once

	// watchHook, set only by tests, sees every watcher created and returns
	// the one to consume (it, or a wrapper of it).
	watchHook func(kind string, w jetstream.KeyWatcher) jetstream.KeyWatcher
}

// NewSource returns a Source over the store's buckets; call Run.
func NewSource(st *Store, cfg SourceConfig) *Source {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	kinds := cfg.Kinds
	if len(kinds) == 0 {
		kinds = []string{KindJobs, KindNodes, KindIntents, KindAllocs, KindDeployments, KindRollout}
	}
	filters := map[string][]string{}
	refilter := map[string]chan struct{}{}
	for _, k := range kinds {
		if f := normalFilters(cfg.Filters[k]); len(f) > 0 {
			filters[k] = f
		}
		refilter[k] = make(chan struct{}, 1)
	}
	return &Source{
		st: st, log: log, obs: observerOr(cfg.Observer), kinds: kinds, recreate: cfg.Recreate,
		filters: filters, watched: map[string][]string{}, refilter: refilter, widening: map[string]bool{},
		nodeRaw: map[string][]byte{}, revs: map[string]uint64{}, epochs: map[string]time.Time{}, markerTTL: map[string]time.Duration{},
		synced: map[string]bool{}, stage: map[string]string{}, restartWhy: map[string]uint64{}, resumedAt: map[string]time.Time{},
		changed: make(chan struct{}, 1), syncedCh: make(chan struct{}), subs: map[int]chan struct{}{},
	}
}

// Changed receives a value after one or more changes to the View. Signals
// coalesce: a burst of updates yields at least one receive, not one per
// update; read View after each receive. It is meant for one consumer (the
// reconcile loop); every other consumer takes its own channel with Subscribe.
//
// A node record that changed in its heartbeat time alone
// (Change.HeartbeatOnly) is applied (the next View holds it) but not
// signalled, here or to subscribers, until beatSignalEvery such heartbeats
// have gone unsignalled: nothing a consumer decides reads a heartbeat time,
// and a fleet's heartbeats are most of what every agent receives (each one
// woke the reconcile loop and every subscriber of every agent to find
// nothing to do). A reader of heartbeat times reads them in the next View
// it takes for any reason. The signal every beatSignalEvery heartbeats
// keeps a consumer that follows the change log by generation
// (ChangesSince) from being pushed out of it by heartbeats alone.
func (s *Source) Changed() <-chan struct{} { return s.changed }

// Subscribe returns a coalesced change signal of its own, like Changed, for a
// second consumer (a signal on a shared channel reaches only one reader).
// Call cancel when done.
func (s *Source) Subscribe() (ch <-chan struct{}, cancel func()) {
	c := make(chan struct{}, 1)
	s.mu.Lock()
	id := s.nextSub
	s.nextSub++
	s.subs[id] = c
	s.mu.Unlock()
	return c, func() {
		s.mu.Lock()
		delete(s.subs, id)
		s.mu.Unlock()
	}
}

// SetFilters changes the filters of a kind's watch (nil: the whole
// bucket), as SourceConfig.Filters sets them at the start: the kind's
// watcher is re-created for the new filters. After a complete pull it
// resumes after the last revision applied, once the keys of the filters
// added are pulled and the keys no filter matches any more are dropped
// from the View (narrowTo); otherwise, and to widen to the whole bucket,
// it pulls every key the new filters match and drops the others once that
// pull is complete. Until the new watcher has delivered what it was
// created behind, View.Watched lists only the filters that were watched
// before and still are. Setting the filters in force changes nothing.
func (s *Source) SetFilters(kind string, filters []string) {
	f := normalFilters(filters)
	s.mu.Lock()
	ch, ok := s.refilter[kind]
	if !ok || slices.Equal(f, s.filters[kind]) {
		s.mu.Unlock()
		return
	}
	if len(f) == 0 {
		delete(s.filters, kind)
		s.widening[kind] = true
	} else {
		s.filters[kind] = f
		delete(s.widening, kind)
	}
	s.watched[kind] = intersect(s.watched[kind], f)
	s.bumpLocked(kind) // View.Watched changed: every reader looks again
	s.changes.add(Change{Gen: s.gen, Kind: kind, Filters: true})
	s.mu.Unlock()
	select {
	case ch <- struct{}{}:
	default:
	}
	s.notify()
}

func normalFilters(f []string) []string {
	if len(f) == 0 {
		return nil
	}
	out := slices.Clone(f)
	slices.Sort(out)
	return slices.Compact(out)
}

// intersect is the sorted filters in both sorted lists.
func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); ok {
			out = append(out, x)
		}
	}
	return out
}

// watchedLocked is View.Watched: the pulled filters of each filtered kind.
func (s *Source) watchedLocked() map[string][]string {
	if len(s.filters) == 0 && len(s.widening) == 0 {
		return nil
	}
	out := make(map[string][]string, len(s.filters)+len(s.widening))
	for k := range s.filters {
		out[k] = slices.Clone(s.watched[k])
	}
	for k := range s.widening {
		out[k] = slices.Clone(s.watched[k])
	}
	return out
}

// Synced is closed once every bucket has been pulled whole at least once
// (the boot pull). Before that, absence in the View means "not read yet".
func (s *Source) Synced() <-chan struct{} { return s.syncedCh }

// Run pulls and watches every bucket until ctx ends; it returns ctx's error.
func (s *Source) Run(ctx context.Context) error {
	s.readFleetSize(ctx)
	var wg sync.WaitGroup
	for _, b := range s.st.buckets() {
		if !contains(s.kinds, b.kind) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.runBucket(ctx, b)
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// NodeApplies counts how a source applied the node entries it received:
// heartbeats taken from the held bytes without a decode (Fast), heartbeats
// that had to be decoded to be known as such (DecodedBeats: the first
// after a record's other fields changed, or one whose bytes differ
// otherwise), and everything else (Changed: joins, changed records,
// expiries, deletes, rejections).
type NodeApplies struct {
	Fast, DecodedBeats, Changed uint64
}

// NodeApplies returns the counts so far.
func (s *Source) NodeApplies() NodeApplies {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodeApplies
}

// readFleetSize reads how many keys the nodes bucket holds, once, before
// the first watches are made: their heartbeats grow with the fleet
// (watchBeat), and an agent joining a large fleet starts its watches before
// its own pull of the nodes has counted them. A failed read leaves the
// count to the pull.
func (s *Source) readFleetSize(ctx context.Context) {
	if s.st.Nodes == nil {
		return
	}
	rctx, cancel := s.st.conn.withTimeout(ctx)
	defer cancel()
	st, err := s.st.Nodes.Status(rctx)
	if err != nil {
		return
	}
	if b, ok := st.(*jetstream.KeyValueBucketStatus); ok && b.StreamInfo() != nil {
		s.mu.Lock()
		s.nodesAtStart = int(b.StreamInfo().State.NumSubjects)
		s.mu.Unlock()
	}
}

// fleetSize is the number of nodes the source knows of: those it holds, or
// the nodes bucket's key count read at its start when that is more.
func (s *Source) fleetSize() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.nodes.Len(), s.nodesAtStart)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// runBucket is one bucket's pull/watch loop.
func (s *Source) runBucket(ctx context.Context, b bucketRef) {
	log := s.log.With("bucket", b.name)
	reconnect := make(chan struct{}, 1)
	remove := s.st.conn.OnReconnect(func() {
		select {
		case reconnect <- struct{}{}:
		default:
		}
	})
	defer remove()

	kv := b.kv
	full := true // the next watcher starts with a whole-bucket pull
	attempt := 0
	quietLogged := false
	recreated := false // the buckets were created again since the last open
	checked := false   // kv's epoch checked since it was opened
	// stalled is the last watcher's leader record when it ended stalled
	// or closed under us (either, under a leader that stayed, is load, not
	// a disruption: see below).
	var stalled *leaderSeen
	stalls := 0 // this bucket's watchers that stalled in a row
	// held are the filters whose keys the records of this kind hold, up
	// to the last revision applied (nil: the whole bucket), when the next
	// watcher resumes (full false): the last watcher's. A watcher resumed
	// with other filters pulls the keys of those added first (narrowTo).
	var held []string
	// refiltered: the last watcher ended for new filters, not for an
	// interruption (its successor resumes without the disruption guard).
	refiltered := false
	for ctx.Err() == nil {
		if kv == nil {
			var err error
			checked = false
			kv, err = s.openBucket(ctx, b.name)
			if err != nil {
				missing := errors.Is(err, jetstream.ErrBucketNotFound)
				if missing && s.recreate != nil && !recreated {
					if recreated = s.recreateBuckets(ctx, b, log); recreated {
						continue // open it again at once (once: then back off)
					}
				}
				if missing {
					if !quietLogged {
						log.Info(wanted.QuietNoBucket.Message(), "quiet", wanted.QuietNoBucket.String())
						quietLogged = true
					}
					s.markSynced(b.kind) // nothing to pull: the pull is complete
				} else {
					log.Warn("opening bucket failed; retrying", "err", err)
					s.setStage(b.kind, "opening the bucket failed: "+err.Error())
				}
				if !wait.For(ctx, backoff(attempt, 200*time.Millisecond, 5*time.Second)) {
					return
				}
				attempt++
				continue
			}
			recreated = false
		}
		if !checked {
			reset, err := s.checkEpoch(ctx, b.kind, kv)
			if err != nil {
				if missingStream(err) {
					kv = nil // re-open it: it may have to be created again
				}
				log.Warn("reading bucket status failed; retrying", "err", err)
				s.setStage(b.kind, err.Error())
				if !wait.For(ctx, backoff(attempt, 50*time.Millisecond, 2*time.Second)) {
					return
				}
				attempt++
				continue
			}
			checked = true
			if reset {
				log.Warn("bucket was re-created: revisions restart; re-reading it whole")
				full = true
			}
		}
		// A reconnect signalled before this point is served by the watcher
		// about to be created.
		select {
		case <-reconnect:
		default:
		}
		// A filter change signalled before this point is served by the
		// watcher about to be created: the signal is taken first, then the
		// filters read (a change after the read signals again).
		select {
		case <-s.refilter[b.kind]:
		default:
		}
		s.mu.Lock()
		filters := slices.Clone(s.filters[b.kind])
		s.mu.Unlock()
		if !full && !slices.Equal(held, filters) {
			switch res := s.narrowTo(ctx, kv, b, held, filters, reconnect, log); res {
			case narrowedOK:
			case narrowedReconnect:
				// Served as a reconnect: the epoch is read again and the
				// new filters are pulled whole.
				full, checked = true, false
				s.countRestart(b.kind, "reconnect")
				continue
			default:
				full = true
			}
		}
		var resume uint64
		if !full {
			resume = s.revision(b.kind) + 1
		}
		w, stop, err := s.startWatch(ctx, kv, resume, filters)
		if err != nil {
			// The next watcher resumes from the same revision: the keys
			// of these filters are held (narrowTo pulled any added).
			held = filters
			if missingStream(err) {
				kv = nil // re-open it: it may have to be created again
			}
			log.Warn("creating watcher failed; retrying", "err", err, "resume_revision", resume)
			s.setStage(b.kind, err.Error())
			s.obs.WatchRestarted(b.kind, "error")
			if !wait.For(ctx, backoff(attempt, 50*time.Millisecond, 2*time.Second)) {
				return
			}
			attempt++
			continue
		}
		attempt = 0
		s.setStage(b.kind, "receiving its keys")
		if resume > 0 && !refiltered {
			// A watch resumed after an interruption (a reconnect, a leader
			// change, an error): readers that judge liveness wait a TTL
			// before trusting expiries again (the disruption guard). A
			// watcher re-created because it fell behind while its stream
			// kept its leader was slow, not cut off: every write reached
			// the stream meanwhile, and what it missed is delivered now
			// (with a thousand agents on two cores the stall check fires
			// under load alone, and each guard then held success back
			// for a node TTL).
			// A stream that is not clustered has no leader to change
			// (leaderOf names none): a stall or an end under it is load.
			if stalled != nil && stalled.unchanged(s.streamLeader(ctx, kv)) {
				log.Debug("watcher re-created under the stream leader it stalled or ended under: no disruption guard", "leader", stalled.leader)
			} else {
				s.mu.Lock()
				s.resumedAt[b.kind] = time.Now()
				s.mu.Unlock()
			}
		}
		stalled = nil
		if s.watchHook != nil {
			w = s.watchHook(b.kind, w)
		}
		quietLogged = false
		seen := &leaderSeen{delivered: time.Now()}
		reason, loaded := s.consume(ctx, b, kv, w, full, filters, reconnect, seen, stalls, log)
		stop()
		held, refiltered = filters, reason == endRefilter
		if reason == endStalled || reason == endSilent {
			stalls++
		} else {
			stalls = 0
		}
		switch reason {
		case endCtx:
			return
		case endStalled:
			stalled = seen
			full = full && !loaded
			s.countRestart(b.kind, "stalled")
			log.Warn("watcher stalled behind the bucket; re-creating it", "resume_revision", s.revision(b.kind)+1)
		case endSilent:
			// Its pull is made again (whole, or from the same revision
			// for a resumed watch); the leader record decides the
			// disruption guard as for a stall.
			stalled = seen
			s.countRestart(b.kind, "silent")
			log.Warn("watcher silent during its pull; re-creating it", "silent_for", time.Since(seen.delivered).Round(time.Millisecond), "full_pull", full)
		case endRefilter:
			// The filters changed. After a complete pull the new watcher
			// resumes where this one stopped, and only the keys of the
			// filters added are pulled first (narrowTo): re-pulling every
			// key of every filter made each filter added cost a node as
			// many deliveries as the keys it already watched (a node that
			// stewards 500 jobs took 20-40 ms to start a new one). A pull
			// cut short is done again whole, with the new filters.
			full = full && !loaded
			s.countRestart(b.kind, "filters")
			log.Debug("re-creating watcher for new filters", "full_pull", full)
		case endReconnect:
			// Resume after the last applied revision: the watch is re-created
			// at once instead of staying silent after a server restart. A
			// full pull cut short is redone whole (its absences are unknown).
			// The server may have come back with an empty store, and
			// another bucket's goroutine (or a CLI) may have created the
			// buckets again already: the epoch is read again first, so a
			// resume never starts past the new bucket's first revisions.
			full = full && !loaded
			checked = false
			s.countRestart(b.kind, "reconnect")
			log.Info("re-creating watcher after reconnect", "resume_revision", s.revision(b.kind)+1)
		case endClosed:
			// The watch ended under us: its consumer could not be
			// recreated in time (a server too loaded to answer, or the
			// bucket gone). Resume after the last applied revision, as
			// after a reconnect: the bucket is opened again and its epoch
			// checked first, so a bucket that was re-created is pulled
			// whole, and so is a pull cut short. (A whole-bucket pull per
			// ended watch was what kept a thousand agents on one loaded
			// server from catching up: every such pull re-sent the bucket.)
			// A resume learns an expiry from its marker, which the bucket
			// keeps for its marker TTL only: when the watch last delivered
			// longer ago than half of it, a marker may be gone, and the
			// bucket is pulled whole (a pull sees the key absent).
			// Its leader record decides the disruption guard as for a
			// stall: an end under a leader that stayed is load.
			stalled = seen
			s.mu.Lock()
			ttl := s.markerTTL[b.kind]
			s.mu.Unlock()
			full = (full && !loaded) || (ttl > 0 && time.Since(seen.delivered) >= ttl/2)
			s.countRestart(b.kind, "ended")
			log.Warn("watch ended; re-creating it", "resume_revision", s.revision(b.kind)+1, "full_pull", full)
			if !wait.For(ctx, backoff(0, 50*time.Millisecond, time.Second)) {
				return
			}
			kv = nil // re-open: the bucket may have been deleted
		}
	}
}

// narrowResult is how narrowTo ended.
type narrowResult int

const (
	narrowedOK        narrowResult = iota // the records hold the new filters' keys up to the last revision
	narrowedFull                          // pull the new filters whole
	narrowedReconnect                     // the connection came back meanwhile: as after a reconnect
)

// narrowTo readies the records of a kind that hold the keys of filters
// from (nil: the whole bucket) up to the last revision applied, R, for a
// watcher of filters to that resumes after R: it pulls the last values of
// the keys of the filters added, keeping those of revision R or before (a
// later one the resumed watcher delivers, in order after every earlier
// change of its key), and drops the keys no filter of to matches. A
// watcher of every key (to nil) is a whole pull instead, as is an empty
// bucket so far (R = 0), or a pull of the added filters that fails.
func (s *Source) narrowTo(ctx context.Context, kv jetstream.KeyValue, b bucketRef, from, to []string, reconnect <-chan struct{}, log *slog.Logger) narrowResult {
	rev := s.revision(b.kind)
	if len(to) == 0 || rev == 0 {
		return narrowedFull
	}
	var added []string
	if len(from) > 0 {
		for _, f := range to {
			if _, ok := slices.BinarySearch(from, f); !ok {
				added = append(added, f)
			}
		}
	}
	if len(added) > 0 {
		// The pull is bounded as a watcher's creation and its first
		// deliveries are: past that, the whole pull is as good a wait.
		pctx, cancel := context.WithTimeout(ctx, 2*max(s.st.conn.RequestTimeout(), 5*time.Second))
		defer cancel()
		w, err := watchKV(pctx, s.st.conn.js, kv.Bucket(), added, 0, watchBeat(s.fleetSize()))
		if err != nil {
			log.Debug("pulling the added filters failed: pulling the new ones whole", "err", err)
			return narrowedFull
		}
		defer func() { go func() { _ = w.Stop() }() }()
		n := 0
	pull:
		for {
			select {
			case <-pctx.Done():
				log.Debug("pulling the added filters took too long: pulling the new ones whole")
				return narrowedFull
			case <-reconnect:
				return narrowedReconnect
			case e, ok := <-w.Updates():
				if !ok {
					return narrowedFull
				}
				if e == nil {
					break pull
				}
				s.delivered.count(b.kind, len(e.Key())+len(e.Value()))
				if e.Revision() <= rev {
					s.apply(b, toEntry(e), log)
					n++
				}
			}
		}
		log.Debug("added filters pulled", "filters", len(added), "keys", n, "revision", rev)
	}
	s.purgeHeld(b, func(key string) bool { return !matchesAny(to, key) }, log)
	return narrowedOK
}

// matchesAny reports whether a filter matches key (KV key wildcards: "*"
// one token, ">" one or more at the end).
func matchesAny(filters []string, key string) bool {
	for _, f := range filters {
		if matchFilter(f, key) {
			return true
		}
	}
	return false
}

func matchFilter(filter, key string) bool {
	for {
		ft, frest, fmore := strings.Cut(filter, ".")
		if ft == ">" && !fmore {
			return key != ""
		}
		kt, krest, kmore := strings.Cut(key, ".")
		if ft != "*" && ft != kt {
			return false
		}
		if !fmore || !kmore {
			return fmore == kmore
		}
		filter, key = frest, krest
	}
}

// checkEpoch reads the bucket's stream creation time. When it differs from
// the one seen before, the bucket was deleted and re-created: its revisions
// start again from 1, so every record of that kind forgets the revision it
// applied (keeping its last good value) and the caller pulls the bucket whole.
func (s *Source) checkEpoch(ctx context.Context, kind string, kv jetstream.KeyValue) (reset bool, err error) {
	rctx, cancel := s.st.conn.withTimeout(ctx)
	defer cancel()
	st, err := kv.Status(rctx)
	if err != nil {
		return false, fmt.Errorf("reading bucket status: %w", err)
	}
	var created time.Time
	var markerTTL time.Duration
	if b, ok := st.(*jetstream.KeyValueBucketStatus); ok && b.StreamInfo() != nil {
		created, markerTTL = b.StreamInfo().Created, b.StreamInfo().Config.SubjectDeleteMarkerTTL
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markerTTL[kind] = markerTTL
	prev, seen := s.epochs[kind]
	s.epochs[kind] = created
	if !seen || prev.Equal(created) {
		return false, nil
	}
	s.revs[kind] = 0
	s.forgetAppliedLocked(kind)
	return true, nil
}

// forgetAppliedLocked forgets the revision each record of kind was applied
// at (its bucket was re-created: the old revisions mean nothing there).
func (s *Source) forgetAppliedLocked(kind string) {
	switch kind {
	case KindJobs:
		forgetAppliedIn(&s.jobs)
	case KindNodes:
		forgetAppliedIn(&s.nodes)
		s.tally = tallyOf(s.nodes.All()) // Expired counts applied records only
	case KindIntents:
		forgetAppliedIn(&s.intents)
	case KindAllocs:
		forgetAppliedIn(&s.allocs)
	case KindDeployments:
		forgetAppliedIn(&s.deps)
	case KindRollout:
		forgetAppliedIn(&s.slots)
		forgetAppliedIn(&s.downs)
		forgetAppliedIn(&s.sums)
	}
	s.markStaleLocked(kind) // the records changed: the next snapshot copies them
}

// missingStream reports whether err says the bucket's stream does not
// exist (nats.go spells it in both of its packages).
func missingStream(err error) bool {
	return errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, nats.ErrStreamNotFound)
}

// forgetAppliedIn clears the revision each of a builder's records was
// applied at.
func forgetAppliedIn[T any](b *mapBuilder[wanted.Record[T]]) {
	b.Update(func(_ string, r wanted.Record[T]) (wanted.Record[T], bool) {
		if r.Applied == 0 {
			return r, false
		}
		r.Applied = 0
		return r, true
	})
}

type endReason int

const (
	endCtx endReason = iota
	endReconnect
	endClosed
	endStalled
	endSilent // silent during its pull (consume)
	endRefilter
)

// A new watcher is checked against its bucket for stallWindow after it is
// created, every stallCheck: a watcher whose bucket holds revisions it has
// not delivered, at two checks in a row without progress, is re-created.
// After a server of a cluster dies, a watcher re-created on a survivor can
// be made while the stream has no leader yet, and then stay silent for
// ~20 s (seen here: TestAThreeServerClusterWithR3BucketsPullsWatchesAndCASes
// failed 2 runs in 6 under load). The window keeps the check's requests to
// the moments that need it (start, reconnects, errors), not steady state.
//
// Each stall in a row of one bucket's watchers doubles the interval between
// checks (up to stallMaxShift doublings), so the span without progress that
// counts as a stall, and the window grows with it; a spread of ±25 % keeps
// a fleet's agents from checking in step. A server too loaded to deliver
// within a second is then not also handed a consumer deletion, a creation
// and a stream-info read per watcher per second (seen here at 1,000 agents
// on two cores: 22,656 re-creations of the nodes watchers in one run).
const (
	stallWindow   = 30 * time.Second
	stallCheck    = time.Second
	stallMaxShift = 5
)

// stallPace is the check interval and window for a watcher created after
// stalls watchers of its bucket stalled in a row, in a fleet of nodes
// nodes. The first interval grows with the fleet as the watch's idle
// heartbeat does (a fifth of watchBeat, at least stallCheck: 1 s up to
// 250 nodes, 4 s at 1,000, 6 s from 1,500): a server that serves a
// thousand agents' watchers on two cores may not deliver to one of them
// for a few seconds while it still delivers to all, and re-creating those
// watchers is work it then cannot spare (a 1,000-agent start-up here
// re-created 1,095 nodes watchers as stalled, and a burst of ended
// watches of every bucket followed).
func stallPace(stalls, nodes int) (every, window time.Duration) {
	shift := min(stalls, stallMaxShift)
	base := max(stallCheck, watchBeat(nodes)/5)
	every = base << shift
	every = every*3/4 + time.Duration(rand.Int64N(int64(every/2)+1))
	return every, stallWindow * (base / stallCheck) << shift
}

// consume applies a watcher's entries until it ends. On a full pull it
// records the keys seen, and when the initial state is loaded marks every
// held key the pull did not find as absent.
// It also reports whether the initial state was loaded.
// stalls is how many of the bucket's watchers before this one stalled in a
// row (it paces the stall checks: stallPace).
func (s *Source) consume(ctx context.Context, b bucketRef, kv jetstream.KeyValue, w jetstream.KeyWatcher, full bool, filters []string, reconnect <-chan struct{}, leader *leaderSeen, stalls int, log *slog.Logger) (endReason, bool) {
	var seen map[string]bool
	if full {
		seen = map[string]bool{}
	}
	initial := true
	every, window := stallPace(stalls, s.fleetSize())
	check := time.NewTicker(every)
	defer check.Stop()
	checkUntil := time.Now().Add(window)
	behind := 0
	var behindAt uint64 // our revision at the last check that found us behind
	for {
		select {
		case <-ctx.Done():
			return endCtx, !initial
		case <-reconnect:
			return endReconnect, !initial
		case <-s.refilter[b.kind]:
			return endRefilter, !initial
		case <-check.C:
			if time.Now().After(checkUntil) {
				check.Stop()
				continue
			}
			if initial {
				// The pull is still being delivered, or its pull request
				// was lost: a watch created while its stream elects a
				// leader can deliver part of a bucket and then nothing
				// (after a whole cluster restarted, a CLI read gave up
				// after 20 s on a watch that had delivered some keys).
				// Silence past a request timeout, and past two checks,
				// ends it; the pull is made again (whole, or from the
				// last revision applied for a resumed watch).
				if time.Since(leader.delivered) >= max(s.st.conn.RequestTimeout(), 2*every) {
					return endSilent, false
				}
				continue
			}
			if len(filters) > 0 {
				continue // filtered (see SourceConfig.Filters)
			}
			have := s.revision(b.kind)
			last, err := s.lastRevision(ctx, kv, leader)
			switch {
			case err != nil || last <= have:
				behind = 0
			case behind > 0 && have == behindAt:
				behind++
			default:
				behind, behindAt = 1, have
			}
			if behind >= 2 {
				log.Debug("watcher behind its bucket", "applied_revision", have, "bucket_revision", last)
				return endStalled, true
			}
		case e, ok := <-w.Updates():
			if !ok {
				return endClosed, !initial
			}
			if e == nil {
				if initial {
					initial = false
					if full {
						s.markUnseenAbsent(b, seen, log)
						n := len(seen)
						if n == 0 && b.kind == KindJobs {
							log.Info("jobs bucket holds no key: nothing declared, nothing stopped", "quiet", wanted.QuietNoKey.String())
						}
						log.Debug("bucket pulled", "keys", n, "revision", s.revision(b.kind))
					}
					// The pull of these filters is complete: they are
					// watched (those still in force), or the whole bucket is.
					s.mu.Lock()
					widened := len(filters) == 0 && s.widening[b.kind] && len(s.filters[b.kind]) == 0
					if widened {
						delete(s.widening, b.kind)
						delete(s.watched, b.kind)
					}
					if len(filters) > 0 {
						s.watched[b.kind] = intersect(filters, s.filters[b.kind])
					}
					changed := len(filters) > 0 || widened
					if changed {
						s.bumpLocked(b.kind)
						s.changes.add(Change{Gen: s.gen, Kind: b.kind, Filters: true})
					}
					s.mu.Unlock()
					if changed {
						s.notify()
					}
					s.markSynced(b.kind)
				}
				continue
			}
			if seen != nil && initial {
				seen[e.Key()] = true
			}
			leader.delivered = time.Now()
			s.delivered.count(b.kind, len(e.Key())+len(e.Value()))
			s.apply(b, toEntry(e), log)
		}
	}
}

// lastRevision is the newest revision the bucket holds (its stream's last
// sequence); it notes the stream's leader in seen (when not nil).
func (s *Source) lastRevision(ctx context.Context, kv jetstream.KeyValue, seen *leaderSeen) (uint64, error) {
	info, err := s.streamInfo(ctx, kv)
	if err != nil {
		seen.note("", false)
		return 0, err
	}
	seen.note(leaderOf(info))
	return info.State.LastSeq, nil
}

// streamInfo reads the bucket's stream information.
func (s *Source) streamInfo(ctx context.Context, kv jetstream.KeyValue) (*jetstream.StreamInfo, error) {
	rctx, cancel := s.st.conn.withTimeout(ctx)
	defer cancel()
	st, err := kv.Status(rctx)
	if err != nil {
		return nil, err
	}
	b, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok || b.StreamInfo() == nil {
		return nil, errors.New("bucket status without stream info")
	}
	return b.StreamInfo(), nil
}

// leaderSeen is what a watcher's stall checks saw of its stream's leader:
// the first one read, and whether every check read it and read the same.
// The first check comes a second after the watcher's creation: a leader
// lost within that second and replaced before the check is not seen here
// (the watcher then usually ends by the reconnect, or its checks fail
// while the stream has no leader, and either starts the guard).
type leaderSeen struct {
	leader string
	reads  int
	steady bool
	// delivered is when the watcher last delivered an entry (its creation
	// until the first): what a resume after it may have to catch up from.
	delivered time.Time
}

func (l *leaderSeen) note(leader string, known bool) {
	if l == nil {
		return
	}
	switch {
	case !known:
		l.steady = false
	case l.reads == 0:
		l.leader, l.steady = leader, true
	case leader != l.leader:
		l.steady = false
	}
	l.reads++
}

// same reports whether a leader read now is the one seen.
func (l *leaderSeen) same(leader string, known bool) bool { return known && leader == l.leader }

// unchanged reports whether the stream kept its leader from what was seen
// to the read now (leader, known): every check read the same leader and the
// read now names it; or the stream is not clustered (known, no leader).
func (l *leaderSeen) unchanged(leader string, known bool) bool {
	return (l.steady && l.same(leader, known)) || (known && leader == "")
}

// leaderOf is the server leading a stream (a server that is not clustered
// names itself); known is false while a clustered stream has no leader.
func leaderOf(info *jetstream.StreamInfo) (leader string, known bool) {
	if c := info.Cluster; c != nil {
		return c.Leader, c.Leader != ""
	}
	return "", true // no cluster information: nothing to change
}

// streamLeader reads the server leading the bucket's stream (leaderOf);
// known is false when the read failed.
func (s *Source) streamLeader(ctx context.Context, kv jetstream.KeyValue) (leader string, known bool) {
	info, err := s.streamInfo(ctx, kv)
	if err != nil {
		return "", false
	}
	return leaderOf(info)
}

func toEntry(e jetstream.KeyValueEntry) wanted.Entry {
	op := wanted.OpPut
	switch e.Operation() {
	case jetstream.KeyValueDelete:
		op = wanted.OpDelete
	case jetstream.KeyValuePurge:
		op = wanted.OpPurge
	}
	return wanted.Entry{Key: e.Key(), Value: e.Value(), Revision: e.Revision(), Op: op, Time: e.Created()}
}

func (s *Source) startWatch(ctx context.Context, kv jetstream.KeyValue, resume uint64, filters []string) (jetstream.KeyWatcher, func(), error) {
	// Not kv.Watch: see watch.go (nats.go's push watch can crash the
	// process when its consumer's creation fails). The context bounds the
	// creation only.
	timeout := s.st.conn.RequestTimeout()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w, err := watchKV(cctx, s.st.conn.js, kv.Bucket(), filters, resume, watchBeat(s.fleetSize()))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, fmt.Errorf("creating watcher: no answer within %s", timeout)
		}
		return nil, nil, fmt.Errorf("creating watcher: %w", err)
	}
	// Stop deletes the consumer with a request of its own; with the server
	// gone that waits out its timeout, so it runs aside.
	return w, func() { go func() { _ = w.Stop() }() }, nil
}

// recreateBuckets creates the fleet's buckets again for a bucket found
// missing, once for every bucket goroutine that finds its own missing at
// the same time (a second caller within a second reopens without creating
// again). It reports whether the caller should reopen at once.
func (s *Source) recreateBuckets(ctx context.Context, b bucketRef, log *slog.Logger) bool {
	s.recreateMu.Lock()
	defer s.recreateMu.Unlock()
	if time.Since(s.recreatedAt) < time.Second {
		return true
	}
	log.Warn("bucket missing (a NATS store emptied, or the bucket deleted): creating the fleet's buckets again")
	if err := s.recreate(ctx); err != nil {
		s.recreateErrs++
		log.Error("creating the fleet's buckets again failed; retrying", "attempts", s.recreateErrs, "err", err)
		return false
	}
	s.recreateErrs = 0
	s.recreatedAt = time.Now()
	s.obs.WatchRestarted(b.kind, "recreated")
	return true
}

func (s *Source) openBucket(ctx context.Context, name string) (jetstream.KeyValue, error) {
	rctx, cancel := s.st.conn.withTimeout(ctx)
	defer cancel()
	return s.st.conn.js.KeyValue(rctx, name)
}

func (s *Source) revision(kind string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revs[kind]
}

// countRestart counts a watcher of kind re-created for reason, in
// Restarts, RestartReasons and the observer.
func (s *Source) countRestart(kind, reason string) {
	s.mu.Lock()
	s.restartWhy[kind+"/"+reason]++
	s.mu.Unlock()
	s.obs.WatchRestarted(kind, reason)
}

// RestartReasons counts the watchers re-created, by "kind/reason" (the
// reasons of Observer.WatchRestarted but "error" and "recreated").
func (s *Source) RestartReasons() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.restartWhy)
}

// Restarts returns how many times each bucket's watcher was re-created.
func (s *Source) Restarts() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]uint64{}
	for k, n := range s.restartWhy {
		kind, _, _ := strings.Cut(k, "/")
		out[kind] += n
	}
	return out
}

// setStage records where kind's loop is until its boot pull is complete.
func (s *Source) setStage(kind, stage string) {
	s.mu.Lock()
	if !s.synced[kind] {
		s.stage[kind] = stage
	}
	s.mu.Unlock()
}

// Unsynced names each bucket whose boot pull is not complete yet, with
// where its loop is: the error its last attempt failed with, or that its
// keys are being received. It is empty once Synced is closed.
func (s *Source) Unsynced() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for _, k := range s.kinds {
		if !s.synced[k] {
			out[k] = cmp.Or(s.stage[k], "not opened yet")
		}
	}
	return out
}

func (s *Source) markSynced(kind string) {
	s.mu.Lock()
	first := !s.synced[kind]
	s.synced[kind] = true
	delete(s.stage, kind)
	all := true
	for _, k := range s.kinds {
		all = all && s.synced[k]
	}
	if first {
		s.bumpLocked(kind)
		s.changes.add(Change{Gen: s.gen, Kind: kind, Filters: true})
	}
	s.mu.Unlock()
	if first {
		s.notify()
	}
	if all {
		s.syncedOnce.Do(func() { close(s.syncedCh) })
	}
}

func (s *Source) markUnseenAbsent(b bucketRef, seen map[string]bool, log *slog.Logger) {
	s.purgeHeld(b, func(key string) bool { return !seen[key] }, log)
}

// purgeHeld applies a purge to each key of the kind held (not absent)
// that drop selects.
func (s *Source) purgeHeld(b bucketRef, drop func(key string) bool, log *slog.Logger) {
	var keys []string
	s.mu.Lock()
	switch b.kind {
	case KindJobs:
		keys = heldWhere(s.jobs.All(), drop)
	case KindNodes:
		keys = heldWhere(s.nodes.All(), drop)
	case KindIntents:
		keys = heldWhere(s.intents.All(), drop)
	case KindAllocs:
		keys = heldWhere(s.allocs.All(), drop)
	case KindDeployments:
		keys = heldWhere(s.deps.All(), drop)
	case KindRollout:
		keys = append(append(heldWhere(s.slots.All(), drop), heldWhere(s.downs.All(), drop)...), heldWhere(s.sums.All(), drop)...)
	}
	s.mu.Unlock()
	for _, k := range keys {
		s.apply(b, wanted.Entry{Key: k, Op: wanted.OpPurge}, log)
	}
}

func heldWhere[T any](m iter.Seq2[string, wanted.Record[T]], drop func(string) bool) []string {
	var out []string
	for k, r := range m {
		if !r.Absent && drop(k) {
			out = append(out, k)
		}
	}
	return out
}

// apply applies one entry to the bucket's records, logging and counting
// what the rules say must be visible.
func (s *Source) apply(b bucketRef, e wanted.Entry, log *slog.Logger) {
	received := time.Now()
	if b.kind == KindRollout && !strings.HasPrefix(e.Key, "slot.") && !strings.HasPrefix(e.Key, "down.") && !strings.HasPrefix(e.Key, "sum.") {
		// Only the slots, loss verdicts and summaries of the rollout
		// bucket are records a host holds (the CLI's clock keys are not).
		s.mu.Lock()
		if e.Revision > s.revs[b.kind] {
			s.revs[b.kind] = e.Revision
		}
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	if !e.Time.IsZero() {
		if skew := received.Sub(e.Time); !s.haveSkew || skew < s.minSkew {
			s.minSkew, s.haveSkew = skew, true
		}
	}
	if e.Revision > s.revs[b.kind] {
		s.revs[b.kind] = e.Revision
	}
	before := s.jobOfLocked(b.kind, e.Key)
	var eff wanted.Effect
	heartbeat := false // a node record changed in its heartbeat time alone
	var rej *wanted.Rejection
	switch b.kind {
	case KindJobs:
		st, ef := wanted.ApplyJob(s.jobs.At(e.Key), e)
		s.jobs.Set(e.Key, st)
		eff, rej = ef, st.Rejection
	case KindNodes:
		prev, had := s.nodes.Get(e.Key)
		if st, ok := heartbeatPut(prev, s.nodeRaw[e.Key], e); ok {
			// Only the heartbeat time moved: the tally stays.
			s.nodes.Set(e.Key, st)
			eff, heartbeat = wanted.EffectAccepted, true
			s.nodeRaw[e.Key] = e.Value
			s.nodeApplies.Fast++
			break
		}
		st, ef := wanted.ApplyNode(prev, e)
		s.nodes.Set(e.Key, st)
		s.tally.replace(prev, st)
		eff, rej = ef, st.Rejection
		heartbeat = had && heartbeatOnly(prev, st)
		if heartbeat {
			s.nodeApplies.DecodedBeats++
		} else {
			s.nodeApplies.Changed++
		}
		if ef == wanted.EffectAccepted {
			s.nodeRaw[e.Key] = e.Value
		}
	case KindIntents:
		st, ef := wanted.ApplyIntent(s.intents.At(e.Key), e)
		s.intents.Set(e.Key, st)
		eff, rej = ef, st.Rejection
	case KindAllocs:
		st, ef := wanted.ApplyAlloc(s.allocs.At(e.Key), e)
		eff, rej = ef, st.Rejection
		if ef == wanted.EffectAbsent {
			// A status record is not a declaration: a deleted one is
			// forgotten (a replay cannot resurrect it: a resume starts after
			// the delete and a full pull delivers the delete marker).
			s.allocs.Delete(e.Key)
		} else {
			s.allocs.Set(e.Key, st)
		}
	case KindDeployments:
		st, ef := wanted.ApplyDeployment(s.deps.At(e.Key), e)
		eff, rej = ef, st.Rejection
		if ef == wanted.EffectAbsent {
			s.deps.Delete(e.Key)
		} else {
			s.deps.Set(e.Key, st)
		}
	case KindRollout:
		if strings.HasPrefix(e.Key, "sum.") {
			st, ef := wanted.ApplySummary(s.sums.At(e.Key), e)
			eff, rej = ef, st.Rejection
			if ef == wanted.EffectAbsent {
				s.sums.Delete(e.Key)
			} else {
				s.sums.Set(e.Key, st)
			}
			break
		}
		if strings.HasPrefix(e.Key, "down.") {
			st, ef := wanted.ApplyVerdict(s.downs.At(e.Key), e)
			eff, rej = ef, st.Rejection
			if ef == wanted.EffectAbsent {
				s.downs.Delete(e.Key) // the node came back and deleted it
			} else {
				s.downs.Set(e.Key, st)
			}
			break
		}
		st, ef := wanted.ApplySlot(s.slots.At(e.Key), e)
		eff, rej = ef, st.Rejection
		if ef == wanted.EffectAbsent {
			s.slots.Delete(e.Key) // released, reclaimed or expired
		} else {
			s.slots.Set(e.Key, st)
		}
	}
	beatOnly := b.kind == KindNodes && heartbeat && eff == wanted.EffectAccepted
	if beatOnly {
		// Kept beside the snapshot's node records, not copied into them
		// (View.NodeBeats).
		s.beats = append(s.beats, NodeBeat{Key: e.Key, State: s.nodes.At(e.Key)})
		s.beatsStale = true
	} else {
		s.markStaleLocked(b.kind) // even a write with no effect replaced the record
	}
	if rej != nil {
		rej.Bucket = b.name
	}
	if beatOnly {
		s.gen++
		s.snap = nil
	} else if eff != wanted.EffectNone {
		s.bumpLocked(b.kind)
	}
	if eff != wanted.EffectNone {
		s.changes.add(Change{Gen: s.gen, Kind: b.kind, Key: e.Key, Revision: e.Revision,
			Jobs: [2]string{before, s.jobOfLocked(b.kind, e.Key)}, HeartbeatOnly: heartbeat})
	}
	unsignalled := false // a heartbeat alone, not signalled yet (Changed)
	if beatOnly {
		s.beatsUnsignalled++
		unsignalled = s.beatsUnsignalled < beatSignalEvery
	}
	s.mu.Unlock()

	switch eff {
	case wanted.EffectNone:
		return
	case wanted.EffectAccepted:
		if unsignalled {
			return
		}
	case wanted.EffectRejected:
		attrs := []any{"key", e.Key, "revision", e.Revision, "reason", rej.Reason}
		if b.kind == KindJobs {
			attrs = append(attrs, "job", e.Key)
		}
		log.Warn("declaration rejected; the last good version stays in force", attrs...)
		s.obs.DeclarationRejected(b.kind, e.Key)
	case wanted.EffectAbsent:
		switch b.kind {
		case KindJobs:
			log.Info("job key gone: not a deletion order; its allocations keep running, reported orphaned",
				"job", e.Key, "op", e.Op.String(), "revision", e.Revision)
		case KindNodes:
			log.Info("node heartbeat entry gone: node seen down", "node_id", e.Key, "op", e.Op.String())
		}
	}
	s.notify()
}

func (s *Source) bumpLocked(kind string) {
	s.gen++
	s.changeGen = s.gen
	s.snap = nil
	s.markStaleLocked(kind)
}

// markStaleLocked records that a kind's records were written: the next
// snapshot copies them again.
func (s *Source) markStaleLocked(kind string) {
	if s.stale == nil {
		s.stale = map[string]bool{}
	}
	s.stale[kind] = true
}

// beatSignalEvery is how many heartbeats alone go unsignalled at most
// (Changed): a quarter of the change log, so that a consumer woken by them
// reads its changes while the log still reaches back to its last read.
const beatSignalEvery = maxChanges / 4

func (s *Source) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beatsUnsignalled = 0
	for _, c := range s.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// ResumedAt is the local time the bucket kind's watcher last resumed after
// an interruption (zero: never).
func (s *Source) ResumedAt(kind string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resumedAt[kind]
}

// ServerNow estimates the NATS server's clock at local time t from the
// server timestamps of the entries received (every cross-machine time of
// the rollout protocol is the server's, docs/rollout.md I6). The estimate
// lags the server by at most the fastest delivery seen; before any entry
// arrived it is t itself.
func (s *Source) ServerNow(t time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.haveSkew {
		return t
	}
	return t.Add(-s.minSkew)
}

// Intent returns the operator intent in force for a node (without building
// a View; node.FollowIntent polls it on every change).
func (s *Source) Intent(nodeID string) wanted.Intent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return wanted.IntentOf(s.intents.At(wanted.NodeKey(nodeID)))
}

// pullAttempts is how many watches a pull starts before it gives up: a
// watch that stays silent past the request timeout is taken for lost and
// replaced by a fresh one. A watch created while its stream elects a leader
// (a cluster forming, a server killed) can have its first pull request
// lost; its own recovery (two missed idle heartbeats, then a new consumer)
// takes 10 s or more, longer than a CLI read should wait in silence. Met in
// CI: `deployment list` right after a 3-server cluster formed, "no entry
// within 5s", while the next read answered at once.
const pullAttempts = 3

// pullAll reads the latest entry of every key of a bucket (delete and purge
// markers included) and stops. A watch silent for longer than the request
// timeout is replaced (pullAttempts in all).
func (s *Store) pullAll(ctx context.Context, kv jetstream.KeyValue) ([]wanted.Entry, error) {
	if kv == nil {
		return nil, ErrNoBucket
	}
	src := &Source{st: s}
	return pullEntries(ctx, s.conn.RequestTimeout(), pullAttempts, func(ctx context.Context) (jetstream.KeyWatcher, func(), error) {
		return src.startWatch(ctx, kv, 0, nil)
	})
}

// pullEntries runs pullOnce on watches from start until one ends with its
// nil marker, at most attempts of them; each starts over from nothing (a
// silent watch may have delivered some entries, and a fresh one delivers
// them all again).
func pullEntries(ctx context.Context, silence time.Duration, attempts int, start func(context.Context) (jetstream.KeyWatcher, func(), error)) ([]wanted.Entry, error) {
	var err error
	for range attempts {
		var out []wanted.Entry
		if out, err = pullOnce(ctx, silence, start); err == nil || ctx.Err() != nil {
			return out, err
		}
	}
	return nil, fmt.Errorf("%w (%d watches)", err, attempts)
}

// errPullSilent is a watch that delivered nothing for the silence allowed.
var errPullSilent = errors.New("pulling bucket: watch silent")

func pullOnce(ctx context.Context, silence time.Duration, start func(context.Context) (jetstream.KeyWatcher, func(), error)) ([]wanted.Entry, error) {
	w, stop, err := start(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	var out []wanted.Entry
	t := time.NewTimer(silence)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			return nil, fmt.Errorf("%w: no entry within %s", errPullSilent, silence)
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("pulling bucket: watch ended early")
			}
			if e == nil {
				return out, nil
			}
			out = append(out, toEntry(e))
			t.Reset(silence)
		}
	}
}

// JobFilters are the Filters of a source that follows one job's rollout:
// the job's key, its allocations on every node, its deployment records, its
// update slots and every loss verdict (a verdict names a node, not a job).
// The nodes bucket stays whole: the rollout's scope is every node.
func JobFilters(namespace, jobID string) map[string][]string {
	job := wanted.JobKey(namespace, jobID)
	return map[string][]string{
		KindJobs:        {job},
		KindAllocs:      {wanted.AllocJobFilter(namespace, jobID)},
		KindDeployments: {job + ".*"}, // DeploymentKey: <job key>.<version>
		KindRollout:     {wanted.SlotFilter(namespace, jobID), wanted.DownFilter},
	}
}

// JobView reads one job's rollout facts (JobFilters: the job, its
// allocations on every node, its records and slots, every verdict, the
// nodes) with a source of its own, and returns its View once every bucket
// is pulled. It is for a reader whose own source does not watch the job's
// allocations (a narrowed agent serving an operator's promote).
func (s *Store) JobView(ctx context.Context, namespace, jobID string) (*View, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	src := NewSource(s, SourceConfig{Filters: JobFilters(namespace, jobID),
		Kinds: []string{KindJobs, KindNodes, KindAllocs, KindDeployments, KindRollout}})
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(sctx) }()
	defer func() { cancel(); <-done }()
	t := time.NewTimer(2 * s.conn.RequestTimeout())
	defer t.Stop()
	select {
	case <-src.Synced():
		return src.View(), nil
	case <-t.C:
		return nil, fmt.Errorf("reading job %s: the buckets were not pulled within %s", wanted.JobKey(namespace, jobID), 2*s.conn.RequestTimeout())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
