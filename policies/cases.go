package policies

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
)

// EvalInput is one decision's input in JSON, as `hivelet policy eval` and
// the cases files of `hivelet policy test` take it: exactly one of Canary
// and Completion.
type EvalInput struct {
	Canary     *CanaryCase     `json:"canary,omitempty"`
	Completion *CompletionCase `json:"completion,omitempty"`
}

// CanaryCase is a canary request in JSON. Eligible nodes use the data
// model's node records; they are sorted by ID before evaluation, as the
// reconciler sends them.
type CanaryCase struct {
	JobID        string            `json:"job_id"`
	JobVersion   uint64            `json:"job_version"`
	DeploymentID string            `json:"deployment_id"`
	Group        string            `json:"group"`
	Percent      int               `json:"percent"`
	Count        int               `json:"count"`
	Eligible     []*model.Node     `json:"eligible"`
	Existing     []string          `json:"existing,omitempty"`
	Params       map[string]string `json:"params,omitempty"`
}

// CompletionCase is a completion input in JSON.
type CompletionCase struct {
	Deployment *model.Deployment      `json:"deployment"`
	Groups     map[string]GroupHealth `json:"groups"`
	// Disruption, when not empty, is why the disruption guard holds
	// (reconcile.CompletionInput.Disruption).
	Disruption string            `json:"disruption,omitempty"`
	Now        time.Time         `json:"now"`
	Params     map[string]string `json:"params,omitempty"`
}

// GroupHealth is reconcile.GroupHealth in JSON.
type GroupHealth struct {
	Placed          int  `json:"placed"`
	Healthy         int  `json:"healthy"`
	Unhealthy       int  `json:"unhealthy"`
	Pending         int  `json:"pending"`
	CanariesHealthy int  `json:"canaries_healthy"`
	LostInFlight    int  `json:"lost_in_flight"`
	Lost            int  `json:"lost"`
	Disconnected    int  `json:"disconnected"`
	Complete        bool `json:"complete"`
}

// Expect is an expected (or obtained) answer: node IDs for a canary
// decision, decision and revert for a completion decision, or a fault kind.
type Expect struct {
	NodeIDs  []string `json:"node_ids,omitempty"`
	Decision string   `json:"decision,omitempty"`
	Revert   bool     `json:"revert,omitempty"`
	Fault    string   `json:"fault,omitempty"`
}

// Want is what a case of a cases file asserts about the answer. The fields
// of Expect are compared exactly (node_ids in order, decision, revert,
// fault; an absent field asserts the zero value), except node_ids when the
// case states Chosen instead; the rest are properties. docs/policy-cases.md
// documents every field of a cases file.
type Want struct {
	Expect
	// ReasonContains lists substrings the decision's reason must each
	// contain (case-sensitive).
	ReasonContains []string `json:"reason_contains,omitempty"`
	// Chosen states properties of the chosen canary set instead of the
	// exact node_ids; with Chosen set and node_ids absent, the order and
	// the exact members are left free.
	Chosen *ChosenSet `json:"chosen,omitempty"`
}

// ChosenSet is a set of properties of a canary decision's chosen nodes.
// Every property given must hold; an empty ChosenSet asserts nothing.
type ChosenSet struct {
	// Count is the exact number of nodes chosen.
	Count *int `json:"count,omitempty"`
	// Includes are nodes that must be chosen.
	Includes []string `json:"includes,omitempty"`
	// Excludes are nodes that must not be chosen.
	Excludes []string `json:"excludes,omitempty"`
	// Within, if given, holds every node that may be chosen.
	Within []string `json:"within,omitempty"`
}

// Check lists how an outcome fails the case (empty: it passes).
func (w Want) Check(out Outcome) []string {
	exact := w.Expect
	if w.Chosen != nil && exact.NodeIDs == nil {
		exact.NodeIDs = out.Got.NodeIDs // left free: checked by Chosen
	}
	d := exact.Diff(out.Got)
	for _, sub := range w.ReasonContains {
		if !strings.Contains(out.Reason, sub) {
			d = append(d, fmt.Sprintf("reason: want it to contain %q, got %q", sub, out.Reason))
		}
	}
	if c := w.Chosen; c != nil {
		got := out.Got.NodeIDs
		if c.Count != nil && len(got) != *c.Count {
			d = append(d, fmt.Sprintf("chosen: want %d nodes, got %d (%v)", *c.Count, len(got), got))
		}
		for _, id := range c.Includes {
			if !slices.Contains(got, id) {
				d = append(d, fmt.Sprintf("chosen: want %s among %v", id, got))
			}
		}
		for _, id := range c.Excludes {
			if slices.Contains(got, id) {
				d = append(d, fmt.Sprintf("chosen: want %s not among %v", id, got))
			}
		}
		if c.Within != nil {
			for _, id := range got {
				if !slices.Contains(c.Within, id) {
					d = append(d, fmt.Sprintf("chosen: %s is not within %v", id, c.Within))
				}
			}
		}
	}
	return d
}

