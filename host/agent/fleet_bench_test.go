package agent

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/rollout"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/mock"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkFleetRollout rolls one new version across HIVELET_FLEET_AGENTS
// in-process agents (default 100) on one embedded NATS with the mock
// driver: 10% canaries, auto-promote, max_parallel 10% of the nodes,
// min_healthy_time 1 s. It reports the wall time beyond the health times
// the job asks for (one canary wave plus ceil(rest / max_parallel) waves,
// each min_healthy_time), the rollout's KV operations and CAS conflicts
// per deployment and per agent, what the agents' watches delivered
// (entries and bytes, per rollout and per agent), and asserts the
// invariants on the way:
// never more than max_parallel replacements in flight (from the drivers'
// timestamps), and only canary nodes start the new version before the
// promotion.
//
// HIVELET_FLEET_NODE_TTL sets the nodes bucket's TTL (default 30 s; the
// agents heartbeat at a third of it), as an operator of a large fleet
// lengthens nats.node_ttl (docs/scale.md).
//
// The agents narrow their watches (only the first nodes of each ranking
// watch the job's allocations on every node); HIVELET_FLEET_WATCH=all
// makes every agent watch every allocation, as before, for a comparison.
// HIVELET_FLEET_CLUSTER=3 runs the fleet on a three-server JetStream
// cluster on loopback with R3 buckets, the agents spread over the servers.
//
//	go test -run '^$' -bench FleetRollout -benchtime 1x ./host/agent/
func BenchmarkFleetRollout(b *testing.B) {
	agents := 100
	if v, err := strconv.Atoi(os.Getenv("HIVELET_FLEET_AGENTS")); err == nil && v > 0 {
		agents = v
	}
	maxParallel := max(agents/10, 1)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		var ttl time.Duration // HIVELET_FLEET_NODE_TTL: the nodes bucket's TTL (heartbeats at a third)
		if v := os.Getenv("HIVELET_FLEET_NODE_TTL"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				b.Fatalf("HIVELET_FLEET_NODE_TTL: %v", err)
			}
			ttl = d
		}
		var w *world
		if os.Getenv("HIVELET_FLEET_CLUSTER") != "" { // three servers, R3 buckets
			w = newClusterWorld(b, ttl)
		} else {
			w = newWorldTTL(b, ttl)
		}
		w.watchAll = os.Getenv("HIVELET_FLEET_WATCH") == "all"
		// HIVELET_FLEET_PASS_CPU=1: each agent's passes' CPU (cpuShares),
		// measured on the pass's own OS thread; a pass then holds its
		// thread, which costs thread hand-offs: off for the timed figures.
		w.passCPU = os.Getenv("HIVELET_FLEET_PASS_CPU") == "1"
		// Each agent its own connection, as in a fleet (HIVELET_FLEET_CONN=shared:
		// all on the world's one, as the figures before 2026-12-02 were taken).
		w.connPerNode = os.Getenv("HIVELET_FLEET_CONN") != "shared"
		rec := &recorder{tasks: map[string]string{}}
		f := &testFleet{w: w, rec: rec}
		// The agents start in batches, each batch's first pulls done
		// before the next starts (HIVELET_FLEET_BATCH, default 50): a
		// fleet's agents do not all boot in one instant, and a thousand
		// pulls of the nodes bucket at once on the two cores the server
		// shares with them is a start-up storm, not the rollout measured.
		batch := 50
		if v, err := strconv.Atoi(os.Getenv("HIVELET_FLEET_BATCH")); err == nil && v > 0 {
			batch = v
		}
		began, from := time.Now(), 0
		for k := 1; k <= agents; k++ {
			id := fmt.Sprintf("node-%03d", k)
			drv := &countingDriver{Driver: &recordingDriver{Driver: mock.New(), node: id, rec: rec}}
			f.nodes = append(f.nodes, w.newNodeResync(id, drv, "", 0))
			if k%batch == 0 || k == agents {
				fresh := f.nodes[from:]
				from = len(f.nodes)
				testutil.Eventually(b, 5*time.Minute, fmt.Sprintf("the first pulls of agents %d to %d", k-len(fresh)+1, k), func() bool {
					for _, n := range fresh {
						if !n.src.View().Synced {
							return false
						}
					}
					return true
				})
				if agents >= 300 && (k%(4*batch) == 0 || k == agents) {
					benchLogf("%d agents started and pulled in %v", k, time.Since(began).Round(time.Second))
				}
			}
		}
		// Every 30 s, how the fleet is doing (a thousand agents take
		// minutes: a failed wait then has a history).
		progress := time.NewTicker(30 * time.Second)
		progressDone, progressExited := make(chan struct{}), make(chan struct{})
		var stopProgress sync.Once
		endProgress := func() { // before the agents stop: it reads them
			stopProgress.Do(func() { close(progressDone) })
			<-progressExited
		}
		go func() {
			defer close(progressExited)
			defer progress.Stop()
			for {
				select {
				case <-progressDone:
					return
				case <-progress.C:
				}
				var restarts uint64
				why := map[string]uint64{}
				v1, v2 := 0, 0
				for _, n := range f.nodes {
					for k, c := range n.src.RestartReasons() {
						restarts += c
						why[k] += c
					}
					for _, a := range n.live("web") {
						switch a.JobVersion {
						case 1:
							v1++
						case 2:
							v2++
						}
					}
				}
				line := fmt.Sprintf("%v: %d running v1, %d v2; %d watch restarts %v", time.Since(began).Round(time.Second), v1, v2, restarts, why)
				for _, v := range []uint64{1, 2} {
					if d := w.deployment("", "web", v); d != nil && d.TaskGroups["g"] != nil {
						g := d.TaskGroups["g"]
						line += fmt.Sprintf("; v%d %s (%s) healthy %d/%d placed %d promoted %v", v, d.Status, d.StatusDescription, g.HealthyAllocs, g.DesiredTotal, g.PlacedAllocs, g.Promoted)
					}
				}
				benchLog(line)
				if why := f.canaryLag("web", 2); why != "" {
					benchLog("v2 canaries not running v2: " + why)
				}
			}
		}()
		defer endProgress()
		mod := func(g *model.Group) {
			g.Update.MaxParallel = maxParallel
			g.Update.MinHealthyTime = model.Duration(time.Second)
			g.Update.HealthyDeadline = model.Duration(30 * time.Second)
			g.Update.ProgressDeadline = model.Duration(2 * time.Minute)
		}
		defer func() {
			if b.Failed() { // what the records say when a wait gave up
				for _, v := range []uint64{1, 2} {
					if d := w.deployment("", "web", v); d != nil {
						benchLogf("deployment of version %d: %s, %s, groups %s", v, d.Status, d.StatusDescription, mustJSON(d.TaskGroups))
					} else {
						benchLogf("deployment of version %d: none", v)
					}
				}
				// Watch restarts and disruption guards across the fleet
				// (a guard holds success back for a node TTL).
				restarts := map[string]uint64{}
				resumed, reconnected := 0, 0
				for _, n := range f.nodes {
					for k, c := range n.src.RestartReasons() {
						restarts[k] += c
					}
					if at := n.src.ResumedAt(fleet.KindNodes); !at.IsZero() && time.Since(at) < w.store.NodeTTL() {
						resumed++
					}
					n.agent.mu.Lock()
					if at := n.agent.reconnectedAt; !at.IsZero() && time.Since(at) < w.store.NodeTTL()+time.Minute {
						reconnected++
					}
					n.agent.mu.Unlock()
				}
				benchLogf("watch restarts by bucket and reason %v; within one node TTL, %d agents resumed their nodes watch and %d reconnected (their disruption guard holds)", restarts, resumed, reconnected)
				srv := w.emb.Server()
				benchLogf("the server closed %d slow consumers (%d clients) and %d stale connections", srv.NumSlowConsumers(), srv.NumSlowConsumersClients(), srv.NumStaleConnections())
				// Why nodes run nothing of the job: the first ten such
				// nodes' last pass, view and watches.
				explain := func(n *node, what string) {
					st, v := n.agent.Status(), n.src.View()
					_, hasJob := v.Jobs.Get("default.web")
					benchLogf("%s %s: synced %v, job in view %v, nodes %d, watched %v, passes %d, last pass %s counts %s errors %q",
						n.id, what, v.Synced, hasJob, v.Nodes.Len(), v.Watched, st.Passes, st.LastPass.Format(time.RFC3339Nano), mustJSON(st.LastCounts), st.Errors)
				}
				shown := 0
				for _, n := range f.nodes {
					if shown >= 10 || len(n.live("web")) > 0 {
						continue
					}
					shown++
					explain(n, "runs nothing")
				}
				// Canaries of the newest record not running its version.
				for _, v := range []uint64{2, 1} {
					d := w.deployment("", "web", v)
					if d == nil || d.TaskGroups["g"] == nil {
						continue
					}
					canary := map[string]bool{}
					for _, c := range d.TaskGroups["g"].CanaryNodes {
						canary[c] = true
					}
					shown = 0
					for _, n := range f.nodes {
						if shown >= 10 || !canary[n.id] || slices.ContainsFunc(n.live("web"), func(a *model.Allocation) bool { return a.JobVersion == v }) {
							continue
						}
						shown++
						explain(n, fmt.Sprintf("is a canary of version %d and does not run it", v))
					}
					break
				}
			}
		}()
		// The rollout is what is measured, not the start: every agent
		// has pulled the buckets (a thousand agents starting one after
		// the other keep the server busy for minutes) before the job is
		// put, and a put the busy server did not answer in time is made
		// again (the same version: agents see one job).
		testutil.Eventually(b, 10*time.Minute, "every agent's first pull", func() bool {
			for _, n := range f.nodes {
				if !n.src.View().Synced {
					return false
				}
			}
			return true
		})
		putRetrying(b, w, fleetJob(1, mod))
		testutil.Eventually(b, 6*time.Minute, "v1 everywhere", func() bool {
			d := w.deployment("", "web", 1)
			return d != nil && d.Status == model.DeploymentSuccessful
		})
		// The KV operations of the whole fleet: every store the agents
		// and the harness wrote through (one each with a connection per
		// agent).
		stores := []*fleet.Store{w.store}
		seen := map[*fleet.Store]bool{w.store: true}
		for _, n := range f.nodes {
			if !seen[n.store] {
				seen[n.store] = true
				stores = append(stores, n.store)
			}
		}
		stats := func() (sum fleet.Stats) {
			for _, st := range stores {
				s := st.Stats()
				sum.RolloutOps += s.RolloutOps
				sum.CASConflicts += s.CASConflicts
				sum.SlotConflicts += s.SlotConflicts
				sum.SlotAdopted += s.SlotAdopted
				sum.SlotAmbiguous += s.SlotAmbiguous
				sum.NodeWrites += s.NodeWrites
				sum.NodeBytes += s.NodeBytes
			}
			return sum
		}
		before := stats()
		// The nodes stream's writes, from the server: every record put
		// (heartbeats), whichever store made it.
		nodesSeq := func() uint64 {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st, err := w.store.Nodes.Status(ctx)
			if err != nil {
				return 0
			}
			if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok && bs.StreamInfo() != nil {
				return bs.StreamInfo().State.LastSeq
			}
			return 0
		}
		nodesSeq0 := nodesSeq()
		// The heartbeaters' own account: writes answered, writes whose
		// answer failed, and of those the ones found landed on read-back.
		beats := func() (ok, failed, landed uint64) {
			for _, n := range f.nodes {
				st := n.hb.Status()
				ok += st.Heartbeats
				failed += st.Failures
				landed += st.FoundLanded
			}
			return
		}
		beatsOK0, beatsFailed0, beatsLanded0 := beats()
		beatWrites0, beatSlow0 := w.beatTimes.writes.Load(), w.beatTimes.overRequest.Load()
		w.beatTimes.maxNanos.Store(0)
		var allocBytes0, allocBytes1 uint64 // the allocations' share of the bytes
		delivered := func() (entries, bytes uint64, byKind map[string]uint64) {
			byKind = map[string]uint64{}
			var ab uint64
			for _, n := range f.nodes {
				for kind, d := range n.src.Delivered() {
					entries += d.Entries
					bytes += d.Bytes
					byKind[kind] += d.Entries
					if kind == fleet.KindAllocs {
						ab += d.Bytes
					}
				}
			}
			allocBytes0, allocBytes1 = allocBytes1, ab
			return
		}
		nodeApplies := func() (out fleet.NodeApplies) {
			for _, n := range f.nodes {
				a := n.src.NodeApplies()
				out.Fast += a.Fast
				out.DecodedBeats += a.DecodedBeats
				out.Changed += a.Changed
			}
			return out
		}
		e0, b0, k0 := delivered()
		na0 := nodeApplies()
		profileDone := func() {}
		trace, err := traceWaves(context.Background(), w.store.Rollout, "", "web")
		if err != nil {
			b.Fatal(err)
		}
		passes0, decided0 := map[string]uint64{}, map[string]uint64{}
		causes0 := map[string]map[string]uint64{}
		cpu0 := map[string]float64{}
		for _, n := range f.nodes {
			st := n.agent.Status()
			passes0[n.id], cpu0[n.id], decided0[n.id] = st.Passes, passTime(st, w.passCPU), st.Decisions
			causes0[n.id] = st.PassCauses
		}
		proc0 := processCPU()
		// HIVELET_FLEET_PROFILE: a CPU profile of the rollout alone (the
		// -test.cpuprofile of a run is mostly its start-up).
		if path := os.Getenv("HIVELET_FLEET_PROFILE"); path != "" {
			pf, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.StartCPUProfile(pf); err != nil {
				b.Fatal(err)
			}
			var once sync.Once
			stopProfile := func() { once.Do(func() { pprof.StopCPUProfile(); _ = pf.Close() }) }
			defer stopProfile()
			profileDone = stopProfile
		}
		b.StartTimer()
		start := time.Now()
		putRetrying(b, w, fleetJob(2, func(g *model.Group) {
			mod(g)
			g.Update.Canary = 10
			g.Update.AutoPromote = true
		}))
		// Reported once the wait ends, before the agents stop (they are
		// read), or on the way out of a wait that gave up.
		var shares cpuShares
		report := sync.OnceFunc(func() {
			profileDone()
			benchLog(f.timeline("web", 2, start))
			benchLog(trace.report(2, "g", maxParallel, f.starts(2), f.healthyAt("web", 2)))
			benchLog(f.passShares(passes0, decided0, trace.stewards(), time.Since(start)))
			benchLog(f.passCausesSince(causes0))
			shares = f.cpuShares(cpu0, w.passCPU, trace.stewards(), time.Since(start), processCPU()-proc0)
			benchLog(shares.String())
		})
		defer report()
		var d *model.Deployment
		testutil.Eventually(b, 5*time.Minute, "v2 successful", func() bool {
			d = w.deployment("", "web", 2)
			return d != nil && d.Status == model.DeploymentSuccessful
		})
		elapsed := time.Since(start)
		b.StopTimer()
		report()
		after := stats()
		e1, b1, k1 := delivered()
		na1 := nodeApplies()
		benchLogf("node entries applied during the rollout, per agent: %.1f heartbeats without a decode, %.1f heartbeats decoded, %.1f other (joins, changes, expiries)",
			float64(na1.Fast-na0.Fast)/float64(agents), float64(na1.DecodedBeats-na0.DecodedBeats)/float64(agents), float64(na1.Changed-na0.Changed)/float64(agents))
		canaries := d.TaskGroups["g"].CanaryNodes
		waves := 1 + (agents-len(canaries)+maxParallel-1)/maxParallel
		asked := time.Duration(waves) * time.Second
		// Invariants from the drivers' timestamps.
		promoted := d.TaskGroups["g"].PromotedAt
		isCanary := map[string]bool{}
		for _, c := range canaries {
			isCanary[c] = true
		}
		skew := 50 * time.Millisecond // server time versus this process's clock
		for _, e := range rec.all() {
			if e.op == "start" && e.version == "v2" && !isCanary[e.node] && e.at.Before(promoted.Add(-skew)) {
				b.Fatalf("%s started v2 at %v, before the promotion at %v, and is no canary", e.node, e.at, promoted)
			}
		}
		if got := f.maxInFlight(b, "v1", "v2"); got > maxParallel {
			b.Fatalf("%d replacements in flight, max_parallel %d", got, maxParallel)
		}
		ops := after.RolloutOps - before.RolloutOps
		b.ReportMetric(elapsed.Seconds(), "rollout-s")
		b.ReportMetric((elapsed - asked).Seconds(), "overhead-s")
		b.ReportMetric(float64(ops), "kv-ops/deployment")
		b.ReportMetric(float64(ops)/float64(agents), "kv-ops/agent")
		b.ReportMetric(float64(after.CASConflicts-before.CASConflicts), "cas-conflicts/deployment")
		b.ReportMetric(float64(after.SlotConflicts-before.SlotConflicts), "slot-conflicts/deployment")
		b.ReportMetric(float64(after.SlotAdopted-before.SlotAdopted), "slot-takes-adopted/deployment")
		b.ReportMetric(float64(after.SlotAmbiguous-before.SlotAmbiguous), "slot-takes-ambiguous/deployment")
		// Heartbeats (and any other node record writes) fleet-wide, as the
		// nodes stream counts them (the stores count only their own).
		nodeWrites := nodesSeq() - nodesSeq0
		b.ReportMetric(float64(nodeWrites)/elapsed.Seconds(), "node-writes/s")
		beatsOK1, beatsFailed1, beatsLanded1 := beats()
		b.ReportMetric(float64(beatsOK1-beatsOK0)/elapsed.Seconds(), "heartbeats-answered/s")
		b.ReportMetric(float64(beatsFailed1-beatsFailed0), "heartbeats-failed/rollout")
		b.ReportMetric(float64(beatsLanded1-beatsLanded0), "heartbeats-found-landed/rollout")
		b.ReportMetric(float64(w.beatTimes.writes.Load()-beatWrites0), "heartbeat-writes/rollout")
		b.ReportMetric(float64(w.beatTimes.overRequest.Load()-beatSlow0), "heartbeat-writes-over-3s/rollout")
		b.ReportMetric(time.Duration(w.beatTimes.maxNanos.Load()).Seconds(), "heartbeat-write-max-s")
		// What the agents' watches delivered during the rollout, by
		// bucket: the allocations' share grows with the fleet only for
		// the few agents that watch the job on every node.
		b.ReportMetric(float64(e1-e0), "deliveries/rollout")
		b.ReportMetric(float64(e1-e0)/float64(agents), "deliveries/agent")
		b.ReportMetric(float64(k1[fleet.KindAllocs]-k0[fleet.KindAllocs])/float64(agents), "alloc-deliveries/agent")
		b.ReportMetric(float64(k1[fleet.KindRollout]-k0[fleet.KindRollout])/float64(agents), "rollout-deliveries/agent")
		b.ReportMetric(float64(k1[fleet.KindDeployments]-k0[fleet.KindDeployments])/float64(agents), "record-deliveries/agent")
		b.ReportMetric(float64(k1[fleet.KindNodes]-k0[fleet.KindNodes])/float64(agents), "node-deliveries/agent")
		b.ReportMetric(float64(b1-b0)/1e6, "MB-delivered/rollout")
		if n := k1[fleet.KindAllocs] - k0[fleet.KindAllocs]; n > 0 {
			b.ReportMetric(float64(allocBytes1-allocBytes0)/float64(n), "bytes/alloc-delivery")
		}
		if w.emb != nil {
			srv := w.emb.Server()
			b.ReportMetric(float64(srv.NumSlowConsumers()), "slow-consumers")
		}
		var foreign, passes, most, handSent, handTakes uint64
		var handWait float64
		var takeN, releaseN int
		var takeMS, releaseMS float64
		var busiest Status
		for _, n := range f.nodes {
			st := n.agent.Status()
			foreign += st.ForeignWrites
			handSent += st.HandoffsSent
			handTakes += st.HandoffTakes
			handWait += st.HandoffWaitMS
			if w, ok := st.RolloutWrites["take"]; ok {
				takeN, takeMS = takeN+int(w.Count), takeMS+w.TotalMS
			}
			if w, ok := st.RolloutWrites["release"]; ok {
				releaseN, releaseMS = releaseN+int(w.Count), releaseMS+w.TotalMS
			}
			passes += st.Passes
			if st.Passes > most {
				most, busiest = st.Passes, st
			}
		}
		benchLogf("the agent with the most passes, %s: %d passes, by cause %v; its rollout writes %v", busiest.NodeID, most, busiest.PassCauses, busiest.RolloutWrites)
		b.ReportMetric(float64(foreign), "foreign-writes")
		// The slot handoff: release hints sent, and the takes made on one.
		b.ReportMetric(float64(handSent), "handoffs-sent/rollout")
		b.ReportMetric(float64(handTakes), "handoff-takes/rollout")
		if handTakes > 0 {
			b.ReportMetric(handWait/float64(handTakes), "handoff-hint-to-take-ms")
		}
		if takeN > 0 && releaseN > 0 {
			benchLogf("slot writes, all agents: %d takes, %.0f ms each on average (Create and the record's re-read); %d releases and reclaims, %.0f ms each", takeN, takeMS/float64(takeN), releaseN, releaseMS/float64(releaseN))
		}
		b.ReportMetric(float64(passes)/float64(agents), "passes/agent")
		b.ReportMetric(shares.max*100, "max-agent-pass-%")
		b.ReportMetric(shares.median*100, "median-agent-pass-%")
		b.ReportMetric(shares.process, "process-cpu-s/rollout")
		endProgress()
		for _, n := range f.nodes {
			n.stopOnce(true)
		}
	}
}

