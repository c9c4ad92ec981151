package reconcile

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/internal/imports"
)

// The reconciler is a pure function (doc.go, "Invariants"): the caller
// passes Now, so it reads no clock; it does no I/O and draws no random
// numbers; it runs no policy engine (a policy reaches it only through the
// CanaryChooser and CompletionDecider interfaces it declares). These tests
// make the promise mechanical: an import or a call that breaks it fails CI
// with the rule it breaks.

// forbiddenStd are the standard library packages (and everything below
// them) the reconciler must not import, with why.
var forbiddenStd = map[string]string{
	"os":          "I/O",
	"io":          "I/O",
	"net":         "I/O",
	"syscall":     "I/O",
	"bufio":       "I/O",
	"embed":       "I/O",
	"path":        "I/O (file paths)",
	"log":         "I/O (logging is the caller's)",
	"database":    "I/O",
	"plugin":      "I/O",
	"runtime":     "goroutines and the scheduler",
	"sync":        "goroutines (a pure function needs no lock)",
	"math/rand":   "randomness",
	"crypto/rand": "randomness",
}

// allowedModule are the only non-standard packages it may import: the data
// model it reconciles, and XXH3, which derives allocation IDs (ids.go: a
// function of bytes; its only other import reads the CPU's features, to
// choose how to compute the same sum, once).
var allowedModule = []string{"github.com/hivelet/hivelet/host/model", "github.com/zeebo/xxh3"}

// clockFuncs are the functions of package time that read the clock or
// wait. The rest of package time (Time, Duration, their methods) is data.
var clockFuncs = []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker"}

func TestTheReconcilerImportsNoClockIONorPolicyEngine(t *testing.T) {
	pkgs, err := imports.List("github.com/hivelet/hivelet/host/reconcile")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 1 || len(pkgs[0].Imports) == 0 {
		t.Fatalf("control: listed %+v, want host/reconcile with its imports", pkgs)
	}
	for _, imp := range pkgs[0].Imports {
		if why := importBreaksPurity(imp); why != "" {
			t.Errorf("host/reconcile imports %s: %s", imp, why)
		}
	}
}

// importBreaksPurity says why the reconciler may not import path ("" when
// it may).
func importBreaksPurity(path string) string {
	first, _, _ := strings.Cut(path, "/")
	if !strings.Contains(first, ".") { // the standard library
		for p, why := range forbiddenStd {
			if imports.Under(path, p) {
				return "the reconciler does no " + why
			}
		}
		return ""
	}
	if slices.Contains(allowedModule, path) {
		return ""
	}
	if imports.Under(path, "github.com/hivelet/hivelet/policies") || strings.Contains(path, "wazero") {
		return "the reconciler runs no policy engine: policies reach it through CanaryChooser and CompletionDecider"
	}
	return "the reconciler imports only the standard library's pure packages and " + strings.Join(allowedModule, ", ")
}

func TestTheImportRuleRefusesClockIOAndTheEngine(t *testing.T) {
	for _, c := range []struct {
		path string
		ok   bool
	}{
		{"time", true}, {"strings", true}, {"crypto/sha256", true}, {"context", true},
		{"github.com/hivelet/hivelet/host/model", true},
		{"os", false}, {"os/exec", false}, {"io/fs", false}, {"net/http", false}, {"log/slog", false},
		{"math/rand/v2", false}, {"crypto/rand", false}, {"sync/atomic", false},
		{"github.com/hivelet/hivelet/policies", false}, {"github.com/tetratelabs/wazero", false},
		{"github.com/hivelet/hivelet/host/state", false}, {"github.com/nats-io/nats.go", false},
	} {
		if why := importBreaksPurity(c.path); (why == "") != c.ok {
			t.Errorf("%s: allowed %v (%q), want %v", c.path, why == "", why, c.ok)
		}
	}
}

// clockUses lists, as "file:line: time.F", every reference to a clock
// function of package time (called or taken as a value, under any import
// name) and every go statement in the file's source.
func clockUses(fset *token.FileSet, f *ast.File) (uses []string, timeRefs int) {
	var timeNames []string
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "time" {
			name := "time"
			if imp.Name != nil {
				name = imp.Name.Name
			}
			if name == "." {
				uses = append(uses, fset.Position(imp.Pos()).String()+": a dot import of time hides its clock calls")
			}
			timeNames = append(timeNames, name)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			uses = append(uses, fset.Position(n.Pos()).String()+": a go statement")
		case *ast.SelectorExpr:
			x, ok := n.X.(*ast.Ident)
			if !ok || !slices.Contains(timeNames, x.Name) {
				return true
			}
			timeRefs++
			if slices.Contains(clockFuncs, n.Sel.Name) {
				uses = append(uses, fset.Position(n.Pos()).String()+": time."+n.Sel.Name)
			}
		}
		return true
	})
	return uses, timeRefs
}

func TestTheReconcilerReadsNoClockAndStartsNoGoroutine(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	parsed, timeRefs := 0, 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed++
		uses, refs := clockUses(fset, f)
		timeRefs += refs
		for _, u := range uses {
			t.Errorf("%s: the reconciler is pure; the caller passes Now", u)
		}
	}
	// Control: the scan did read the package, and it does see package time
	// (Time and Duration are used throughout).
	if parsed < 5 || timeRefs == 0 {
		t.Fatalf("control: parsed %d files, saw %d references to package time", parsed, timeRefs)
	}
}

func TestTheClockScanFindsCallsUnderAnyImportName(t *testing.T) {
	src := `package p

import (
	clock "time"
)

var d clock.Duration = clock.Second

func f() clock.Time {
	tick := clock.Tick
	_ = tick
	go func() {}()
	return clock.Now().Add(d)
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	uses, refs := clockUses(fset, f)
	want := []string{"p.go:10:10: time.Tick", "p.go:12:2: a go statement", "p.go:13:9: time.Now"}
	slices.Sort(uses)
	if !slices.Equal(uses, want) {
		t.Fatalf("found %q, want %q", uses, want)
	}
	// Duration, Second, Time, Tick and Now: data is seen but not flagged.
	if refs != 5 {
		t.Fatalf("saw %d references to the time package, want 5", refs)
	}
}
