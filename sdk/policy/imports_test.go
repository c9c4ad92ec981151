package policy

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// wirePkg is the one package of the module the SDK may import: the ABI's
// codec, shared with the engine, itself importing only the standard library
// (checked by sdk/driver's TestTheSDKsImportNothingOfTheDaemon).
const wirePkg = "github.com/hivelet/hivelet/internal/policywire"

// TestTheSDKImportsNothingFromTheDaemon enforces the package's promise:
// policy authors depend on this package alone, never on hivelet's
// internals (and it stays small enough for a WASM guest). The control
// checks the scan does see imports, the codec's among them.
func TestTheSDKImportsNothingFromTheDaemon(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen, wire := 0, 0
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
			if path == wirePkg {
				wire++
				continue
			}
			if strings.HasPrefix(path, "github.com/hivelet/hivelet/") || strings.Contains(path, ".") {
				t.Errorf("%s imports %s: the SDK may import only the standard library and %s", f, path, wirePkg)
			}
		}
	}
	if seen == 0 || wire == 0 {
		t.Fatalf("control: %d imports found, %d of them the codec's", seen, wire)
	}
}