// putRetrying puts a job, again after a put the busy server did not
// answer within its deadline (up to five times).
func putRetrying(b *testing.B, w *world, j *model.Job) {
	b.Helper()
	var err error
	for try := 0; try < 5; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err = w.store.PutJob(ctx, j)
		cancel()
		if err == nil {
			return
		}
		benchLogf("putting job %s version %d (try %d): %v", j.ID, j.Version, try+1, err)
	}
	b.Fatal(err)
}

// canaryLag says where the canaries of the job's deployment of version v
// that do not run v yet stand, counted by the first of these that holds:
// the node's view lacks the job at v, lacks the deployment record, or its
// own allocation of v is placed but not running; else the node's last pass
// counts (placement made nothing). Empty before the record names canaries.
func (f *testFleet) canaryLag(job string, v uint64) string {
	d := f.w.deployment("", job, v)
	if d == nil || d.TaskGroups["g"] == nil || len(d.TaskGroups["g"].CanaryNodes) == 0 {
		return ""
	}
	canary := map[string]bool{}
	for _, c := range d.TaskGroups["g"].CanaryNodes {
		canary[c] = true
	}
	jobKey, depKey := wanted.JobKey("", job), wanted.DeploymentKey("", job, v)
	why := map[string]int{}
	var examples []string
	for _, n := range f.nodes {
		if !canary[n.id] {
			continue
		}
		placed := false
		for _, a := range n.live(job) {
			if a.JobVersion != v {
				continue
			}
			placed = true
			if a.ClientStatus == model.ClientRunning {
				placed = false
				canary[n.id] = false
			}
		}
		if !canary[n.id] {
			continue
		}
		view := n.src.View()
		var reason string
		switch js := view.Jobs.At(jobKey); {
		case js.Value == nil || js.Value.Version < v:
			reason = "job not in view"
		case view.Deployments.At(depKey).Value == nil:
			reason = "record not in view"
		case placed:
			reason = "placed, not running"
		default:
			st := n.agent.Status()
			reason = "nothing placed"
			if len(examples) < 3 {
				sum := "no summary in view"
				if ss := view.Summaries.At(wanted.SummaryKey("", job)); ss.Value != nil && ss.Value.Groups["g"] != nil {
					g := ss.Value.Groups["g"]
					rank := slices.IndexFunc(g.Waiting, func(w model.SummaryWaiter) bool { return w.Node == n.id })
					sum = fmt.Sprintf("summary of v%d from %s ago: rank %d of %d waiting, %d slots held", ss.Value.JobVersion, time.Since(ss.Value.Time).Round(time.Millisecond), rank, g.WaitingTotal, len(g.Slots))
				}
				examples = append(examples, fmt.Sprintf("%s: last pass %s ago counts %s errors %q; %s", n.id, time.Since(st.LastPass).Round(time.Millisecond), mustJSON(st.LastCounts), st.Errors, sum))
			}
		}
		why[reason]++
	}
	if len(why) == 0 {
		return ""
	}
	return fmt.Sprintf("%v %s", why, strings.Join(examples, "; "))
}

