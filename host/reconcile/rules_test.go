package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// ruleCase is one row of the rule tables: an input, the decisions it must
// give, and, for every case where nothing happens, a control: a sibling
// input (one change away) that must do something.
type ruleCase struct {
	name        string
	in          func() Input
	want        map[string]string
	control     func(in *Input)
	controlWant map[string]string
}

func runRuleCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkDecisions(t, mustFleet(t, c.in()), c.want)
			if c.control != nil {
				in := c.in()
				c.control(&in)
				checkDecisions(t, mustFleet(t, in), c.controlWant)
			}
		})
	}
}

// TestEachPerAllocationRuleDecidesItsBucket has one case per rule 1–14 of
// the per-allocation table (first match wins).
func TestEachPerAllocationRuleDecidesItsBucket(t *testing.T) {
	discGroup := func() *model.Group { return withLostAfter(grp("web", 1), time.Minute) }
	runRuleCases(t, []ruleCase{
		{
			name: "rule 1: a name beyond the count is stopped",
			in: func() Input {
				in := fleetOf(sysJob(1, grp("web", 1)), rnode("n1"))
				in.LiveAllocs = []*model.Allocation{al("a0", "n1", "web", 0, 1), al("a1", "n1", "web", 1, 1)}
				return in
			},
			want: map[string]string{"a0": "ignore alloc.14", "a1": "stop alloc.1"},
		},
		{
			name: "rule 1: a removed group's allocation is stopped",
			in: func() Input {
				in := fleetOf(sysJob(1, grp("web", 1)), rnode("n1"))
				in.LiveAllocs = []*model.Allocation{al("a0", "n1", "api", 0, 1)}
				return in
			},
			want: map[string]string{"a0": "stop alloc.1"},
		},
		{
			name: "rule 1: a stopped job stops everything, even on tainted nodes and with migrate set",
			in: func() Input {
				j := sysJob(1, grp("web", 1))
				j.Stop = true
				in := fleetOf(j, rnode("n1"))
				in.TaintedNodes["n2"] = nil
				a2 := al("a2", "n2", "web", 0, 1)
				m := true
				a2.DesiredTransition.Migrate = &m
				in.LiveAllocs = []*model.Allocation{al("a1", "n1", "web", 0, 1), a2}
				return in
			},
			want: map[string]string{"a1": "stop alloc.1", "a2": "stop alloc.1", "n1/web.web[0]": ""},
		},
		{
			name: "rule 2: an allocation marked for migration migrates, even on a down node",
			in: func() Input {
				in := fleetOf(sysJob(1, grp("web", 1)), rnode("n1"))
				in.TaintedNodes["n2"] = nodeWith("n2", model.NodeStatusDown)
				m := true
				a1, a2 := al("a1", "n1", "web", 0, 1), al("a2", "n2", "web", 0, 1)
				a1.DesiredTransition.Migrate, a2.DesiredTransition.Migrate = &m, &m
				in.LiveAllocs = []*model.Allocation{a1, a2}
				return in
			},
			want: map[string]string{"a1": "migrate alloc.2", "a2": "migrate alloc.2"},
		},
		{
			name: "rule 3: unknown longer than lost_after (boundary: exactly lost_after) is lost",
			in: func() Input {
				in := fleetOf(sysJob(1, discGroup()), rnode("n1"))
				in.DisconnectHandling = true
				in.TaintedNodes["n2"] = nodeWith("n2", model.NodeStatusDisconnected)
				a1 := transitioned(terminal(al("a1", "n1", "web", 0, 1), model.ClientUnknown), model.ClientUnknown, t0.Add(-time.Minute))
				a2 := transitioned(terminal(al("a2", "n2", "web", 0, 1), model.ClientUnknown), model.ClientUnknown, t0.Add(-2*time.Minute))
				in.LiveAllocs = []*model.Allocation{a1, a2}
				return in
			},
			want: map[string]string{"a1": "lost alloc.3", "a2": "lost alloc.3"},
		},
		{
			name: "rule 4: unknown and desired run within lost_after waits to reconnect (ignore)",
			in: func() Input {
				in := fleetOf(sysJob(1, discGroup()), rnode("n1"))
				in.DisconnectHandling = true
				in.TaintedNodes["n2"] = nodeWith("n2", model.NodeStatusDisconnected)
				a2 := transitioned(terminal(al("a2", "n2", "web", 0, 1), model.ClientUnknown), model.ClientUnknown, t0.Add(-59*time.Second))
				in.LiveAllocs = []*model.Allocation{a2}
				return in
			},
			want: map[string]string{"a2": "ignore alloc.4"},
			// Control: one second older, it is lost.
			control:     func(in *Input) { in.LiveAllocs[0].States[0].Time = t0.Add(-61 * time.Second) },
			controlWant: map[string]string{"a2": "lost alloc.3"},
		},
		{
			name: "rule 4 needs the group's lost_after: without it an unknown allocation on a down node is lost",
			in: func() Input {
				in := fleetOf(sysJob(1, discGroup()), rnode("n1"))
				in.DisconnectHandling = true
				in.TaintedNodes["n2"] = nodeWith("n2", model.NodeStatusDown)
				in.LiveAllocs = []*model.Allocation{terminal(al("a2", "n2", "web", 0, 1), model.ClientUnknown)}
				return in
			},
			want:        map[string]string{"a2": "ignore alloc.4"},
			control:     func(in *Input) { in.Job.Groups[0].Disconnect = nil },
			controlWant: map[string]string{"a2": "lost alloc.8"},
		},
		{
			name: "rule 5: a running allocation whose last transition is unknown, on an untainted node, reconnects",
			in: func() Input {
				in := fleetOf(sysJob(1, discGroup()), rnode("n1"))
				in.DisconnectHandling = true
				in.LiveAllocs = []*model.Allocation{transitioned(al("a1", "n1", "web", 0, 1), model.ClientUnknown, t0.Add(-10*time.Second))}
				return in
			},
			want: map[string]string{"a1": "reconnecting alloc.5"},
			// Control: the caller's flag off: an ordinary up-to-date allocation.
			control:     func(in *Input) { in.DisconnectHandling = false },
			controlWant: map[string]string{"a1": "ignore alloc.14"},
		},
		{
			name: "rule 6: a sysbatch allocation that finished successfully on a tainted node is ignored",
			in: func() Input {
				j := sysJob(1, &model.Group{Name: "web", Count: 1})
				j.Type = model.JobTypeSysbatch
				in := fleetOf(j)
				in.TaintedNodes["n2"] = nodeWith("n2", model.NodeStatusDown)
				in.LiveAllocs = []*model.Allocation{terminal(al("a2", "n2", "web", 0, 1), model.ClientComplete)}
				return in
			},
			want:        map[string]string{"a2": "ignore alloc.6"},
			control:     func(in *Input) { in.LiveAllocs[0].ClientStatus = model.ClientRunning },
			controlWant: map[string]string{"a2": "lost alloc.8"},
		},
		{
			name: "rule 7: running on a disconnected node with handling on is disconnecting",
			in: func() Input {
				in := fleetOf(sysJob(1, discGroup()))
				in.DisconnectHandling = true
				in.TaintedNodes["n2"] = nodeWith("n2", model.NodeStatusDisconnected)
				in.LiveAllocs = []*model.Allocation{al("a2", "n2", "web", 0, 1)}
				return in
			},
			want: map[string]string{"a2": "disconnecting alloc.7"},
		},
		{
			name: "rule 8: an allocation on a down or gone node is lost",
			in: func() Input {
				in := fleetOf(sysJob(1, grp("web", 1)))
				in.TaintedNodes["n2"] = nodeWith("n2", model.NodeStatusDown)
				in.TaintedNodes["n3"] = nil
				in.LiveAllocs = []*model.Allocation{al("a2", "n2", "web", 0, 1), al("a3", "n3", "web", 0, 1)}
				return in
			},
			want: map[string]string{"a2": "lost alloc.8", "a3": "lost alloc.8"},
		},
		{
			name: "rule 9: a draining node's allocation (not yet migrating) is ignored",
			in: func() Input {
				in := fleetOf(sysJob(1, grp("web", 1)))
				in.TaintedNodes["n2"] = draining("n2")
				in.LiveAllocs = []*model.Allocation{al("a2", "n2", "web", 0, 1)}
				return in
			},
			want:        map[string]string{"a2": "ignore alloc.9"},
			control:     func(in *Input) { in.TaintedNodes["n2"].Status = model.NodeStatusDown },
			controlWant: map[string]string{"a2": "lost alloc.8"},
		},
		{
			name: "rule 9: a disconnected node's allocation is ignored when handling is off",
			in: func() Input {
				in := fleetOf(sysJob(1, discGroup()))
				in.TaintedNodes["n2"] = nodeWith("n2", model.NodeStatusDisconnected)
				in.LiveAllocs = []*model.Allocation{al("a2", "n2", "web", 0, 1)}
				return in
			},
			want:        map[string]string{"a2": "ignore alloc.9"},
			control:     func(in *Input) { in.DisconnectHandling = true },
			controlWant: map[string]string{"a2": "disconnecting alloc.7"},
		},
		{
			name: "rule 10: an allocation on a not-ready node is ignored",
			in: func() Input {
				in := fleetOf(sysJob(2, grp("web", 1)))
				in.NotReadyNodes = []string{"n2"}
				in.LiveAllocs = []*model.Allocation{al("a2", "n2", "web", 0, 1)}
				return in
			},
			want: map[string]string{"a2": "ignore alloc.10"},
			// Control: the node leaves scope entirely: rule 11 stops it.
			control:     func(in *Input) { in.NotReadyNodes = nil },
			controlWant: map[string]string{"a2": "stop alloc.11"},
		},
		{
			name: "rule 11: an allocation on a node that is not a ready node is stopped",
			in: func() Input {
				in := fleetOf(sysJob(1, grp("web", 1)), rnode("n1"))
				in.LiveAllocs = []*model.Allocation{al("a1", "n1", "web", 0, 1), al("a9", "n9", "web", 0, 1)}
				return in
			},
			want: map[string]string{"a1": "ignore alloc.14", "a9": "stop alloc.11", "n9/web.web[0]": ""},
		},
		{
			name: "rule 12: canarying, not promoted: the canary node updates as canary, the other waits",
			in: func() Input {
				g := withUpdate(grp("web", 1), func(u *model.UpdateStrategy) { u.Canary = 50 })
				in := fleetOf(sysJob(2, g), rnode("n1"), rnode("n2"))
				in.LiveAllocs = []*model.Allocation{al("a1", "n1", "web", 0, 1), al("a2", "n2", "web", 0, 1)}
				return in
			},
			want: map[string]string{"a1": "update alloc.12 canary", "a2": "awaiting alloc.12"},
			// Control: once promoted, both update (rule 13).
			control: func(in *Input) {
				in.Deployment = dep(2, model.DeploymentRunning, map[string]*model.DeploymentState{
					"web": {Promoted: true, CanaryNodes: []string{"n1"}, DesiredCanaries: 1, DesiredTotal: 2}})
			},
			controlWant: map[string]string{"a1": "update alloc.13", "a2": "update alloc.13"},
		},
		{
			name: "rule 13: an outdated allocation is updated",
			in: func() Input {
				in := fleetOf(sysJob(2, grp("web", 1)), rnode("n1"))
				in.LiveAllocs = []*model.Allocation{al("a1", "n1", "web", 0, 1)}
				return in
			},
			want: map[string]string{"a1": "update alloc.13"},
		},
		{
			name: "rule 14: an up-to-date allocation is ignored",
			in: func() Input {
				in := fleetOf(sysJob(2, grp("web", 1)), rnode("n1"))
				in.LiveAllocs = []*model.Allocation{al("a1", "n1", "web", 0, 2)}
				return in
			},
			want:        map[string]string{"a1": "ignore alloc.14"},
			control:     func(in *Input) { in.Job.Version = 3 },
			controlWant: map[string]string{"a1": "update alloc.13"},
		},
		{
			name: "duplicates: of two live allocations of one name on one node, the newer version is kept",
			in: func() Input {
				in := fleetOf(sysJob(2, grp("web", 1)), rnode("n1"))
				in.LiveAllocs = []*model.Allocation{al("a1", "n1", "web", 0, 1), al("b1", "n1", "web", 0, 2)}
				return in
			},
			want: map[string]string{"a1": "stop duplicate", "b1": "ignore alloc.14", "n1/web.web[0]": ""},
		},
	})
}

