package reconcile

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/hivelet/hivelet/host/model"
)

// nodesInView are every node a fleet round plans: listed in a set or
// carrying an allocation, plus one the input never mentions.
func nodesInView(in Input) []string {
	ids := map[string]bool{"never-mentioned": true}
	for _, n := range in.ReadyNodes {
		ids[n.ID] = true
	}
	for _, id := range in.NotReadyNodes {
		ids[id] = true
	}
	for id := range in.TaintedNodes {
		ids[id] = true
	}
	for _, a := range slices.Concat(in.LiveAllocs, in.TerminalAllocs) {
		ids[a.NodeID] = true
	}
	return slices.Sorted(maps.Keys(ids))
}

// bucketsJSON is a plan's nine lists, the per-node decisions.
func bucketsJSON(p *Plan) string {
	return mustJSON([]any{p.Place, p.Update, p.Migrate, p.Stop, p.Ignore, p.Lost, p.Disconnecting,
		p.Reconnecting, p.AwaitingPromotion})
}

// checkLocal checks, for every node in view, that the local plan (with the
// fleet's canary facts) has the whole-fleet path's buckets, and that
// without the facts it has them too or refuses with ErrFleetFactsNeeded.
// It reports how many plans were exact without the facts and how many
// were refused.
func checkLocal(in Input) (exact, refused int, err error) {
	for _, id := range nodesInView(in) {
		whole, err := ReconcileNode(in, id)
		if err != nil {
			return 0, 0, err
		}
		want := bucketsJSON(whole)
		ni, err := in.NodeInput(id)
		if err != nil {
			return 0, 0, err
		}
		local, err := ReconcileLocal(ni)
		if err != nil {
			return 0, 0, fmt.Errorf("node %s: %w", id, err)
		}
		if got := bucketsJSON(local); got != want {
			return 0, 0, fmt.Errorf("node %s: local plan\n%s\nwhole-fleet plan\n%s", id, got, want)
		}
		bare := ni
		bare.Canary = nil
		p, err := ReconcileLocal(bare)
		switch {
		case errors.Is(err, ErrFleetFactsNeeded):
			refused++
		case err != nil:
			return 0, 0, err
		case bucketsJSON(p) != want:
			return 0, 0, fmt.Errorf("node %s: local plan without canary facts\n%s\nwhole-fleet plan\n%s", id, bucketsJSON(p), want)
		default:
			exact++
		}
	}
	return exact, refused, nil
}

// The differential test of the node-local entry point: over generated
// fleets, every node's local plan (from its own allocations, the record and
// the canary facts) has exactly the buckets of the whole-fleet path for that
// node; without the canary facts it either has them too, or refuses with
// ErrFleetFactsNeeded (never a different answer).
func TestLocalPlanMatchesTheFleetViewForEveryNode(t *testing.T) {
	plans, exactWithoutFacts, refused, wrongFactsDiffer := 0, 0, 0, 0
	for seed := range uint64(1500) {
		in := randomFleet(seed)
		exact, ref, err := checkLocal(in)
		if err != nil {
			t.Fatalf("seed %d: %v\ninput: %s", seed, err, mustJSON(fixtureOf(in)))
		}
		plans += len(nodesInView(in))
		exactWithoutFacts += exact
		refused += ref
		// Control: the facts are read, and the comparison sees a
		// difference when they are wrong.
		for _, id := range nodesInView(in) {
			ni, err := in.NodeInput(id)
			if err != nil || len(ni.Canary) == 0 {
				continue
			}
			whole, err := ReconcileNode(in, id)
			if err != nil {
				t.Fatal(err)
			}
			wrong := ni
			wrong.Canary = map[string]NodeCanary{}
			for g, c := range ni.Canary {
				wrong.Canary[g] = NodeCanary{Canarying: true, Canary: !c.Canary}
			}
			if p, err := ReconcileLocal(wrong); err == nil && bucketsJSON(p) != bucketsJSON(whole) {
				wrongFactsDiffer++
			}
		}
	}
	t.Logf("%d node plans: %d exact without canary facts, %d refused for want of them; wrong facts changed %d",
		plans, exactWithoutFacts, refused, wrongFactsDiffer)
	if exactWithoutFacts < plans/2 || refused == 0 || wrongFactsDiffer == 0 {
		t.Fatalf("controls: %d plans, %d exact without facts, %d refused, %d changed by wrong facts",
			plans, exactWithoutFacts, refused, wrongFactsDiffer)
	}
}

