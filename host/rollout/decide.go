package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
)

// Transition is one compare-and-set on a deployment record: Apply is the
// pure transition re-run on the record the CAS just read.
type Transition struct {
	Kind string `json:"kind"`
	// Version is the job version of the record (its key).
	Version uint64                                                `json:"version"`
	Reason  string                                                `json:"reason,omitempty"`
	Apply   func(cur model.Deployment) (*model.Deployment, error) `json:"-"`
}

// Take is a slot this node may try to take (T5): create-if-absent with TTL.
type Take struct {
	Key   string          `json:"key"`
	Slot  model.Slot      `json:"slot"`
	TTL   time.Duration   `json:"ttl"`
	Entry reconcile.Entry `json:"entry"`
	Rank  int             `json:"rank"`
	// Handoff: taken on a release hint, as queued on the slot by the
	// summary (HandoffProtocol), not as admitted by it.
	Handoff bool `json:"handoff,omitempty"`
}

// Held is a plan entry this node does not act on now, and why.
type Held struct {
	Entry  reconcile.Entry `json:"entry"`
	Reason string          `json:"reason"`
	// Unlisted: a narrowed node's update that the steward's summary does
	// not rank: a waiter not among the first it lists (or with no summary
	// yet), or a node outside the canary set before the promotion (which
	// it never lists). Only a summary that lists the node, or a change of
	// the record, can let it go: another summary that does not list it is
	// no news to it.
	Unlisted bool `json:"unlisted,omitempty"`
}

// Create is a record to create (T1) once the canary policy answered each
// request.
type Create struct {
	Proposal *model.Deployment         `json:"proposal"`
	Canaries []reconcile.CanaryRequest `json:"canaries,omitempty"`
	Rank     int                       `json:"rank"`
	// GroupCount is each group's count (desired canaries = nodes × count).
	GroupCount map[string]int `json:"group_count,omitempty"`
}

// RevertWork is a pending revert this agent should write (T12): the job
// key still holds the failed version, so a new version with the stable
// spec is written, then the record says "revert done".
type RevertWork struct {
	FailedVersion uint64 `json:"failed_version"`
	ToVersion     uint64 `json:"to_version"`
}

// Decision is what one node does for one job now.
type Decision struct {
	// Hold, when set, says why this node plans nothing and writes nothing
	// for the job (I3: a stale job view; a record it cannot decode).
	Hold string `json:"hold,omitempty"`
	// Record is the stored record of the job's version, if any.
	Record *Record `json:"record,omitempty"`
	// Counts are the record's derived counts per group.
	Counts map[string]Counts `json:"counts,omitempty"`
	// Create asks for the canary choices, then the record's creation.
	Create *Create `json:"create,omitempty"`
	// RetryIn says when to decide again (a creator's rank delay, a
	// deputy's wait), 0 for "on the next change".
	RetryIn time.Duration `json:"retry_in,omitempty"`
	// Transitions are the record CASes to attempt (cancel, clock,
	// progress, lost canary).
	Transitions []Transition `json:"transitions,omitempty"`
	// Verdict: this agent is the acting steward of the running record and
	// should ask the completion policy, then apply its answer with
	// ApplyVerdict inside a CAS.
	Verdict bool `json:"verdict,omitempty"`
	// Revert is a pending revert to write.
	Revert *RevertWork `json:"revert,omitempty"`
	// Summary is the job's rollout summary to write (the steward's duty,
	// at most once per SummaryEvery).
	Summary *model.RolloutSummary `json:"summary,omitempty"`
	// CanaryReplace asks the canary policy to replace a canary node lost
	// before promotion; the loop applies the answer with ReplaceCanary.
	CanaryReplace *CanaryReplacement `json:"canary_replace,omitempty"`
	// Takes, Releases (own slots, T7) and Reclaims (T8, as steward).
	Takes    []Take `json:"takes,omitempty"`
	Releases []Slot `json:"releases,omitempty"`
	Reclaims []Slot `json:"reclaims,omitempty"`
	// The plan entries this node acts on now: placements, in-place
	// updates, and the destructive updates licensed by a held slot (stop
	// now; the replacement is placed once the stop is done).
	Place   []reconcile.Entry `json:"place,omitempty"`
	InPlace []reconcile.Entry `json:"in_place,omitempty"`
	Stop    []reconcile.Entry `json:"stop,omitempty"`
	// PlaceStable are placements on a node that joined during an
	// unpromoted canary phase: they run StableVersion, not the job's.
	PlaceStable   []reconcile.Entry `json:"place_stable,omitempty"`
	StableVersion uint64            `json:"stable_version,omitempty"`
	// Held are the entries not acted on now, with the reason.
	Held []Held `json:"held,omitempty"`
	// Steward is the record's steward; StewardRank this node's rank among
	// the candidates (0 steward, k deputy k, -1 not a candidate).
	Steward     string `json:"steward,omitempty"`
	StewardRank int    `json:"steward_rank"`
	// Due are the steward duties due now that this node, a deputy, may
	// not act on yet (the loop times them for Facts.Overdue).
	Due []string `json:"due,omitempty"`
	// Disruption is the disruption guard's reason while it holds.
	Disruption string `json:"disruption,omitempty"`
}