// timeline is when the deployment of version v went through its steps,
// from put (this process's clock; the record's times are the server's,
// the same clock here): the record's creation, the canaries' starts (first,
// median, 90th percentile, last), the promotion, and the other nodes' starts.
func (f *testFleet) timeline(job string, v uint64, put time.Time) string {
	d := f.w.deployment("", job, v)
	if d == nil || d.TaskGroups["g"] == nil {
		return fmt.Sprintf("v%d timeline: no record", v)
	}
	g := d.TaskGroups["g"]
	isCanary := map[string]bool{}
	for _, c := range g.CanaryNodes {
		isCanary[c] = true
	}
	var canaries, others []time.Duration
	for _, e := range f.rec.all() {
		if e.op != "start" || e.version != fmt.Sprintf("v%d", v) {
			continue
		}
		if isCanary[e.node] {
			canaries = append(canaries, e.at.Sub(put))
		} else {
			others = append(others, e.at.Sub(put))
		}
	}
	slices.Sort(canaries)
	slices.Sort(others)
	q := func(ds []time.Duration, p float64) string {
		if len(ds) == 0 {
			return "-"
		}
		return ds[min(len(ds)-1, int(p*float64(len(ds))))].Round(100 * time.Millisecond).String()
	}
	line := fmt.Sprintf("v%d timeline from put: record created %v; %d canary starts first %s median %s p90 %s last %s",
		v, d.CreateTime.Sub(put).Round(100*time.Millisecond), len(canaries), q(canaries, 0), q(canaries, 0.5), q(canaries, 0.9), q(canaries, 1))
	if !g.PromotedAt.IsZero() {
		line += fmt.Sprintf("; promoted %v", g.PromotedAt.Sub(put).Round(100*time.Millisecond))
	}
	line += fmt.Sprintf("; %d other starts first %s median %s last %s; status %s at %v",
		len(others), q(others, 0), q(others, 0.5), q(others, 1), d.Status, d.ModifyTime.Sub(put).Round(100*time.Millisecond))
	return line
}

