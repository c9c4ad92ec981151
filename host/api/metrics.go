package api

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hivelet/hivelet/host/fleet"
)

// Metrics are every collector of the agent. Create one with NewMetrics and
// pass it to whoever updates them; the fields may be used directly.
type Metrics struct {
	// ReconcilePasses counts reconcile passes by outcome ("ok", "error",
	// "refused" when MayAct said no).
	ReconcilePasses *prometheus.CounterVec
	// PassCauses counts the reconcile loop's passes by what made each
	// (agent.Status.PassCauses: a change of the view by kind, a kick by
	// source, a timer, the resync period). A bounded set of labels.
	PassCauses *prometheus.CounterVec
	// ReconcileDuration observes each pass's wall time in seconds.
	ReconcileDuration prometheus.Histogram
	// AllocsByStatus is the number of this node's allocations per client
	// status, set when the registry is read from the function given to
	// CountAllocsWith (registered through allocsCollector, not directly).
	AllocsByStatus *prometheus.GaugeVec
	allocs         *allocsCollector
	// KVWatchRestarts counts re-created KV watchers by bucket and reason.
	KVWatchRestarts *prometheus.CounterVec
	// PluginRestarts counts driver plugin restarts by plugin.
	PluginRestarts *prometheus.CounterVec
	// RejectedDeclarations counts values that failed closed decoding, by bucket.
	RejectedDeclarations *prometheus.CounterVec
	// NATSConnState is 1 for the current connection state, 0 for the others.
	NATSConnState *prometheus.GaugeVec
	// EnumerationFailed is 1 while the node cannot enumerate its tasks
	// (fail closed: the reconciler does not act).
	EnumerationFailed prometheus.Gauge
	// Heartbeats counts node heartbeats by outcome ("ok", "error").
	Heartbeats *prometheus.CounterVec
	// HealthFailing is 1 for each /v1/health check that fails (Judge's
	// check names), 0 for the others: health as a metric, so a node whose
	// connection looks up while its heartbeats fail is seen.
	HealthFailing *prometheus.GaugeVec
}

// NewMetrics creates the collectors and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ReconcilePasses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivelet_reconcile_passes_total", Help: "Reconcile passes by outcome.",
		}, []string{"outcome"}),
		PassCauses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivelet_reconcile_pass_causes_total", Help: "Reconcile passes of the loop by what made each (a view change's kind, a kick's source, a timer, the resync).",
		}, []string{"cause"}),
		ReconcileDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "hivelet_reconcile_duration_seconds", Help: "Wall time of one reconcile pass.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		AllocsByStatus: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hivelet_allocations", Help: "This node's allocations by client status.",
		}, []string{"status"}),
		KVWatchRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivelet_kv_watch_restarts_total", Help: "KV watchers re-created, by bucket and reason (reconnect, ended, error, stalled).",
		}, []string{"bucket", "reason"}),
		PluginRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivelet_plugin_restarts_total", Help: "Driver plugin restarts by plugin.",
		}, []string{"plugin"}),
		RejectedDeclarations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivelet_rejected_declarations_total", Help: "KV values rejected by closed decoding, by bucket.",
		}, []string{"bucket"}),
		NATSConnState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hivelet_nats_connection_state", Help: "1 for the NATS connection's current state.",
		}, []string{"state"}),
		EnumerationFailed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hivelet_enumeration_failed", Help: "1 while the node cannot enumerate its tasks and does not act.",
		}),
		Heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hivelet_node_heartbeats_total", Help: "Node heartbeats by outcome.",
		}, []string{"outcome"}),
		HealthFailing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hivelet_health_failing", Help: "1 for each health check that fails (enumeration, kv, heartbeat, watch, store).",
		}, []string{"check"}),
	}
	m.allocs = &allocsCollector{vec: m.AllocsByStatus}
	reg.MustRegister(m.ReconcilePasses, m.PassCauses, m.ReconcileDuration, m.allocs, m.KVWatchRestarts,
		m.PluginRestarts, m.RejectedDeclarations, m.NATSConnState, m.EnumerationFailed, m.Heartbeats, m.HealthFailing)
	m.SetHealth(Health{})
	for _, s := range fleet.ConnStates {
		m.NATSConnState.WithLabelValues(string(s)).Set(0)
	}
	m.RejectedDeclarations.WithLabelValues(fleet.KindJobs)
	return m
}

