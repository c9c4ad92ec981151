package api

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

type allocsP []*model.Allocation

func (p allocsP) Allocations() []*model.Allocation { return p }

// TestPerJobAndPerDeploymentMetricsFollowTheAllocationsAndTheView: this
// node's allocations are counted per job and status; each job's newest
// deployment (not an older one) has its status and its fleet-wide
// allocations by health, stopped ones left out.
func TestPerJobAndPerDeploymentMetricsFollowTheAllocationsAndTheView(t *testing.T) {
	yes, no := true, false
	alloc := func(id, node string, version uint64, cs model.ClientStatus, healthy *bool) *model.Allocation {
		a := &model.Allocation{ID: id, NodeID: node, JobID: "web", JobVersion: version, DesiredStatus: model.DesiredRun, ClientStatus: cs}
		if healthy != nil {
			a.DeploymentStatus = &model.AllocDeploymentStatus{Healthy: healthy}
		}
		return a
	}
	mine := allocsP{alloc("a1", "n1", 2, model.ClientRunning, &yes), alloc("a0", "n1", 1, model.ClientComplete, nil)}
	stopped := alloc("a4", "n4", 2, model.ClientRunning, &yes)
	stopped.DesiredStatus = model.DesiredStop
	v := &fleet.View{Allocs: fleet.MapOf(map[string]wanted.AllocState{}), Deployments: fleet.MapOf(map[string]wanted.DeploymentState{})}
	for _, a := range []*model.Allocation{mine[0], alloc("a2", "n2", 2, model.ClientRunning, &no), alloc("a3", "n3", 2, model.ClientPending, nil), stopped} {
		v.Allocs = v.Allocs.With(a.ID, wanted.AllocState{Key: a.ID, Value: a})
	}
	for _, d := range []*model.Deployment{{ID: "d1", JobID: "web", JobVersion: 1, Status: model.DeploymentSuccessful},
		{ID: "d2", JobID: "web", JobVersion: 2, Status: model.DeploymentRunning}} {
		v.Deployments = v.Deployments.With(d.ID, wanted.DeploymentState{Key: d.ID, Value: d})
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(JobCollector{Allocs: mine, View: fixedView{v}})
	_, body := get(t, NewHandler(Providers{}, reg), "/metrics")
	for _, want := range []string{
		`hivelet_job_allocations{job="web",namespace="default",status="running"} 1`,
		`hivelet_job_allocations{job="web",namespace="default",status="complete"} 1`,
		`hivelet_deployment_status{job="web",namespace="default",status="running",version="2"} 1`,
		`hivelet_deployment_allocations{health="healthy",job="web",namespace="default",version="2"} 1`,
		`hivelet_deployment_allocations{health="unhealthy",job="web",namespace="default",version="2"} 1`,
		`hivelet_deployment_allocations{health="pending",job="web",namespace="default",version="2"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(body, `version="1"`) {
		t.Errorf("an older deployment is exported:\n%s", body)
	}
}

// A narrowed agent (the job's allocations not watched on every node)
// exports the steward's summary counts for the deployment it names, and
// nothing of another deployment's summary. Control: the allocations it
// does hold are not what is counted then.
func TestANarrowedAgentExportsTheSummarysDeploymentCounts(t *testing.T) {
	v := &fleet.View{Allocs: fleet.MapOf(map[string]wanted.AllocState{}), Deployments: fleet.MapOf(map[string]wanted.DeploymentState{}),
		Summaries: fleet.MapOf(map[string]wanted.SummaryState{}), Watched: map[string][]string{fleet.KindAllocs: {wanted.AllocKeyPrefix("n1")}}}
	healthy := true
	mine := &model.Allocation{ID: "a1", NodeID: "n1", JobID: "web", JobVersion: 2, DesiredStatus: model.DesiredRun,
		DeploymentStatus: &model.AllocDeploymentStatus{Healthy: &healthy}}
	v.Allocs = v.Allocs.With("n1.default.web.a1", wanted.AllocState{Value: mine})
	v.Deployments = v.Deployments.With("d2", wanted.DeploymentState{Value: &model.Deployment{ID: "d2", JobID: "web", JobVersion: 2, Status: model.DeploymentRunning}})
	metric := func(sum *model.RolloutSummary) string {
		v.Summaries = v.Summaries.With(wanted.SummaryKey("", "web"), wanted.SummaryState{Value: sum})
		reg := prometheus.NewRegistry()
		reg.MustRegister(JobCollector{View: fixedView{v}})
		_, body := get(t, NewHandler(Providers{}, reg), "/metrics")
		return body
	}
	body := metric(&model.RolloutSummary{JobID: "web", DeploymentID: "d2", Groups: map[string]*model.GroupSummary{
		"a": {Healthy: 40, Unhealthy: 2, Pending: 5}, "b": {Healthy: 7}}})
	for _, want := range []string{
		`hivelet_deployment_allocations{health="healthy",job="web",namespace="default",version="2"} 47`,
		`hivelet_deployment_allocations{health="unhealthy",job="web",namespace="default",version="2"} 2`,
		`hivelet_deployment_allocations{health="pending",job="web",namespace="default",version="2"} 5`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	body = metric(&model.RolloutSummary{JobID: "web", DeploymentID: "d1", Groups: map[string]*model.GroupSummary{"a": {Healthy: 40}}})
	if want := `hivelet_deployment_allocations{health="healthy",job="web",namespace="default",version="2"} 0`; !strings.Contains(body, want) {
		t.Errorf("another deployment's summary counted:\n%s", body)
	}
}
