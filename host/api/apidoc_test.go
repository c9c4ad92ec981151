package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

var routeRE = regexp.MustCompile(`^(GET|POST|PUT|PATCH|DELETE) (/\S*)$`)

// documentedRoutes are the "### METHOD /path" headings of docs/api.md.
func documentedRoutes(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok && routeRE.MatchString(h) {
			out = append(out, h)
		}
	}
	return out
}

// registeredRoutes reads the route patterns the package's handler code
// registers: full patterns written as literals ("GET /v1/health"), and the
// patterns of the local helpers (serve, action) that prefix their first
// argument with a method or a path: the literal in the helper's body that
// starts with a method, followed by each call's first argument.
func registeredRoutes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		prefixes := map[string]string{} // helper variable → route prefix
		prefixLits := map[*ast.BasicLit]bool{}
		ast.Inspect(file, func(n ast.Node) bool {
			as, ok := n.(*ast.AssignStmt)
			if !ok || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
				return true
			}
			id, ok1 := as.Lhs[0].(*ast.Ident)
			fl, ok2 := as.Rhs[0].(*ast.FuncLit)
			if !ok1 || !ok2 {
				return true
			}
			ast.Inspect(fl.Body, func(m ast.Node) bool {
				if be, ok := m.(*ast.BinaryExpr); ok && be.Op == token.ADD {
					if lit, ok := be.X.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						if regexp.MustCompile(`^(GET|POST|PUT|PATCH|DELETE) `).MatchString(s) {
							prefixes[id.Name] = s
							prefixLits[lit] = true
						}
					}
				}
				return true
			})
			return true
		})
		ast.Inspect(file, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.BasicLit:
				if x.Kind != token.STRING || prefixLits[x] {
					return true
				}
				if s, _ := strconv.Unquote(x.Value); routeRE.MatchString(s) {
					out = append(out, s)
				}
			case *ast.CallExpr:
				id, ok := x.Fun.(*ast.Ident)
				if !ok || len(x.Args) == 0 {
					return true
				}
				p, ok := prefixes[id.Name]
				if !ok {
					return true
				}
				if lit, ok := x.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					out = append(out, p+s)
				}
			}
			return true
		})
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestEveryRouteIsDocumented: every route heading of docs/api.md is served
// by the handler under exactly that pattern, and every route the code
// registers has its heading. The control: a path the page does not
// document finds no pattern.
func TestEveryRouteIsDocumented(t *testing.T) {
	docs := documentedRoutes(t)
	code := registeredRoutes(t)
	if len(code) < 10 {
		t.Fatalf("found only %d registered routes in the code (%v): the scan is broken", len(code), code)
	}
	for _, r := range code {
		if !slices.Contains(docs, r) {
			t.Errorf("route %q is registered but docs/api.md has no \"### %s\" heading", r, r)
		}
	}
	mux, ok := NewHandler(Providers{}, prometheus.NewRegistry()).(*http.ServeMux)
	if !ok {
		t.Fatal("NewHandler no longer returns a *http.ServeMux")
	}
	fill := regexp.MustCompile(`\{[a-z_]+\}`)
	for _, d := range docs {
		if !slices.Contains(code, d) {
			t.Errorf("docs/api.md documents %q, which the code does not register", d)
		}
		m := routeRE.FindStringSubmatch(d)
		req := httptest.NewRequest(m[1], fill.ReplaceAllString(m[2], "x1"), nil)
		serving := mux
		if strings.HasPrefix(m[2], "/debug/") {
			serving = debugMux() // WithDebug's, http.enable_debug
		}
		if _, pattern := serving.Handler(req); pattern != d {
			t.Errorf("%s %s is served by pattern %q, want %q", req.Method, req.URL.Path, pattern, d)
		}
	}
	if _, pattern := mux.Handler(httptest.NewRequest("GET", "/v1/undocumented", nil)); pattern != "" {
		t.Errorf("an unknown path matched %q", pattern)
	}
}
