package policywire

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTheWireImportsOnlyTheStandardLibrary: this package is compiled into
// every policy module through sdk/policy, which promises authors it depends
// on nothing of the daemon. The control checks the scan sees imports.
func TestTheWireImportsOnlyTheStandardLibrary(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			seen++
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s: the wire codec may import only the standard library", f, path)
			}
		}
	}
	if seen == 0 {
		t.Fatal("control: no imports found at all")
	}
}
