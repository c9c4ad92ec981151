// Package lint holds the module's own checks of how its source reads, each
// run over the whole tree by a test of this package:
//   - an error is logged under the slog key "err", never "error" (LogKeys,
//     TestTheModuleLogsErrorsUnderErr);
//   - every library package outside internal/ and examples/ names in its
//     package doc a page under docs/ that exists, and no Go comment or
//     Markdown file cites a docs/, spec/ or root page the tree does not have
//     (Docs, TestEveryPackageDocPointsAtAPageInTheTree);
//   - a loop pauses through internal/wait.For, never a select of its own
//     on a Done channel and time.After (Pauses,
//     TestTheModulePausesOnlyThroughWaitFor);
//   - a test builds hivelet or a plugin through fleettest.BuildStatic,
//     never a `go build` of its own with other flags, which would compile
//     the module a second time in every suite run (GoBuilds,
//     TestTheModuleBuildsBinariesOnlyThroughBuildStatic);
//   - the README, the Makefile and .ci/run state one test command, which
//     ends with ./... and whose leading packages exist (TestCommand,
//     TestTheREADMEMakefileAndCIRunOneTestCommand).
//
// It reads source as text (go/parser: no build, no type checking), so a
// check sees every file whatever its build constraints. Each check has a
// control over testdata that must find what it looks for. It is used by
// tests only and imports only the standard library.
package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
)

// walk calls fn for every file below root, not below a directory named
// testdata or starting with "." (root itself excepted), with its path and
// its slash-separated path relative to root.
func walk(root string, fn func(path, rel string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		return fn(path, filepath.ToSlash(rel))
	})
}

// inspect parses the Go file at path (rel names it in errors) and calls
// fn for each of its nodes, as ast.Inspect does, with the line each starts
// at.
func inspect(path, rel string, fn func(n ast.Node, line int) bool) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return fmt.Errorf("parsing %s: %w", rel, err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			return fn(n, 0)
		}
		return fn(n, fset.Position(n.Pos()).Line)
	})
	return nil
}
