package agent

// Fleet rollouts with several agents in one process on one embedded NATS
// server, each with its own mock driver whose calls are recorded with
// timestamps (docs/rollout.md's invariants, asserted on what the drivers
// saw, not only on the records).

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/rollout"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/mock"
	"github.com/hivelet/hivelet/sdk/driver"
)

// driverEvent is one recorded driver call.
type driverEvent struct {
	node, op, alloc, version string
	at                       time.Time
}

// recorder collects the driver calls of every node of a fleet.
type recorder struct {
	mu     sync.Mutex
	events []driverEvent
	tasks  map[string]string // task ID → version it runs
}

func (r *recorder) add(e driverEvent) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) all() []driverEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// recordingDriver records StartTask and StopTask calls of one node; the
// version of a task is its config's "stdout_string".
type recordingDriver struct {
	driver.Driver
	node string
	rec  *recorder
}

func (d *recordingDriver) StartTask(ctx context.Context, cfg *driver.TaskConfig) (*driver.TaskHandle, error) {
	v, _ := cfg.Config["stdout_string"].(string)
	d.rec.mu.Lock()
	d.rec.tasks[cfg.ID] = v
	d.rec.mu.Unlock()
	d.rec.add(driverEvent{node: d.node, op: "start", alloc: cfg.AllocID, version: v, at: time.Now()})
	return d.Driver.StartTask(ctx, cfg)
}

func (d *recordingDriver) StopTask(ctx context.Context, id string, t time.Duration, sig string) error {
	d.rec.mu.Lock()
	v := d.rec.tasks[id]
	d.rec.mu.Unlock()
	d.rec.add(driverEvent{node: d.node, op: "stop", alloc: id, version: v, at: time.Now()})
	return d.Driver.StopTask(ctx, id, t, sig)
}

// testFleet is n agents on one world.
type testFleet struct {
	w     *world
	rec   *recorder
	nodes []*node
}

func newFleet(t *testing.T, n int, ttl time.Duration) *testFleet {
	t.Helper()
	f := &testFleet{w: newWorldTTL(t, ttl), rec: &recorder{tasks: map[string]string{}}}
	for i := 1; i <= n; i++ {
		f.add(t, fmt.Sprintf("node-%02d", i))
	}
	t.Cleanup(func() {
		for _, n := range f.nodes {
			if n.agent != nil {
				n.stopOnce(true)
			}
		}
	})
	return f
}

func (f *testFleet) add(t *testing.T, id string) *node {
	t.Helper()
	return f.addWith(t, id, nil)
}

// addWith is add with a hook that sets the node up before it starts.
func (f *testFleet) addWith(t *testing.T, id string, setup func(*node)) *node {
	t.Helper()
	drv := &countingDriver{Driver: &recordingDriver{Driver: mock.New(), node: id, rec: f.rec}}
	n := f.w.newNodeWith(id, drv, "", 200*time.Millisecond, setup)
	f.nodes = append(f.nodes, n)
	return n
}

// stopOnce stops an agent that may already be stopped.
func (n *node) stopOnce(stopTasks bool) {
	if n.agent == nil {
		return
	}
	n.stop(stopTasks)
	n.agent = nil
}

// job is a mock job whose version is visible to the driver.
func fleetJob(version uint64, mod func(g *model.Group)) *model.Job {
	j := mockJob("web", version, map[string]any{"stdout_string": "v" + strconv.FormatUint(version, 10)})
	u := j.Groups[0].Update
	u.MinHealthyTime = model.Duration(50 * time.Millisecond)
	u.HealthyDeadline = model.Duration(5 * time.Second)
	u.ProgressDeadline = model.Duration(30 * time.Second)
	if mod != nil {
		mod(j.Groups[0])
	}
	return j
}

// ids are the fleet's node IDs, stopped nodes among them.
func (f *testFleet) ids() []string {
	var ids []string
	for _, n := range f.nodes {
		ids = append(ids, n.id)
	}
	return ids
}

// runs reports the version each live node's allocation of web runs
// (healthy ones only when healthy is set).
func (f *testFleet) runs(healthy bool) map[string]uint64 {
	out := map[string]uint64{}
	for _, n := range f.nodes {
		if n.agent == nil {
			continue
		}
		for _, a := range n.live("web") {
			if !healthy || a.DeploymentStatus.IsHealthy() {
				out[n.id] = a.JobVersion
			}
		}
	}
	return out
}

func (f *testFleet) allRun(version uint64) bool {
	live := 0
	for _, n := range f.nodes {
		if n.agent != nil {
			live++
		}
	}
	r := f.runs(true)
	if len(r) != live {
		return false
	}
	for _, v := range r {
		if v != version {
			return false
		}
	}
	return true
}