// TestEachPlacementRuleDecides covers the rules for a required name with no
// live allocation on a node.
func TestEachPlacementRuleDecides(t *testing.T) {
	sysbatch := func(version uint64) *model.Job {
		j := sysJob(version, &model.Group{Name: "web", Count: 1})
		j.Type = model.JobTypeSysbatch
		return j
	}
	runRuleCases(t, []ruleCase{
		{
			name: "name 1: sysbatch with a terminal allocation of the same version: ignore, nothing placed",
			in: func() Input {
				in := fleetOf(sysbatch(1), rnode("n1"))
				in.TerminalAllocs = []*model.Allocation{terminal(al("t1", "n1", "web", 0, 1), model.ClientComplete)}
				return in
			},
			want:        map[string]string{"t1": "ignore name.1", "n1/web.web[0]": ""},
			control:     func(in *Input) { in.Job.Version = 2 },
			controlWant: map[string]string{"t1": "update name.1", "n1/web.web[0]": ""},
		},
		{
			name: "name 1 comes before name 2: sysbatch terminal handling applies on a tainted node too",
			in: func() Input {
				in := fleetOf(sysbatch(2))
				in.TaintedNodes["n2"] = draining("n2")
				in.TerminalAllocs = []*model.Allocation{terminal(al("t2", "n2", "web", 0, 1), model.ClientFailed)}
				return in
			},
			want: map[string]string{"t2": "update name.1"},
		},
		{
			name: "name 2: tainted and not-ready nodes get nothing, not even ignore",
			in: func() Input {
				in := fleetOf(sysJob(1, grp("web", 1)))
				in.TaintedNodes["n2"] = draining("n2")
				in.NotReadyNodes = []string{"n3"}
				return in
			},
			want: map[string]string{"n2/web.web[0]": "", "n3/web.web[0]": ""},
			control: func(in *Input) {
				in.TaintedNodes = nil
				in.NotReadyNodes = nil
				in.ReadyNodes = []*model.Node{rnode("n2"), rnode("n3")}
			},
			controlWant: map[string]string{"n2/web.web[0]": "place name.3", "n3/web.web[0]": "place name.3"},
		},
		{
			name: "name 2: a node listed both ready and tainted is treated as tainted",
			in: func() Input {
				in := fleetOf(sysJob(1, grp("web", 1)), rnode("n2"))
				in.TaintedNodes["n2"] = draining("n2")
				return in
			},
			want:        map[string]string{"n2/web.web[0]": ""},
			control:     func(in *Input) { delete(in.TaintedNodes, "n2") },
			controlWant: map[string]string{"n2/web.web[0]": "place name.3"},
		},
		{
			name: "name 3: every required name of every group is placed on a ready node",
			in: func() Input {
				return fleetOf(sysJob(1, grp("web", 2), grp("api", 1)), rnode("n1"))
			},
			want: map[string]string{"n1/web.web[0]": "place name.3", "n1/web.web[1]": "place name.3",
				"n1/web.api[0]": "place name.3"},
		},
	})
}

