package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// smallFS mounts a tmpfs of size bytes on a new directory, unmounted at
// the end of the test. It needs CAP_SYS_ADMIN: without it the test skips
// and says why.
func smallFS(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file in dir until the filesystem is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return p
		}
	}
}

// The fault of issue 11 (5), store half: with the state directory full
// (ENOSPC on every write) health stayed ok. The store now reports its
// failing writes (with the reason, counted) until a write succeeds again —
// Probe's, once space is freed; a change that fails on its own (control)
// is not taken for the store failing. (A small write may still succeed on
// a full disk, in pages bbolt reuses: the report is about the writes.)
func TestAFullDiskIsReportedByTheStoreUntilAWriteSucceedsAgain(t *testing.T) {
	dir := smallFS(t, 1<<20)
	s, err := Open(filepath.Join(dir, "state"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutAlloc(rec("before")); err != nil {
		t.Fatal(err)
	}
	if err := s.update(func(*bolt.Tx) error { return errors.New("the change's own error") }); err == nil {
		t.Fatal("a failing change succeeded")
	}
	if n, err := s.WriteFailure(); err != nil || n != 0 {
		t.Fatalf("after a change's own error: WriteFailure %v, %d; want none", err, n)
	}

	filler := fill(t, dir)
	var werr error
	for i := 0; i < 64 && werr == nil; i++ { // until bbolt needs a page the disk has no room for
		werr = s.PutAlloc(rec(fmt.Sprintf("full-%02d-%s", i, strings.Repeat("x", 2000))))
	}
	if werr == nil {
		t.Fatal("every write succeeded on a full filesystem")
	}
	n, err := s.WriteFailure()
	if err == nil || n == 0 || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("on a full disk: write error %v; WriteFailure %v, %d; want ENOSPC", werr, err, n)
	}
	if err := s.PutAlloc(rec("still-full-" + strings.Repeat("y", 8000))); err == nil {
		t.Fatal("a large write succeeded on a full filesystem")
	}
	if n2, _ := s.WriteFailure(); n2 <= n {
		t.Fatalf("the second failing write was not counted: %d then %d", n, n2)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := s.Probe(); err != nil {
		t.Fatalf("probe after freeing space: %v", err)
	}
	if n, err := s.WriteFailure(); err != nil || n != 0 {
		t.Fatalf("after space was freed: WriteFailure %v, %d; want none", err, n)
	}
	if _, ok, err := s.Alloc("before"); !ok || err != nil {
		t.Fatalf("the record written before the disk filled: %v %v", ok, err)
	}
}
