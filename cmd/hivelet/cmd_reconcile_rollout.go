package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/host/rollout"
)

// `hivelet reconcile -rollout`: the rollout core's dry run. A fixture holds
// the raw fleet facts one agent would read for one job (docs/reconcile.md,
// "Rollout fixtures"); the command builds the node's reconciler input from
// them the way host/agent does (the record of the job's version as the
// deployment), runs reconcile.ReconcileNode, hands the plan with the same
// facts to rollout.Decide, and prints both. Every decision an agent makes
// for a rollout can be shown this way on a fixture.

// rolloutFixture is rollout.Facts in JSON without the plan (which is
// computed), durations as strings ("30s"), plus a comment saying what the
// fixture must show.
type rolloutFixture struct {
	Comment string              `json:"comment"`
	Self    string              `json:"self"`
	BootID  string              `json:"boot_id,omitempty"`
	Job     *model.Job          `json:"job"`
	Records []rollout.Record    `json:"records"`
	Allocs  []*model.Allocation `json:"allocs"`
	Nodes   []rollout.Node      `json:"nodes"`
	Slots   []rollout.Slot      `json:"slots"`
	Now     time.Time           `json:"now"`
	// Narrow, OwnSlotsOnly, Summary and Released are a narrowed node's
	// view (rollout.Facts): its own allocations and slots only, the
	// admission order from the job's rollout summary, and the slot
	// releases it was told of (the handoff, protocol 5).
	Narrow       bool                  `json:"narrow,omitempty"`
	OwnSlotsOnly bool                  `json:"own_slots_only,omitempty"`
	Summary      *model.RolloutSummary `json:"summary,omitempty"`
	Released     map[string]string     `json:"released,omitempty"`
	// NodeTTL defaults to 30s; SinceSeen (how long the version was seen
	// without a record) to rollout.CreateMax, so a creator's rank delay
	// has passed unless the fixture says otherwise.
	NodeTTL       model.Duration            `json:"node_ttl,omitempty"`
	ReconnectedAt time.Time                 `json:"reconnected_at,omitzero"`
	SinceSeen     *model.Duration           `json:"since_seen,omitempty"`
	Overdue       map[string]model.Duration `json:"overdue,omitempty"`
	InPlace       map[string]bool           `json:"in_place,omitempty"`
	FailedHere    map[string]bool           `json:"failed_here,omitempty"`
	Nonce         string                    `json:"nonce,omitempty"`
}

// transitionResult is a proposed record transition applied to the stored
// record it names (the CAS body run on what the fixture stores).
type transitionResult struct {
	Kind    string                 `json:"kind"`
	Version uint64                 `json:"version"`
	Reason  string                 `json:"reason,omitempty"`
	Status  model.DeploymentStatus `json:"status,omitempty"`
	Desc    string                 `json:"status_description,omitempty"`
	Error   string                 `json:"error,omitempty"`
	NoOp    bool                   `json:"no_op,omitempty"`
}

// rolloutOutput is what `reconcile -rollout` prints.
type rolloutOutput struct {
	Comment     string             `json:"comment"`
	Plan        *reconcile.Plan    `json:"plan"`
	Decision    rollout.Decision   `json:"decision"`
	Transitions []transitionResult `json:"transitions"`
}

// facts turns the fixture into the core's facts (without the plan).
func (fx *rolloutFixture) facts() rollout.Facts {
	f := rollout.Facts{Self: fx.Self, BootID: fx.BootID, Job: fx.Job, Records: fx.Records, Allocs: fx.Allocs,
		Nodes: fx.Nodes, Slots: fx.Slots, Now: fx.Now, NodeTTL: fx.NodeTTL.D(), ReconnectedAt: fx.ReconnectedAt,
		SinceSeen: rollout.CreateMax, InPlace: fx.InPlace, FailedHere: fx.FailedHere, Nonce: fx.Nonce,
		Narrow: fx.Narrow, OwnSlotsOnly: fx.OwnSlotsOnly, Summary: fx.Summary, Released: fx.Released}
	if f.NodeTTL <= 0 {
		f.NodeTTL = 30 * time.Second
	}
	if fx.SinceSeen != nil {
		f.SinceSeen = fx.SinceSeen.D()
	}
	if f.Nonce == "" {
		f.Nonce = "fixture-" + fx.Self
	}
	if len(fx.Overdue) > 0 {
		f.Overdue = map[string]time.Duration{}
		for k, d := range fx.Overdue {
			f.Overdue[k] = d.D()
		}
	}
	return f
}

