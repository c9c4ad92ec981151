package lint

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// citation matches a cited page: a name ending in .md right under docs/ or
// spec/ (group 1), or a capitalised one at the module's root, README.md and
// the like (group 2); a path ending in such a name (examples/x/README.md)
// is not a citation of the root's.
var citation = regexp.MustCompile(`\b((?:docs|spec)/[\w.-]+\.md)\b|(?:^|[^\w/.-])([A-Z][A-Z_]+\.md)\b`)

// cited returns the pages text cites, as paths relative to the root.
func cited(text string) []string {
	var out []string
	for _, m := range citation.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1]+m[2])
	}
	return out
}

// A Problem is one package doc without a page, or one citation of a page
// the tree does not have.
type Problem struct {
	Where string // a package directory, or file:line
	What  string
}

func (p Problem) String() string { return p.Where + ": " + p.What }

// Docs reads the files below root (as walk visits them) and returns their
// problems, sorted, and how many library packages it checked.
func Docs(root string) (problems []Problem, packages int, err error) {
	docs := map[string]string{} // package dir -> package doc, library packages
	err = walk(root, func(path, rel string) error {
		switch {
		case strings.HasSuffix(path, ".md"):
			text, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			problems = append(problems, deadCitations(root, rel, string(text), 1)...)
		case strings.HasSuffix(path, ".go"):
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return fmt.Errorf("parsing %s: %w", rel, err)
			}
			for _, g := range f.Comments {
				line := fset.Position(g.Pos()).Line
				for _, c := range g.List {
					problems = append(problems, deadCitations(root, rel, c.Text, line)...)
					line += strings.Count(c.Text, "\n") + 1
				}
			}
			dir := filepath.ToSlash(filepath.Dir(rel))
			if strings.HasSuffix(path, "_test.go") || f.Name.Name == "main" ||
				dir == "internal" || strings.HasPrefix(dir, "internal/") || strings.Contains("/"+dir+"/", "/internal/") ||
				dir == "examples" || strings.HasPrefix(dir, "examples/") {
				return nil
			}
			docs[dir] += f.Doc.Text()
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	for dir, doc := range docs {
		pages := cited(doc)
		ok := false
		for _, p := range pages {
			if strings.HasPrefix(p, "docs/") && exists(root, p) {
				ok = true
			}
		}
		if !ok {
			problems = append(problems, Problem{dir, "the package doc names no page under docs/"})
		}
	}
	sort.Slice(problems, func(i, j int) bool { return problems[i].String() < problems[j].String() })
	return problems, len(docs), nil
}

// deadCitations returns the pages text cites that root does not have,
// counting lines from line.
func deadCitations(root, file, text string, line int) []Problem {
	var out []Problem
	for i, l := range strings.Split(text, "\n") {
		for _, p := range cited(l) {
			if !exists(root, p) {
				out = append(out, Problem{fmt.Sprintf("%s:%d", file, line+i), "cites " + p + ", which is not in the tree"})
			}
		}
	}
	return out
}

func exists(root, page string) bool {
	st, err := os.Stat(filepath.Join(root, filepath.FromSlash(page)))
	return err == nil && !st.IsDir()
}