func TestAPlacementCarriesThePreviousTerminalAllocationOnThatNodeOnly(t *testing.T) {
	in := fleetOf(sysJob(1, grp("web", 1)), rnode("n1"), rnode("n2"))
	in.TerminalAllocs = []*model.Allocation{terminal(al("t1", "n1", "web", 0, 1), model.ClientFailed)}
	p := mustFleet(t, in)
	e1, _ := entryFor(p, "n1/web.web[0]")
	e2, _ := entryFor(p, "n2/web.web[0]")
	if e1.PreviousAllocID != "t1" {
		t.Errorf("n1 placement carries %q, want t1", e1.PreviousAllocID)
	}
	if e2.PreviousAllocID != "" {
		t.Errorf("n2 placement carries %q, want nothing (t1 is on n1)", e2.PreviousAllocID)
	}
	if e1.AllocID == "t1" || e1.AllocID == e2.AllocID || e1.AllocID != AllocID("", "web", 1, "n1", "web.web[0]", "t1") {
		t.Errorf("placement IDs not derived as documented: %q %q", e1.AllocID, e2.AllocID)
	}
}

func TestDisconnectingAndReconnectingRecordTheClientStatusTransition(t *testing.T) {
	g := withLostAfter(grp("web", 1), time.Minute)
	in := fleetOf(sysJob(1, g), rnode("n1"))
	in.DisconnectHandling = true
	in.TaintedNodes["n2"] = nodeWith("n2", model.NodeStatusDisconnected)
	in.LiveAllocs = []*model.Allocation{
		transitioned(al("a1", "n1", "web", 0, 1), model.ClientUnknown, t0.Add(-time.Second)),
		al("a2", "n2", "web", 0, 1),
	}
	p := mustFleet(t, in)
	dis, b := entryFor(p, "a2")
	if b != "disconnecting" || dis.ClientStatus != model.ClientUnknown || dis.State == nil ||
		dis.State.Value != "unknown" || !dis.State.Time.Equal(t0) || dis.State.Field != model.AllocStateClientStatus {
		t.Errorf("disconnecting entry: %s %+v", b, dis)
	}
	re, b := entryFor(p, "a1")
	if b != "reconnecting" || re.State == nil || re.State.Value != "running" || !re.State.Time.Equal(t0) {
		t.Errorf("reconnecting entry: %s %+v", b, re)
	}
	// Applying the recorded transition ends "due to reconnect": the next
	// round leaves the allocation alone.
	in.LiveAllocs[0].States = append(in.LiveAllocs[0].States, *re.State)
	if _, b := entryFor(mustFleet(t, in), "a1"); b != "ignore" {
		t.Errorf("after recording the reconnect: %s, want ignore", b)
	}
}