// Counts are additive: the fleet's group counts are the sums of every
// node's local counts, so a steward can total them from per-node reports.
func TestLocalGroupCountsSumToTheFleetCounts(t *testing.T) {
	nonZero := 0
	for seed := range uint64(3000) {
		in := randomFleet(seed)
		fleet := mustFleet(t, in)
		sums := map[string]GroupSummary{}
		for _, id := range nodesInView(in) {
			ni, err := in.NodeInput(id)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ReconcileLocal(ni)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range p.Groups {
				s := sums[g.Name]
				s.DesiredTotal += g.DesiredTotal
				s.LeftToPlace += g.LeftToPlace
				s.LeftToUpdate += g.LeftToUpdate
				s.LeftToMigrate += g.LeftToMigrate
				s.Awaiting += g.Awaiting
				s.Placed += g.Placed
				s.Healthy += g.Healthy
				s.Unhealthy += g.Unhealthy
				s.CanariesHealthy += g.CanariesHealthy
				sums[g.Name] = s
			}
		}
		for _, g := range fleet.Groups {
			s := sums[g.Name]
			got := [...]int{s.DesiredTotal, s.LeftToPlace, s.LeftToUpdate, s.LeftToMigrate, s.Awaiting, s.Placed, s.Healthy, s.Unhealthy, s.CanariesHealthy}
			want := [...]int{g.DesiredTotal, g.LeftToPlace, g.LeftToUpdate, g.LeftToMigrate, g.Awaiting, g.Placed, g.Healthy, g.Unhealthy, g.CanariesHealthy}
			if got != want {
				t.Fatalf("seed %d group %s: summed local counts %v, fleet counts %v", seed, g.Name, got, want)
			}
			if g.Placed+g.LeftToUpdate > 0 {
				nonZero++
			}
		}
	}
	// Control: the sums compared were not all zero.
	if nonZero < 400 {
		t.Fatalf("only %d groups had anything counted", nonZero)
	}
}

// canaryRecordFleet: three ready nodes at version 1, job at version 2 with
// 34% canaries (one node), a running deployment of version 2.
func canaryRecordFleet(st *model.DeploymentState) Input {
	g := withUpdate(grp("web", 1), func(u *model.UpdateStrategy) { u.Canary = 34 })
	in := fleetOf(sysJob(2, g), rnode("n1"), rnode("n2"), rnode("n3"))
	for i, n := range []string{"n1", "n2", "n3"} {
		in.LiveAllocs = append(in.LiveAllocs, al("a"+string(rune('1'+i)), n, "web", 0, 1))
	}
	in.Deployment = dep(2, model.DeploymentRunning, map[string]*model.DeploymentState{"web": st})
	return in
}

func localOnly(t *testing.T, in Input, node string) (*Plan, error) {
	t.Helper()
	ni, err := in.NodeInput(node)
	if err != nil {
		t.Fatal(err)
	}
	ni.Canary = nil
	return ReconcileLocal(ni)
}

// Before the deployment records a canary set, which node is a canary is
// the chooser's fleet-wide decision: the local round says so rather than
// guess; once recorded, the record alone decides.
func TestALocalRoundRefusesToGuessAnUnrecordedCanarySet(t *testing.T) {
	in := canaryRecordFleet(&model.DeploymentState{})
	if _, err := localOnly(t, in, "n2"); !errors.Is(err, ErrFleetFactsNeeded) {
		t.Fatalf("unrecorded canary set: got %v, want ErrFleetFactsNeeded", err)
	}
	// Recorded: n2 is the canary node, n1 waits.
	in = canaryRecordFleet(&model.DeploymentState{CanaryNodes: []string{"n2"}, DesiredCanaries: 1})
	p, err := localOnly(t, in, "n2")
	if err != nil || len(p.Update) != 1 || !p.Update[0].Canary {
		t.Fatalf("recorded canary node n2: %v %s", err, mustJSON(p))
	}
	p, err = localOnly(t, in, "n1")
	if err != nil || len(p.AwaitingPromotion) != 1 || len(p.Update) != 0 {
		t.Fatalf("non-canary node n1: %v %s", err, mustJSON(p))
	}
	// Promoted: no canary facts are needed at all, and n1 updates.
	in = canaryRecordFleet(&model.DeploymentState{Promoted: true})
	p, err = localOnly(t, in, "n1")
	if err != nil || len(p.Update) != 1 || p.Update[0].Canary {
		t.Fatalf("promoted: %v %s", err, mustJSON(p))
	}
}

func TestALocalInputHoldsOnlyItsNodesAllocations(t *testing.T) {
	in := canaryRecordFleet(&model.DeploymentState{Promoted: true})
	ni, err := in.NodeInput("n1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReconcileLocal(ni); err != nil {
		t.Fatalf("control: n1's own input: %v", err)
	}
	ni.LiveAllocs = append(ni.LiveAllocs, in.LiveAllocs[1]) // n2's
	if _, err := ReconcileLocal(ni); err == nil {
		t.Fatal("an allocation of another node was accepted")
	}
	ni.LiveAllocs = ni.LiveAllocs[:1]
	ni.NodeID = ""
	if _, err := ReconcileLocal(ni); err == nil {
		t.Fatal("an empty node ID was accepted")
	}
}
