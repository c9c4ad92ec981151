package rollout

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
)

// The transition functions below are the record's compare-and-set bodies
// (docs/rollout.md, "The protocol's transitions"). Each takes the record just read (a copy the
// function may change) and returns the record to write, nil when there is
// nothing to write (already done: a lost race that the winner settled), or
// an error when the transition is refused on that record. Each re-checks
// I4 on what it read, so a queued write is re-decided, never replayed.

// ErrRefused wraps every refusal (a terminal record, promotion without
// healthy canaries, ...).
var ErrRefused = errors.New("refused")

func refused(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, a...))
}

// clone copies the record deeply enough for a transition to change it.
func clone(d model.Deployment) *model.Deployment { return d.Clone() }

func event(d *model.Deployment, now time.Time, kind, msg string) {
	d.Events = model.AppendDeploymentEvent(d.Events, model.DeploymentEvent{Time: now, Kind: kind, Message: msg})
}

func touch(d *model.Deployment, now time.Time, nonce string) {
	// Monotonic: a queued CAS whose facts are older than the record it
	// read still moves its modify time forward (readers compare it).
	if !now.After(d.ModifyTime) {
		now = d.ModifyTime.Add(time.Microsecond)
	}
	d.ModifyTime = now
	if nonce != "" {
		d.Nonce = nonce
	}
}

// Cancel is T2 (and the stopped job's cancel): the record of an older
// version is cancelled by an agent that read a strictly newer job (I3), or
// a stopped job's record by an agent that read the stop.
func Cancel(cur model.Deployment, job *model.Job, now time.Time, nonce string) (*model.Deployment, error) {
	if !cur.Status.Active() {
		return nil, nil
	}
	if job == nil || job.ID != cur.JobID || job.Namespace != cur.Namespace {
		return nil, refused("deployment %s is not of this job", cur.ID)
	}
	desc := ""
	switch {
	case job.Version > cur.JobVersion:
		desc = model.DescNewerJob
	case job.Stop && job.Version == cur.JobVersion:
		desc = model.DescStoppedJob
	default:
		return nil, refused("job version %d does not supersede deployment of version %d", job.Version, cur.JobVersion)
	}
	d := clone(cur)
	d.Status, d.StatusDescription = model.DeploymentCancelled, desc
	touch(d, now, nonce)
	return d, nil
}

// Pause is T3 (running → paused): no new slot is taken while paused, and
// the deadlines stop.
func Pause(cur model.Deployment, now time.Time, nonce string) (*model.Deployment, error) {
	switch cur.Status {
	case model.DeploymentPaused:
		return nil, nil
	case model.DeploymentRunning:
	default:
		return nil, refused("deployment %s is %s, not running", cur.ID, cur.Status)
	}
	d := clone(cur)
	d.Status, d.StatusDescription, d.PausedAt = model.DeploymentPaused, model.DescPaused, now
	event(d, now, model.EventPaused, "paused")
	touch(d, now, nonce)
	return d, nil
}

// Resume is T3 (paused → running): every deadline moves by the time paused.
func Resume(cur model.Deployment, now time.Time, nonce string) (*model.Deployment, error) {
	switch cur.Status {
	case model.DeploymentRunning:
		return nil, nil
	case model.DeploymentPaused:
	default:
		return nil, refused("deployment %s is %s, not paused", cur.ID, cur.Status)
	}
	d := clone(cur)
	paused := time.Duration(0)
	if !d.PausedAt.IsZero() && now.After(d.PausedAt) {
		paused = now.Sub(d.PausedAt)
	}
	for _, st := range d.TaskGroups {
		if !st.RequireProgressBy.IsZero() {
			st.RequireProgressBy = st.RequireProgressBy.Add(paused)
		}
	}
	d.PausedTotal += model.Duration(paused)
	d.PausedAt = time.Time{}
	d.Status, d.StatusDescription = model.DeploymentRunning, runningDescription(d)
	event(d, now, model.EventResumed, "resumed after "+paused.Round(time.Millisecond).String())
	touch(d, now, nonce)
	return d, nil
}

// runningDescription is the description of a running record: whether it
// waits for promotion.
func runningDescription(d *model.Deployment) string {
	needs, auto := false, true
	for _, st := range d.TaskGroups {
		if canarying(st) {
			needs = true
			auto = auto && st.AutoPromote
		}
	}
	switch {
	case needs && auto:
		return model.DescAutoPromotionPending
	case needs:
		return model.DescNeedsPromotion
	}
	return model.DescRunning
}