func (f *testFleet) waitStatus(t *testing.T, version uint64, status model.DeploymentStatus, within time.Duration) *model.Deployment {
	t.Helper()
	var d *model.Deployment
	deadline := time.Now().Add(within)
	for {
		d = f.w.deployment("", "web", version)
		if d != nil && d.Status == status {
			return d
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, as testutil.Eventually does
	}
	// What the fleet looked like, for the failure's reader.
	t.Logf("deployment of version %d: %s", version, mustJSON(d))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if keys, err := f.w.store.Rollout.ListKeys(ctx); err == nil {
		for k := range keys.Keys() {
			if e, err := f.w.store.Rollout.Get(ctx, k); err == nil {
				t.Logf("rollout key %s rev %d: %s", k, e.Revision(), e.Value())
			}
		}
	}
	for _, n := range f.nodes {
		if n.agent == nil {
			continue
		}
		st := n.agent.Status()
		t.Logf("%s: passes %d, counts %+v, errors %v, deployment errors %v", n.id, st.Passes, st.LastCounts, st.Errors, st.DeploymentErrors)
		for _, a := range n.agent.Allocs() {
			t.Logf("  alloc %s %s v%d desired %s client %s deployment %s health %s prev %s", a.ID, a.Name, a.JobVersion, a.DesiredStatus, a.ClientStatus, a.DeploymentID, mustJSON(a.DeploymentStatus), a.PreviousAllocation)
		}
	}
	t.Fatalf("timed out after %s waiting for deployment of version %d %s", within, version, status)
	return nil
}

// atV1 runs version 1 of the job everywhere, its deployment successful:
// the stable version the tests roll from.
func (f *testFleet) atV1(t *testing.T, mod func(g *model.Group)) {
	t.Helper()
	f.w.putJob(fleetJob(1, mod))
	f.waitStatus(t, 1, model.DeploymentSuccessful, 20*time.Second)
}

// settle waits until every running agent made k more full passes: the
// "nothing happened" checks wait for passes, not for time.
func (f *testFleet) settle(t *testing.T, k uint64) {
	t.Helper()
	base := map[string]uint64{}
	for _, n := range f.nodes {
		if n.agent != nil {
			base[n.id] = n.agent.Status().Passes
		}
	}
	testutil.Eventually(t, 20*time.Second, fmt.Sprintf("%d more passes on every agent", k), func() bool {
		for _, n := range f.nodes {
			if n.agent != nil && n.agent.Status().Passes < base[n.id]+k {
				return false
			}
		}
		return true
	})
}

// promote promotes the deployment of version as the CLI does: the pure
// transition on the record read, counts derived from the allocations.
func (f *testFleet) promote(t *testing.T, version uint64) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err := f.w.store.ModifyDeployment(ctx, "", "web", version, 8, func(cur model.Deployment) (*model.Deployment, error) {
		return rollout.Promote(cur, f.counts(t, &cur), nil, "cli", time.Now(), "test-promote")
	})
	return err
}

func (f *testFleet) counts(t *testing.T, d *model.Deployment) map[string]rollout.Counts {
	facts := rollout.Facts{Job: fleetJob(d.JobVersion, nil)}
	for _, n := range f.nodes {
		facts.Nodes = append(facts.Nodes, rollout.Node{ID: n.id, Live: n.agent != nil, Eligible: true, Ready: true})
		if n.agent != nil {
			facts.Allocs = append(facts.Allocs, n.agent.Allocs()...)
		}
	}
	return rollout.Derive(d, &facts)
}

