package fleet

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A KV watch over the jetstream package's ordered pull consumer, in place
// of jetstream.KeyValue.Watch. nats.go's KV watch rides the legacy push
// ordered consumer, whose reset can dereference a subscription state that a
// failed consumer creation cleared (nats.go v1.55.0, js.go:2373, in a
// goroutine of the library: the process dies). It was met here with 1,000
// agents on one overloaded server (BENCHMARKS.md, "Narrowed watches"). The
// ordered pull consumer recreates its consumer on a gap or a missed
// heartbeat by itself, with no such state. The watch keeps KeyValue.Watch's
// contract: the last value of each key the filters match (or every entry
// from a revision on), then a nil entry once those are delivered, then
// every change; Updates is closed when the watch ends (Stop, or a consumer
// that cannot be recreated: the bucket is gone).

// watchResets bounds the ordered consumer's attempts to recreate its
// consumer in one go (1 s, 2 s, 4 s apart) before the watch ends and the
// Source, which re-opens the bucket, takes over.
const watchResets = 3

// watchInactive is how long the server keeps a watch's consumer that no
// pull request reaches (a client gone without stopping it); a live watch
// keeps a pull request open. A consumer the server removed under a live
// watch is recreated by the ordered consumer.
const watchInactive = 30 * time.Second

// A watch's pull requests carry an idle heartbeat: the server sends one
// when it has had nothing to deliver for that long, and a watch that hears
// nothing for two of them takes its pull request for lost and recreates its
// consumer (the ordered consumer's reset: a deletion and a creation, each a
// JetStream API request). nats.go's default for an ordered consumer is 5 s
// (a reset after 10 s of silence). Under a server that a thousand agents
// keep busy, 10 s without a delivery is load, not loss, and every reset adds
// two requests to the queue that made it late: at 1,000 agents on two cores
// the watches ended (three resets failed) 906–1,490 times per bucket in one
// rollout (BENCHMARKS.md, "1,000 agents, 2026-12-03"). The heartbeat grows
// with the fleet instead, as the node heartbeats do (node.BeatTTL): 5 s up
// to 250 nodes, N / 50 s beyond, at most watchBeatMax. The idle heartbeats
// a fleet's watches cost stay about constant (7 watches × N / (N / 50 s) =
// 350 / s past 250 nodes), and so do their pull requests (each expires
// after watchExpiryBeats heartbeats and is re-issued).
//
// A lost connection is not left to the heartbeat: the Source re-creates its
// watches from the connection's reconnect handler, and the server answers a
// pending pull with a status when its consumer is deleted or changes leader.
const (
	watchBeatMin     = 5 * time.Second
	watchBeatMax     = 30 * time.Second
	watchBeatPerNode = 20 * time.Millisecond // N / 50 s
	watchExpiryBeats = 6
)

// watchBeat is the idle heartbeat of a watch in a fleet of nodes nodes.
func watchBeat(nodes int) time.Duration {
	return min(max(time.Duration(nodes)*watchBeatPerNode, watchBeatMin), watchBeatMax)
}

// kvWatch is one watch of a bucket's keys.
type kvWatch struct {
	updates chan jetstream.KeyValueEntry
	js      jetstream.JetStream
	stream  string
	cons    jetstream.Consumer
	iter    jetstream.MessagesContext
	once    sync.Once
	done    chan struct{}
}