// Promote is T4: promote the canarying groups named (all of them when
// groups is empty) when each has at least its desired canaries healthy
// (counts derived by the caller from the allocations); else refused, saying
// "group G has h/n healthy canaries". The progress deadline restarts.
func Promote(cur model.Deployment, counts map[string]Counts, groups []string, by string, now time.Time, nonce string) (*model.Deployment, error) {
	if cur.Status != model.DeploymentRunning {
		return nil, refused("deployment %s is %s, not running", cur.ID, cur.Status)
	}
	names := groups
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(cur.TaskGroups))
	}
	d := clone(cur)
	var promoted []string
	for _, name := range names {
		st := d.TaskGroups[name]
		if st == nil {
			return nil, refused("deployment %s has no group %q", cur.ID, name)
		}
		if !canarying(st) {
			continue
		}
		h := counts[name].CanariesHealthy
		if h < st.DesiredCanaries {
			return nil, refused("group %s has %d/%d healthy canaries", name, h, st.DesiredCanaries)
		}
		st.Promoted, st.PromotedAt, st.PromotedBy = true, now, by
		if st.ProgressDeadline > 0 {
			st.RequireProgressBy = now.Add(st.ProgressDeadline.D())
		}
		promoted = append(promoted, name)
	}
	if len(promoted) == 0 {
		if len(groups) > 0 {
			return nil, refused("group %s is not waiting for promotion", strings.Join(groups, ", "))
		}
		return nil, nil
	}
	d.StatusDescription = runningDescription(d)
	event(d, now, model.EventPromoted, "groups "+strings.Join(promoted, ", ")+" promoted by "+by)
	touch(d, now, nonce)
	return d, nil
}

// Fail is T11: the record fails with reason. With revert, the newest
// stable version older than the record's (stable; nil when there is none)
// becomes a pending revert, or the revert says why there is none.
func Fail(cur model.Deployment, reason string, revert bool, stable *uint64, now time.Time, nonce string) (*model.Deployment, error) {
	if cur.Status != model.DeploymentRunning && cur.Status != model.DeploymentPaused {
		if cur.Status == model.DeploymentFailed {
			return nil, nil
		}
		return nil, refused("deployment %s is %s", cur.ID, cur.Status)
	}
	d := clone(cur)
	d.Status, d.StatusDescription = model.DeploymentFailed, reason
	d.PausedAt = time.Time{}
	if revert {
		switch {
		case stable == nil:
			d.Revert = &model.DeploymentRevert{Status: model.RevertNone, Reason: "no stable version to revert to"}
		case *stable >= cur.JobVersion:
			d.Revert = &model.DeploymentRevert{Status: model.RevertNone, Reason: fmt.Sprintf("stable version %d is not older", *stable)}
		default:
			d.Revert = &model.DeploymentRevert{Status: model.RevertPending, ToVersion: *stable}
		}
	}
	msg := reason
	if d.Revert != nil {
		switch d.Revert.Status {
		case model.RevertPending:
			msg += fmt.Sprintf("; reverting to version %d", d.Revert.ToVersion)
		default:
			msg += "; not reverting: " + d.Revert.Reason
		}
	}
	event(d, now, model.EventFailed, msg)
	touch(d, now, nonce)
	return d, nil
}

// RevertSettled is the end of T12: a pending revert becomes done (written
// as version as), abandoned (an operator's newer version won; why says
// so), or none (nothing to do; why).
func RevertSettled(cur model.Deployment, status model.RevertStatus, as uint64, why string, now time.Time, nonce string) (*model.Deployment, error) {
	if cur.Revert == nil || cur.Revert.Status != model.RevertPending {
		return nil, nil
	}
	d := clone(cur)
	d.Revert.Status, d.Revert.AsVersion, d.Revert.Reason = status, as, why
	msg := string(status)
	switch status {
	case model.RevertDone:
		msg = fmt.Sprintf("reverted to the spec of version %d as version %d", d.Revert.ToVersion, as)
	default:
		msg += ": " + why
	}
	event(d, now, model.EventRevert, msg)
	touch(d, now, nonce)
	return d, nil
}

// StartClock is T6: the progress deadline of each group with a slot taken
// for this record starts at the earliest such slot's server time. A group
// that takes no slot (a first rollout: nothing to replace, only
// placements) starts it at now, once allocations of the version are
// placed and nothing is outdated or in flight.
func StartClock(cur model.Deployment, slots []Slot, counts map[string]Counts, now time.Time, nonce string) (*model.Deployment, error) {
	if cur.Status != model.DeploymentRunning {
		return nil, nil
	}
	d := clone(cur)
	changed := false
	for name, st := range d.TaskGroups {
		if st.ProgressDeadline <= 0 || !st.RequireProgressBy.IsZero() {
			continue
		}
		var first time.Time
		for _, s := range slots {
			if s.Slot.DeploymentID == d.ID && s.Slot.Group == name && !s.Time.IsZero() && (first.IsZero() || s.Time.Before(first)) {
				first = s.Time
			}
		}
		if first.IsZero() && placedOnly(counts[name]) {
			first = now
		}
		if first.IsZero() {
			continue
		}
		st.RequireProgressBy = first.Add(st.ProgressDeadline.D())
		changed = true
	}
	if !changed {
		return nil, nil
	}
	touch(d, now, nonce)
	return d, nil
}

