package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fillStore writes n allocation records into a new store in dir and closes it.
func fillStore(t *testing.T, dir string, n int) int64 {
	t.Helper()
	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Fresh() {
		t.Fatal("a store created by this Open is not fresh")
	}
	for i := range n {
		if err := s.PutAlloc(rec(fmt.Sprintf("alloc-%04d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// The fault of issue 11 (4): a truncated state.db made bbolt panic ("invalid
// freelist page") and took the agent down. Every damaged file here fails
// Open with an error naming the path and the damage, and nothing panics;
// the intact control reopens with every record, not fresh.
func TestATruncatedOrCorruptStoreFailsOpenWithItsPathAndNeverPanics(t *testing.T) {
	damage := []struct {
		name string
		do   func(f *os.File, size int64) error
		want string
	}{
		{"truncated to half", func(f *os.File, size int64) error { return f.Truncate(size / 2) }, "truncated to"},
		{"truncated to two pages", func(f *os.File, size int64) error { return f.Truncate(8192) }, "truncated to"},
		{"truncated to one page", func(f *os.File, size int64) error { return f.Truncate(4096) }, "file size too small"},
		{"truncated inside the first page", func(f *os.File, size int64) error { return f.Truncate(100) }, "invalid database"},
		{"garbage over the middle pages", func(f *os.File, size int64) error {
			_, err := f.WriteAt([]byte(strings.Repeat("\xa5", 8192)), size/2)
			return err
		}, "problems, first:"},
	}
	for _, d := range damage {
		t.Run(d.name, func(t *testing.T) {
			dir := t.TempDir()
			size := fillStore(t, dir, 200)
			path := filepath.Join(dir, FileName)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.do(f, size); err != nil {
				t.Fatal(err)
			}
			f.Close()
			var s *Store
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("Open panicked on a damaged store: %v", r)
					}
				}()
				s, err = Open(dir, time.Second)
			}()
			if err == nil {
				s.Close()
				t.Fatal("a damaged store opened")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), d.want) {
				t.Fatalf("error %q: want the path %s and %q", err, path, d.want)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %q is not ErrCorrupt", err)
			}
		})
	}

	// Control: the same store undamaged reopens with every record.
	dir := t.TempDir()
	fillStore(t, dir, 200)
	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, err := s.Allocs()
	if err != nil || len(recs) != 200 || s.Fresh() {
		t.Fatalf("intact store: %d records, fresh %v, err %v; want 200, false", len(recs), s.Fresh(), err)
	}
}

// An empty file (zeroed, or created and never written) is a fresh store:
// Open initialises it, and says so, so the caller can ask whether the node
// had a store before (LostState).
func TestAnEmptyFileOpensAsAFreshStore(t *testing.T) {
	dir := t.TempDir()
	fillStore(t, dir, 3)
	if err := os.Truncate(filepath.Join(dir, FileName), 0); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if recs, err := s.Allocs(); err != nil || len(recs) != 0 || !s.Fresh() {
		t.Fatalf("emptied store: %d records, fresh %v, err %v; want 0, true", len(recs), s.Fresh(), err)
	}
}

// BenchmarkOpenVerifies measures Open of a store of 1,000 allocations,
// read-only check included.
func BenchmarkOpenVerifies(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(dir, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		if err := s.PutAlloc(rec(fmt.Sprintf("alloc-%04d", i))); err != nil {
			b.Fatal(err)
		}
	}
	s.Close()
	for b.Loop() {
		s, err := Open(dir, time.Second)
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