func TestTheInputIsNeverModified(t *testing.T) {
	g := withUpdate(grp("web", 1), func(u *model.UpdateStrategy) { u.Canary = 50 })
	in := fleetOf(sysJob(2, g), rnode("n1"), rnode("n2"))
	in.LiveAllocs = []*model.Allocation{al("a1", "n1", "web", 0, 1), al("a2", "n2", "web", 0, 1)}
	in.Deployment = dep(2, model.DeploymentRunning, map[string]*model.DeploymentState{"web": {DesiredTotal: 1}})
	before := jsonOf(t, in.Deployment) + jsonOf(t, in.LiveAllocs) + jsonOf(t, in.ReadyNodes)
	p := mustFleet(t, in)
	if !p.DeploymentChanged || len(p.Deployment.TaskGroups["web"].CanaryNodes) != 1 {
		t.Fatalf("control: the plan should change the deployment: %s", jsonOf(t, p.Deployment))
	}
	if after := jsonOf(t, in.Deployment) + jsonOf(t, in.LiveAllocs) + jsonOf(t, in.ReadyNodes); after != before {
		t.Errorf("input modified:\n%s\n%s", before, after)
	}
}

func TestOnlyCanonicalNamesWithinTheCountAreRequired(t *testing.T) {
	in := fleetOf(sysJob(1, grp("web", 12), grp("a[b", 1)), rnode("n1"))
	f, err := prepare(&in)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]int{ // name → index, -1: not required
		"web.web[0]": 0, "web.web[11]": 11, "web.a[b[0]": 0,
		"web.web[12]": -1, "web.web[01]": -1, "web.web[-1]": -1, "web.web[+1]": -1, "web.web[ 1]": -1,
		"web.web[]": -1, "web.web[1": -1, "web.web1]": -1, "webx.web[0]": -1, "web.api[0]": -1,
		"web.web[99999999999]": -1, "web.a[b[1]": -1, "": -1, "web": -1,
	}
	for name, want := range cases {
		gr, idx := f.required(name)
		got := -1
		if gr != nil {
			got = idx
			if model.AllocName("web", gr.name, idx) != name {
				t.Errorf("%q resolved to %s[%d]", name, gr.name, idx)
			}
		}
		if got != want {
			t.Errorf("required(%q) = %d, want %d", name, got, want)
		}
	}
	// A stopped job requires nothing (control above: it required web.web[0]).
	in.Job.Stop = true
	if f, _ = prepare(&in); f != nil {
		if gr, _ := f.required("web.web[0]"); gr != nil {
			t.Error("a stopped job still requires web.web[0]")
		}
	}
}

