package api

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hivelet/hivelet/host/fleet"
)

// Each fact that says the node does not do its job makes the health
// degraded with its own check and reason; the healthy control is ok with
// no check. Heartbeats failing behind a connection that looks up, a watch
// that does not progress and a store that cannot write were all "ok"
// before (issue 11, 5). The metric follows the same checks.
func TestHealthNamesEveryReasonItIsNotOK(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	healthy := HealthFacts{Now: now, NATS: fleet.StateConnected, Synced: true, LastHeartbeat: now.Add(-3 * time.Second), NodeTTL: 30 * time.Second}
	for _, tc := range []struct {
		name  string
		edit  func(*HealthFacts)
		check string
		want  string
	}{
		{"healthy", func(*HealthFacts) {}, "", ""},
		{"a per-allocation error is reported, not judged", func(f *HealthFacts) { f.PassErrors = []string{"a1: driver said no"} }, "", ""},
		{"failing closed", func(f *HealthFacts) { f.FailedClosed = "state store unreadable" }, CheckEnumeration, "state store unreadable"},
		{"boot pull not complete", func(f *HealthFacts) { f.Synced = false }, CheckKV, "boot pull not complete"},
		{"heartbeat failing behind a connection that looks up", func(f *HealthFacts) {
			f.HeartbeatErr = "nats: timeout"
			f.LastHeartbeat = now.Add(-42 * time.Second)
		}, CheckHeartbeat, "heartbeat failing, last success 42s ago: nats: timeout"},
		{"registration not returned yet", func(f *HealthFacts) { f.LastHeartbeat = time.Time{} }, CheckHeartbeat, "node not registered yet"},
		{"never registered", func(f *HealthFacts) { f.HeartbeatErr = "no responders"; f.LastHeartbeat = time.Time{} }, CheckHeartbeat, "node not registered: no responders"},
		{"no heartbeat attempt past the TTL", func(f *HealthFacts) { f.LastHeartbeat = now.Add(-31 * time.Second) }, CheckHeartbeat, "past the node TTL 30s: the node record has expired"},
		{"watch stalled", func(f *HealthFacts) {
			f.Watch = []string{"bucket b: no progress for 10s", "bucket a cannot be read: nats: stream not found"}
		}, CheckWatch, "bucket a cannot be read: nats: stream not found; bucket b: no progress for 10s"},
		{"store cannot write", func(f *HealthFacts) {
			f.StoreErr = "write state.db: no space left on device"
			f.StoreErrSince = now.Add(-5 * time.Second)
		}, CheckStore, "state store writes failing for 5s: write state.db: no space left on device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := healthy
			tc.edit(&f)
			h := Judge(f)
			reg := prometheus.NewRegistry()
			NewMetrics(reg).SetHealth(h)
			failing := healthGauges(t, reg)
			if tc.check == "" {
				if h.Status != "ok" {
					t.Fatalf("healthy facts judged %s: %v", h.Status, h.Checks)
				}
				for _, c := range judgedChecks {
					if v, ok := failing[c]; !ok || v != 0 {
						t.Fatalf("metric hivelet_health_failing{check=%q} = %v (present %v), want 0", c, v, ok)
					}
				}
				return
			}
			if h.Status != "degraded" || !strings.Contains(h.Checks[tc.check], tc.want) {
				t.Fatalf("judged %s, checks %v; want degraded with %s: %q", h.Status, h.Checks, tc.check, tc.want)
			}
			if len(h.Checks) != 1 {
				t.Fatalf("checks %v: one fact failed, want one check", h.Checks)
			}
			if v := failing[tc.check]; v != 1 {
				t.Fatalf("metric hivelet_health_failing{check=%q} = %v, want 1", tc.check, v)
			}
		})
	}
}

// healthGauges reads hivelet_health_failing by check from reg.
func healthGauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "hivelet_health_failing" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "check" {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}