func (f *testFleet) modify(t *testing.T, version uint64, change func(cur model.Deployment) (*model.Deployment, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := f.w.store.ModifyDeployment(ctx, "", "web", version, 8, change); err != nil {
		t.Fatal(err)
	}
}

// startsOf returns, per node, the versions the driver started, in order.
func (f *testFleet) startsOf() map[string][]string {
	out := map[string][]string{}
	for _, e := range f.rec.all() {
		if e.op == "start" {
			out[e.node] = append(out[e.node], e.version)
		}
	}
	return out
}

// maxInFlight is the most replacements in flight at once, from the driver's
// timestamps: a node's replacement is in flight from the stop of its old
// task to its new allocation's health verdict (taken from the node's
// record of it).
func (f *testFleet) maxInFlight(t testing.TB, from, to string) int {
	t.Helper()
	type span struct{ a, b time.Time }
	var spans []span
	for _, n := range f.nodes {
		var stop time.Time
		for _, e := range f.rec.all() {
			if e.node == n.id && e.op == "stop" && e.version == from && stop.IsZero() {
				stop = e.at
			}
		}
		if stop.IsZero() || n.agent == nil {
			continue
		}
		var healthy time.Time
		for _, a := range n.agent.Allocs() {
			if "v"+strconv.FormatUint(a.JobVersion, 10) == to && a.DeploymentStatus != nil && a.DeploymentStatus.IsHealthy() {
				healthy = a.DeploymentStatus.Timestamp
			}
		}
		if healthy.IsZero() {
			t.Fatalf("%s: no healthy allocation of %s", n.id, to)
		}
		spans = append(spans, span{stop, healthy})
	}
	most := 0
	for _, s := range spans {
		k := 0
		for _, o := range spans {
			if !o.a.After(s.a) && o.b.After(s.a) {
				k++
			}
		}
		most = max(most, k)
	}
	return most
}

func repeats(def int) int {
	if v, err := strconv.Atoi(os.Getenv("HIVELET_FLEET_REPEAT")); err == nil && v > 0 {
		return v
	}
	return def
}

// The worst defect this protocol exists to prevent: before promotion only
// the stored canary set updates, whatever the agents' views (50 rollouts);
// control: promotion lets every other node update, paced by max_parallel.
func TestACanaryRolloutUpdatesExactlyTheStoredCanarySetUntilPromoted(t *testing.T) {
	f := newFleet(t, 5, 0)
	f.atV1(t, func(g *model.Group) { g.Update.MaxParallel = 2 })
	for v := uint64(2); v <= uint64(1+repeats(50)); v++ {
		before := f.startsOf()
		f.w.putJob(fleetJob(v, func(g *model.Group) { g.Update.MaxParallel = 2; g.Update.Canary = 20 }))
		var d *model.Deployment
		testutil.Eventually(t, 20*time.Second, fmt.Sprintf("v%d's canary healthy", v), func() bool {
			d = f.w.deployment("", "web", v)
			return d != nil && f.counts(t, d)["g"].CanariesHealthy == 1
		})
		canaries := d.TaskGroups["g"].CanaryNodes
		if len(canaries) != 1 || d.TaskGroups["g"].DesiredCanaries != 1 || d.StatusDescription != model.DescNeedsPromotion {
			t.Fatalf("v%d: record %+v / %+v", v, d, d.TaskGroups["g"])
		}
		f.settle(t, 3)
		after := f.startsOf()
		for _, n := range f.nodes {
			started := after[n.id][len(before[n.id]):]
			want := 0
			if slices.Contains(canaries, n.id) {
				want = 1
			}
			if len(started) != want {
				t.Fatalf("v%d unpromoted: %s started %v (canaries %v)", v, n.id, started, canaries)
			}
		}
		// Control: promotion lets the others update.
		if err := f.promote(t, v); err != nil {
			t.Fatalf("promote v%d: %v", v, err)
		}
		f.waitStatus(t, v, model.DeploymentSuccessful, 20*time.Second)
		testutil.Eventually(t, 10*time.Second, fmt.Sprintf("every node on v%d", v), func() bool { return f.allRun(v) })
	}
}

// I5 from the drivers' timestamps: never more replacements in flight than
// max_parallel; and with slots to spare they do run in parallel.
func TestReplacementsInFlightNeverExceedMaxParallel(t *testing.T) {
	for _, m := range []int{1, 2} {
		t.Run("max_parallel="+strconv.Itoa(m), func(t *testing.T) {
			f := newFleet(t, 6, 0)
			mod := func(g *model.Group) {
				g.Update.MaxParallel = m
				g.Update.MinHealthyTime = model.Duration(150 * time.Millisecond)
			}
			f.atV1(t, mod)
			refilters := map[string]uint64{}
			for _, n := range f.nodes {
				refilters[n.id] = n.src.RestartReasons()[fleet.KindRollout+"/filters"]
			}
			f.w.putJob(fleetJob(2, mod))
			f.waitStatus(t, 2, model.DeploymentSuccessful, 30*time.Second)
			testutil.Eventually(t, 10*time.Second, "every node on v2", func() bool { return f.allRun(2) })
			if got := f.maxInFlight(t, "v1", "v2"); got != m {
				t.Fatalf("max replacements in flight %d, want exactly %d", got, m)
			}
			// Once the record is stored, the nodes planned from their own
			// allocations and the record, not from the fleet view.
			for _, n := range f.nodes {
				if n.agent.Status().LocalPlans == 0 {
					t.Fatalf("%s made no local plan", n.id)
				}
			}
			// The watches are narrowed: only the steward and its deputies
			// (and the first nodes of the next version's ranking, who
			// watch ahead) hold other nodes' allocations; the others
			// rolled out from the steward's summary.
			var watching []string
			for _, n := range f.nodes {
				for k, st := range n.src.View().Allocs.All() {
					if !st.Absent && !strings.HasPrefix(k, n.id+".") {
						watching = append(watching, n.id)
						break
					}
				}
			}
			if len(watching) == 0 || len(watching) > 2*rollout.StewardDepth {
				t.Fatalf("nodes holding other nodes' allocations: %v, want 1 to %d", watching, 2*rollout.StewardDepth)
			}
			// The others took and released their slots without watching
			// a slot key (the summary's slots, their own memory): their
			// rollout watch was never re-filtered for v2. Control: at
			// least one such node took a slot (every node updated).
			// Watching ranks nodes by the record of the version in force
			// and of the next one (v1's and v2's, then v2's and v3's): a
			// node first in any of these watched the job for a while.
			ids := f.ids()
			ranked := map[string]bool{}
			for _, key := range []string{rollout.RankingKey("", "web", 1), rollout.RankingKey("", "web", 2), rollout.RankingKey("", "web", 3)} {
				for _, id := range rollout.RankedNodes(key, ids)[:rollout.StewardDepth] {
					ranked[id] = true
				}
			}
			others := 0
			for _, n := range f.nodes {
				if ranked[n.id] {
					continue
				}
				others++
				if got := n.src.RestartReasons()[fleet.KindRollout+"/filters"] - refilters[n.id]; got != 0 {
					t.Errorf("%s (not watching the job) re-filtered its rollout watch %d times during v2", n.id, got)
				}
			}
			if others == 0 {
				t.Fatal("control: every node watches the job; no node rolled out from the summary")
			}
			// And once done, only they watch the job's update slots (the
			// steward, its deputies, and the next version's first nodes).
			var slotWatchers []string
			testutil.Eventually(t, 10*time.Second, "the slots watched by the steward, its deputies and the next version's first nodes only", func() bool {
				slotWatchers = slotWatchers[:0]
				for _, n := range f.nodes {
					if n.src.View().Watches(fleet.KindRollout, wanted.SlotFilter("", "web")) {
						slotWatchers = append(slotWatchers, n.id)
					}
				}
				return len(slotWatchers) > 0 && len(slotWatchers) <= 2*rollout.StewardDepth
			})
		})
	}
}

// An unhealthy canary fails the deployment and auto_revert brings every
// node back to the stable version's spec, written as a new version.
func TestAnUnhealthyCanaryFailsTheRolloutAndAutoRevertRestoresTheStableSpec(t *testing.T) {
	f := newFleet(t, 5, 0)
	f.atV1(t, nil)
	bad := fleetJob(2, func(g *model.Group) {
		g.Update.Canary = 20
		g.Update.AutoRevert = true
		g.Tasks[0].Config["start_error"] = "this version cannot start"
	})
	f.w.putJob(bad)
	d := f.waitStatus(t, 2, model.DeploymentFailed, 30*time.Second)
	testutil.Eventually(t, 20*time.Second, "the revert written", func() bool {
		d = f.w.deployment("", "web", 2)
		return d.Revert != nil && d.Revert.Status == model.RevertDone
	})
	if d.Revert.ToVersion != 1 || d.Revert.AsVersion != 3 {
		t.Fatalf("revert %+v", d.Revert)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	job, _, err := f.w.store.GetJob(ctx, "", "web")
	if err != nil || job.Version != 3 || job.RevertOf == nil || *job.RevertOf != 1 || job.Groups[0].Tasks[0].Config["stdout_string"] != "v1" {
		t.Fatalf("job after the revert: %+v %v", job, err)
	}
	f.waitStatus(t, 3, model.DeploymentSuccessful, 30*time.Second)
	testutil.Eventually(t, 10*time.Second, "every node back on the stable spec", func() bool { return f.allRun(3) })
	for n, starts := range f.startsOf() {
		for _, v := range starts {
			if v == "v2" && !slices.Contains(f.w.deployment("", "web", 2).TaskGroups["g"].CanaryNodes, n) {
				t.Fatalf("a node that was not a canary started the bad version: %s %v", n, starts)
			}
		}
	}
}

// Ten agents racing to create the record of each of 20 new jobs: one
// record each, created by one agent.
func TestTenAgentsRacingToCreateMakeOneRecord(t *testing.T) {
	f := newFleet(t, 10, 0)
	jobs := repeats(20)
	for i := range jobs {
		j := fleetJob(1, nil)
		j.ID = fmt.Sprintf("race-%02d", i)
		f.w.putJob(j)
	}
	testutil.Eventually(t, 30*time.Second, "every job's record", func() bool {
		for i := range jobs {
			if d := f.w.deployment("", fmt.Sprintf("race-%02d", i), 1); d == nil {
				return false
			}
		}
		return true
	})
	for i := range jobs {
		// One request at a time, each with its own deadline: ten agents
		// are still busy on the server (their rollouts go on).
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		hist, err := f.w.store.Deployments.History(ctx, wanted.DeploymentKey("", fmt.Sprintf("race-%02d", i), 1))
		cancel()
		if err != nil {
			t.Fatalf("job %d's record history: %v", i, err)
		}
		var creators []string
		for _, e := range hist {
			d, err := wanted.DecodeDeployment(e.Key(), e.Value())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(creators, d.CreatedBy) {
				creators = append(creators, d.CreatedBy)
			}
		}
		if len(creators) != 1 || hist[0].Revision() == 0 {
			t.Fatalf("job %d: the record's history names creators %v", i, creators)
		}
	}
}

// A node joining during an unpromoted canary phase runs the last stable
// version; after promotion it is updated like the rest.
func TestANodeJoiningMidCanaryPlacesTheStableVersion(t *testing.T) {
	f := newFleet(t, 4, 0)
	f.atV1(t, nil)
	f.w.putJob(fleetJob(2, func(g *model.Group) { g.Update.Canary = 25; g.Update.MaxParallel = 4 }))
	var d *model.Deployment
	testutil.Eventually(t, 20*time.Second, "the canary healthy", func() bool {
		d = f.w.deployment("", "web", 2)
		return d != nil && f.counts(t, d)["g"].CanariesHealthy == 1
	})
	joined := f.add(t, "node-05")
	testutil.Eventually(t, 20*time.Second, "the new node runs v1", func() bool {
		r := f.runs(true)
		return r[joined.id] == 1
	})
	if d := f.w.deployment("", "web", 2); d.TaskGroups["g"].DesiredCanaries != 1 || len(d.TaskGroups["g"].CanaryNodes) != 1 {
		t.Fatalf("the canary set changed when a node joined: %+v", d.TaskGroups["g"])
	}
	if err := f.promote(t, 2); err != nil {
		t.Fatal(err)
	}
	f.waitStatus(t, 2, model.DeploymentSuccessful, 30*time.Second)
	testutil.Eventually(t, 10*time.Second, "the joined node updated after promotion", func() bool { return f.allRun(2) })
}

// A healthy canary awaiting manual promotion outlives its progress
// deadline; control: promoting it then lets the rollout finish.
func TestAHealthyCanaryAwaitingPromotionOutlivesTheProgressDeadline(t *testing.T) {
	f := newFleet(t, 3, 0)
	f.atV1(t, nil)
	f.w.putJob(fleetJob(2, func(g *model.Group) {
		g.Update.Canary = 34
		g.Update.ProgressDeadline = model.Duration(time.Second)
		g.Update.HealthyDeadline = model.Duration(900 * time.Millisecond)
	}))
	testutil.Eventually(t, 20*time.Second, "the canary healthy", func() bool {
		d := f.w.deployment("", "web", 2)
		return d != nil && f.counts(t, d)["g"].CanariesHealthy == 1
	})
	d := f.w.deployment("", "web", 2)
	by := d.TaskGroups["g"].RequireProgressBy
	if by.IsZero() {
		t.Fatal("the progress clock did not start with the canary's slot")
	}
	testutil.Eventually(t, 20*time.Second, "past the deadline", func() bool { return time.Now().After(by.Add(500 * time.Millisecond)) })
	f.settle(t, 4)
	if d := f.w.deployment("", "web", 2); d.Status != model.DeploymentRunning {
		t.Fatalf("a healthy canary awaiting promotion was failed: %s %q", d.Status, d.StatusDescription)
	}
	if err := f.promote(t, 2); err != nil {
		t.Fatal(err)
	}
	f.waitStatus(t, 2, model.DeploymentSuccessful, 20*time.Second)
}

// Pause really stops new slots, and resume moves the deadline by the
// paused time; control: after resume the rollout finishes.
func TestPauseStopsNewSlotsAndResumeMovesTheDeadline(t *testing.T) {
	f := newFleet(t, 4, 0)
	f.atV1(t, nil)
	f.w.putJob(fleetJob(2, func(g *model.Group) { g.Update.MinHealthyTime = model.Duration(300 * time.Millisecond) }))
	testutil.Eventually(t, 20*time.Second, "the first replacement started", func() bool {
		for _, starts := range f.startsOf() {
			if slices.Contains(starts, "v2") {
				return true
			}
		}
		return false
	})
	f.modify(t, 2, func(cur model.Deployment) (*model.Deployment, error) { return rollout.Pause(cur, time.Now(), "test") })
	// The slot held at the pause finishes; then nothing new starts.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	testutil.Eventually(t, 20*time.Second, "no slot held", func() bool {
		keys, err := f.w.store.Rollout.ListKeys(ctx)
		if err != nil {
			return false
		}
		n := 0
		for k := range keys.Keys() {
			if strings.HasPrefix(k, "slot.") { // the job's rollout summary is there too
				n++
			}
		}
		return n == 0
	})
	count := func() int {
		k := 0
		for _, starts := range f.startsOf() {
			for _, v := range starts {
				if v == "v2" {
					k++
				}
			}
		}
		return k
	}
	before := count()
	paused := f.w.deployment("", "web", 2)
	f.settle(t, 4)
	if after := count(); after != before {
		t.Fatalf("%d replacements started while paused", after-before)
	}
	f.modify(t, 2, func(cur model.Deployment) (*model.Deployment, error) { return rollout.Resume(cur, time.Now(), "test") })
	resumed := f.w.deployment("", "web", 2)
	if !paused.TaskGroups["g"].RequireProgressBy.IsZero() && !resumed.TaskGroups["g"].RequireProgressBy.After(paused.TaskGroups["g"].RequireProgressBy) {
		t.Fatalf("resume did not move the deadline: %v → %v", paused.TaskGroups["g"].RequireProgressBy, resumed.TaskGroups["g"].RequireProgressBy)
	}
	f.waitStatus(t, 2, model.DeploymentSuccessful, 30*time.Second)
	testutil.Eventually(t, 10*time.Second, "every node on v2", func() bool { return f.allRun(2) })
}

