package reconcile

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
)

func TestCanaryNodeCountIsTheCeilingOfThePercentage(t *testing.T) {
	cases := []struct{ percent, ready, want int }{
		{0, 10, 0}, {25, 0, 0}, {25, 1, 1}, {25, 4, 1}, {25, 5, 2}, {33, 3, 1}, {34, 3, 2},
		{50, 3, 2}, {100, 3, 3}, {1, 1000, 10}, {1, 1001, 11}, {25, 10000, 2500},
	}
	for _, c := range cases {
		if got := canaryTarget(c.percent, c.ready); got != c.want {
			t.Errorf("ceil(%d%% × %d) = %d, want %d", c.percent, c.ready, got, c.want)
		}
	}
}

// recorder is a CanaryChooser that records its requests and answers with
// a fixed choice or error.
type recorder struct {
	reqs   []CanaryRequest
	answer CanaryChoice
	err    error
	// useDefault answers like the default when answer is empty.
	useDefault bool
}

func (r *recorder) ChooseCanaries(ctx context.Context, req CanaryRequest) (CanaryChoice, error) {
	r.reqs = append(r.reqs, req)
	if r.useDefault {
		return DefaultCanaryChooser{}.ChooseCanaries(context.Background(), req)
	}
	return r.answer, r.err
}

// canaryFleet: four ready nodes n1..n4 all running v1 of a group with 50%
// canaries (2 canary nodes), job at v2.
func canaryFleet() Input {
	g := withUpdate(grp("web", 1), func(u *model.UpdateStrategy) { u.Canary = 50 })
	in := fleetOf(sysJob(2, g), rnode("n4"), rnode("n2"), rnode("n3"), rnode("n1"))
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		in.LiveAllocs = append(in.LiveAllocs, al("a"+n[1:], n, "web", 0, 1))
	}
	return in
}

func canaryOf(t *testing.T, p *Plan) *CanaryDecision {
	t.Helper()
	for _, g := range p.Groups {
		if g.Name == "web" && g.Canary != nil {
			return g.Canary
		}
	}
	t.Fatalf("no canary decision in %s", jsonOf(t, p.Groups))
	return nil
}

func TestTheChooserIsAskedForTheMissingNodesAndItsAnswerIsRecorded(t *testing.T) {
	in := canaryFleet()
	r := &recorder{answer: CanaryChoice{NodeIDs: []string{"n4", "n3"}}}
	in.Canaries = r
	p := mustFleet(t, in)
	if len(r.reqs) != 1 {
		t.Fatalf("chooser asked %d times", len(r.reqs))
	}
	req := r.reqs[0]
	var ids []string
	for _, n := range req.Eligible {
		ids = append(ids, n.ID)
	}
	if req.Count != 2 || req.Percent != 50 || req.Group != "web" || req.JobVersion != 2 ||
		strings.Join(ids, ",") != "n1,n2,n3,n4" || len(req.Existing) != 0 || req.DeploymentID != DeploymentID("", "web", 2) {
		t.Errorf("request: %+v eligible %v", req, ids)
	}
	d := canaryOf(t, p)
	if strings.Join(d.Nodes, ",") != "n3,n4" || d.Fallback != "" {
		t.Errorf("decision: %+v", d)
	}
	if got := p.Deployment.TaskGroups["web"].CanaryNodes; strings.Join(got, ",") != "n3,n4" {
		t.Errorf("recorded canary nodes %v", got)
	}
	checkDecisions(t, p, map[string]string{"a3": "update alloc.12 canary", "a4": "update alloc.12 canary",
		"a1": "awaiting alloc.12", "a2": "awaiting alloc.12"})
}

func TestRecordedCanaryNodesAreReusedWithoutAskingAgain(t *testing.T) {
	in := canaryFleet()
	in.Deployment = dep(2, model.DeploymentRunning, map[string]*model.DeploymentState{
		"web": {CanaryNodes: []string{"n2", "n4"}, DesiredCanaries: 2, DesiredTotal: 4}})
	r := &recorder{err: errors.New("must not be asked")}
	in.Canaries = r
	p := mustFleet(t, in)
	if len(r.reqs) != 0 || strings.Join(canaryOf(t, p).Nodes, ",") != "n2,n4" || p.DeploymentChanged {
		t.Errorf("asked %d times; decision %+v; changed %v", len(r.reqs), canaryOf(t, p), p.DeploymentChanged)
	}
	// A recorded set smaller than the target (a node joined since, or the
	// policy chose fewer) is never extended: the set is chosen once
	// (docs/rollout.md, I4), so promotion still waits for exactly the
	// recorded canaries.
	in.Deployment.TaskGroups["web"].CanaryNodes = []string{"n4"}
	in.Deployment.TaskGroups["web"].DesiredCanaries = 1
	p = mustFleet(t, in)
	if len(r.reqs) != 0 || strings.Join(canaryOf(t, p).Nodes, ",") != "n4" || p.Deployment.TaskGroups["web"].DesiredCanaries != 1 {
		t.Errorf("partly recorded: asked %d times; decision %+v; desired %d", len(r.reqs), canaryOf(t, p), p.Deployment.TaskGroups["web"].DesiredCanaries)
	}
	// Control: a group recorded with no canary decision at all asks.
	in.Deployment.TaskGroups["web"].CanaryNodes, in.Deployment.TaskGroups["web"].DesiredCanaries = nil, 0
	r.err, r.useDefault = nil, true
	p = mustFleet(t, in)
	if len(r.reqs) != 1 || r.reqs[0].Count != 2 || strings.Join(canaryOf(t, p).Nodes, ",") != "n1,n2" || !p.DeploymentChanged {
		t.Errorf("control: requests %+v; decision %+v", r.reqs, canaryOf(t, p))
	}
}

