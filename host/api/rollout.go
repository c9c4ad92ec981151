package api

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/agent"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/rollout"
	"github.com/hivelet/hivelet/host/wanted"
)

// The operator's rollout actions (docs/rollout.md T3 pause/resume, T4
// promote, T11 fail, and a revert by hand): each is one compare-and-set
// whose body is the pure transition of host/rollout re-run on the record
// the CAS just read, stamped with the NATS server's clock. The CLI calls
// them directly; the HTTP API calls the same functions, so a refusal reads
// the same everywhere.

// ErrUnknown wraps "no such job, version or deployment" (HTTP 404, CLI
// exit 2).
var ErrUnknown = errors.New("unknown")

// ErrBadInput wraps a malformed request (HTTP 400, CLI exit 2). A refusal
// by the protocol wraps rollout.ErrRefused instead (HTTP 409, CLI exit 1).
var ErrBadInput = errors.New("bad input")

// Operator carries out the operator's rollout actions on the buckets.
type Operator struct {
	Store *fleet.Store
	// View is the fleet as last read (nodes, allocations, deployments,
	// slots): promote derives the healthy canaries from it, fail its stable
	// version.
	View ViewSource
	// By is the record's "promoted by" ("cli" when empty).
	By string
	// JobView, when set, reads one job's fleet facts for promote, in
	// place of View: an agent's own view holds the job's allocations on
	// every node only where it watches them (fleet.Store.JobView).
	JobView func(ctx context.Context, namespace, jobID string) (*fleet.View, error)
}

func (o *Operator) by() string {
	if o.By == "" {
		return "cli"
	}
	return o.By
}