// Case is one row of a cases file.
type Case struct {
	Name  string    `json:"name"`
	Input EvalInput `json:"input"`
	Want  Want      `json:"want"`
}

// CaseFile is the format of `hivelet policy test`'s cases file
// (docs/policy-cases.md). Decode it with DecodeStrict: an unknown field
// must refuse the file, or a misspelt assertion would assert nothing.
type CaseFile struct {
	Cases []Case `json:"cases"`
}

// DecodeStrict decodes JSON refusing unknown fields and trailing data.
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// Validate checks an input names exactly one decision.
func (in *EvalInput) Validate() error {
	if (in.Canary == nil) == (in.Completion == nil) {
		return errors.New(`an input holds exactly one of "canary" and "completion"`)
	}
	if in.Completion != nil && in.Completion.Deployment == nil {
		return errors.New("a completion input needs a deployment")
	}
	return nil
}

// CanaryRequest converts the case for the module named name.
func (c *CanaryCase) CanaryRequest(name string) reconcile.CanaryRequest {
	eligible := slices.Clone(c.Eligible)
	slices.SortFunc(eligible, func(a, b *model.Node) int { return strings.Compare(a.ID, b.ID) })
	existing := slices.Clone(c.Existing)
	slices.Sort(existing)
	return reconcile.CanaryRequest{JobID: c.JobID, JobVersion: c.JobVersion, DeploymentID: c.DeploymentID, Group: c.Group,
		Percent: c.Percent, Count: c.Count, Eligible: eligible, Existing: existing,
		Policy: &model.PolicyRef{Name: name, Params: c.Params}}
}

// CompletionInput converts the case for the module named name.
func (c *CompletionCase) CompletionInput(name string) reconcile.CompletionInput {
	groups := make(map[string]reconcile.GroupHealth, len(c.Groups))
	for n, g := range c.Groups {
		groups[n] = reconcile.GroupHealth(g)
	}
	return reconcile.CompletionInput{Deployment: c.Deployment, Groups: groups, Now: c.Now, Disruption: c.Disruption,
		Policy: &model.PolicyRef{Name: name, Params: c.Params}}
}

// Outcome is the result of one evaluation.
type Outcome struct {
	Got    Expect
	Reason string
	Took   time.Duration
	Fault  *Fault
}

// Eval evaluates one input on the module, without fallback: a fault is
// returned in the outcome.
func (m *Module) Eval(ctx context.Context, in EvalInput) (Outcome, error) {
	if err := in.Validate(); err != nil {
		return Outcome{}, err
	}
	var out Outcome
	start := time.Now()
	var err error
	if in.Canary != nil {
		var c reconcile.CanaryChoice
		c, err = m.Canary(ctx, in.Canary.CanaryRequest(m.Name))
		out.Got, out.Reason = Expect{NodeIDs: c.NodeIDs}, c.Reason
	} else {
		var d reconcile.CompletionDecision
		d, err = m.Completion(ctx, in.Completion.CompletionInput(m.Name))
		out.Got, out.Reason = Expect{Decision: string(d.Decision), Revert: d.Revert}, d.Reason
	}
	out.Took = time.Since(start)
	if f, ok := AsFault(err); ok {
		f.Policy, f.Digest = m.Name, m.Digest
		out.Fault, out.Got = f, Expect{Fault: string(f.Kind)}
	} else if err != nil {
		return out, err
	}
	return out, nil
}

// Diff lists how got differs from want (empty: they agree).
func (want Expect) Diff(got Expect) []string {
	var d []string
	if want.Fault != got.Fault {
		d = append(d, fmt.Sprintf("fault: want %q, got %q", want.Fault, got.Fault))
	}
	if !slices.Equal(want.NodeIDs, got.NodeIDs) {
		d = append(d, fmt.Sprintf("node_ids: want %v, got %v", want.NodeIDs, got.NodeIDs))
	}
	if want.Decision != got.Decision {
		d = append(d, fmt.Sprintf("decision: want %q, got %q", want.Decision, got.Decision))
	}
	if want.Revert != got.Revert {
		d = append(d, fmt.Sprintf("revert: want %v, got %v", want.Revert, got.Revert))
	}
	return d
}
