package lint

import (
	"slices"
	"testing"
)

// TestTheModulePausesOnlyThroughWaitFor: internal/wait.For is the one
// context-aware sleep; no other package writes it again.
func TestTheModulePausesOnlyThroughWaitFor(t *testing.T) {
	found, files, err := Pauses("../..")
	if err != nil {
		t.Fatal(err)
	}
	requireModuleRoot(t, files, 100, "Go files")
	for _, f := range found {
		t.Error(f)
	}
}

// TestPausesFindsBothOrdersAndOnlyPauses is the control: the two pauses of
// testdata/pause are found, the select that waits for a change and the one
// whose timeout acts are not.
func TestPausesFindsBothOrdersAndOnlyPauses(t *testing.T) {
	found, files, err := Pauses("testdata/pause")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"pause.go:9: a select that pauses until a context ends: call wait.For",
		"pause.go:14: a select that pauses until a context ends: call wait.For",
	}
	if !slices.Equal(found, want) || files != 1 {
		t.Fatalf("read %d files, found %q, want %q", files, found, want)
	}
}