// starts is when each node first started a task of version v.
func (f *testFleet) starts(v uint64) map[string]time.Time {
	at := map[string]time.Time{}
	for _, e := range f.rec.all() {
		if e.op == "start" && e.version == fmt.Sprintf("v%d", v) {
			if _, ok := at[e.node]; !ok {
				at[e.node] = e.at
			}
		}
	}
	return at
}

// healthyAt is when each node's live allocation of job at version v was
// marked healthy.
func (f *testFleet) healthyAt(job string, v uint64) map[string]time.Time {
	at := map[string]time.Time{}
	for _, n := range f.nodes {
		for _, a := range n.live(job) {
			if a.JobVersion == v && a.DeploymentStatus != nil && a.DeploymentStatus.IsHealthy() {
				at[n.id] = a.DeploymentStatus.Timestamp
			}
		}
	}
	return at
}

// benchLogf writes one line of the fleet benchmark's account to stderr:
// the testing package keeps ten lines of a benchmark that passed, and the
// timeline and slot trace come last.
func benchLogf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "fleet-bench %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func benchLog(line string) { benchLogf("%s", line) }

// cpuShares are the agents' passes' CPU during the rollout, each as a
// share of one core (its passes' thread CPU time over the rollout's wall
// time, Config.PassCPU), against the whole process's CPU.
type cpuShares struct {
	median, p90, p99, max float64
	maxNode               string
	stewards              map[string]float64
	top                   string  // the five largest, with each node's place in the rankings
	passes                float64 // all agents' passes, seconds
	process               float64 // the process, CPU-seconds
	cpu                   bool    // thread CPU time (Config.PassCPU), else wall time
}

