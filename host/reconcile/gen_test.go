package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// bytesrc turns fuzz bytes into choices; once exhausted it answers 0, so
// every byte string is a valid fleet.
type bytesrc struct {
	b []byte
	i int
}

func (s *bytesrc) n(k int) int {
	if k <= 1 || s.i >= len(s.b) {
		return 0
	}
	v := int(s.b[s.i])
	s.i++
	return v % k
}

func (s *bytesrc) yes() bool { return s.n(2) == 1 }

func pick[T any](s *bytesrc, vs ...T) T { return vs[s.n(len(vs))] }

// genFleet builds a random fleet: job shape, nodes in every state, live
// and terminal allocations of every status, a deployment of the current or
// an older version in any status, and a well- or badly-behaved chooser.
func genFleet(s *bytesrc) Input {
	job := &model.Job{ID: "web", Type: model.JobTypeSystem, Version: uint64(1 + s.n(3))}
	if s.n(4) == 0 {
		job.Type = model.JobTypeSysbatch
	}
	job.Stop = s.n(8) == 0
	job.Multiregion = s.n(6) == 0
	for _, name := range []string{"web", "api"} {
		if name == "api" && !s.yes() {
			continue
		}
		g := &model.Group{Name: name, Count: s.n(3)}
		if job.Type == model.JobTypeSystem && s.n(5) != 0 {
			g.Update = &model.UpdateStrategy{MaxParallel: s.n(3), Canary: pick(s, 0, 0, 25, 50, 100, 34),
				AutoPromote: s.yes(), ProgressDeadline: model.Duration(10 * time.Minute)}
		}
		if lost := pick(s, 0, 0, time.Minute, 5*time.Minute); lost > 0 {
			g.Disconnect = &model.DisconnectStrategy{LostAfter: model.Duration(lost)}
		}
		job.Groups = append(job.Groups, g)
	}
	in := Input{Job: job, TaintedNodes: map[string]*model.Node{}, Now: t0, DisconnectHandling: s.yes()}
	nodes := []string{"nx"} // nx: in no set, only carries allocations
	for i := range 1 + s.n(8) {
		id := fmt.Sprintf("n%d", i)
		nodes = append(nodes, id)
		switch s.n(9) {
		case 0, 1, 2:
			in.ReadyNodes = append(in.ReadyNodes, rnode(id))
		case 3:
			in.NotReadyNodes = append(in.NotReadyNodes, id)
		case 4:
			in.TaintedNodes[id] = nodeWith(id, model.NodeStatusDown)
		case 5:
			in.TaintedNodes[id] = nodeWith(id, model.NodeStatusDisconnected)
		case 6:
			in.TaintedNodes[id] = draining(id)
		case 7:
			in.TaintedNodes[id] = nil
		case 8: // ready and tainted at once
			in.ReadyNodes = append(in.ReadyNodes, rnode(id))
			in.TaintedNodes[id] = draining(id)
		}
	}
	curDep := DeploymentID("", "web", job.Version)
	genAlloc := func(id string, statuses ...model.ClientStatus) *model.Allocation {
		a := al(id, pick(s, nodes...), pick(s, "web", "web", "api", "old"), s.n(3), uint64(s.n(int(job.Version)+1)))
		a.ClientStatus = pick(s, statuses...)
		if s.n(6) == 0 {
			m := true
			a.DesiredTransition.Migrate = &m
		}
		switch s.n(4) {
		case 1:
			transitioned(a, model.ClientUnknown, t0.Add(-time.Duration(s.n(8))*time.Minute))
		case 2:
			transitioned(transitioned(a, model.ClientUnknown, t0.Add(-time.Hour)), model.ClientRunning, t0.Add(-time.Minute))
		}
		if s.yes() {
			h := pick(s, 0, 1, 2)
			a.DeploymentStatus = &model.AllocDeploymentStatus{Canary: s.yes()}
			if h > 0 {
				b := h == 1
				a.DeploymentStatus.Healthy = &b
			}
			a.DeploymentID = pick(s, curDep, "other-deployment", "")
		}
		return a
	}
	for i := range s.n(14) {
		in.LiveAllocs = append(in.LiveAllocs, genAlloc(fmt.Sprintf("l%d", i),
			model.ClientRunning, model.ClientRunning, model.ClientPending, model.ClientUnknown, model.ClientComplete))
	}
	for i := range s.n(6) {
		in.TerminalAllocs = append(in.TerminalAllocs, genAlloc(fmt.Sprintf("t%d", i),
			model.ClientComplete, model.ClientFailed, model.ClientLost))
	}
	if v := s.n(3); v > 0 {
		ver := job.Version
		if v == 2 {
			ver--
		}
		d := dep(ver, pick(s, model.DeploymentStatuses...), nil)
		d.IsMultiregion = job.Multiregion
		d.StatusDescription = pick(s, model.DescRunning, model.DescNeedsPromotion)
		for _, g := range job.Groups {
			if s.yes() {
				st := &model.DeploymentState{Promoted: s.yes(), DesiredTotal: s.n(6), DesiredCanaries: s.n(3)}
				for _, id := range nodes {
					if s.n(4) == 0 {
						st.CanaryNodes = append(st.CanaryNodes, id)
					}
				}
				d.TaskGroups[g.Name] = st
			}
		}
		in.Deployment = d
	}
	switch s.n(4) {
	case 1:
		in.Canaries = DefaultCanaryChooser{}
	case 2:
		in.Canaries = &wildChooser{s.n(5)}
	case 3:
		in.Canaries = &recorder{err: fmt.Errorf("policy trapped")}
	}
	return in
}

// wildChooser answers in a way chosen by mode: the last eligible nodes
// (valid), an unknown node, a duplicate, one too many, or too few with no
// reason. It is deterministic, as a chooser must be.
type wildChooser struct{ mode int }

func (w *wildChooser) ChooseCanaries(ctx context.Context, req CanaryRequest) (CanaryChoice, error) {
	var ids []string
	for i := len(req.Eligible) - 1; i >= 0 && len(ids) < req.Count; i-- {
		ids = append(ids, req.Eligible[i].ID)
	}
	switch w.mode {
	case 1:
		ids = append(ids[:max(len(ids)-1, 0)], "nowhere")
	case 2:
		if len(ids) > 0 {
			ids = append(ids[:len(ids)-1], ids[0])
		}
	case 3:
		ids = append(ids, "extra")
	case 4:
		if len(ids) > 0 {
			ids = ids[1:]
		}
	}
	return CanaryChoice{NodeIDs: ids}, nil
}