// Progress is T9: a group whose derived healthy count is above the
// record's watermark (HealthyAllocs) moves the watermark, and its progress
// deadline (once started) to now + progress_deadline.
func Progress(cur model.Deployment, counts map[string]Counts, now time.Time, nonce string) (*model.Deployment, error) {
	if cur.Status != model.DeploymentRunning {
		return nil, nil
	}
	d := clone(cur)
	changed := false
	for name, st := range d.TaskGroups {
		c, ok := counts[name]
		if !ok || c.Healthy <= st.HealthyAllocs {
			continue
		}
		st.HealthyAllocs = c.Healthy
		if st.ProgressDeadline > 0 && !st.RequireProgressBy.IsZero() {
			st.RequireProgressBy = now.Add(st.ProgressDeadline.D())
		}
		changed = true
	}
	if !changed {
		return nil, nil
	}
	touch(d, now, nonce)
	return d, nil
}

// CompletionInput is the completion policy's input for record d: the
// derived counts as the policy's group health. A group is Complete only on
// positive evidence (Counts.Complete).
func CompletionInput(d *model.Deployment, counts map[string]Counts, policy *model.PolicyRef, now time.Time, disruption string) reconcile.CompletionInput {
	groups := make(map[string]reconcile.GroupHealth, len(counts))
	for name, c := range counts {
		groups[name] = reconcile.GroupHealth{Placed: c.Placed, Healthy: c.Healthy, Unhealthy: c.Unhealthy,
			Pending: c.Pending, CanariesHealthy: c.CanariesHealthy, LostInFlight: c.LostInFlight,
			Lost: c.Lost, Disconnected: c.Disconnected, Complete: c.Complete}
	}
	// The default policy compares Healthy with DesiredTotal: give it the
	// derived desired total, not the one stored at creation.
	dd := clone(*d)
	for name, st := range dd.TaskGroups {
		if c, ok := counts[name]; ok {
			st.DesiredTotal = c.Desired
		}
	}
	return reconcile.CompletionInput{Deployment: dd, Groups: groups, Policy: policy, Now: now, Disruption: disruption}
}

// ApplyVerdict applies a completion policy's verdict (T4 promote by the
// steward, T10 succeed, T11 fail) to the record just read, re-checking the
// verdict's preconditions on it: a promotion still needs the healthy
// canaries, a success the positive evidence of every group. During a
// disruption the policy was told (its input says so; the default
// continues), and a success is never applied: live nodes that look
// complete while many nodes just went away are no evidence.
func ApplyVerdict(cur model.Deployment, counts map[string]Counts, v reconcile.CompletionDecision, disruption bool, stable *uint64, by string, now time.Time, nonce string) (*model.Deployment, error) {
	if cur.Status != model.DeploymentRunning || disruption && v.Decision == reconcile.DecisionSucceed {
		return nil, nil
	}
	switch v.Decision {
	case reconcile.DecisionPromote:
		d, err := Promote(cur, counts, nil, by, now, nonce)
		if errors.Is(err, ErrRefused) {
			return nil, nil // the policy was early: the next round asks again
		}
		return d, err
	case reconcile.DecisionSucceed:
		for name := range cur.TaskGroups {
			if !counts[name].Complete {
				return nil, nil // no positive evidence on this record: not complete
			}
		}
		d := clone(cur)
		d.Status = model.DeploymentSuccessful
		d.StatusDescription = BoundReason(v.Reason)
		if d.StatusDescription == "" {
			d.StatusDescription = model.DescSuccessful
		}
		touch(d, now, nonce)
		return d, nil
	case reconcile.DecisionFail:
		reason := BoundReason(v.Reason)
		if reason == "" {
			reason = model.DescFailedAllocations
		}
		return Fail(cur, reason, v.Revert, stable, now, nonce)
	}
	return nil, nil
}

// placedOnly reports that a group's rollout is placements alone: some are
// placed and nothing is left to replace or in flight, so no slot will ever
// start its progress clock.
func placedOnly(c Counts) bool {
	return c.Placed > 0 && c.Outdated == 0 && c.InFlight == 0
}

// MaxReason bounds the text of a policy's answer (a reason, an error) as a
// record stores it. A module may answer up to 16 MiB; the record, with its
// events (a canary reason is quoted in one), must fit in one NATS message
// (1 MiB by default), or every write of it fails and the rollout stops
// where it is (found by the rollout fault suite: a completion policy's
// 2 MiB reason kept a deployment from ever succeeding).
const MaxReason = 1024

// BoundReason returns s if it fits in MaxReason bytes, else its first
// bytes (cut at a character boundary) and how long it was.
func BoundReason(s string) string {
	if len(s) <= MaxReason {
		return s
	}
	cut := MaxReason
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes, cut to %d)", s[:cut], len(s), cut)
}
