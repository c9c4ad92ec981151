package agent

import (
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/rollout"
	"github.com/hivelet/hivelet/host/wanted"
)

// The slot handoff (rollout.HandoffProtocol, docs/rollout.md "The rollout
// summary"). A steward's summary queues waiters on each slot, two deep
// (model.GroupSummary.Next). The holder that releases a slot, or the
// steward that reclaims it, tells the waiter next behind it over core
// NATS; the waiter's next pass counts the slot as free and takes it, by
// create-if-absent as every take (I5), without waiting for the summary
// that shows it free (up to rollout.SummaryEvery later, and on a loaded
// fleet a second or more). A hint is never stored and never trusted for
// more than a try: a stale one costs a refused create; a lost one, the
// wait for the next summary, as before the handoff.

// releaseHints is what the handoff needs of the deployment writer: a
// fleet.Store has it; a writer without it (a test's fake) makes no
// handoff, and its waiters wait for summaries.
type releaseHints interface {
	NotifyReleased(node string, r model.SlotReleased) error
	SubscribeReleased(node string, fn func(model.SlotReleased)) (stop func(), err error)
}

// releasedHint is a release this node was told of: the holder whose take
// was released, and when the hint came.
type releasedHint struct {
	holder string
	at     time.Time
}

// releasedHintTTL is how long a hint not taken (nor refused) is kept:
// past a few summaries the steward has seen the release and a summary
// shows the slot free, or the slot is held again.
const releasedHintTTL = 5 * rollout.SummaryEvery

// listenReleases subscribes to this node's release hints; the returned
// function ends the subscription.
func (a *Agent) listenReleases() func() {
	h, ok := a.cfg.Deployments.(releaseHints)
	if !ok {
		return func() {}
	}
	stop, err := h.SubscribeReleased(a.nodeID, a.onReleased)
	if err != nil {
		a.log.Warn("slot handoff: not listening for release hints (waiters wait for summaries)", "err", err)
		return func() {}
	}
	return stop
}

// onReleased keeps a release hint and asks for a pass of its job.
func (a *Agent) onReleased(r model.SlotReleased) {
	if !strings.HasPrefix(r.Key, wanted.SlotPrefix(r.Namespace, r.JobID)) || r.Holder == "" {
		return
	}
	a.mu.Lock()
	a.released[r.Key] = releasedHint{holder: r.Holder, at: a.cfg.Now()}
	a.ownDirty[wanted.JobKey(r.Namespace, r.JobID)] = true
	a.status.HandoffsHeard++
	a.mu.Unlock()
	a.KickFor("kick: a slot released to this node")
}

// releasedFor are the release hints of job's slots, and their share of the
// job's signature. Whether a hint admits a take is the core's to say, on
// the summary of the pass (rollout.TellsAt): one that came before the
// summary that queued this node is kept for it. A hint is forgotten once
// its slot is taken here, or its take refused, or after releasedHintTTL.
func (a *Agent) releasedFor(job *model.Job) (map[string]string, uint64) {
	prefix := wanted.SlotPrefix(job.Namespace, job.ID)
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.released) == 0 {
		return nil, 0
	}
	var out map[string]string
	var sig uint64
	for k, h := range a.released {
		if now.Sub(h.at) > releasedHintTTL {
			delete(a.released, k)
			continue
		}
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = h.holder
		sig += mix(hashString(k) ^ hashString(h.holder))
	}
	return out, sig
}

// dropHint forgets the release hint of key (its take was refused: the
// slot is held again).
func (a *Agent) dropHint(key string) {
	a.mu.Lock()
	delete(a.released, key)
	a.mu.Unlock()
}

// handOff tells the waiter that the summary s (the one the release was
// decided on) queues behind sl's holder on its slot that the slot is
// released (rollout.QueuedOn: the first of the slot's queue behind the
// holder s lists or admits there, the second behind the first). A waiter
// on this node is told directly.
func (a *Agent) handOff(s *model.RolloutSummary, sl rollout.Slot) {
	if s == nil || s.DeploymentID == "" {
		return
	}
	w, ok := rollout.QueuedOn(s, sl.Slot.Group, sl.Slot.Index, sl.Slot.Holder)
	if !ok {
		return // nobody queued behind this holder's take of the index
	}
	r := model.SlotReleased{Namespace: s.Namespace, JobID: s.JobID, Key: sl.Key, Holder: sl.Slot.Holder, DeploymentID: s.DeploymentID}
	if w.Node == a.nodeID {
		a.onReleased(r)
		return
	}
	h, ok := a.cfg.Deployments.(releaseHints)
	if !ok {
		return
	}
	if err := h.NotifyReleased(w.Node, r); err != nil {
		a.log.Debug("slot handoff: the hint was not sent (the waiter waits for the next summary)", "slot", sl.Key, "to", w.Node, "err", err)
		return
	}
	a.mu.Lock()
	a.status.HandoffsSent++
	a.mu.Unlock()
}