func TestNodesCarryingACanaryOfTheDeploymentStayCanaryNodes(t *testing.T) {
	for _, where := range []string{"live", "terminal"} {
		t.Run(where, func(t *testing.T) {
			in := canaryFleet()
			in.Deployment = dep(2, model.DeploymentRunning, st(4))
			c := healthy(al("c3", "n3", "web", 0, 2), in.Deployment.ID, true)
			if where == "live" {
				in.LiveAllocs[2] = c // replaces a3 on n3
			} else {
				in.TerminalAllocs = []*model.Allocation{terminal(c, model.ClientFailed)}
			}
			r := &recorder{useDefault: true}
			in.Canaries = r
			p := mustFleet(t, in)
			if len(r.reqs) != 1 || r.reqs[0].Count != 1 || strings.Join(r.reqs[0].Existing, ",") != "n3" ||
				strings.Join(canaryOf(t, p).Nodes, ",") != "n1,n3" {
				t.Errorf("requests %+v; decision %+v", r.reqs, canaryOf(t, p))
			}
			// Control: a canary of another deployment does not count.
			c.DeploymentID = "someone-else"
			r.reqs = nil
			p = mustFleet(t, in)
			if len(r.reqs) != 1 || r.reqs[0].Count != 2 || strings.Join(canaryOf(t, p).Nodes, ",") != "n1,n2" {
				t.Errorf("control: requests %+v; decision %+v", r.reqs, canaryOf(t, p))
			}
		})
	}
}

func TestABadCanaryAnswerFallsBackToTheDefaultAndIsReported(t *testing.T) {
	cases := []struct {
		name   string
		answer CanaryChoice
		err    error
		why    string // "" means accepted
		nodes  string
	}{
		{"accepted", CanaryChoice{NodeIDs: []string{"n2", "n4"}}, nil, "", "n2,n4"},
		{"fewer with a reason is accepted", CanaryChoice{NodeIDs: []string{"n3"}, Reason: "rack spread"}, nil, "", "n3"},
		{"fewer without a reason", CanaryChoice{NodeIDs: []string{"n3"}}, nil, "gave no reason", "n1,n2"},
		{"unknown node", CanaryChoice{NodeIDs: []string{"n3", "n9"}}, nil, `"n9", which is not an eligible node`, "n1,n2"},
		{"duplicate node", CanaryChoice{NodeIDs: []string{"n3", "n3"}}, nil, `"n3" twice`, "n1,n2"},
		{"more than asked", CanaryChoice{NodeIDs: []string{"n1", "n2", "n3"}}, nil, "chose 3 nodes, 2 asked", "n1,n2"},
		{"an error", CanaryChoice{}, errors.New("wasm trap"), "canary policy failed: wasm trap", "n1,n2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := canaryFleet()
			in.Canaries = &recorder{answer: c.answer, err: c.err}
			p := mustFleet(t, in)
			d := canaryOf(t, p)
			if strings.Join(d.Nodes, ",") != c.nodes || strings.Join(p.Deployment.TaskGroups["web"].CanaryNodes, ",") != c.nodes {
				t.Errorf("nodes %v (recorded %v), want %s", d.Nodes, p.Deployment.TaskGroups["web"].CanaryNodes, c.nodes)
			}
			if c.why == "" && d.Fallback != "" || !strings.Contains(d.Fallback, c.why) {
				t.Errorf("fallback %q, want it to say %q", d.Fallback, c.why)
			}
			if c.answer.Reason != "" && d.Reason != c.answer.Reason {
				t.Errorf("reason %q not recorded", d.Reason)
			}
		})
	}
}

func TestTheDefaultChooserTakesEligibleNodesInIDOrder(t *testing.T) {
	req := CanaryRequest{Count: 2, Eligible: []*model.Node{rnode("c"), rnode("a"), rnode("b")}}
	c, err := DefaultCanaryChooser{}.ChooseCanaries(context.Background(), req)
	if err != nil || !slices.Equal(c.NodeIDs, []string{"a", "b"}) {
		t.Errorf("got %v %v", c.NodeIDs, err)
	}
	req.Count = 5
	if c, _ := (DefaultCanaryChooser{}).ChooseCanaries(context.Background(), req); !slices.Equal(c.NodeIDs, []string{"a", "b", "c"}) || validateChoice(req, c) != "" {
		t.Errorf("fewer eligible than asked: %v must be valid without a reason", c.NodeIDs)
	}
}

func TestAHeldDeploymentChoosesNoNewCanaries(t *testing.T) {
	in := canaryFleet()
	in.Deployment = dep(2, model.DeploymentPaused, st(4))
	r := &recorder{useDefault: true}
	in.Canaries = r
	p := mustFleet(t, in)
	if len(r.reqs) != 0 || len(p.Update) != 0 {
		t.Errorf("paused: asked %d times, %d updates", len(r.reqs), len(p.Update))
	}
	in.Deployment.Status = model.DeploymentRunning
	if p = mustFleet(t, in); len(r.reqs) != 1 || len(p.Update) != 2 {
		t.Errorf("control: asked %d times, %d updates", len(r.reqs), len(p.Update))
	}
}
