package policies

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/internal/policywire"
)

// This file adapts the engine to the reconciler: Module.Canary and
// Module.Completion run one decision on a module (a fault is returned), and
// Engine.ChooseCanaries and Engine.DecideCompletion implement
// reconcile.CanaryChooser and reconcile.CompletionDecider (a fault falls
// back to the native default and is reported).

var (
	_ reconcile.CanaryChooser     = (*Engine)(nil)
	_ reconcile.CompletionDecider = (*Engine)(nil)
)

// evaluate runs one decision's export with input and returns the answer's
// bytes, or a fault.
func (m *Module) evaluate(ctx context.Context, kind Kind, input []byte, now time.Time, seed uint64) ([]byte, *Fault) {
	inst, err := m.acquire(ctx)
	if err != nil {
		f, _ := AsFault(err)
		return nil, f
	}
	fn, name := inst.canary, exportCanary
	if kind == KindCompletion {
		fn, name = inst.completion, exportCompletion
	}
	out, err := m.call(ctx, inst, fn, name, input, now, seed)
	if err != nil {
		f, _ := AsFault(err)
		// A trap or a deadline poisons the instance; an invalid answer from
		// a healthy call does not, but the memory restore costs as much as
		// a check, so every fault discards.
		m.release(inst, false)
		return nil, f
	}
	m.release(inst, true)
	return out, nil
}

// evaluateEncoded encodes a decision's input with enc into a pooled
// buffer, evaluates it and gives the buffer back.
func (m *Module) evaluateEncoded(ctx context.Context, kind Kind, enc func([]byte) []byte, now time.Time, seed uint64) ([]byte, *Fault) {
	bp := m.engine.bufs.Get().(*[]byte)
	input := enc((*bp)[:0])
	raw, f := m.evaluate(ctx, kind, input, now, seed)
	*bp = input
	m.engine.bufs.Put(bp)
	return raw, f
}

// answerFault is the fault of an answer that did not decode: the policy's
// own error answer, or an invalid output.
func answerFault(err error) *Fault {
	var pe *policywire.PolicyError
	if errors.As(err, &pe) {
		reason := pe.Message
		if strings.TrimSpace(reason) == "" {
			// The fault is logged and attached to the deployment: it must
			// say something.
			reason = "the policy answered an error without a message"
		}
		return &Fault{Kind: FaultPolicyError, Reason: reason, Err: err}
	}
	return &Fault{Kind: FaultInvalidOutput, Reason: err.Error(), Err: err}
}

// Canary evaluates the module's canary policy on req and validates the
// answer. It does not fall back: a fault comes back as a *Fault.
func (m *Module) Canary(ctx context.Context, req reconcile.CanaryRequest) (reconcile.CanaryChoice, error) {
	if m.Kinds&KindCanary == 0 {
		return reconcile.CanaryChoice{}, &Fault{Kind: FaultNotLoaded, Reason: "the module implements no canary policy"}
	}
	fields, attr, meta := m.Manifest.keys(params(req.Policy), req.Eligible)
	raw, f := m.evaluateEncoded(ctx, KindCanary, func(b []byte) []byte { return appendCanaryInput(b, &req, fields, attr, meta) },
		time.Unix(0, 0), seedOf(req.DeploymentID, req.Group))
	if f != nil {
		return reconcile.CanaryChoice{}, f
	}
	out, err := policywire.DecodeCanaryOutput(raw)
	if err != nil {
		return reconcile.CanaryChoice{}, answerFault(err)
	}
	if err := validateCanary(&req, out); err != nil {
		return reconcile.CanaryChoice{}, &Fault{Kind: FaultInvalidOutput, Reason: err.Error(), Err: err}
	}
	return reconcile.CanaryChoice{NodeIDs: out.NodeIDs, Reason: out.Reason}, nil
}