// reconcileInput builds the node's reconciler input from the facts, as
// host/agent's buildInput does from its view: a node whose heartbeat is
// gone is tainted (down), a live node that is not ready or not eligible is
// not ready (drained: tainted), the rest are ready; allocations on nodes
// the facts do not know are on a gone node; the deployment is the record
// of the job's version.
func reconcileInput(f *rollout.Facts) reconcile.Input {
	in := reconcile.Input{Job: f.Job, TaintedNodes: map[string]*model.Node{}, Now: f.Now, DisconnectHandling: true}
	known := map[string]bool{}
	nodes := slices.Clone(f.Nodes)
	slices.SortFunc(nodes, func(a, b rollout.Node) int { return strings.Compare(a.ID, b.ID) })
	for _, n := range nodes {
		known[n.ID] = true
		rec := &model.Node{ID: n.ID, Status: model.NodeStatusReady, Eligibility: model.Eligible,
			Attributes: map[string]string{}, Meta: map[string]string{}}
		if n.Record != nil {
			c := *n.Record
			rec = &c
		}
		switch {
		case !n.Live:
			rec.Status = model.NodeStatusDown
			in.TaintedNodes[n.ID] = rec
		case rec.Drain != nil:
			in.TaintedNodes[n.ID] = rec
		case !n.Eligible || !n.Ready:
			in.NotReadyNodes = append(in.NotReadyNodes, n.ID)
		default:
			rec.Status = model.NodeStatusReady
			in.ReadyNodes = append(in.ReadyNodes, rec)
		}
	}
	for _, a := range f.Allocs {
		if f.Job == nil || a.JobID != f.Job.ID || a.Namespace != f.Job.Namespace {
			continue
		}
		if a.Terminal() {
			in.TerminalAllocs = append(in.TerminalAllocs, a)
			continue
		}
		in.LiveAllocs = append(in.LiveAllocs, a)
		if !known[a.NodeID] {
			in.TaintedNodes[a.NodeID] = nil
		}
	}
	for _, r := range f.Records {
		if r.D != nil && f.Job != nil && r.D.JobID == f.Job.ID && r.D.Namespace == f.Job.Namespace && r.D.JobVersion == f.Job.Version {
			in.Deployment = r.D
		}
	}
	return in
}

// reconcileRolloutFixture decodes a rollout fixture strictly and returns
// the plan and the decision as indented JSON. Decoding and input errors
// are bad input (exit code 2).
func reconcileRolloutFixture(data []byte) ([]byte, error) {
	out, err := runRolloutFixture(data)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the decision: %w", err)
	}
	return append(b, '\n'), nil
}

func runRolloutFixture(data []byte) (*rolloutOutput, error) {
	var fx rolloutFixture
	if err := model.Decode(data, &fx); err != nil {
		return nil, badInput(fmt.Errorf("decoding rollout fixture: %w", err))
	}
	switch {
	case fx.Job == nil:
		return nil, badInput(errors.New("decoding rollout fixture: job: missing"))
	case fx.Now.IsZero():
		return nil, badInput(errors.New("decoding rollout fixture: now: missing (RFC 3339 time)"))
	case fx.Self == "":
		return nil, badInput(errors.New("decoding rollout fixture: self: missing (the node deciding)"))
	}
	f := fx.facts()
	plan, err := reconcile.ReconcileNode(reconcileInput(&f), fx.Self)
	if err != nil {
		return nil, badInput(err)
	}
	f.Plan = plan
	dec := rollout.Decide(f)
	out := &rolloutOutput{Comment: fx.Comment, Plan: plan, Decision: dec, Transitions: []transitionResult{}}
	for _, t := range dec.Transitions {
		r := transitionResult{Kind: t.Kind, Version: t.Version, Reason: t.Reason}
		var cur *model.Deployment
		for _, rec := range f.Records {
			if rec.D != nil && rec.D.JobVersion == t.Version {
				cur = rec.D
			}
		}
		if cur == nil {
			r.Error = fmt.Sprintf("no record of version %d in the fixture", t.Version)
			out.Transitions = append(out.Transitions, r)
			continue
		}
		switch next, err := t.Apply(*cur); {
		case err != nil:
			r.Error = err.Error()
		case next == nil:
			r.NoOp = true
		default:
			r.Status, r.Desc = next.Status, next.StatusDescription
		}
		out.Transitions = append(out.Transitions, r)
	}
	return out, nil
}
