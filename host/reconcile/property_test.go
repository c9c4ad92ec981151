package reconcile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
)

// checkProperties checks the invariants of docs/reconciler-rules.md "Outputs" and
// of the canary and deployment rules on one plan.
func checkProperties(in Input, p *Plan) error {
	var errs []string
	fail := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }

	// Every live allocation lands in exactly one list (at most one of the
	// eight buckets, or awaiting promotion).
	live := map[string]int{}
	for _, a := range in.LiveAllocs {
		live[a.ID] = 0
	}
	for b, es := range bucketsOf(p) {
		for _, e := range es {
			if strings.HasPrefix(e.Rule, "alloc.") || e.Rule == "duplicate" {
				if _, ok := live[e.AllocID]; !ok {
					fail("%s entry %s names no live allocation", b, e.AllocID)
				}
				live[e.AllocID]++
			}
			if e.Rule == "alloc.12" && b == "awaiting" && e.Canary {
				fail("awaiting entry %s marked canary", e.AllocID)
			}
		}
	}
	for id, n := range live {
		if n != 1 {
			fail("live allocation %s is in %d lists", id, n)
		}
	}

	// Every required name on a ready node lands in exactly one bucket,
	// except rule 12's wait (then in awaiting, exactly once).
	ready := map[string]bool{}
	for _, n := range in.ReadyNodes {
		ready[n.ID] = true
	}
	for id := range in.TaintedNodes {
		delete(ready, id)
	}
	for _, id := range in.NotReadyNodes {
		delete(ready, id)
	}
	type nn struct{ node, name string }
	inBucket, waiting := map[nn]int{}, map[nn]int{}
	for b, es := range bucketsOf(p) {
		for _, e := range es {
			if e.Rule == "duplicate" {
				continue
			}
			if b == "awaiting" {
				waiting[nn{e.NodeID, e.Name}]++
			} else {
				inBucket[nn{e.NodeID, e.Name}]++
			}
			if b == "place" && !ready[e.NodeID] {
				fail("placement on %s, which is not a ready node", e.NodeID)
			}
		}
	}
	if !in.Job.Stop {
		for node := range ready {
			for _, g := range in.Job.Groups {
				for i := range g.Count {
					k := nn{node, model.AllocName(in.Job.ID, g.Name, i)}
					if !(inBucket[k] == 1 && waiting[k] == 0 || inBucket[k] == 0 && waiting[k] == 1) {
						fail("required %s on ready node %s: %d buckets, %d awaiting", k.name, node, inBucket[k], waiting[k])
					}
				}
			}
		}
	}

	// Canary decisions: never more than asked, only ready nodes chosen.
	for _, g := range p.Groups {
		if c := g.Canary; c != nil {
			if len(c.Chosen) > max(c.Target-len(c.Existing), 0) {
				fail("group %s: chose %d canary nodes, target %d, existing %d", g.Name, len(c.Chosen), c.Target, len(c.Existing))
			}
			for _, id := range c.Chosen {
				if !ready[id] || slices.Contains(c.Existing, id) {
					fail("group %s: chose %s, not an eligible ready node", g.Name, id)
				}
			}
		}
	}

	// Deployments: status updates only for the input deployment; a created
	// one has the (job, version) ID; none for a stopped job.
	for _, u := range p.DeploymentUpdates {
		if in.Deployment == nil || u.DeploymentID != in.Deployment.ID {
			fail("status update for %s, which is not the input deployment", u.DeploymentID)
		}
	}
	if p.DeploymentCreated {
		if p.Deployment.ID != DeploymentID(in.Job.Namespace, in.Job.ID, in.Job.Version) || in.Job.Stop {
			fail("created deployment %s for job version %d (stopped %v)", p.Deployment.ID, in.Job.Version, in.Job.Stop)
		}
		if in.Deployment != nil && in.Deployment.JobVersion == in.Job.Version {
			fail("created a second deployment for version %d", in.Job.Version)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// checkUnion checks that the fleet plan's buckets are the union of the
// single-node plans, and that every node plan agrees on the deployment.
func checkUnion(in Input, fleet *Plan) error {
	nodes := map[string]bool{}
	for _, es := range bucketsOf(fleet) {
		for _, e := range es {
			nodes[e.NodeID] = true
		}
	}
	for _, n := range in.ReadyNodes {
		nodes[n.ID] = true
	}
	for id := range in.TaintedNodes {
		nodes[id] = true
	}
	union := &Plan{}
	fleetFacts := factsJSON(fleet)
	for _, id := range slices.Sorted(maps.Keys(nodes)) {
		p, err := ReconcileNode(in, id)
		if err != nil {
			return err
		}
		if f := factsJSON(p); f != fleetFacts {
			return fmt.Errorf("node %s sees fleet facts\n%s\nfleet run:\n%s", id, f, fleetFacts)
		}
		for b, es := range bucketsOf(p) {
			for _, e := range es {
				if e.NodeID != id {
					return fmt.Errorf("node %s's plan has an entry for node %s", id, e.NodeID)
				}
			}
			switch b {
			case "place":
				union.Place = append(union.Place, es...)
			case "update":
				union.Update = append(union.Update, es...)
			case "migrate":
				union.Migrate = append(union.Migrate, es...)
			case "stop":
				union.Stop = append(union.Stop, es...)
			case "ignore":
				union.Ignore = append(union.Ignore, es...)
			case "lost":
				union.Lost = append(union.Lost, es...)
			case "disconnecting":
				union.Disconnecting = append(union.Disconnecting, es...)
			case "reconnecting":
				union.Reconnecting = append(union.Reconnecting, es...)
			case "awaiting":
				union.AwaitingPromotion = append(union.AwaitingPromotion, es...)
			}
		}
	}
	union.normalize()
	for b, es := range bucketsOf(fleet) {
		if a, b2 := mustJSON(es), mustJSON(bucketsOf(union)[b]); a != b2 {
			return fmt.Errorf("bucket %s: fleet\n%s\nunion of nodes\n%s", b, a, b2)
		}
	}
	return nil
}

func factsJSON(p *Plan) string {
	return mustJSON([]any{p.Deployment, p.DeploymentCreated, p.DeploymentChanged, p.DeploymentUpdates, p.Groups})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// shuffled returns a copy of in with every slice and map rebuilt in a
// random order (allocation state histories keep their order: it means
// something).
func shuffled(in Input, r *rand.Rand) Input {
	out := in
	perm := func(n int, swap func(i, j int)) { r.Shuffle(n, swap) }
	out.ReadyNodes = slices.Clone(in.ReadyNodes)
	perm(len(out.ReadyNodes), func(i, j int) { out.ReadyNodes[i], out.ReadyNodes[j] = out.ReadyNodes[j], out.ReadyNodes[i] })
	out.NotReadyNodes = slices.Clone(in.NotReadyNodes)
	perm(len(out.NotReadyNodes), func(i, j int) {
		out.NotReadyNodes[i], out.NotReadyNodes[j] = out.NotReadyNodes[j], out.NotReadyNodes[i]
	})
	out.LiveAllocs = slices.Clone(in.LiveAllocs)
	perm(len(out.LiveAllocs), func(i, j int) { out.LiveAllocs[i], out.LiveAllocs[j] = out.LiveAllocs[j], out.LiveAllocs[i] })
	out.TerminalAllocs = slices.Clone(in.TerminalAllocs)
	perm(len(out.TerminalAllocs), func(i, j int) {
		out.TerminalAllocs[i], out.TerminalAllocs[j] = out.TerminalAllocs[j], out.TerminalAllocs[i]
	})
	keys := slices.Collect(maps.Keys(in.TaintedNodes))
	perm(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	out.TaintedNodes = make(map[string]*model.Node, len(keys))
	for _, k := range keys {
		out.TaintedNodes[k] = in.TaintedNodes[k]
	}
	j := *in.Job
	j.Groups = slices.Clone(in.Job.Groups)
	perm(len(j.Groups), func(a, b int) { j.Groups[a], j.Groups[b] = j.Groups[b], j.Groups[a] })
	out.Job = &j
	if in.Deployment != nil {
		d := cloneDeployment(in.Deployment)
		for _, st := range d.TaskGroups {
			perm(len(st.CanaryNodes), func(a, b int) { st.CanaryNodes[a], st.CanaryNodes[b] = st.CanaryNodes[b], st.CanaryNodes[a] })
		}
		out.Deployment = d
	}
	return out
}

func randomFleet(seed uint64) Input {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, 400)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return genFleet(&bytesrc{b: b})
}

func TestPlanBytesDoNotDependOnInputOrder(t *testing.T) {
	for seed := range uint64(20) {
		in := randomFleet(seed)
		want, err := json.Marshal(mustFleet(t, in))
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(seed, 99))
		for i := range 100 {
			got, _ := json.Marshal(mustFleet(t, shuffled(in, r)))
			if !bytes.Equal(got, want) {
				t.Fatalf("seed %d shuffle %d: plan bytes differ\n%s\n%s", seed, i, want, got)
			}
		}
	}
	// Control: the comparison can fail: a different fleet gives other bytes.
	a, _ := json.Marshal(mustFleet(t, canaryFleet()))
	b, _ := json.Marshal(mustFleet(t, oneNodeV(2, 1)))
	if bytes.Equal(a, b) {
		t.Fatal("control: two different fleets gave the same plan")
	}
}

func TestEveryAllocationAndRequiredNameLandsInExactlyOneList(t *testing.T) {
	nonEmpty := 0
	for seed := range uint64(3000) {
		in := randomFleet(seed)
		p := mustFleet(t, in)
		if err := checkProperties(in, p); err != nil {
			t.Fatalf("seed %d: %v\ninput: %s\nplan: %s", seed, err, mustJSON(fixtureOf(in)), mustJSON(p))
		}
		if len(p.Place)+len(p.Update)+len(p.AwaitingPromotion) > 0 {
			nonEmpty++
		}
	}
	// Control: the generator makes fleets with work to do, not only empty ones.
	if nonEmpty < 1000 {
		t.Fatalf("only %d of 3000 random fleets had anything to place or update", nonEmpty)
	}
}

func TestFleetPlanIsTheUnionOfNodePlans(t *testing.T) {
	for seed := range uint64(1000) {
		in := randomFleet(seed)
		if err := checkUnion(in, mustFleet(t, in)); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	// Control: a node plan holds only its node.
	in := canaryFleet()
	p, err := ReconcileNode(in, "n2")
	if err != nil || len(p.AwaitingPromotion)+len(p.Update) != 1 || mustFleet(t, in).Deployment == nil {
		t.Fatalf("n2 plan: %v %s", err, mustJSON(p))
	}
}

func fixtureOf(in Input) Fixture {
	return Fixture{Job: in.Job, ReadyNodes: in.ReadyNodes, NotReadyNodes: in.NotReadyNodes, TaintedNodes: in.TaintedNodes,
		LiveAllocs: in.LiveAllocs, TerminalAllocs: in.TerminalAllocs, Deployment: in.Deployment, Now: in.Now,
		DisconnectHandling: in.DisconnectHandling}
}