// Nonce is a fresh random token that marks one write as this caller's
// (an ambiguous compare-and-set is recognised by it).
func Nonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Latest returns the newest deployment record of a job in the view.
func (o *Operator) Latest(namespace, jobID string) (*model.Deployment, error) {
	var best *model.Deployment
	for _, r := range Records(o.View.View(), namespace, jobID) {
		if best == nil || r.D.JobVersion > best.JobVersion {
			best = r.D
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%w: no deployment of job %q", ErrUnknown, jobID)
	}
	return best, nil
}

// modify runs one transition by CAS on the record of (namespace, jobID,
// version) with the server's time and a fresh nonce. A record that needed
// no change is returned as read, with changed false.
func (o *Operator) modify(ctx context.Context, namespace, jobID string, version uint64,
	body func(cur model.Deployment, now time.Time, nonce string) (*model.Deployment, error)) (*model.Deployment, bool, error) {
	now, err := o.Store.ServerNow(ctx)
	if err != nil {
		return nil, false, err
	}
	nonce := Nonce()
	changed := false
	d, _, err := o.Store.ModifyDeployment(ctx, namespace, jobID, version, 0, func(cur model.Deployment) (*model.Deployment, error) {
		next, err := body(cur, now, nonce)
		changed = next != nil
		return next, err
	})
	if errors.Is(err, fleet.ErrNotFound) {
		return nil, false, fmt.Errorf("%w: no deployment of job %q version %d", ErrUnknown, jobID, version)
	}
	return d, changed, err
}

// Promote is T4 by hand: the canarying groups named (every one when groups
// is empty) are promoted if their healthy canaries, derived from the
// allocations in the view, reach the record's desired canaries; else the
// error wraps rollout.ErrRefused and says "group G has h/n healthy
// canaries". changed is false when nothing waited for promotion.
func (o *Operator) Promote(ctx context.Context, namespace, jobID string, version uint64, groups []string) (*model.Deployment, bool, error) {
	v := o.View.View()
	if o.JobView != nil && !v.Watches(fleet.KindAllocs, wanted.AllocJobFilter(namespace, jobID)) {
		jv, err := o.JobView(ctx, namespace, jobID)
		if err != nil {
			return nil, false, fmt.Errorf("reading the allocations of job %q: %w", jobID, err)
		}
		v = jv
	}
	job := jobOf(v, namespace, jobID)
	return o.modify(ctx, namespace, jobID, version, func(cur model.Deployment, now time.Time, nonce string) (*model.Deployment, error) {
		f := FleetFacts(job, namespace, jobID, v, now, o.Store.NodeTTL())
		return rollout.Promote(cur, rollout.Derive(&cur, &f), groups, o.by(), now, nonce)
	})
}

// Fail is T11 by hand: the record fails ("Deployment marked as failed");
// when a group has auto_revert, the revert is pending to the newest stable
// version (rollout.StableVersion over the job's records), and the steward
// writes it, or the record says why there is none.
func (o *Operator) Fail(ctx context.Context, namespace, jobID string, version uint64) (*model.Deployment, bool, error) {
	recs := Records(o.View.View(), namespace, jobID)
	return o.modify(ctx, namespace, jobID, version, func(cur model.Deployment, now time.Time, nonce string) (*model.Deployment, error) {
		revert := false
		for _, st := range cur.TaskGroups {
			revert = revert || (st != nil && st.AutoRevert)
		}
		return rollout.Fail(cur, model.DescFailedByUser, revert, rollout.StableVersion(recs, cur.JobVersion), now, nonce)
	})
}

// Pause is T3 (running → paused): no slot is taken while paused.
func (o *Operator) Pause(ctx context.Context, namespace, jobID string, version uint64) (*model.Deployment, bool, error) {
	return o.modify(ctx, namespace, jobID, version, func(cur model.Deployment, now time.Time, nonce string) (*model.Deployment, error) {
		return rollout.Pause(cur, now, nonce)
	})
}

// Resume is T3 (paused → running): the deadlines move by the time paused.
func (o *Operator) Resume(ctx context.Context, namespace, jobID string, version uint64) (*model.Deployment, bool, error) {
	return o.modify(ctx, namespace, jobID, version, func(cur model.Deployment, now time.Time, nonce string) (*model.Deployment, error) {
		return rollout.Resume(cur, now, nonce)
	})
}

// Revert writes the spec of a recorded version of the job as a new version
// (the current one + 1) marked RevertOf, by compare-and-set on the job key:
// an operator who writes the job meanwhile makes it re-read and write on top
// of that. A job already running that spec is refused (nothing to do).
func (o *Operator) Revert(ctx context.Context, namespace, jobID string, version uint64) (*model.Job, error) {
	spec, err := o.Store.GetJobVersion(ctx, namespace, jobID, version)
	if errors.Is(err, fleet.ErrNotFound) {
		return nil, fmt.Errorf("%w: no recorded version %d of job %q", ErrUnknown, version, jobID)
	}
	if err != nil {
		return nil, err
	}
	for range 5 {
		cur, rev, err := o.Store.GetJob(ctx, namespace, jobID)
		if errors.Is(err, fleet.ErrNotFound) {
			return nil, fmt.Errorf("%w: no job %q", ErrUnknown, jobID)
		}
		if err != nil {
			return nil, err
		}
		if model.SameSpec(cur, spec) {
			return nil, fmt.Errorf("%w: job %s already runs the spec of version %d (as version %d)", rollout.ErrRefused, jobID, version, cur.Version)
		}
		now, err := o.Store.ServerNow(ctx)
		if err != nil {
			return nil, err
		}
		j := *spec
		j.Version, j.SubmitTime, j.Stable = cur.Version+1, now, false
		of := version
		j.RevertOf = &of
		if _, err = o.Store.UpdateJob(ctx, &j, rev); err == nil {
			return &j, nil
		}
		if !errors.Is(err, fleet.ErrLostRace) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("reverting job %s: too many concurrent writers", jobID)
}

func jobOf(v *fleet.View, namespace, jobID string) *model.Job {
	if st, ok := v.Job(namespace, jobID); ok {
		return st.Value
	}
	return nil
}

// Records are a job's deployment records in the view, oldest version first.
func Records(v *fleet.View, namespace, jobID string) []rollout.Record {
	var out []rollout.Record
	for _, st := range v.Deployments.All() {
		d := st.Value
		if d == nil || st.Absent || d.JobID != jobID || !sameNamespace(d.Namespace, namespace) {
			continue
		}
		out = append(out, rollout.Record{D: d, Revision: st.Revision})
	}
	slices.SortFunc(out, func(a, b rollout.Record) int { return cmp.Compare(a.D.JobVersion, b.D.JobVersion) })
	return out
}

func sameNamespace(a, b string) bool {
	return wanted.NamespaceOr(a) == wanted.NamespaceOr(b)
}

// FleetFacts are the rollout facts of a job as a reader of the buckets sees
// them (no Self, no Plan): its deployment records, its allocations on every
// node, the nodes in its scope or carrying its allocations with their
// liveness (heartbeat key present), and its held slots (the rollout bucket
// under wanted.SlotPrefix). rollout.Derive over them gives the counts every
// agent derives; the CLI shows them and promote checks them. job may be nil
// (a purged job): then every known node counts as in scope.
func FleetFacts(job *model.Job, namespace, jobID string, v *fleet.View, now time.Time, nodeTTL time.Duration) rollout.Facts {
	f := rollout.Facts{Job: job, Now: now, NodeTTL: nodeTTL, Records: Records(v, namespace, jobID)}
	carrying := map[string]bool{}
	for _, st := range v.Allocs.All() {
		a := st.Value
		if a == nil || st.Absent || a.JobID != jobID || !sameNamespace(a.Namespace, namespace) {
			continue
		}
		f.Allocs = append(f.Allocs, a)
		carrying[a.NodeID] = true
	}
	slices.SortFunc(f.Allocs, func(a, b *model.Allocation) int {
		if c := strings.Compare(a.NodeID, b.NodeID); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	lost := v.LostSince()
	for _, st := range v.NodesNewest() {
		n := st.Value
		if n == nil {
			continue
		}
		scope := job == nil || InScope(job, n)
		if !scope && !carrying[n.ID] {
			continue
		}
		live := !st.Absent
		eligible := scope && n.Eligibility != model.Ineligible && n.Drain == nil
		rn := rollout.Node{ID: n.ID, Live: live, Eligible: eligible, Protocol: n.RolloutProtocol, Record: n,
			Ready: eligible && live && (job == nil || agent.PlacesOn(job, n))}
		// Its last expiry, also once it is back (as the agent builds it:
		// the disruption guard counts a node that expired within one TTL).
		rn.DownSince = st.Expired
		if live {
			f.Nodes = append(f.Nodes, rn)
			continue
		}
		// A loss verdict in force: its "down since" names the loss also
		// for a reader that did not see the expiry.
		rn.LostSince = lost[n.ID]
		if rn.DownSince.IsZero() {
			rn.DownSince = rn.LostSince
		}
		f.Nodes = append(f.Nodes, rn)
	}
	slices.SortFunc(f.Nodes, func(a, b rollout.Node) int { return strings.Compare(a.ID, b.ID) })
	prefix := wanted.SlotPrefix(namespace, jobID)
	for k, st := range v.Slots.All() {
		if !strings.HasPrefix(k, prefix) || st.Value == nil || st.Absent {
			continue
		}
		f.Slots = append(f.Slots, rollout.Slot{Key: k, Revision: st.Revision, Time: st.Time, Slot: *st.Value})
	}
	slices.SortFunc(f.Slots, func(a, b rollout.Slot) int { return strings.Compare(a.Key, b.Key) })
	return f
}

// InScope reports whether node n is in job's scope (datacenters, node
// pool, constraints) whatever its readiness: agent.PlacesOn asked of the
// node as if it were ready, eligible and had every driver the job uses.
// (host/agent keeps its scope test unexported; this is the same rule.)
func InScope(job *model.Job, n *model.Node) bool {
	c := *n
	c.Status, c.Eligibility, c.Drain = model.NodeStatusReady, model.Eligible, nil
	c.Drivers = map[string]model.DriverInfo{}
	for _, g := range job.Groups {
		for _, t := range g.Tasks {
			c.Drivers[t.Driver] = model.DriverInfo{Detected: true, Healthy: true}
		}
	}
	return agent.PlacesOn(job, &c)
}
