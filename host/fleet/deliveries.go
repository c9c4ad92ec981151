package fleet

import "sync"

// Delivery counts what a source's watches delivered of one bucket kind:
// entries (puts, deletes, purges, the initial pulls included) and the
// bytes of their keys and values. It is the measure of a host's KV
// traffic (BENCHMARKS.md, "Fleet rollout").
type Delivery struct {
	Entries uint64 `json:"entries"`
	Bytes   uint64 `json:"bytes"`
}

// deliveries is a source's Delivery per kind.
type deliveries struct {
	mu sync.Mutex
	m  map[string]Delivery
}

func (d *deliveries) count(kind string, bytes int) {
	d.mu.Lock()
	if d.m == nil {
		d.m = map[string]Delivery{}
	}
	c := d.m[kind]
	c.Entries++
	c.Bytes += uint64(bytes)
	d.m[kind] = c
	d.mu.Unlock()
}

// Delivered returns, by bucket kind, what this source's watches delivered
// since it started.
func (s *Source) Delivered() map[string]Delivery {
	s.delivered.mu.Lock()
	defer s.delivered.mu.Unlock()
	out := make(map[string]Delivery, len(s.delivered.m))
	for k, v := range s.delivered.m {
		out[k] = v
	}
	return out
}
