package fleet

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// ReleasedSubject is the core NATS subject on which node hears that a slot
// a rollout summary queued it on was released (model.SlotReleased):
// <prefix>.released.<node>.
func (s *Store) ReleasedSubject(node string) (string, error) {
	p := s.names.Prefix
	if p == "" {
		p = DefaultPrefix
	}
	return wanted.NodeSubject(p, "released", node)
}

// NotifyReleased tells node that a slot was released (the handoff of
// rollout protocol 5): one core NATS message, not stored, not
// acknowledged. A message lost (node away, a reconnect) costs the waiter
// the wait for the next summary, as before the handoff.
func (s *Store) NotifyReleased(node string, r model.SlotReleased) error {
	subj, err := s.ReleasedSubject(node)
	if err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.conn.nc.Publish(subj, b)
}

// SubscribeReleased calls fn with each release hint sent to node until the
// returned stop is called. A message that does not decode is dropped (fn
// is not called): a hint decides nothing by itself. The subscription is
// made again by the NATS client after a reconnect.
func (s *Store) SubscribeReleased(node string, fn func(model.SlotReleased)) (stop func(), err error) {
	subj, err := s.ReleasedSubject(node)
	if err != nil {
		return nil, err
	}
	if s.conn == nil || s.conn.nc == nil {
		return nil, errors.New("fleet: no NATS connection")
	}
	sub, err := s.conn.nc.Subscribe(subj, func(m *nats.Msg) {
		var r model.SlotReleased
		if json.Unmarshal(m.Data, &r) != nil || r.Key == "" || r.JobID == "" {
			return
		}
		fn(r)
	})
	if err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", subj, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
