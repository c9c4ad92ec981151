package lint

import (
	"slices"
	"testing"
)

// TestTheModuleBuildsBinariesOnlyThroughBuildStatic: no test runs go build
// with flags of its own (each set of flags compiles the module again).
func TestTheModuleBuildsBinariesOnlyThroughBuildStatic(t *testing.T) {
	found, files, err := GoBuilds("../..")
	if err != nil {
		t.Fatal(err)
	}
	requireModuleRoot(t, files, 100, "Go files")
	for _, f := range found {
		t.Error(f)
	}
}

// TestGoBuildsFindsBuildsOnly is the control: the builds of
// testdata/gobuild are found (also as words passed to another program: the
// check reads literals, not intent), go test and go env are not.
func TestGoBuildsFindsBuildsOnly(t *testing.T) {
	found, files, err := GoBuilds("testdata/gobuild")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"build_test.go:9: runs go build itself: call fleettest.BuildStatic",
		"build_test.go:10: runs go build itself: call fleettest.BuildStatic",
		"build_test.go:13: runs go build itself: call fleettest.BuildStatic",
	}
	if !slices.Equal(found, want) || files != 1 {
		t.Fatalf("read %d files, found %q, want %q", files, found, want)
	}
}
