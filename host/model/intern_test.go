package model

import (
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func TestInternKeepsOneCopyOfShortStringsAndBoundsItsTable(t *testing.T) {
	a := strings.Clone("node-001")
	b := strings.Clone("node-001")
	if unsafe.StringData(a) == unsafe.StringData(b) {
		t.Fatal("the test's two strings are one already")
	}
	ia, ib := Intern(a), Intern(b)
	if ia != "node-001" || ib != "node-001" || unsafe.StringData(ia) != unsafe.StringData(ib) {
		t.Fatalf("Intern gave %q and %q, not one copy", ia, ib)
	}
	long := strings.Repeat("x", internLen+1)
	if got := Intern(strings.Clone(long)); got != long || unsafe.StringData(Intern(long)) == unsafe.StringData(got) {
		t.Error("a string longer than internLen was interned")
	}
	if Intern("") != "" {
		t.Error("the empty string changed")
	}
	// Past internMax distinct strings the table starts again: never more.
	for i := range internMax + 10 {
		Intern("k" + strconv.Itoa(i))
	}
	interned.mu.Lock()
	n := len(interned.m)
	interned.mu.Unlock()
	if n > internMax || n == 0 {
		t.Errorf("the table holds %d strings, bound %d", n, internMax)
	}
}
