package api

import (
	"sort"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// Per-job and per-deployment metrics, computed when /metrics is scraped
// from what the agent already holds (its allocations, the fleet view), so
// they can never drift from what `job status` shows and cost nothing
// between scrapes.
var (
	jobAllocsDesc = prometheus.NewDesc("hivelet_job_allocations",
		"This node's allocations of each job, by client status.", []string{"namespace", "job", "status"}, nil)
	deploymentStatusDesc = prometheus.NewDesc("hivelet_deployment_status",
		"1 for the status of each job's newest deployment in the fleet view.", []string{"namespace", "job", "version", "status"}, nil)
	deploymentAllocsDesc = prometheus.NewDesc("hivelet_deployment_allocations",
		"Allocations of each job's newest deployment across the fleet, by health: healthy, unhealthy, pending (from the job's allocations where this agent watches them on every node, else from the steward's rollout summary).",
		[]string{"namespace", "job", "version", "health"}, nil)
)

// JobCollector serves the per-job and per-deployment metrics. Allocs is
// this node's allocations; View the fleet's (either may be nil).
type JobCollector struct {
	Allocs AllocProvider
	View   ViewSource
}

// Describe implements prometheus.Collector.
func (c JobCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobAllocsDesc
	ch <- deploymentStatusDesc
	ch <- deploymentAllocsDesc
}

// Collect implements prometheus.Collector.
func (c JobCollector) Collect(ch chan<- prometheus.Metric) {
	if c.Allocs != nil {
		type key struct{ ns, job, status string }
		counts := map[key]int{}
		for _, a := range c.Allocs.Allocations() {
			if a != nil {
				counts[key{nsOf(a.Namespace), a.JobID, string(a.ClientStatus)}]++
			}
		}
		for k, n := range counts {
			ch <- prometheus.MustNewConstMetric(jobAllocsDesc, prometheus.GaugeValue, float64(n), k.ns, k.job, k.status)
		}
	}
	if c.View == nil {
		return
	}
	v := c.View.View()
	if v == nil {
		return
	}
	type jobKey struct{ ns, job string }
	newest := map[jobKey]*model.Deployment{}
	for _, st := range v.Deployments.All() {
		d := st.Value
		if d == nil || st.Absent {
			continue
		}
		k := jobKey{nsOf(d.Namespace), d.JobID}
		if cur := newest[k]; cur == nil || d.JobVersion > cur.JobVersion {
			newest[k] = d
		}
	}
	keys := make([]jobKey, 0, len(newest))
	for k := range newest {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ns+"."+keys[i].job < keys[j].ns+"."+keys[j].job })
	for _, k := range keys {
		d := newest[k]
		ver := strconv.FormatUint(d.JobVersion, 10)
		ch <- prometheus.MustNewConstMetric(deploymentStatusDesc, prometheus.GaugeValue, 1, k.ns, k.job, ver, string(d.Status))
		health := map[string]int{"healthy": 0, "unhealthy": 0, "pending": 0}
		if !v.Watches(fleet.KindAllocs, wanted.AllocJobFilter(d.Namespace, d.JobID)) {
			// This agent does not watch the job's allocations on every
			// node: the steward's summary has the counts.
			sum := v.Summaries.At(wanted.SummaryKey(d.Namespace, d.JobID)).Value
			if sum != nil && sum.DeploymentID == d.ID {
				for _, g := range sum.Groups {
					health["healthy"] += g.Healthy
					health["unhealthy"] += g.Unhealthy
					health["pending"] += g.Pending
				}
			}
		} else {
			for _, st := range v.Allocs.All() {
				a := st.Value
				if a == nil || st.Absent || a.JobID != d.JobID || nsOf(a.Namespace) != k.ns || a.JobVersion != d.JobVersion || a.DesiredStatus != model.DesiredRun {
					continue
				}
				switch {
				case a.DeploymentStatus.IsHealthy():
					health["healthy"]++
				case a.DeploymentStatus.IsUnhealthy():
					health["unhealthy"]++
				default:
					health["pending"]++
				}
			}
		}
		for h, n := range health {
			ch <- prometheus.MustNewConstMetric(deploymentAllocsDesc, prometheus.GaugeValue, float64(n), k.ns, k.job, ver, h)
		}
	}
}

// nsOf names the default namespace as the job keys do.
func nsOf(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}
