package fleet_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/fleettest"
)

// canaryJob is mockJob with 25% canaries (one of four agents), manual
// promotion and a min_healthy_time long enough to see a slot held.
func canaryJob(version int, minHealthy string) string {
	j := mockJob(version)
	return strings.Replace(j, `    min_healthy_time = "500ms"`, `    min_healthy_time = "`+minHealthy+`"
    canary           = 25`, 1)
}

// deploymentOf is the record of one version of the job, or nil.
func deploymentOf(f *fleettest.Fleet, version uint64) *model.Deployment {
	ds, err := f.Deployments(jobID)
	if err != nil {
		return nil
	}
	for _, d := range ds {
		if d.JobVersion == version {
			return d
		}
	}
	return nil
}

// agentOf maps node IDs to the agents' containers, from their allocations.
func agentOf(t *testing.T, f *fleettest.Fleet) map[string]*fleettest.Container {
	out := map[string]*fleettest.Container{}
	for _, c := range f.Agents {
		allocs, err := f.Allocs(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range fleettest.Live(allocs, jobID) {
			out[a.NodeID] = c
		}
	}
	return out
}

// aCanaryRolloutAcrossTheFleetWithAHolderCutOff rolls version `version`
// with one canary: until promoted only the stored canary node runs it;
// after `hivelet deployment promote` the others roll one slot at a time. A
// slot holder is cut off the network past its TTL: the fleet sees it down,
// the steward reclaims its slot, the rollout completes on the three others,
// and once reconnected the holder's allocation was not restarted by the
// cut.
func aCanaryRolloutAcrossTheFleetWithAHolderCutOff(t *testing.T, f *fleettest.Fleet, ttl time.Duration, version int) {
	v := uint64(version)
	old := v - 1
	nodes := agentOf(t, f)
	path := f.WriteFile(fmt.Sprintf("canary-%d.hcl", version), canaryJob(version, "4s"))
	if code, out := f.CLI("job", "run", "-detach", path); code != 0 {
		t.Fatalf("job run v%d: exit %d\n%s", version, code, out)
	}
	var d *model.Deployment
	f.WaitFor(60*time.Second, fmt.Sprintf("v%d's record with its canary set", version), func() (bool, string) {
		d = deploymentOf(f, v)
		if d == nil || d.TaskGroups["g"] == nil {
			return false, "no record"
		}
		return len(d.TaskGroups["g"].CanaryNodes) == 1, fmt.Sprintf("canary nodes %v", d.TaskGroups["g"].CanaryNodes)
	})
	canary := nodes[d.TaskGroups["g"].CanaryNodes[0]]
	var others []*fleettest.Container
	for _, c := range f.Agents {
		if c != canary {
			others = append(others, c)
		}
	}
	f.WaitFor(60*time.Second, "the canary runs the new version", func() (bool, string) {
		ok, why, _ := f.RunningAt(jobID, v, 1, canary)
		return ok, why
	})
	// Until promoted nobody else moves: watched over two heartbeat TTLs
	// (every agent made several passes meanwhile), then the control.
	// A read that fails (the CLI timed out on a cluster still catching
	// up) observes nothing: it is retried, and the window must hold reads
	// that succeeded.
	until := time.Now().Add(2 * ttl)
	observed, failed := 0, 0
	for time.Now().Before(until) {
		for _, c := range others {
			allocs, err := f.Allocs(c)
			if err != nil {
				failed++
				t.Logf("reading %s's allocations (retried): %v", c.Name, err)
				continue
			}
			if !fleettest.RunsOnly(allocs, jobID, old, 1) {
				t.Fatalf("before promotion a node that is not the canary changed: %s runs %d live allocations of %s, not one at version %d",
					c.Name, len(fleettest.Live(allocs, jobID)), jobID, old)
			}
			observed++
		}
		time.Sleep(500 * time.Millisecond) // an observation window, not a synchronisation
	}
	if observed < len(others) {
		t.Fatalf("before promotion: %d successful reads of the other nodes (%d failed), want at least one each", observed, failed)
	}
	if code, out := f.CLI("deployment", "promote", jobID); code != 0 {
		t.Fatalf("deployment promote: exit %d\n%s", code, out)
	}
	// A non-canary holder, cut off while it holds its slot.
	var holder *fleettest.Container
	var replacement string
	f.WaitFor(60*time.Second, "a slot held by a node that is not the canary", func() (bool, string) {
		slots, err := f.Slots(jobID)
		if err != nil {
			return false, err.Error()
		}
		if len(slots) > 1 {
			t.Fatalf("%d slots held with max_parallel 1: %+v", len(slots), slots)
		}
		for _, s := range slots {
			if c := nodes[s.Holder]; c != nil && c != canary {
				holder, replacement = c, s.NewAlloc
				return true, ""
			}
		}
		return false, fmt.Sprintf("slots %+v", slots)
	})
	f.Disconnect(holder)
	cutAt := time.Now()
	f.WaitFor(ttl+20*time.Second, holder.Name+"'s node expired", func() (bool, string) { return f.NodeGone(holder) })
	f.WaitFor(30*time.Second, "a loss verdict for "+holder.Name, func() (bool, string) {
		for _, c := range f.Agents {
			if c != holder && f.LoggedSince(c, cutAt, "node lost: verdict written") {
				return true, ""
			}
		}
		return false, "no agent wrote one"
	})
	f.WaitFor(60*time.Second, "the cut-off holder's slot reclaimed", func() (bool, string) {
		slots, err := f.Slots(jobID)
		if err != nil {
			return false, err.Error()
		}
		for _, s := range slots {
			if nodes[s.Holder] == holder {
				return false, "still held by " + holder.Name
			}
		}
		return true, ""
	})
	var rest []*fleettest.Container
	for _, c := range f.Agents {
		if c != holder {
			rest = append(rest, c)
		}
	}
	f.WaitFor(90*time.Second, "the rollout complete on the others", func() (bool, string) {
		d := deploymentOf(f, v)
		if d == nil || d.Status != model.DeploymentSuccessful {
			return false, fmt.Sprintf("deployment %+v", d)
		}
		ok, why, _ := f.RunningAt(jobID, v, 1, rest...)
		return ok, why
	})
	// The holder comes back: the replacement it was making when cut off
	// (the slot's new allocation) keeps running, started once.
	backAt := time.Now()
	f.Reconnect(holder)
	f.WaitFor(ttl+30*time.Second, holder.Name+" ready again", func() (bool, string) { return f.NodesReady(holder) })
	f.WaitFor(30*time.Second, holder.Name+" deleting its loss verdict", func() (bool, string) {
		return f.LoggedSince(holder, backAt, "its loss verdict deleted"), "not yet"
	})
	var after []*model.Allocation
	f.WaitFor(60*time.Second, holder.Name+" on the new version", func() (bool, string) {
		ok, why, by := f.RunningAt(jobID, v, 1, holder)
		after = by[holder.Name]
		return ok, why
	})
	if after[0].ID != replacement {
		t.Fatalf("%s runs %s after the reconnect; the replacement it made under its slot was %s", holder.Name, after[0].ID, replacement)
	}
	if logs, err := f.AllocLogs(after[0].ID, "t"); err != nil || starts(logs) != 1 {
		t.Fatalf("%s after the reconnect: alloc logs %q (%v), want exactly one start", holder.Name, logs, err)
	}
}

// theWholeClusterDownMidRolloutWritesNoReclaim stops every NATS server
// past the TTL while a slot is held: when the cluster is back every node
// key expired at once, the disruption guard holds, and no agent reclaims a
// slot (the holder finishes and releases it itself) or writes a loss
// verdict; the rollout completes.
func theWholeClusterDownMidRolloutWritesNoReclaim(t *testing.T, f *fleettest.Fleet, ttl time.Duration, version int) {
	v := uint64(version)
	path := f.WriteFile(fmt.Sprintf("plain-%d.hcl", version), strings.Replace(mockJob(version), `min_healthy_time = "500ms"`, `min_healthy_time = "3s"`, 1))
	if code, out := f.CLI("job", "run", "-detach", path); code != 0 {
		t.Fatalf("job run v%d: exit %d\n%s", version, code, out)
	}
	f.WaitFor(60*time.Second, "a slot held", func() (bool, string) {
		slots, err := f.Slots(jobID)
		if err != nil {
			return false, err.Error()
		}
		return len(slots) == 1, fmt.Sprintf("%d slots", len(slots))
	})
	f.KillNATS(f.NATS...)
	downAt := time.Now()
	f.WaitFor(3*ttl, "the cluster down past node_ttl", func() (bool, string) {
		return time.Since(downAt) > ttl+ttl/3, time.Since(downAt).String()
	})
	f.StartNATS(f.NATS...)
	f.WaitFor(120*time.Second, "the rollout complete after the cluster's return", func() (bool, string) {
		d := deploymentOf(f, v)
		if d == nil || d.Status != model.DeploymentSuccessful {
			return false, fmt.Sprintf("deployment %+v", d)
		}
		ok, why, _ := f.RunningAt(jobID, v, 1, f.Agents...)
		return ok, why
	})
	for _, c := range f.Agents {
		if f.LoggedSince(c, downAt, "its holder's node expired") {
			t.Fatalf("%s reclaimed a slot after the whole cluster was down (the disruption guard did not hold)", c.Name)
		}
		if f.LoggedSince(c, downAt, "node lost: verdict written") {
			t.Fatalf("%s wrote a loss verdict after the whole cluster was down (the disruption guard did not hold)", c.Name)
		}
	}
}
