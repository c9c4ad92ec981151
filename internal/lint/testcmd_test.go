package lint

import (
	"slices"
	"strings"
	"testing"
)

// TestTheREADMEMakefileAndCIRunOneTestCommand: .ci/run and `make test`
// run exactly the README's command, whose leading packages exist.
func TestTheREADMEMakefileAndCIRunOneTestCommand(t *testing.T) {
	cmd, found, err := TestCommand("../..")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cmd, "go test -race ") {
		t.Fatalf("README.md's test command %q", cmd)
	}
	for _, f := range found {
		t.Error(f)
	}
}

// TestTestCommandFindsADifferenceAndAMissingPackage is the control over
// testdata/testcmd: .ci/run runs another command, and the README names a
// package directory that does not exist.
func TestTestCommandFindsADifferenceAndAMissingPackage(t *testing.T) {
	cmd, found, err := TestCommand("testdata/testcmd")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`.ci/run: runs "go test -race ./...", README.md "go test -race ./pkg/a ./pkg/gone ./..."`,
		"README.md: the test command names ./pkg/gone, which is not a directory of the tree",
	}
	if cmd != "go test -race ./pkg/a ./pkg/gone ./..." || !slices.Equal(found, want) {
		t.Fatalf("command %q, found %q, want %q", cmd, found, want)
	}
}