// StableVersion returns the newest version older than v whose deployment
// succeeded, from the records held (nil: none).
func StableVersion(records []Record, v uint64) *uint64 {
	var best *uint64
	for _, r := range records {
		if r.D == nil || r.D.Status != model.DeploymentSuccessful || r.D.JobVersion >= v {
			continue
		}
		if best == nil || r.D.JobVersion > *best {
			x := r.D.JobVersion
			best = &x
		}
	}
	return best
}

// SlotTTL is a slot's TTL for a group: kill_timeout + healthy_deadline + 30 s.
func SlotTTL(g *model.Group) time.Duration {
	kill := 5 * time.Second
	for _, t := range g.Tasks {
		if d := t.KillTimeout.D(); d > kill {
			kill = d
		}
	}
	healthy := 5 * time.Minute
	if g.Update != nil && g.Update.HealthyDeadline > 0 {
		healthy = g.Update.HealthyDeadline.D()
	}
	return kill + healthy + SlotGrace
}

// Decide is the protocol's decision for one job on this node.
func Decide(f Facts) Decision {
	dec := Decision{StewardRank: -1}
	job := f.Job
	if job == nil || f.Plan == nil {
		dec.Hold = "no job or no plan"
		return dec
	}
	nonce := f.Nonce
	var rec *Record
	for i := range f.Records {
		r := f.Records[i]
		if r.D == nil {
			if r.Rejected != "" {
				dec.Hold = "a deployment record of this job cannot be decoded: " + r.Rejected
				return dec
			}
			continue
		}
		if r.D.JobVersion > job.Version {
			// I3: this node's job view is stale.
			dec.Hold = fmt.Sprintf("stale job view: a deployment of version %d exists and this node holds version %d", r.D.JobVersion, job.Version)
			return dec
		}
		if r.D.Protocol > Protocol {
			dec.Hold = fmt.Sprintf("deployment %s speaks rollout protocol %d; this agent speaks %d", r.D.ID, r.D.Protocol, Protocol)
			return dec
		}
		if r.D.JobVersion == job.Version {
			if r.Rejected != "" {
				dec.Hold = "the deployment record of this version cannot be decoded: " + r.Rejected
				return dec
			}
			rec = &f.Records[i]
			continue
		}
		// An older version's record.
		if r.D.Status.Active() {
			dec.Transitions = append(dec.Transitions, Transition{Kind: "cancel", Version: r.D.JobVersion, Reason: model.DescNewerJob,
				Apply: func(cur model.Deployment) (*model.Deployment, error) { return Cancel(cur, job, f.Now, nonce) }})
		}
		if r.D.Revert != nil && r.D.Revert.Status == model.RevertPending {
			why := fmt.Sprintf("version %d was pushed before the revert was written", job.Version)
			if job.RevertOf != nil && *job.RevertOf == r.D.Revert.ToVersion {
				why = "" // this very version is the revert: record it as done
			}
			dec.Transitions = append(dec.Transitions, Transition{Kind: "revert_settled", Version: r.D.JobVersion, Reason: why,
				Apply: func(cur model.Deployment) (*model.Deployment, error) {
					if why == "" {
						return RevertSettled(cur, model.RevertDone, job.Version, "", f.Now, nonce)
					}
					return RevertSettled(cur, model.RevertAbandoned, 0, why, f.Now, nonce)
				}})
		}
	}
	dec.Record = rec
	plan := f.Plan
	f.releases(&dec, rec)
	if job.Stop {
		if rec != nil && rec.D.Status.Active() {
			dec.Transitions = append(dec.Transitions, Transition{Kind: "cancel", Version: rec.D.JobVersion, Reason: model.DescStoppedJob,
				Apply: func(cur model.Deployment) (*model.Deployment, error) { return Cancel(cur, job, f.Now, nonce) }})
		}
		return dec // a stopped job only stops: the agent applies plan.Stop itself
	}
	if rec == nil {
		if !plan.DeploymentCreated || plan.Deployment == nil {
			// No rollout for this version (no update strategy, max_parallel
			// 0, sysbatch, a re-placement of a version that already ran):
			// the plan as it is, no slots.
			f.noRollout(&dec)
			return dec
		}
		f.create(&dec, plan.Deployment)
		return dec
	}
	d := rec.D
	var counts map[string]Counts
	if !f.Narrow {
		// A narrowed view cannot count the fleet: only the nodes that
		// watch derive the counts (and the summary from them).
		counts = Derive(d, &f)
		dec.Counts = counts
	}
	f.steward(&dec, rec, counts)
	f.nodeActions(&dec, d, counts)
	return dec
}