func TestInputsThatWouldMakeThePlanOrderDependentAreRefused(t *testing.T) {
	in := fleetOf(sysJob(1, grp("web", 1)), rnode("n1"), rnode("n2"))
	if _, err := ReconcileFleet(in); err != nil {
		t.Fatalf("control: %v", err)
	}
	in.ReadyNodes = append(in.ReadyNodes, rnode("n1"))
	if _, err := ReconcileFleet(in); err == nil || !strings.Contains(err.Error(), `"n1" is listed twice`) {
		t.Errorf("duplicate ready node: %v", err)
	}
	in.ReadyNodes = []*model.Node{rnode("n1"), rnode("n1"), rnode("n2")} // in order otherwise
	if _, err := ReconcileFleet(in); err == nil || !strings.Contains(err.Error(), `"n1" is listed twice`) {
		t.Errorf("duplicate ready node, in order: %v", err)
	}
	in = fleetOf(sysJob(1, grp("web", 1), grp("web", 2)), rnode("n1"))
	if _, err := ReconcileFleet(in); err == nil {
		t.Error("a group declared twice was accepted")
	}
	in = fleetOf(sysJob(1, grp("web", 1)), rnode("n1"))
	in.Deployment = dep(1, model.DeploymentRunning, nil)
	in.Deployment.JobID = "api"
	if _, err := ReconcileFleet(in); err == nil {
		t.Error("another job's deployment was accepted")
	}
}

