package lint

import (
	"slices"
	"testing"
)

func TestEveryPackageDocPointsAtAPageInTheTree(t *testing.T) {
	problems, packages, err := Docs("../..")
	if err != nil {
		t.Fatal(err)
	}
	requireModuleRoot(t, packages, 30, "library packages")
	for _, p := range problems {
		t.Error(p)
	}
}

// TestDocsFindsAMissingPageAndADeadCitation is the control: a tree with
// one package without a page, dead spec/ and root citations in Go and a
// dead docs/ citation in Markdown, beside a package that does it right.
func TestDocsFindsAMissingPageAndADeadCitation(t *testing.T) {
	problems, packages, err := Docs("testdata/tree")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	want := []string{
		"docs/lib.md:3: cites docs/gone.md, which is not in the tree",
		"lib/lib.go:2: cites DESIGN.md, which is not in the tree",
		"lib/lib.go:2: cites spec/reconcile.md, which is not in the tree",
		"lib: the package doc names no page under docs/",
	}
	if !slices.Equal(got, want) || packages != 2 {
		t.Fatalf("checked %d packages, problems:\n%q\nwant:\n%q", packages, got, want)
	}
}
