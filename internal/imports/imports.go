// Package imports lists what the module's packages import, for the tests
// that guard the module's layering: only runtime/docker imports the Docker
// client (runtime/docker), sdk/ imports nothing of the daemon (sdk/driver),
// only tests import internal/testutil (internal/testutil).
//
// It asks the go command (`go list -json`), so build constraints are
// applied as for a build of this platform, and it reports direct imports
// only: a guard says which packages may name a dependency, and everything
// else reaches it through them. It is used by tests only and imports
// nothing of the module.
package imports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// Package is one package's direct imports.
type Package struct {
	ImportPath string
	// Imports are the imports of its non-test files.
	Imports []string
	// TestImports are the imports of its _test.go files, in-package and
	// external.
	TestImports []string
}

// ImportsUnder returns the imports of the package's non-test files that
// are prefix or below it.
func (p Package) ImportsUnder(prefix string) []string {
	var out []string
	for _, imp := range p.Imports {
		if Under(imp, prefix) {
			out = append(out, imp)
		}
	}
	return out
}

// Under reports whether path is prefix or a package below it.
func Under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// List returns the packages matching patterns (as `go list` takes them,
// e.g. "github.com/hivelet/hivelet/..."), in go list's order. It fails if
// the go command is missing or a package cannot be listed, and if no
// package matched: a guard over nothing passes by luck.
func List(patterns ...string) ([]Package, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("the go command is needed to list imports: %w", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(goBin, append([]string{"list", "-json=ImportPath,Imports,TestImports,XTestImports"}, patterns...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list %s: %w: %s", strings.Join(patterns, " "), err, strings.TrimSpace(stderr.String()))
	}
	var out []Package
	dec := json.NewDecoder(&stdout)
	for {
		var raw struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
		}
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading go list's output: %w", err)
		}
		out = append(out, Package{ImportPath: raw.ImportPath, Imports: raw.Imports,
			TestImports: append(raw.TestImports, raw.XTestImports...)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("go list %s: no package matched", strings.Join(patterns, " "))
	}
	return out, nil
}
