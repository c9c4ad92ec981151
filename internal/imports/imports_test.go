package imports

import (
	"slices"
	"testing"
)

func TestListSeesThisPackagesImports(t *testing.T) {
	pkgs, err := List("github.com/hivelet/hivelet/internal/imports")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 1 {
		t.Fatalf("listed %d packages, want 1", len(pkgs))
	}
	p := pkgs[0]
	if !slices.Contains(p.Imports, "os/exec") || slices.Contains(p.Imports, "testing") {
		t.Errorf("non-test imports %v: want os/exec and not testing", p.Imports)
	}
	if !slices.Contains(p.TestImports, "testing") {
		t.Errorf("test imports %v: want testing", p.TestImports)
	}
	if got := p.ImportsUnder("encoding"); !slices.Equal(got, []string{"encoding/json"}) {
		t.Errorf("imports under encoding: %v", got)
	}
}

func TestUnderIsAPathPrefixNotAStringPrefix(t *testing.T) {
	for _, c := range []struct {
		path, prefix string
		want         bool
	}{
		{"github.com/docker/docker", "github.com/docker/docker", true},
		{"github.com/docker/docker/client", "github.com/docker/docker", true},
		{"github.com/docker/dockerfile", "github.com/docker/docker", false},
		{"github.com/docker", "github.com/docker/docker", false},
	} {
		if got := Under(c.path, c.prefix); got != c.want {
			t.Errorf("Under(%q, %q) = %v", c.path, c.prefix, got)
		}
	}
}

func TestListRefusesAPatternMatchingNothing(t *testing.T) {
	if _, err := List("github.com/hivelet/hivelet/no/such/..."); err == nil {
		t.Fatal("a guard over no package would pass by luck")
	}
}