// passTime is an agent's passes' time so far, in milliseconds: their CPU
// time with Config.PassCPU, else their wall time (which also counts the
// time a pass waited for a core: every agent waits alike).
func passTime(st Status, cpu bool) float64 {
	if cpu {
		return st.PassCPUMS
	}
	return st.PassMS
}

func (f *testFleet) cpuShares(before map[string]float64, cpu bool, stewards []string, d time.Duration, process time.Duration) cpuShares {
	c := cpuShares{stewards: map[string]float64{}, process: process.Seconds(), cpu: cpu}
	var all []float64
	type agentShare struct {
		id    string
		share float64
		st    Status
	}
	var each []agentShare
	var ids []string
	for _, n := range f.nodes {
		st := n.agent.Status()
		ms := passTime(st, cpu) - before[n.id]
		c.passes += ms / 1000
		share := ms / 1000 / d.Seconds()
		all = append(all, share)
		each = append(each, agentShare{n.id, share, st})
		ids = append(ids, n.id)
		if share > c.max {
			c.max, c.maxNode = share, n.id
		}
		if slices.Contains(stewards, n.id) {
			c.stewards[n.id] = share
		}
	}
	if len(all) == 0 {
		return c
	}
	// Which roles cost most: each of the five largest with its place in
	// the ranking (rollout.RankingKey) of v1, v2 (this rollout) and v3
	// (watched ahead), the first StewardDepth of each watching the job.
	slices.SortFunc(each, func(a, b agentShare) int { return cmp.Compare(b.share, a.share) })
	var rankings [][]string
	for v := uint64(1); v <= 3; v++ {
		rankings = append(rankings, rollout.RankedNodes(rollout.RankingKey(fleetJob(v, nil).Namespace, "web", v), ids))
	}
	for _, e := range each[:min(5, len(each))] {
		c.top += fmt.Sprintf(" %s %.2f%% (v1/v2/v3 rank %d/%d/%d; %s)", e.id, e.share*100,
			slices.Index(rankings[0], e.id), slices.Index(rankings[1], e.id), slices.Index(rankings[2], e.id), passCauses(e.st, 3))
	}
	slices.Sort(all)
	c.median, c.p90, c.p99 = all[len(all)/2], all[len(all)*9/10], all[len(all)*99/100]
	return c
}