// An operator's push while a revert is pending wins: the revert is
// abandoned and the operator's version runs.
func TestAnOperatorsPushDuringAPendingRevertWins(t *testing.T) {
	f := newFleet(t, 3, 0)
	f.atV1(t, nil)
	f.w.putJob(fleetJob(2, func(g *model.Group) { g.Update.MinHealthyTime = model.Duration(3 * time.Second) }))
	testutil.Eventually(t, 20*time.Second, "v2's record", func() bool { return f.w.deployment("", "web", 2) != nil })
	// The steward fails v2 with a revert pending just as the operator
	// pushes v3: with every agent's pass held, both land before any agent
	// reads either.
	for _, n := range f.nodes {
		n.agent.passMu.Lock()
	}
	stable := uint64(1)
	f.modify(t, 2, func(cur model.Deployment) (*model.Deployment, error) {
		return rollout.Fail(cur, "failed by the test", true, &stable, time.Now(), "test")
	})
	f.w.putJob(fleetJob(3, nil))
	for _, n := range f.nodes {
		n.agent.passMu.Unlock()
	}
	testutil.Eventually(t, 20*time.Second, "the revert abandoned", func() bool {
		d := f.w.deployment("", "web", 2)
		return d.Revert != nil && d.Revert.Status == model.RevertAbandoned
	})
	f.waitStatus(t, 3, model.DeploymentSuccessful, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if job, _, err := f.w.store.GetJob(ctx, "", "web"); err != nil || job.Version != 3 || job.RevertOf != nil {
		t.Fatalf("the operator's version did not win: %+v %v", job, err)
	}
}

// An agent SIGKILLed-like (stopped, tasks left, no more heartbeats) while
// holding a slot: its node expires, the steward reclaims the slot, and the
// rollout finishes on the others.
func TestAHolderThatDiesIsReclaimedAndTheRolloutFinishes(t *testing.T) {
	f := newFleet(t, 4, 3*time.Second)
	f.atV1(t, nil)
	f.w.putJob(fleetJob(2, func(g *model.Group) { g.Update.MinHealthyTime = model.Duration(time.Second) }))
	var holder string
	var rev uint64
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := wanted.SlotKey("", "web", "g", 0)
	testutil.Eventually(t, 20*time.Second, "a slot held", func() bool {
		s, r, err := f.w.store.GetSlot(ctx, key)
		if err == nil {
			holder, rev = s.Holder, r
		}
		return err == nil
	})
	for _, n := range f.nodes {
		if n.id == holder {
			n.stopOnce(false) // the agent dies; its task and its slot stay
		}
	}
	f.waitStatus(t, 2, model.DeploymentSuccessful, 60*time.Second)
	if !f.allRun(2) {
		t.Fatalf("live nodes: %v", f.runs(true))
	}
	if s, r, err := f.w.store.GetSlot(ctx, key); err == nil && r == rev {
		t.Fatalf("the dead holder's slot was never reclaimed: %+v", s)
	}
}

// A node whose driver is briefly unhealthy mid-rollout keeps its pacing and
// its deployment: completion needs every allocation of the new version
// healthy, never an absence (one agent, count 6, max_parallel 1: before,
// a driver blip made desired_total 0 and the deployment "successful" with
// 1 of 6 replaced, the other 5 replaced within milliseconds).
func TestADriverOutageMidRolloutNeitherCompletesTheDeploymentNorLosesPacing(t *testing.T) {
	f := newFleet(t, 1, 0)
	six := func(g *model.Group) { g.Count = 6; g.Update.MinHealthyTime = model.Duration(200 * time.Millisecond) }
	f.atV1(t, six)
	f.w.putJob(fleetJob(2, six))
	n := f.nodes[0]
	testutil.Eventually(t, 20*time.Second, "the first replacement started", func() bool {
		return slices.Contains(f.startsOf()[n.id], "v2")
	})
	n.driverDown.Store(true) // the driver is unhealthy for a while
	n.agent.Kick()
	f.settle(t, 3)
	if d := f.w.deployment("", "web", 2); d.Status != model.DeploymentRunning {
		t.Fatalf("during the outage the deployment became %s (%q)", d.Status, d.StatusDescription)
	}
	n.driverDown.Store(false)
	f.waitStatus(t, 2, model.DeploymentSuccessful, 30*time.Second)
	if v2 := healthyAt(n, 2); v2 != 6 {
		t.Fatalf("successful with %d of 6 replaced", v2)
	}
	// Pacing held: the replacements never overlapped.
	if got := f.maxInFlightOn(t, n, "v1", "v2"); got != 1 {
		t.Fatalf("%d replacements in flight at once, max_parallel 1", got)
	}
}

// healthyAt counts a node's live, healthy allocations of web at version.
func healthyAt(n *node, version uint64) int {
	k := 0
	for _, a := range n.live("web") {
		if a.JobVersion == version && a.DeploymentStatus.IsHealthy() {
			k++
		}
	}
	return k
}

// An agent restarted early in a rollout keeps the deployment's pacing: its
// slot is in the rollout bucket, not in its memory, and completion waits
// for every allocation of the new version (before, a restart could let a
// rollout of 6 at max_parallel 1 report success with 1 replaced).
func TestAnAgentRestartedMidRolloutKeepsItsPacing(t *testing.T) {
	f := newFleet(t, 1, 0)
	six := func(g *model.Group) { g.Count = 6; g.Update.MinHealthyTime = model.Duration(300 * time.Millisecond) }
	f.atV1(t, six)
	f.w.putJob(fleetJob(2, six))
	n := f.nodes[0]
	testutil.Eventually(t, 20*time.Second, "the first replacement started", func() bool {
		return slices.Contains(f.startsOf()[n.id], "v2")
	})
	n.stop(false) // tasks keep running; the agent's memory is gone
	n.start()
	f.waitStatus(t, 2, model.DeploymentSuccessful, 40*time.Second)
	if v2 := healthyAt(n, 2); v2 != 6 {
		t.Fatalf("successful with %d of 6 replaced", v2)
	}
	if got := f.maxInFlightOn(t, n, "v1", "v2"); got > 1 {
		t.Fatalf("%d replacements in flight at once across the restart, max_parallel 1", got)
	}
}

// maxInFlightOn is maxInFlight for the replacements of one node with many
// allocations: the i-th stop of the old version pairs with the i-th health
// verdict of the new one.
func (f *testFleet) maxInFlightOn(t *testing.T, n *node, from, to string) int {
	var stops, healthy []time.Time
	for _, e := range f.rec.all() {
		if e.node == n.id && e.op == "stop" && e.version == from {
			stops = append(stops, e.at)
		}
	}
	for _, a := range n.agent.Allocs() {
		if "v"+strconv.FormatUint(a.JobVersion, 10) == to && a.DeploymentStatus.IsHealthy() {
			healthy = append(healthy, a.DeploymentStatus.Timestamp)
		}
	}
	slices.SortFunc(stops, func(a, b time.Time) int { return a.Compare(b) })
	slices.SortFunc(healthy, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i := range min(len(stops), len(healthy)) {
		k := 0
		for j := range min(len(stops), len(healthy)) {
			if !stops[j].After(stops[i]) && healthy[j].After(stops[i]) {
				k++
			}
		}
		most = max(most, k)
	}
	return most
}

// A canary node that dies before promotion is replaced by the canary
// policy's choice (the built-in default names one); the replacement runs
// the new version as a canary, and after promotion the rollout finishes
// on the live nodes.
func TestADeadCanaryNodeIsReplacedByThePolicysChoice(t *testing.T) {
	f := newFleet(t, 4, 3*time.Second)
	f.atV1(t, nil)
	f.w.putJob(fleetJob(2, func(g *model.Group) { g.Update.Canary = 25 }))
	var d *model.Deployment
	testutil.Eventually(t, 20*time.Second, "v2's canary healthy", func() bool {
		d = f.w.deployment("", "web", 2)
		return d != nil && f.counts(t, d)["g"].CanariesHealthy == 1
	})
	dead := d.TaskGroups["g"].CanaryNodes[0]
	for _, n := range f.nodes {
		if n.id == dead {
			n.stopOnce(false) // the canary's agent dies; its heartbeats stop
		}
	}
	testutil.Eventually(t, 30*time.Second, "the dead canary node replaced", func() bool {
		d = f.w.deployment("", "web", 2)
		nodes := d.TaskGroups["g"].CanaryNodes
		return d.Status == model.DeploymentRunning && len(nodes) == 1 && nodes[0] != dead
	})
	replacement := d.TaskGroups["g"].CanaryNodes[0]
	testutil.Eventually(t, 20*time.Second, "the replacement runs v2 healthy", func() bool {
		return f.runs(true)[replacement] == 2
	})
	if err := f.promote(t, 2); err != nil {
		t.Fatal(err)
	}
	f.waitStatus(t, 2, model.DeploymentSuccessful, 30*time.Second)
	testutil.Eventually(t, 10*time.Second, "every live node on v2", func() bool { return f.allRun(2) })
}

// The steward of a rollout dies (its agent stopped, its task left, no more
// heartbeats) as soon as the record exists, before its canary is healthy,
// and the rest of the ranking does its duties: deputy 1, which acts on a
// duty overdue for rollout.DeputyStep while the dead steward still counts
// as live (asserted with a long node TTL), or with a short TTL whichever
// comes first of it and the next node as steward once the dead node's key
// expired. Either way the canary is
// auto-promoted by a live node, only the canary set updates before that,
// max_parallel holds among the live nodes, and the rollout finishes on
// them (once the dead node expired: it still owed its update). Each round
// a fresh fleet (HIVELET_FLEET_REPEAT rounds).
func TestADeadStewardsDutiesAreTakenOverAndTheRolloutFinishes(t *testing.T) {
	for _, c := range []struct {
		name string
		ttl  time.Duration
	}{{"successor", 3 * time.Second}, {"deputy", 12 * time.Second}} {
		for round := range repeats(1) {
			t.Run(fmt.Sprintf("%s/round=%d", c.name, round), func(t *testing.T) {
				f := newFleet(t, 5, c.ttl)
				mod := func(g *model.Group) {
					g.Update.MaxParallel = 1
					g.Update.Canary = 20 // one of five
					g.Update.AutoPromote = true
					g.Update.MinHealthyTime = model.Duration(time.Second)
				}
				f.atV1(t, mod)
				f.w.putJob(fleetJob(2, mod))
				var d *model.Deployment
				testutil.Eventually(t, 20*time.Second, "v2's record", func() bool {
					d = f.w.deployment("", "web", 2)
					return d != nil
				})
				canaries := slices.Clone(d.TaskGroups["g"].CanaryNodes)
				steward := rollout.RankedNodes(d.ID, f.ids())[0]
				for _, n := range f.nodes {
					if n.id == steward {
						n.stopOnce(false)
					}
				}
				killed := time.Now()
				d = f.waitStatus(t, 2, model.DeploymentSuccessful, 60*time.Second)
				testutil.Eventually(t, 10*time.Second, "every live node on v2", func() bool { return f.allRun(2) })
				g := d.TaskGroups["g"]
				t.Logf("steward %s stopped; promoted by %s %v later, successful %v later (canaries %v, then %v)",
					steward, g.PromotedBy, g.PromotedAt.Sub(killed).Round(time.Millisecond), time.Since(killed).Round(time.Millisecond), canaries, g.CanaryNodes)
				if !g.Promoted || g.PromotedBy == steward || g.PromotedBy == "cli" || g.PromotedBy == "" {
					t.Fatalf("promoted %v by %q: not by a live node (the dead steward is %s)", g.Promoted, g.PromotedBy, steward)
				}
				// The dead node's key lives at least two thirds of the TTL
				// after its last heartbeat (a third of the TTL apart).
				if c.name == "deputy" && g.PromotedAt.Sub(killed) >= c.ttl*2/3 {
					t.Fatalf("promoted %v after the steward died: not before its key could expire (%v), so not by a deputy", g.PromotedAt.Sub(killed), c.ttl*2/3)
				}
				canaries = append(canaries, g.CanaryNodes...) // a dead canary node is replaced
				for _, e := range f.rec.all() {
					if e.op == "start" && e.version == "v2" && e.at.Before(g.PromotedAt) && !slices.Contains(canaries, e.node) {
						t.Fatalf("%s started v2 at %v, before the promotion at %v, and is not a canary (%v)", e.node, e.at, g.PromotedAt, canaries)
					}
				}
				if got := f.maxInFlight(t, "v1", "v2"); got > 1 {
					t.Fatalf("%d replacements in flight at once among the live nodes, max_parallel 1", got)
				}
			})
		}
	}
}

// A node that stops heartbeating gets one loss verdict, written by another
// node; when it comes back it settles its allocations by the verdict and
// the group's disconnect block, then deletes the verdict (T14): within
// disconnect.lost_after its allocation reconnects, the same one, its task
// never started again, the reconnect recorded in its states; past
// lost_after, or with no disconnect block, the allocation is lost (client
// status lost) and its name placed again, one more start.
func TestALostNodeGetsOneVerdictAndSettlesItsAllocationsOnReturn(t *testing.T) {
	for _, c := range []struct {
		name      string
		lostAfter time.Duration
		lost      bool
	}{{"within lost_after", time.Minute, false}, {"no disconnect block", 0, true}, {"past lost_after", time.Second, true}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFleet(t, 4, 3*time.Second)
			f.atV1(t, func(g *model.Group) {
				if c.lostAfter > 0 {
					g.Disconnect = &model.DisconnectStrategy{LostAfter: model.Duration(c.lostAfter)}
				}
			})
			lost := f.nodes[3]
			before := onlyLive(t, lost, "web")
			lost.stop(false) // the agent dies; its task stays; its heartbeats stop
			lost.agent = nil
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var key string
			testutil.Eventually(t, 20*time.Second, "a loss verdict for the dead node", func() bool {
				keys, err := f.w.store.Rollout.ListKeys(ctx)
				if err != nil {
					return false
				}
				for k := range keys.Keys() {
					if n, _, ok := wanted.ParseDownKey(k); ok && n == lost.id {
						key = k
					}
				}
				return key != ""
			})
			e, err := f.w.store.Rollout.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			v, err := wanted.DecodeVerdict(key, e.Value())
			if err != nil || v.DownSince.IsZero() || v.WrittenBy == "" || v.WrittenBy == lost.id {
				t.Fatalf("verdict %+v (%v)", v, err)
			}
			hist, err := f.w.store.Rollout.History(ctx, key)
			if err != nil || len(hist) != 1 {
				t.Fatalf("the verdict was written %d times (%v)", len(hist), err)
			}
			// Another node's reader derives the allocation's state from the
			// verdict and lost_after.
			if c.lost && c.lostAfter > 0 {
				time.Sleep(c.lostAfter) // lost_after is a span of time: let it pass
			}
			d := f.w.deployment("", "web", 1)
			facts := rollout.Facts{Job: fleetJob(1, nil), Now: time.Now(), Allocs: []*model.Allocation{before}}
			if c.lostAfter > 0 {
				facts.Job.Groups[0].Disconnect = &model.DisconnectStrategy{LostAfter: model.Duration(c.lostAfter)}
			}
			facts.Nodes = []rollout.Node{{ID: lost.id, Eligible: true, LostSince: v.DownSince}}
			if got := rollout.Derive(d, &facts)[facts.Job.Groups[0].Name]; c.lost && got.Lost != 1 || !c.lost && got.Disconnected != 1 {
				t.Fatalf("derived from the verdict: %+v", got)
			}
			// The node returns on its state directory.
			starts := lost.mock.starts.Load()
			lost.start()
			testutil.Eventually(t, 20*time.Second, "the verdict deleted by the returning node", func() bool {
				_, err := f.w.store.Rollout.Get(ctx, key)
				return err != nil
			})
			if !c.lost {
				after := onlyLive(t, lost, "web")
				if after == nil || after.ID != before.ID || lost.mock.starts.Load() != starts {
					t.Fatalf("after the return: %+v (before %s), starts %d → %d", after, before.ID, starts, lost.mock.starts.Load())
				}
				recorded := false
				for i, st := range after.States {
					if st.Value == string(model.ClientUnknown) && st.Time.Equal(v.DownSince) && i+1 < len(after.States) && after.States[i+1].Value == string(model.ClientRunning) {
						recorded = true
					}
				}
				if !recorded {
					t.Fatalf("the reconnect is not recorded in the allocation's states: %+v", after.States)
				}
				return
			}
			testutil.Eventually(t, 20*time.Second, "the lost allocation replaced", func() bool {
				live := lost.live("web")
				return len(live) == 1 && live[0].ID != before.ID && live[0].DeploymentStatus.IsHealthy()
			})
			var old *model.Allocation
			for _, a := range lost.agent.Allocs() {
				if a.ID == before.ID {
					old = a
				}
			}
			if old == nil || old.ClientStatus != model.ClientLost || old.DesiredStatus != model.DesiredStop {
				t.Fatalf("the old allocation after the return: %+v", old)
			}
			if got := lost.mock.starts.Load(); got != starts+1 {
				t.Fatalf("starts %d → %d, want one more (the replacement)", starts, got)
			}
		})
	}
}
