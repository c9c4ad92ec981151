package state

import (
	"errors"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterr "go.etcd.io/bbolt/errors"
)

// ErrCorrupt is returned (wrapped, with the path and the reason) by Open
// when the store's file is truncated or its pages are inconsistent. The
// caller must fail closed: the file is the node's only record of what it
// runs, and opening it read-write could lose more of it.
var ErrCorrupt = errors.New("state store is corrupt")

// maxCheckErrors bounds the problems a corrupt store's error lists.
const maxCheckErrors = 3

// verify opens the file read-only and checks it before a read-write open
// touches it. bbolt panics on a truncated file ("invalid freelist page")
// and on pages that lie about themselves; a read-only open loads no
// freelist, so the size the last transaction's meta page claims can be
// compared with the file's first (a page past the end of the file would
// fault, not panic), then bbolt's own consistency check (which recovers its
// panics) walks every page.
func verify(path string, size int64, timeout time.Duration) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("opening %s: %w: %v", path, ErrCorrupt, r)
		}
	}()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, ReadOnly: true})
	if err != nil {
		if errors.Is(err, bolterr.ErrTimeout) {
			return fmt.Errorf("opening %s: %w", path, ErrLocked)
		}
		return fmt.Errorf("opening %s: %w: %v", path, ErrCorrupt, err)
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		if need := tx.Size(); size < need {
			return fmt.Errorf("opening %s: %w: truncated to %d bytes, its last transaction needs %d", path, ErrCorrupt, size, need)
		}
		var problems []string
		n := 0
		for e := range tx.Check() {
			if n < maxCheckErrors {
				problems = append(problems, e.Error())
			}
			n++
		}
		if n > 0 {
			return fmt.Errorf("opening %s: %w: %d problems, first: %s", path, ErrCorrupt, n, strings.Join(problems, "; "))
		}
		return nil
	})
}