// watchKV starts a watch of bucket's keys matching filters (none: every
// key): from revision resume on when resume > 0, else the last value of
// each key; beat is its pull requests' idle heartbeat (watchBeat; 0: the
// smallest). ctx bounds the consumer's creation only.
func watchKV(ctx context.Context, js jetstream.JetStream, bucket string, filters []string, resume uint64, beat time.Duration) (*kvWatch, error) {
	pre := "$KV." + bucket + "."
	subjects := make([]string, 0, max(len(filters), 1))
	for _, f := range filters {
		subjects = append(subjects, pre+f)
	}
	if len(subjects) == 0 {
		subjects = append(subjects, pre+">")
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
		MaxResetAttempts: watchResets, InactiveThreshold: watchInactive}
	if resume > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, resume
	}
	cons, err := js.OrderedConsumer(ctx, "KV_"+bucket, cfg)
	if err != nil {
		return nil, err
	}
	pending := uint64(0)
	if info := cons.CachedInfo(); info != nil {
		pending = info.NumPending
	}
	if beat <= 0 {
		beat = watchBeatMin
	}
	iter, err := cons.Messages(jetstream.PullHeartbeat(beat), jetstream.PullExpiry(watchExpiryBeats*beat))
	if err != nil {
		return nil, err
	}
	w := &kvWatch{updates: make(chan jetstream.KeyValueEntry, 256), js: js, stream: "KV_" + bucket, cons: cons, iter: iter, done: make(chan struct{})}
	go w.run(bucket, pre, pending)
	return w, nil
}

func (w *kvWatch) run(bucket, pre string, pending uint64) {
	defer close(w.updates)
	send := func(e jetstream.KeyValueEntry) bool {
		select {
		case w.updates <- e:
			return true
		case <-w.done:
			return false
		}
	}
	initial := true
	if pending == 0 {
		initial = false
		if !send(nil) {
			return
		}
	}
	received := uint64(0)
	for {
		m, err := w.iter.Next()
		if err != nil {
			return // stopped, or the consumer could not be recreated
		}
		meta, err := m.Metadata()
		if err != nil || !strings.HasPrefix(m.Subject(), pre) || len(m.Subject()) == len(pre) {
			continue
		}
		e := &kvEntry{bucket: bucket, key: m.Subject()[len(pre):], value: m.Data(), revision: meta.Sequence.Stream,
			created: meta.Timestamp, delta: meta.NumPending, op: kvOp(m.Headers())}
		if !send(e) {
			return
		}
		if initial {
			received++
			if received >= pending || meta.NumPending == 0 {
				initial = false
				if !send(nil) {
					return
				}
			}
		}
	}
}

// kvOp is an entry's operation from its headers, as the KV API reads them:
// a delete or purge marker, or a limit marker (an expiry by the bucket's or
// the message's TTL, or a purge).
func kvOp(h map[string][]string) jetstream.KeyValueOp {
	get := func(k string) string {
		if v := h[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	switch get("KV-Operation") {
	case "DEL":
		return jetstream.KeyValueDelete
	case "PURGE":
		return jetstream.KeyValuePurge
	}
	switch get(jetstream.MarkerReasonHeader) {
	case "MaxAge", "Purge":
		return jetstream.KeyValuePurge
	case "Remove":
		return jetstream.KeyValueDelete
	}
	return jetstream.KeyValuePut
}

// Updates are the watch's entries; closed once the watch ended.
func (w *kvWatch) Updates() <-chan jetstream.KeyValueEntry { return w.updates }

// Stop ends the watch and deletes its consumer (a request: with the
// server gone it waits out its timeout, and the server would remove the
// consumer after watchInactive anyway).
func (w *kvWatch) Stop() error {
	var err error
	w.once.Do(func() {
		close(w.done)
		w.iter.Stop()
		if info := w.cons.CachedInfo(); info != nil && info.Name != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if derr := w.js.DeleteConsumer(ctx, w.stream, info.Name); derr != nil && !errors.Is(derr, jetstream.ErrConsumerNotFound) {
				err = derr
			}
		}
	})
	return err
}

// kvEntry is one entry of a watch.
type kvEntry struct {
	bucket, key string
	value       []byte
	revision    uint64
	created     time.Time
	delta       uint64
	op          jetstream.KeyValueOp
}

func (e *kvEntry) Bucket() string                  { return e.bucket }
func (e *kvEntry) Key() string                     { return e.key }
func (e *kvEntry) Value() []byte                   { return e.value }
func (e *kvEntry) Revision() uint64                { return e.revision }
func (e *kvEntry) Created() time.Time              { return e.created }
func (e *kvEntry) Delta() uint64                   { return e.delta }
func (e *kvEntry) Operation() jetstream.KeyValueOp { return e.op }

var _ jetstream.KeyWatcher = (*kvWatch)(nil)