// noRollout licenses the plan's entries as they are.
func (f *Facts) noRollout(dec *Decision) {
	for _, e := range f.Plan.Place {
		f.place(dec, e)
	}
	for _, e := range f.Plan.Update {
		if f.InPlace[e.AllocID] {
			dec.InPlace = append(dec.InPlace, e)
		} else {
			dec.Stop = append(dec.Stop, e)
		}
	}
}

func (f *Facts) place(dec *Decision, e reconcile.Entry) {
	if f.FailedHere[e.PreviousAllocID] {
		dec.Held = append(dec.Held, Held{Entry: e, Reason: "the restart policy gave up on this version here; a new version places again"})
		return
	}
	dec.Place = append(dec.Place, e)
}

// create proposes the record (T1) once this node's rank delay has passed;
// until the record is stored nothing of the version is placed or updated
// (I2).
func (f *Facts) create(dec *Decision, proposal *model.Deployment) {
	hold := fmt.Sprintf("waiting for the deployment record of version %d", f.Job.Version)
	// The record is created at the lowest level every eligible node speaks;
	// this agent knows one level, so a node below it holds the creation
	// (it would follow rules of its own).
	blocked := false
	for _, n := range f.Nodes {
		if n.Live && n.Eligible && n.Protocol < Protocol {
			hold = fmt.Sprintf("node %s speaks rollout protocol %d, not %d: no fleet rollout can be created", n.ID, n.Protocol, Protocol)
			blocked = true
			break
		}
	}
	first := StableVersion(f.Records, f.Job.Version) == nil
	for _, e := range f.Plan.Place {
		if first {
			// A first rollout places at once (nothing is replaced, and with
			// no stable version there is nothing else a node could run);
			// the record counts these allocations by their version.
			f.place(dec, e)
			continue
		}
		dec.Held = append(dec.Held, Held{Entry: e, Reason: hold})
	}
	for _, e := range f.Plan.Update {
		dec.Held = append(dec.Held, Held{Entry: e, Reason: hold})
	}
	if blocked || f.Narrow {
		// A node without the fleet's allocations cannot tell whether the
		// version has anything to canary: the nodes that watch create.
		return
	}
	rank, _ := f.rankLive(RankingKey(f.Job.Namespace, f.Job.ID, f.Job.Version), f.Self, true)
	delay := min(time.Duration(rank)*CreateStep, CreateMax)
	if f.SinceSeen < delay {
		dec.RetryIn = delay - f.SinceSeen
		return
	}
	p := clone(*proposal)
	p.Protocol = Protocol
	p.CreatedBy = f.Self
	p.Nonce = f.Nonce
	p.Status = model.DeploymentRunning
	p.CreateTime, p.ModifyTime = f.Now, f.Now
	p.Events = nil
	if f.Job.RevertOf != nil {
		v := *f.Job.RevertOf
		p.RevertOf = &v
	}
	ready := f.readyNodes()
	c := &Create{Proposal: p, Rank: rank, GroupCount: map[string]int{}}
	for _, name := range slices.Sorted(mapsKeys(p.TaskGroups)) {
		st := p.TaskGroups[name]
		st.RequireProgressBy = time.Time{} // T1: the clock starts at the first slot
		st.CanaryNodes, st.DesiredCanaries, st.PlacedCanaries = nil, 0, nil
		st.Promoted = false
		g := groupOf(f.Job, name)
		if g == nil || g.Update == nil {
			continue
		}
		st.MaxParallel = g.Update.MaxParallel
		c.GroupCount[name] = g.Count
		if g.Update.Canary <= 0 || f.Job.RevertOf != nil || !f.outdated(name) {
			// No canary phase: none asked for, a revert (its spec is known
			// good), or nothing to roll out (a first version is placed,
			// not canaried).
			continue
		}
		count := (g.Update.Canary*len(ready) + 99) / 100
		c.Canaries = append(c.Canaries, reconcile.CanaryRequest{
			JobID: f.Job.ID, JobVersion: f.Job.Version, DeploymentID: p.ID, Group: name,
			Percent: g.Update.Canary, Count: count, Eligible: ready, Policy: g.Update.CanaryPolicy,
		})
	}
	p.StatusDescription = model.DescRunning
	dec.Create = c
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// readyNodes are the live ready nodes' records, sorted by ID: the canary
// policy's candidates.
func (f *Facts) readyNodes() []*model.Node {
	var out []*model.Node
	for _, n := range f.Nodes {
		if n.Live && n.Ready && n.Eligible {
			r := n.Record
			if r == nil {
				r = &model.Node{ID: n.ID, Attributes: map[string]string{}, Meta: map[string]string{}}
			}
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *model.Node) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// CanaryAnswer is the loop's answer to one canary request: the policy's
// choice, or the error that made the loop use the default.
type CanaryAnswer struct {
	Choice reconcile.CanaryChoice
	Err    error
	// PolicyName names the policy asked ("default" for the built-in).
	PolicyName string
}

// CreateRecord completes a Create with the canary policy's answers (by
// group): each answer is checked against its request (at most Count
// nodes, only eligible ones, no repeats, a reason when fewer), a bad one
// is replaced by the built-in default's with the refusal as the reason,
// and the set is stored sorted, once (I4).
func CreateRecord(c *Create, answers map[string]CanaryAnswer) *model.Deployment {
	d := clone(*c.Proposal)
	for _, req := range c.Canaries {
		st := d.TaskGroups[req.Group]
		if st == nil {
			continue
		}
		a := answers[req.Group]
		name := a.PolicyName
		if name == "" {
			name = "default"
		}
		choice, why := a.Choice, ""
		switch {
		case a.Err != nil:
			why = "canary policy failed: " + a.Err.Error()
		default:
			why = reconcile.ValidateCanaryChoice(req, choice)
			if why != "" {
				why = "canary policy answer refused: " + why
			}
		}
		reason := BoundReason(choice.Reason)
		why = BoundReason(why)
		if why != "" {
			choice = reconcile.DefaultCanaries(req)
			reason = why + "; the built-in default chose instead"
			d.Events = model.AppendDeploymentEvent(d.Events, model.DeploymentEvent{Time: d.CreateTime, Kind: model.EventPolicyFault,
				Message: fmt.Sprintf("group %s: %s", req.Group, why)})
		}
		nodes := slices.Sorted(slices.Values(choice.NodeIDs))
		nodes = slices.Compact(nodes)
		st.CanaryNodes = nodes
		st.DesiredCanaries = len(nodes) * max(c.GroupCount[req.Group], 1)
		st.CanaryPolicy = name
		if reason == "" && len(nodes) < req.Count {
			reason = fmt.Sprintf("chose %d of %d nodes asked", len(nodes), req.Count)
		}
		if reason == "" {
			reason = fmt.Sprintf("chose %d of %d ready nodes (%d%%)", len(nodes), len(req.Eligible), req.Percent)
		}
		st.CanaryReason = reason
		d.Events = model.AppendDeploymentEvent(d.Events, model.DeploymentEvent{Time: d.CreateTime, Kind: model.EventCanary,
			Message: fmt.Sprintf("group %s: canary nodes %s by %s: %s", req.Group, strings.Join(nodes, ", "), name, reason)})
	}
	d.StatusDescription = runningDescription(d)
	return d
}

// outdated reports whether some live node runs an older version of group.
func (f *Facts) outdated(group string) bool {
	for _, a := range f.Allocs {
		if a.TaskGroup == group && !a.Terminal() && a.JobVersion < f.Job.Version && f.live(a.NodeID) {
			return true
		}
	}
	return false
}
