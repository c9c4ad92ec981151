package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
)

// Banned maps each key the module must not log to the key it uses instead.
func Banned() map[string]string { return map[string]string{"error": "err"} }

// A Use is one banned key in one slog call.
type Use struct {
	Pos token.Position
	Key string
	// Want is the key to use instead.
	Want string
}

func (u Use) String() string {
	return fmt.Sprintf("%s: slog key %q (use %q)", u.Pos, u.Key, u.Want)
}

// loggerMethods are the *slog.Logger methods (and slog's functions of the
// same names) that take key-value pairs, with the index of their first
// key-value argument.
var loggerMethods = map[string]int{
	"Debug": 1, "Info": 1, "Warn": 1, "Error": 1,
	"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2,
	"Log": 3, "With": 0,
}

// attrFuncs are slog's Attr constructors, whose first argument is the key.
var attrFuncs = map[string]bool{
	"Any": true, "String": true, "Int": true, "Int64": true, "Uint64": true,
	"Float64": true, "Bool": true, "Time": true, "Duration": true, "Group": true,
}

// LogKeys parses every .go file below root (as walk visits them) and
// returns the keys of banned (as Banned returns) its slog calls use, and
// how many files it read.
func LogKeys(root string, banned map[string]string) (uses []Use, files int, err error) {
	err = walk(root, func(path, _ string) error {
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found, err := FileLogKeys(path, src, banned)
		if err != nil {
			return err
		}
		files++
		uses = append(uses, found...)
		return nil
	})
	return uses, files, err
}

// FileLogKeys returns the keys of banned the slog calls of one Go file use. A
// method call counts as slog's when its receiver is not an imported
// package other than log/slog (so http.Error(w, "error", code) is not
// one); a string literal in a key position is a key, anything else (an
// Attr) takes one position.
func FileLogKeys(name string, src []byte, banned map[string]string) ([]Use, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", name, err)
	}
	pkgNames := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		local := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			local = imp.Name.Name
		}
		pkgNames[local] = path
	}
	var uses []Use
	check := func(lit ast.Expr) {
		if b, ok := lit.(*ast.BasicLit); ok && b.Kind == token.STRING {
			if key, err := strconv.Unquote(b.Value); err == nil {
				if want, ok := banned[key]; ok {
					uses = append(uses, Use{Pos: fset.Position(b.Pos()), Key: key, Want: want})
				}
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok {
			if path, isPkg := pkgNames[x.Name]; isPkg {
				if path != "log/slog" {
					return true
				}
				if attrFuncs[sel.Sel.Name] && len(call.Args) > 0 {
					check(call.Args[0])
					return true
				}
			}
		}
		first, ok := loggerMethods[sel.Sel.Name]
		if !ok {
			return true
		}
		for i := first; i < len(call.Args); i++ {
			if b, ok := call.Args[i].(*ast.BasicLit); ok && b.Kind == token.STRING {
				check(b)
				i++ // its value
			}
		}
		return true
	})
	return uses, nil
}