// A nil or ID-less ready node, live or terminal allocation is refused,
// whether the lists arrive in order (checked by the merge itself) or not
// (checked one by one), and the error names the first list at fault in
// the order ready nodes, live allocations, terminal allocations.
func TestInvalidNodesAndAllocationsAreRefusedInOrderOrNot(t *testing.T) {
	const noReady, noLive, noTerminal = "a ready node has no ID", "a live allocation has no ID", "a terminal allocation has no ID"
	n := func(ids ...string) []*model.Node {
		var out []*model.Node
		for _, id := range ids {
			if id == "nil" {
				out = append(out, nil)
				continue
			}
			out = append(out, rnode(id))
		}
		return out
	}
	a := func(id, node string) *model.Allocation { return al(id, node, "web", 0, 1) }
	cases := []struct {
		name     string
		ready    []*model.Node
		live     []*model.Allocation
		terminal []*model.Allocation
		want     string // "" for a valid input (the control)
	}{
		{"valid, in order", n("n1", "n2"), []*model.Allocation{a("a1", "n1"), a("a2", "n2")}, nil, ""},
		{"valid, out of order", n("n2", "n1"), []*model.Allocation{a("a2", "n2"), a("a1", "n1")}, nil, ""},
		{"nil ready node last", n("n1", "nil"), []*model.Allocation{a("a1", "n1")}, nil, noReady},
		{"ID-less ready node", n("n1", ""), []*model.Allocation{a("a1", "n1")}, nil, noReady},
		{"nil ready node first", n("nil", "n1"), nil, nil, noReady},
		{"nil live allocation last", n("n1", "n2"), []*model.Allocation{a("a1", "n1"), nil}, nil, noLive},
		{"nil live allocation first", n("n1", "n2"), []*model.Allocation{nil, a("a1", "n1")}, nil, noLive},
		{"ID-less live allocation", n("n1"), []*model.Allocation{a("a1", "n1"), a("", "n1")}, nil, noLive},
		{"nil live allocation, out of order", n("n1", "n2"), []*model.Allocation{a("a2", "n2"), a("a1", "n1"), nil}, nil, noLive},
		{"both: the ready node's is reported", n("n1", "nil"), []*model.Allocation{nil}, nil, noReady},
		{"both, the live one first in merge order", n("n1", "n2", "nil"), []*model.Allocation{nil}, nil, noReady},
		{"nil terminal allocation", n("n1"), []*model.Allocation{a("a1", "n1")}, []*model.Allocation{nil}, noTerminal},
		{"live and terminal: the live one's is reported", n("n1"), []*model.Allocation{a("", "n1")}, []*model.Allocation{nil}, noLive},
	}
	for _, c := range cases {
		in := fleetOf(sysJob(1, grp("web", 1)), c.ready...)
		in.LiveAllocs, in.TerminalAllocs = c.live, c.terminal
		_, err := ReconcileFleet(in)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}
