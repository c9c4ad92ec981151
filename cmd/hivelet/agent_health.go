package main

import (
	"context"
	"sync"
	"time"

	"github.com/hivelet/hivelet/host/agent"
	"github.com/hivelet/hivelet/host/api"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/node"
	"github.com/hivelet/hivelet/host/state"
)

// healthMonitor gathers the facts /v1/health judges (api.Judge) from the
// parts that own them, and on a period probes what no request would
// (the KV watches' progress, a failing store's recovery) and sets the
// health metric.
type healthMonitor struct {
	a       *agent.Agent
	conn    *fleet.Conn
	src     *fleet.Source
	hb      *node.Heartbeater
	store   *state.Store
	probe   *fleet.WatchProbe
	ttl     func() time.Duration // the node TTL in force (node.Liveness.TTL)
	metrics *api.Metrics

	mu         sync.Mutex
	storeSince time.Time // when the store's writes were first seen failing
}

// healthPeriod is how often the monitor probes; a watch is stalled after
// three periods behind its bucket without progress.
const healthPeriod = 5 * time.Second

func newHealthMonitor(a *agent.Agent, conn *fleet.Conn, src *fleet.Source, hb *node.Heartbeater, store *state.Store, ttl func() time.Duration, metrics *api.Metrics) *healthMonitor {
	return &healthMonitor{a: a, conn: conn, src: src, hb: hb, store: store, ttl: ttl, metrics: metrics,
		probe: fleet.NewWatchProbe(src, 3*healthPeriod)}
}

func (m *healthMonitor) facts(now time.Time) api.HealthFacts {
	st := m.a.Status()
	hb := m.hb.Status()
	f := api.HealthFacts{Now: now, NATS: m.conn.State(), Synced: m.src.View().Synced, FailedClosed: st.FailedClosed,
		PassErrors: st.Errors, LastHeartbeat: hb.LastHeartbeat, HeartbeatErr: hb.LastError, NodeTTL: m.ttl(),
		Watch: m.probe.Problems()}
	_, err := m.store.WriteFailure()
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case err == nil:
		m.storeSince = time.Time{}
	case m.storeSince.IsZero():
		m.storeSince = now
	}
	if err != nil {
		f.StoreErr, f.StoreErrSince = err.Error(), m.storeSince
	}
	return f
}

// Health is the judged health now.
func (m *healthMonitor) Health() api.Health { return api.Judge(m.facts(time.Now())) }

// run probes every healthPeriod until ctx ends.
func (m *healthMonitor) run(ctx context.Context) {
	t := time.NewTicker(healthPeriod)
	defer t.Stop()
	for {
		m.metrics.SetHealth(m.Health())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.probe.Check(ctx, time.Now())
		if _, err := m.store.WriteFailure(); err != nil {
			_ = m.store.Probe() // clears the failure once the store writes again
		}
	}
}
