package lint

import (
	"fmt"
	"go/ast"
	"go/token"
	"strconv"
	"strings"
)

// GoBuilds returns the places below root (test files included; not
// testdata) that run `go build` themselves: an exec.Command or
// exec.CommandContext call whose arguments hold the string literals "go"
// and "build" one after the other. The module's tests build hivelet and
// plugins through fleettest.BuildStatic only, so that the test processes
// share one compile of the module (other flags compile every package
// again: 250 CPU-seconds from a cold cache). Left out: the one build they
// all run, dockertest.GoBuildStatic (runtime/docker/dockertest/, which
// also builds one-file programs in modules of their own), and
// policies/build (WASM modules). It also returns how many Go files it
// read.
func GoBuilds(root string) (found []string, files int, err error) {
	skip := []string{"runtime/docker/dockertest/", "policies/build/"}
	err = walk(root, func(path, rel string) error {
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		for _, s := range skip {
			if strings.HasPrefix(rel, s) {
				return nil
			}
		}
		files++
		return inspect(path, rel, func(n ast.Node, line int) bool {
			if call, ok := n.(*ast.CallExpr); ok && isExecCommand(call) && runsGoBuild(call.Args) {
				found = append(found, fmt.Sprintf("%s:%d: runs go build itself: call fleettest.BuildStatic", rel, line))
			}
			return true
		})
	})
	return found, files, err
}

// isExecCommand reports whether call is exec.Command(...) or
// exec.CommandContext(...).
func isExecCommand(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == "exec" && (sel.Sel.Name == "Command" || sel.Sel.Name == "CommandContext")
}

// runsGoBuild reports whether args hold the literals "go" and "build" one
// after the other.
func runsGoBuild(args []ast.Expr) bool {
	for i := 0; i+1 < len(args); i++ {
		if literal(args[i]) == "go" && literal(args[i+1]) == "build" {
			return true
		}
	}
	return false
}

// literal is the value of a string literal, or "".
func literal(e ast.Expr) string {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return ""
	}
	s, err := strconv.Unquote(lit.Value)
	if err != nil {
		return ""
	}
	return s
}
