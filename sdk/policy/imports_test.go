package policy

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTheSDKImportsNothingFromTheDaemon enforces the package's promise:
// policy authors depend on this package alone, never on hivelet's
// internals (and it stays small enough for a WASM guest). The control
// checks the scan does see imports.
func TestTheSDKImportsNothingFromTheDaemon(t *testing.T) {
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
			if strings.HasPrefix(path, "github.com/hivelet/hivelet/") || strings.Contains(path, ".") {
				t.Errorf("%s imports %s: the SDK may import only the standard library", f, path)
			}
		}
	}
	if seen == 0 {
		t.Fatal("control: no imports found at all")
	}
}
