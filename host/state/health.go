package state

import (
	"strconv"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// writeHealth remembers whether the store's last write transaction reached
// the disk: a store that cannot write (ENOSPC, EIO, a read-only remount)
// fails every change the agent persists, and the node's health must say so
// (api.Judge's "store" check).
type writeHealth struct {
	mu       sync.Mutex
	err      error
	failures uint64 // consecutive failed transactions
}

func (h *writeHealth) note(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.err = err
	if err == nil {
		h.failures = 0
	} else {
		h.failures++
	}
}

// WriteFailure is how many write transactions in a row failed and the
// error of the last; 0 and nil if the last succeeded (or none was made).
// An error a change returned itself is not counted: only the store failing
// to write is.
func (s *Store) WriteFailure() (failures uint64, err error) {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return s.health.failures, s.health.err
}

var keyProbe = []byte("write_probe")

// Probe writes one small record, so that a store whose writes failed is
// seen writable again (WriteFailure clears) without waiting for the
// agent's next change. It returns the write's error.
func (s *Store) Probe() error {
	v := []byte(strconv.FormatUint(s.commitCount(), 10))
	return s.update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyProbe, v) })
}