// passCausesSince sums the fleet's passes by cause since the readings in
// before (Status.PassCauses per agent), the largest first.
func (f *testFleet) passCausesSince(before map[string]map[string]uint64) string {
	sum := map[string]uint64{}
	for _, n := range f.nodes {
		for why, k := range n.agent.Status().PassCauses {
			sum[why] += k - before[n.id][why]
		}
	}
	whys := slices.Collect(maps.Keys(sum))
	slices.SortFunc(whys, func(a, b string) int { return cmp.Or(cmp.Compare(sum[b], sum[a]), strings.Compare(a, b)) })
	line := "the fleet's passes during the rollout by cause:"
	for _, why := range whys {
		if sum[why] > 0 {
			line += fmt.Sprintf(" %s %d;", why, sum[why])
		}
	}
	return line
}

// passCauses is an agent's pass count over the run, its job decisions
// and its n most frequent pass causes.
func passCauses(st Status, n int) string {
	type cause struct {
		why string
		n   uint64
	}
	var cs []cause
	for why, k := range st.PassCauses {
		cs = append(cs, cause{why, k})
	}
	slices.SortFunc(cs, func(a, b cause) int { return cmp.Or(cmp.Compare(b.n, a.n), strings.Compare(a.why, b.why)) })
	out := fmt.Sprintf("%d passes, %d job decisions", st.Passes, st.Decisions)
	for _, c := range cs[:min(n, len(cs))] {
		out += fmt.Sprintf(", %s %d", c.why, c.n)
	}
	return out
}