// Completion evaluates the module's completion policy on in and validates
// the answer. It does not fall back: a fault comes back as a *Fault.
func (m *Module) Completion(ctx context.Context, in reconcile.CompletionInput) (reconcile.CompletionDecision, error) {
	if m.Kinds&KindCompletion == 0 {
		return reconcile.CompletionDecision{}, &Fault{Kind: FaultNotLoaded, Reason: "the module implements no completion policy"}
	}
	if m.ABI < 2 && in.Disruption != "" {
		// A version 1 module cannot be told that the guard holds, and its
		// verdict would read counts that are no evidence now: the guard
		// continues for it, as the default does.
		return reconcile.CompletionDecision{Decision: reconcile.DecisionContinue,
			Reason: "disruption guard holds: " + in.Disruption + " (not asked: the module's ABI version 1 input cannot carry it)"}, nil
	}
	var id string
	if in.Deployment != nil {
		id = in.Deployment.ID
	}
	raw, f := m.evaluateEncoded(ctx, KindCompletion, func(b []byte) []byte {
		ci := completionInput(&in)
		return policywire.AppendCompletionInput(b, &ci, m.ABI)
	},
		in.Now, seedOf(id, in.Now.String()))
	if f != nil {
		return reconcile.CompletionDecision{}, f
	}
	out, err := policywire.DecodeCompletionOutput(raw)
	if err != nil {
		return reconcile.CompletionDecision{}, answerFault(err)
	}
	if err := validateCompletion(&in, out); err != nil {
		return reconcile.CompletionDecision{}, &Fault{Kind: FaultInvalidOutput, Reason: err.Error(), Err: err}
	}
	return reconcile.CompletionDecision{Decision: reconcile.Decision(out.Decision.String()), Revert: out.Revert, Reason: out.Reason}, nil
}

// ChooseCanaries implements reconcile.CanaryChooser: req.Policy's module
// answers (nil: the native default); on a fault the native default answers
// and the fault is reported.
func (e *Engine) ChooseCanaries(ctx context.Context, req reconcile.CanaryRequest) (reconcile.CanaryChoice, error) {
	choice, fellBack := decide(e, KindCanary, "canary", req.Policy,
		func(m *Module) (reconcile.CanaryChoice, error) { return m.Canary(ctx, req) },
		func() reconcile.CanaryChoice { return NativeCanary(req) },
		func(f *Fault) { f.DeploymentID, f.JobID = req.DeploymentID, req.JobID })
	if fellBack {
		choice.Reason = "policy fault, native default: " + choice.Reason
	}
	return choice, nil
}

// DecideCompletion implements reconcile.CompletionDecider, with the same
// fallback as ChooseCanaries.
func (e *Engine) DecideCompletion(ctx context.Context, in reconcile.CompletionInput) (reconcile.CompletionDecision, error) {
	d, fellBack := decide(e, KindCompletion, "completion", in.Policy,
		func(m *Module) (reconcile.CompletionDecision, error) { return m.Completion(ctx, in) },
		func() reconcile.CompletionDecision { return NativeCompletion(in) },
		func(f *Fault) {
			if in.Deployment != nil {
				f.DeploymentID, f.JobID = in.Deployment.ID, in.Deployment.JobID
			}
		})
	if fellBack {
		d.Reason = "policy fault, native default: " + d.Reason
	}
	return d, nil
}

// decide is the shape of both decisions: no policy named, the native
// answer; else the named module's answer; on a fault (the module not
// loaded, or its evaluation failed) the fault, tagged with the decision by
// tag, is reported and the native answer is returned with fellBack set.
// Every evaluation is counted by decision and by who answered.
func decide[T any](e *Engine, kind Kind, decision string, ref *model.PolicyRef,
	eval func(*Module) (T, error), native func() T, tag func(*Fault)) (answer T, fellBack bool) {
	if ref == nil {
		e.evals.WithLabelValues(decision, "native").Inc()
		return native(), false
	}
	m, f := e.resolve(ref, kind)
	if f == nil {
		got, err := eval(m)
		if err == nil {
			e.evals.WithLabelValues(decision, "module").Inc()
			return got, false
		}
		f, _ = AsFault(err)
		f.Policy, f.Digest = ref.Name, m.Digest
	}
	f.Decision = decision
	tag(f)
	e.report(f)
	e.evals.WithLabelValues(decision, "fallback").Inc()
	return native(), true
}

// report logs, counts and hands on a fault.
func (e *Engine) report(f *Fault) {
	e.log.Warn("policy fault, using the native default",
		"policy", f.Policy, "policy_digest", f.Digest, "decision", f.Decision,
		"kind", string(f.Kind), "reason", f.Reason,
		"deployment_id", f.DeploymentID, "job", f.JobID)
	e.faults.WithLabelValues(f.Decision, string(f.Kind)).Inc()
	if e.opts.OnFault != nil {
		e.opts.OnFault(f)
	}
}
