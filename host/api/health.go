package api

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
)

// HealthFacts are what /v1/health judges: each is read by the agent from
// the part that owns it, and Judge, a pure function, says what they mean.
// Health is not "the process answers": it is whether the node does its
// job now, so each check that fails names its reason.
type HealthFacts struct {
	Now    time.Time
	NATS   fleet.ConnState
	Synced bool
	// FailedClosed is the agent's fail-closed reason ("": acting).
	FailedClosed string
	// PassErrors are the last pass's per-allocation errors (reported, not
	// judged: one allocation failing is not the node failing).
	PassErrors []string
	// LastHeartbeat is the last successful write of the node record (zero:
	// never), HeartbeatErr the last attempt's error ("" if it succeeded),
	// NodeTTL the nodes bucket's TTL: past it the record has expired
	// fleet-wide and other nodes take this one for gone.
	LastHeartbeat time.Time
	HeartbeatErr  string
	NodeTTL       time.Duration
	// Watch are the problems of the KV watches' progress (a bucket that
	// cannot be read, a watch behind its bucket that does not catch up).
	Watch []string
	// StoreErr is the state store's failing write ("": writes succeed),
	// StoreErrSince when the failures began.
	StoreErr      string
	StoreErrSince time.Time
}

// Health check names: the keys of Health.Checks.
const (
	CheckEnumeration = "enumeration"
	CheckKV          = "kv"
	CheckHeartbeat   = "heartbeat"
	CheckWatch       = "watch"
	CheckStore       = "store"
	CheckPassErrors  = "last_pass_errors"
)

// Judge is the node's health from its facts: "ok" only when the agent
// acts, the boot pull is complete, the last heartbeat succeeded within the
// node TTL, every watch progresses and the state store takes writes.
// Anything else is "degraded" with one check per reason
// (TestHealthNamesEveryReasonItIsNotOK).
func Judge(f HealthFacts) Health {
	h := Health{Status: "ok", NATS: f.NATS, Synced: f.Synced, Checks: map[string]string{}}
	fail := func(check, why string) {
		h.Status = "degraded"
		h.Checks[check] = why
	}
	if f.FailedClosed != "" {
		fail(CheckEnumeration, f.FailedClosed)
	}
	if !f.Synced {
		fail(CheckKV, "boot pull not complete")
	}
	switch {
	case f.HeartbeatErr == "" && f.LastHeartbeat.IsZero():
		// The first write of the node record has not returned: until it
		// does, the fleet does not see this node, so it is not ok yet.
		fail(CheckHeartbeat, "node not registered yet")
	case f.HeartbeatErr != "" && f.LastHeartbeat.IsZero():
		fail(CheckHeartbeat, "node not registered: "+f.HeartbeatErr)
	case f.HeartbeatErr != "":
		fail(CheckHeartbeat, fmt.Sprintf("heartbeat failing, last success %s ago: %s", f.Now.Sub(f.LastHeartbeat).Round(time.Millisecond), f.HeartbeatErr))
	case !f.LastHeartbeat.IsZero() && f.NodeTTL > 0 && f.Now.Sub(f.LastHeartbeat) > f.NodeTTL:
		fail(CheckHeartbeat, fmt.Sprintf("no heartbeat for %s, past the node TTL %s: the node record has expired", f.Now.Sub(f.LastHeartbeat).Round(time.Millisecond), f.NodeTTL))
	}
	if len(f.Watch) > 0 {
		w := append([]string(nil), f.Watch...)
		sort.Strings(w)
		fail(CheckWatch, strings.Join(w, "; "))
	}
	if f.StoreErr != "" {
		fail(CheckStore, fmt.Sprintf("state store writes failing for %s: %s", f.Now.Sub(f.StoreErrSince).Round(time.Millisecond), f.StoreErr))
	}
	if len(f.PassErrors) > 0 {
		h.Checks[CheckPassErrors] = strings.Join(f.PassErrors, "; ")
	}
	return h
}
