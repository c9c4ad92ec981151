package lint

import (
	"fmt"
	"go/ast"
	"go/token"
	"strings"
)

// Pauses returns the places below root (as walk visits them; not test
// files, not examples/, not internal/wait itself) that write their own
// context-aware sleep instead of calling wait.For: a select of exactly two
// cases, one receiving from a Done() channel and one from time.After with
// nothing to do, is wait.For written again. It also returns how many Go
// files it read.
func Pauses(root string) (found []string, files int, err error) {
	err = walk(root, func(path, rel string) error {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			strings.HasPrefix(rel, "examples/") || strings.HasPrefix(rel, "internal/wait/") {
			return nil
		}
		files++
		return inspect(path, rel, func(n ast.Node, line int) bool {
			if sel, ok := n.(*ast.SelectStmt); ok && isPause(sel) {
				found = append(found, fmt.Sprintf("%s:%d: a select that pauses until a context ends: call wait.For", rel, line))
			}
			return true
		})
	})
	return found, files, err
}

// isPause reports whether sel is `select { case <-x.Done(): ...; case
// <-time.After(d): }`, in either order.
func isPause(sel *ast.SelectStmt) bool {
	if len(sel.Body.List) != 2 {
		return false
	}
	done, after := false, false
	for _, st := range sel.Body.List {
		cc := st.(*ast.CommClause)
		switch receivedCall(cc.Comm) {
		case "Done":
			done = true
		case "time.After":
			after = len(cc.Body) == 0
		}
	}
	return done && after
}

// receivedCall names the call whose channel comm receives from, without
// keeping the value: "Done" for <-x.Done(), "time.After" for
// <-time.After(d), "" otherwise.
func receivedCall(comm ast.Stmt) string {
	es, ok := comm.(*ast.ExprStmt)
	if !ok {
		return ""
	}
	u, ok := es.X.(*ast.UnaryExpr)
	if !ok || u.Op != token.ARROW {
		return ""
	}
	call, ok := u.X.(*ast.CallExpr)
	if !ok {
		return ""
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && sel.Sel.Name == "After" {
		return "time.After"
	}
	if sel.Sel.Name == "Done" && len(call.Args) == 0 {
		return "Done"
	}
	return ""
}
