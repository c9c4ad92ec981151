package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/rollout"
)

func loadRolloutFixture(t *testing.T, name string) rolloutFixture {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "rollout", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx rolloutFixture
	if err := model.Decode(data, &fx); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return fx
}

func decideFixture(t *testing.T, fx rolloutFixture) *rolloutOutput {
	t.Helper()
	data, err := json.Marshal(fx)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runRolloutFixture(data)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func heldReasons(d rollout.Decision) []string {
	var out []string
	for _, h := range d.Held {
		out = append(out, h.Entry.AllocID+": "+h.Reason)
	}
	return out
}

func recordOf(fx *rolloutFixture, v uint64) *model.Deployment {
	for _, r := range fx.Records {
		if r.D.JobVersion == v {
			return r.D
		}
	}
	return nil
}

// Each fixture of examples/rollout says in its comment what it must show;
// each case checks that sentence on the decision's fields, and a control
// changes the one fact the claim rests on and sees the decision change.
func TestEachRolloutFixtureShowsWhatItsCommentSays(t *testing.T) {
	cases := []struct {
		name    string
		check   func(t *testing.T, out *rolloutOutput)
		control func(fx *rolloutFixture)
		after   func(t *testing.T, out *rolloutOutput)
	}{
		{
			name: "stale-job-view",
			check: func(t *testing.T, out *rolloutOutput) {
				d := out.Decision
				if !strings.Contains(d.Hold, "stale job view") {
					t.Fatalf("hold = %q", d.Hold)
				}
				if len(d.Transitions)+len(d.Takes)+len(d.Stop)+len(d.Place)+len(d.Reclaims) > 0 || d.Verdict {
					t.Fatalf("a node with a stale job view acted: %+v", d)
				}
			},
			// Control: the node holding version 3 cancels version 2's record.
			control: func(fx *rolloutFixture) { fx.Job.Version = 3 },
			after: func(t *testing.T, out *rolloutOutput) {
				if len(out.Transitions) == 0 || out.Transitions[len(out.Transitions)-1].Kind != "cancel" ||
					out.Transitions[len(out.Transitions)-1].Status != model.DeploymentCancelled {
					t.Fatalf("a strictly newer job did not cancel: %+v", out.Transitions)
				}
			},
		},
		{
			name: "slot-bound",
			check: func(t *testing.T, out *rolloutOutput) {
				d := out.Decision
				if len(d.Takes) != 0 || len(d.Stop) != 0 {
					t.Fatalf("took a slot beyond max_parallel: takes %+v stop %+v", d.Takes, d.Stop)
				}
				if got := heldReasons(d); len(got) != 1 || !strings.Contains(got[0], "1/1 in flight: n2") {
					t.Fatalf("held = %v", got)
				}
				if c := d.Counts["g"]; c.InFlight != 1 || c.MaxParallel != 1 || !slices.Equal(c.Holders, []string{"n2"}) {
					t.Fatalf("counts = %+v", c)
				}
			},
			// Control: once n2's slot is released, n1 (first in the
			// admission order) takes index 0 and stops its allocation.
			control: func(fx *rolloutFixture) { fx.Slots = nil },
			after: func(t *testing.T, out *rolloutOutput) {
				d := out.Decision
				if len(d.Takes) != 1 || d.Takes[0].Slot.Index != 0 || d.Takes[0].Slot.OldAlloc != "a-n1" {
					t.Fatalf("a free slot was not taken: %+v", d.Takes)
				}
			},
		},
		{
			// The handoff (protocol 5): the summary lists slot 0 held by
			// n1 and queues n10 on it; n1 told n10 of its release.
			name: "handoff-take",
			check: func(t *testing.T, out *rolloutOutput) {
				d := out.Decision
				if len(d.Takes) != 1 || d.Takes[0].Key != "slot.default.web.g.0" || !d.Takes[0].Handoff ||
					d.Takes[0].Slot.Holder != "n10" || d.Takes[0].Slot.OldAlloc != "a-n10" {
					t.Fatalf("takes = %+v, want slot 0 taken on the hint", d.Takes)
				}
				if got := heldReasons(d); len(got) != 0 {
					t.Fatalf("held = %v", got)
				}
			},
			// Control: without the hint the queued node waits for the
			// next summary, and says where it is queued.
			control: func(fx *rolloutFixture) { fx.Released = nil },
			after: func(t *testing.T, out *rolloutOutput) {
				d := out.Decision
				if len(d.Takes) != 0 {
					t.Fatalf("a take without the release hint: %+v", d.Takes)
				}
				if got := heldReasons(d); len(got) != 1 || !strings.Contains(got[0], "queued on slot 0") {
					t.Fatalf("held = %v", got)
				}
			},
		},
		{
			name: "reclaim-lost-holder",
			check: func(t *testing.T, out *rolloutOutput) {
				d := out.Decision
				if d.Steward != "n1" || d.StewardRank != 0 {
					t.Fatalf("steward %q rank %d", d.Steward, d.StewardRank)
				}
				if len(d.Reclaims) != 1 || d.Reclaims[0].Slot.Holder != "n3" || d.Reclaims[0].Revision != 10 {
					t.Fatalf("reclaims = %+v", d.Reclaims)
				}
				if d.Disruption != "" {
					t.Fatalf("disruption = %q", d.Disruption)
				}
			},
			// Control: with the holder alive again there is nothing to reclaim.
			control: func(fx *rolloutFixture) {
				fx.Nodes[2].Live, fx.Nodes[2].Ready, fx.Nodes[2].DownSince = true, true, time.Time{}
			},
			after: func(t *testing.T, out *rolloutOutput) {
				if len(out.Decision.Reclaims) != 0 {
					t.Fatalf("a live holder's slot was reclaimed: %+v", out.Decision.Reclaims)
				}
			},
		},
		{
			name: "lost-node-disconnected",
			check: func(t *testing.T, out *rolloutOutput) {
				c := out.Decision.Counts["g"]
				if c.Disconnected != 1 || c.Lost != 0 || !slices.Equal(c.DisconnectedNodes, []string{"n3"}) || c.LostInFlight != 1 {
					t.Fatalf("counts %+v", c)
				}
				if len(out.Decision.Reclaims) != 1 || out.Decision.Reclaims[0].Slot.Holder != "n3" {
					t.Fatalf("reclaims %+v", out.Decision.Reclaims)
				}
			},
			// Control: past lost_after the same allocation is lost.
			control: func(fx *rolloutFixture) { fx.Now = fx.Now.Add(4 * time.Minute) },
			after: func(t *testing.T, out *rolloutOutput) {
				if c := out.Decision.Counts["g"]; c.Lost != 1 || c.Disconnected != 0 || !slices.Equal(c.LostNodes, []string{"n3"}) {
					t.Fatalf("past lost_after: %+v", c)
				}
			},
		},
		{
			name: "disruption-no-reclaim",
			check: func(t *testing.T, out *rolloutOutput) {
				d := out.Decision
				if !strings.Contains(d.Disruption, "2 of 4") {
					t.Fatalf("disruption = %q", d.Disruption)
				}
				if len(d.Reclaims) != 0 {
					t.Fatalf("reclaimed during a disruption: %+v", d.Reclaims)
				}
				for _, tr := range out.Transitions {
					if tr.Kind == "fail" {
						t.Fatalf("failed during a disruption: %+v", tr)
					}
				}
			},
			// Control: the same expiries a TTL ago are no disruption: the
			// lost holder's slot is reclaimed.
			control: func(fx *rolloutFixture) {
				for i := range fx.Nodes {
					if !fx.Nodes[i].Live {
						fx.Nodes[i].DownSince = fx.Now.Add(-5 * time.Minute)
					}
				}
			},
			after: func(t *testing.T, out *rolloutOutput) {
				if out.Decision.Disruption != "" || len(out.Decision.Reclaims) != 1 {
					t.Fatalf("disruption %q, reclaims %+v", out.Decision.Disruption, out.Decision.Reclaims)
				}
			},
		},
		{
			name: "join-mid-canary",
			check: func(t *testing.T, out *rolloutOutput) {
				d := out.Decision
				if len(d.PlaceStable) != 1 || d.StableVersion != 1 || d.PlaceStable[0].NodeID != "n5" {
					t.Fatalf("place_stable %+v stable %d", d.PlaceStable, d.StableVersion)
				}
				if len(d.Place) != 0 {
					t.Fatalf("the unvetted version was placed on a joining node: %+v", d.Place)
				}
			},
			// Control: once promoted, the joining node places the job's version.
			control: func(fx *rolloutFixture) { recordOf(fx, 2).TaskGroups["g"].Promoted = true },
			after: func(t *testing.T, out *rolloutOutput) {
				d := out.Decision
				if len(d.PlaceStable) != 0 || len(d.Place) != 1 {
					t.Fatalf("after promotion: place %+v place_stable %+v", d.Place, d.PlaceStable)
				}
			},
		},
		{
			name: "canary-nodes-only",
			check: func(t *testing.T, out *rolloutOutput) {
				d := out.Decision
				if len(d.Takes) != 0 || len(d.Stop) != 0 {
					t.Fatalf("a node that is not a canary took a slot: %+v", d.Takes)
				}
				if c := d.Counts["g"]; !c.Canarying || c.Waiting != 1 {
					t.Fatalf("counts = %+v (only the canary node n2 waits)", c)
				}
			},
			// Control: the stored canary node n2 takes the slot.
			control: func(fx *rolloutFixture) { fx.Self = "n2" },
			after: func(t *testing.T, out *rolloutOutput) {
				d := out.Decision
				if len(d.Takes) != 1 || d.Takes[0].Slot.Holder != "n2" || d.Takes[0].Slot.OldAlloc != "a-n2" {
					t.Fatalf("the canary node did not take a slot: %+v", d.Takes)
				}
			},
		},
		{
			name: "paused-no-slot",
			check: func(t *testing.T, out *rolloutOutput) {
				d := out.Decision
				if len(d.Takes) != 0 || len(d.Stop) != 0 || d.Verdict {
					t.Fatalf("a paused deployment acted: takes %+v stop %+v verdict %v", d.Takes, d.Stop, d.Verdict)
				}
			},
			// Control: resumed, the same node takes a slot.
			control: func(fx *rolloutFixture) {
				d := recordOf(fx, 2)
				d.Status, d.StatusDescription, d.PausedAt = model.DeploymentRunning, model.DescRunning, time.Time{}
			},
			after: func(t *testing.T, out *rolloutOutput) {
				if len(out.Decision.Takes) != 1 {
					t.Fatalf("running: takes %+v", out.Decision.Takes)
				}
			},
		},
		{
			name: "release-after-verdict",
			check: func(t *testing.T, out *rolloutOutput) {
				d := out.Decision
				if len(d.Releases) != 1 || d.Releases[0].Slot.NewAlloc != "b-n1" || d.Releases[0].Revision != 10 {
					t.Fatalf("releases = %+v", d.Releases)
				}
				if len(d.Reclaims) != 0 {
					t.Fatalf("the steward reclaims its own slot instead of releasing it: %+v", d.Reclaims)
				}
			},
			// Control: without the verdict the holder keeps its slot.
			control: func(fx *rolloutFixture) {
				for _, a := range fx.Allocs {
					if a.ID == "b-n1" {
						a.DeploymentStatus = nil
					}
				}
			},
			after: func(t *testing.T, out *rolloutOutput) {
				if len(out.Decision.Releases) != 0 {
					t.Fatalf("released before the verdict: %+v", out.Decision.Releases)
				}
			},
		},
		{
			name: "deputy-waits",
			check: func(t *testing.T, out *rolloutOutput) {
				d := out.Decision
				if d.StewardRank != 1 || len(d.Reclaims) != 0 || !slices.Contains(d.Due, "reclaim:slot.default.web.g.0@10") {
					t.Fatalf("rank %d reclaims %+v due %v", d.StewardRank, d.Reclaims, d.Due)
				}
			},
			// Control: overdue for one deputy step, deputy 1 reclaims.
			control: func(fx *rolloutFixture) {
				fx.Overdue = map[string]model.Duration{"reclaim:slot.default.web.g.0@10": model.Duration(rollout.DeputyStepFor(1))}
			},
			after: func(t *testing.T, out *rolloutOutput) {
				if len(out.Decision.Reclaims) != 1 || out.Decision.Reclaims[0].Slot.Holder != "n3" {
					t.Fatalf("an overdue deputy did not reclaim: %+v", out.Decision.Reclaims)
				}
			},
		},
		{
			name: "cancelled-slot-released",
			check: func(t *testing.T, out *rolloutOutput) {
				d := out.Decision
				if len(d.Releases) != 1 || d.Releases[0].Slot.JobVersion != 2 {
					t.Fatalf("releases = %+v", d.Releases)
				}
				if len(d.Stop) != 0 {
					t.Fatalf("the holder acted on a cancelled deployment's slot it releases: stop %+v", d.Stop)
				}
			},
			// Control: while v2's record still runs the holder keeps its slot.
			control: func(fx *rolloutFixture) { recordOf(fx, 2).Status = model.DeploymentRunning },
			after: func(t *testing.T, out *rolloutOutput) {
				if len(out.Decision.Releases) != 0 {
					t.Fatalf("released while running: %+v", out.Decision.Releases)
				}
			},
		},
		{
			name: "canary-policy-chose-nobody",
			check: func(t *testing.T, out *rolloutOutput) {
				d := out.Decision
				if c := d.Counts["g"]; !c.Canarying || c.Waiting != 0 || len(d.Takes) != 0 || len(d.Stop) != 0 {
					t.Fatalf("counts %+v takes %+v stop %+v", c, d.Takes, d.Stop)
				}
				// The operator can go on: promotion is not refused (0/0).
				p, err := rollout.Promote(*d.Record.D, d.Counts, nil, "cli", d.Record.D.CreateTime, "n")
				if err != nil || p == nil || !p.TaskGroups["g"].Promoted {
					t.Fatalf("promote: %v %+v", err, p)
				}
			},
			// Control: once promoted, the first node in the admission order
			// takes the slot.
			control: func(fx *rolloutFixture) { recordOf(fx, 2).TaskGroups["g"].Promoted = true },
			after: func(t *testing.T, out *rolloutOutput) {
				if len(out.Decision.Takes) != 1 || out.Decision.Takes[0].Slot.Holder != "n1" {
					t.Fatalf("promoted: takes %+v", out.Decision.Takes)
				}
			},
		},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			fx := loadRolloutFixture(t, c.name)
			if fx.Comment == "" {
				t.Fatal("the fixture has no comment")
			}
			out := decideFixture(t, fx)
			if out.Comment != fx.Comment {
				t.Fatalf("comment not carried: %q", out.Comment)
			}
			c.check(t, out)
			c.control(&fx)
			c.after(t, decideFixture(t, fx))
		})
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "examples", "rollout", "*.json"))
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".json"); !seen[name] {
			t.Errorf("fixture %s has no test of its comment", name)
		}
	}
	if len(files) < 8 {
		t.Errorf("%d rollout fixtures, want at least 8", len(files))
	}
}

func TestReconcileRolloutPrintsThePlanAndTheDecisionAndRefusesABadFixture(t *testing.T) {
	out, errOut, code := cli(t, "reconcile", "--rollout", "-f", filepath.Join("..", "..", "examples", "rollout", "slot-bound.json"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Plan     map[string]any `json:"plan"`
		Decision map[string]any `json:"decision"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Plan["update"] == nil || got.Decision["held"] == nil {
		t.Fatalf("output: %v\n%s", err, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"self":"n1","now":"2026-12-01T12:00:00Z","job":{"id":"web","type":"system"},"slotz":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := cli(t, "reconcile", "--rollout", "-f", bad); code != 2 || !strings.Contains(errOut, "slotz") {
		t.Fatalf("a bad fixture: exit %d, %s", code, errOut)
	}
}