func (c cpuShares) String() string {
	what := "wall time (HIVELET_FLEET_PASS_CPU=1: CPU time)"
	if c.cpu {
		what = "CPU time"
	}
	line := fmt.Sprintf("passes' %s per agent during the rollout, share of one core: median %.3f%%, p90 %.3f%%, p99 %.3f%%, max %.3f%% (%s)",
		what, c.median*100, c.p90*100, c.p99*100, c.max*100, c.maxNode)
	for _, id := range slices.Sorted(maps.Keys(c.stewards)) {
		line += fmt.Sprintf("; steward %s %.3f%%", id, c.stewards[id]*100)
	}
	return line + fmt.Sprintf("; all passes %.1f s, the process's CPU %.1f s; the largest:%s", c.passes, c.process, c.top)
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// passShares says how often the deployment's stewards passed during the
// rollout against the other agents (a steward starved of CPU by the
// agents it shares the machine with is the rollout's pace), with its last
// pass's time.
func (f *testFleet) passShares(before, decided map[string]uint64, stewards []string, d time.Duration) string {
	var others, decisions []float64
	line := ""
	for _, n := range f.nodes {
		st := n.agent.Status()
		rate := float64(st.Passes-before[n.id]) / d.Seconds()
		drate := float64(st.Decisions-decided[n.id]) / d.Seconds()
		if slices.Contains(stewards, n.id) {
			line += fmt.Sprintf("; steward %s %.1f passes/s, last pass %.1f ms, writes", n.id, rate, st.LastPassMS)
			for _, k := range slices.Sorted(maps.Keys(st.RolloutWrites)) {
				w := st.RolloutWrites[k]
				line += fmt.Sprintf(" %s %d×%.0f ms (max %.0f)", k, w.Count, w.TotalMS/float64(max(w.Count, 1)), w.MaxMS)
			}
			continue
		}
		others = append(others, rate)
		decisions = append(decisions, drate)
	}
	slices.Sort(others)
	slices.Sort(decisions)
	if len(others) == 0 {
		return "passes: no agents"
	}
	sum := 0.0
	for _, r := range decisions {
		sum += r
	}
	return fmt.Sprintf("passes during the rollout: other agents median %.1f/s, p90 %.1f/s; their job decisions median %.2f/s, p90 %.2f/s, in all %.0f/s",
		others[len(others)/2], others[len(others)*9/10], decisions[len(decisions)/2], decisions[len(decisions)*9/10], sum) + line
}
