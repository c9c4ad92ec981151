package fleet

import (
	"hash/maphash"
	"iter"
	"maps"
	"slices"
)

// mapShards is the number of parts a Map's keys are spread over by hash.
// A snapshot taken after a change copies the parts the change touched,
// not the map: at 1,000 keys a part holds about 16.
const mapShards = 64

// mapSeed hashes keys to parts: one per process, which is all a part's
// index must be stable over (Maps are never stored or sent).
var mapSeed = maphash.MakeSeed()

func shardOf(key string) int { return int(maphash.String(mapSeed, key) % mapShards) }

// Map is one bucket's records in a View, by key: immutable once made.
// Snapshots of a Source share every part of the map a change did not
// touch, so taking one after a change costs O(the keys of the parts
// changed), not O(the bucket): with 500 jobs on a node, copying whole
// maps was a quarter of the agent's passes' CPU and about a third of the
// bytes allocated per job put.
//
// The zero Map is empty. Iteration order is unspecified, as a map's.
type Map[V any] struct {
	p *mapParts[V]
}

type mapParts[V any] struct {
	n    int
	part [mapShards]map[string]V // nil: no key hashed to it
	// id names each part's map: a part written gets a new map and an ID
	// new to the builder it came from, so two Maps of one builder with
	// the same ID at a part hold the same records there (0: nil).
	id [mapShards]uint64
}

// MapOf returns a Map holding a copy of m's entries.
func MapOf[V any](m map[string]V) Map[V] {
	var b mapBuilder[V]
	for k, v := range m {
		b.Set(k, v)
	}
	return b.Snapshot()
}

// Get returns the value of key, and whether the map holds it.
func (m Map[V]) Get(key string) (V, bool) {
	if m.p == nil {
		var zero V
		return zero, false
	}
	return m.p.get(key)
}

// At returns the value of key (the zero value if the map does not hold
// it).
func (m Map[V]) At(key string) V {
	v, _ := m.Get(key)
	return v
}

// Same reports whether m and o are one snapshot's Map (two Views of a
// Source that share a kind's records unchanged): then they hold the same
// records. False says nothing: two Maps made apart may hold the same
// records. It lets a reader of one kind skip the work a View of another
// kind's change would have it redo.
func (m Map[V]) Same(o Map[V]) bool { return m.p == o.p }

// Len returns the number of keys.
func (m Map[V]) Len() int {
	if m.p == nil {
		return 0
	}
	return m.p.n
}

// All yields every key and its value.
func (m Map[V]) All() iter.Seq2[string, V] {
	if m.p == nil {
		return func(func(string, V) bool) {}
	}
	return m.p.all
}

// Keys yields every key.
func (m Map[V]) Keys() iter.Seq[string] {
	return func(yield func(string) bool) {
		for k := range m.All() {
			if !yield(k) {
				return
			}
		}
	}
}

// get returns the value of key, and whether the parts hold it.
func (p *mapParts[V]) get(key string) (V, bool) {
	v, ok := p.part[shardOf(key)][key]
	return v, ok
}

// all yields every key and its value.
func (p *mapParts[V]) all(yield func(string, V) bool) {
	for _, part := range &p.part {
		for k, v := range part {
			if !yield(k, v) {
				return
			}
		}
	}
}

// With returns a Map holding m's entries and key's value v (m is not
// changed): it shares every part of m but key's.
func (m Map[V]) With(key string, v V) Map[V] {
	b := m.builder()
	b.Set(key, v)
	return b.Snapshot()
}

// Without returns a Map holding m's entries but key's (m is not changed).
func (m Map[V]) Without(key string) Map[V] {
	b := m.builder()
	b.Delete(key)
	return b.Snapshot()
}

// builder returns a builder holding m's entries, sharing all its parts.
func (m Map[V]) builder() *mapBuilder[V] {
	b := &mapBuilder[V]{}
	if m.p != nil {
		b.cur = *m.p
		b.ids = slices.Max(m.p.id[:])
	}
	return b
}

// Clone returns the entries as a new map of the caller's.
func (m Map[V]) Clone() map[string]V {
	out := make(map[string]V, m.Len())
	for k, v := range m.All() {
		out[k] = v
	}
	return out
}

// mapBuilder is a Source's records of one bucket: written in place, and
// made into Maps by Snapshot. A part written since the last snapshot is
// the builder's own; any other is shared with that snapshot (or older
// ones) and is copied before its first write. The zero builder is empty.
type mapBuilder[V any] struct {
	cur   mapParts[V]
	owned [mapShards]bool
	ids   uint64 // the last part ID given
}

// own makes part i the builder's to write.
func (b *mapBuilder[V]) own(i int) map[string]V {
	if !b.owned[i] {
		if b.cur.part[i] == nil {
			b.cur.part[i] = make(map[string]V)
		} else {
			b.cur.part[i] = maps.Clone(b.cur.part[i])
		}
		b.ids++
		b.cur.id[i] = b.ids
		b.owned[i] = true
	}
	return b.cur.part[i]
}

// Get returns the value of key, and whether the builder holds it.
func (b *mapBuilder[V]) Get(key string) (V, bool) { return b.cur.get(key) }

// At returns the value of key (the zero value if the builder does not
// hold it).
func (b *mapBuilder[V]) At(key string) V {
	v, _ := b.cur.get(key)
	return v
}

// Set sets key's value.
func (b *mapBuilder[V]) Set(key string, v V) {
	p := b.own(shardOf(key))
	if _, ok := p[key]; !ok {
		b.cur.n++
	}
	p[key] = v
}

// Delete removes key, if held.
func (b *mapBuilder[V]) Delete(key string) {
	i := shardOf(key)
	if _, ok := b.cur.part[i][key]; !ok {
		return
	}
	delete(b.own(i), key)
	b.cur.n--
}

// Len returns the number of keys.
func (b *mapBuilder[V]) Len() int { return b.cur.n }

// All yields every key and its value. The builder must not be written
// during the iteration.
func (b *mapBuilder[V]) All() iter.Seq2[string, V] { return b.cur.all }

// Update sets every key's value to f of it (f must not write the
// builder): copies only the parts that change.
func (b *mapBuilder[V]) Update(f func(key string, v V) (V, bool)) {
	for i := range b.cur.part {
		for k, v := range b.cur.part[i] {
			if nv, changed := f(k, v); changed {
				// own replaces the part with a copy while it is being
				// ranged over: the range goes on over the old one, and
				// the write lands in the copy.
				b.own(i)[k] = nv
			}
		}
	}
}

// Snapshot returns the records as they stand, as a Map no later write
// changes.
func (b *mapBuilder[V]) Snapshot() Map[V] {
	p := new(mapParts[V])
	*p = b.cur
	b.owned = [mapShards]bool{}
	return Map[V]{p: p}
}