// WatchRestarted implements fleet.Observer.
func (m *Metrics) WatchRestarted(bucket, reason string) {
	m.KVWatchRestarts.WithLabelValues(bucket, reason).Inc()
}

// DeclarationRejected implements fleet.Observer.
func (m *Metrics) DeclarationRejected(bucket, _ string) {
	m.RejectedDeclarations.WithLabelValues(bucket).Inc()
}

// ConnState implements fleet.Observer.
func (m *Metrics) ConnState(state fleet.ConnState) {
	for _, s := range fleet.ConnStates {
		v := 0.0
		if s == state {
			v = 1
		}
		m.NATSConnState.WithLabelValues(string(s)).Set(v)
	}
}

// ObserveReconcile records one reconcile pass.
func (m *Metrics) ObserveReconcile(outcome string, d time.Duration) {
	m.ReconcilePasses.WithLabelValues(outcome).Inc()
	m.ReconcileDuration.Observe(d.Seconds())
}

// CountPassCause counts one pass of the reconcile loop by its cause.
func (m *Metrics) CountPassCause(cause string) {
	m.PassCauses.WithLabelValues(cause).Inc()
}

// CountAllocsWith sets the function the allocations gauge is read from:
// each collection (a scrape) calls it and replaces the gauge's series with
// its counts (a status it no longer names is dropped). Until it is set
// the gauge has no series.
func (m *Metrics) CountAllocsWith(count func() map[string]int) {
	m.allocs.mu.Lock()
	defer m.allocs.mu.Unlock()
	m.allocs.count = count
}

// allocsCollector collects AllocsByStatus, refreshed from count first.
type allocsCollector struct {
	mu    sync.Mutex // one refresh and collection at a time
	vec   *prometheus.GaugeVec
	count func() map[string]int
}

// Describe implements prometheus.Collector.
func (c *allocsCollector) Describe(ch chan<- *prometheus.Desc) { c.vec.Describe(ch) }

// Collect implements prometheus.Collector.
func (c *allocsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.count != nil {
		counts := c.count()
		c.vec.Reset()
		for s, n := range counts {
			c.vec.WithLabelValues(s).Set(float64(n))
		}
	}
	c.vec.Collect(ch)
}

// HeartbeatResult counts one node record write (node.HeartbeatConfig.Observe).
func (m *Metrics) HeartbeatResult(err error) {
	if err != nil {
		m.Heartbeats.WithLabelValues("error").Inc()
		return
	}
	m.Heartbeats.WithLabelValues("ok").Inc()
}

// judgedChecks are the checks HealthFailing reports, failing or not.
var judgedChecks = []string{CheckEnumeration, CheckKV, CheckHeartbeat, CheckWatch, CheckStore}

// SetHealth sets HealthFailing from a judged health.
func (m *Metrics) SetHealth(h Health) {
	for _, c := range judgedChecks {
		v := 0.0
		if _, failing := h.Checks[c]; failing {
			v = 1
		}
		m.HealthFailing.WithLabelValues(c).Set(v)
	}
}

// PluginRestarted counts one restart of a plugin.
func (m *Metrics) PluginRestarted(plugin string) { m.PluginRestarts.WithLabelValues(plugin).Inc() }

// SetEnumerationFailed sets the fail-closed gauge.
func (m *Metrics) SetEnumerationFailed(failed bool) {
	if failed {
		m.EnumerationFailed.Set(1)
	} else {
		m.EnumerationFailed.Set(0)
	}
}

var _ fleet.Observer = (*Metrics)(nil)
