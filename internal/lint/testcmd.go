package lint

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// testCommandSources are the files that state the suite's test command,
// each with the pattern of its line: the README's "two commands" block,
// the Makefile's test target and .ci/run, which must run exactly the
// README's command.
var testCommandSources = []struct {
	file string
	line *regexp.Regexp
}{
	{"README.md", regexp.MustCompile(`^GOTOOLCHAIN=\S+ (go test [^#]*?)\s*#`)},
	{"Makefile", regexp.MustCompile(`^\t(go test -race .*)$`)},
	{".ci/run", regexp.MustCompile(`^(go test -race .*)$`)},
}

// TestCommand reads the suite's test command from every file that states
// it below root and reports where they differ, and where the command
// names a package directory the tree does not have or does not end with
// ./... (it lists its longest packages first so that `go test`, which
// starts packages in the order it is given them, does not leave one of
// them alone at the end; the rest come from ./...). It returns the command
// as the README states it.
func TestCommand(root string) (cmd string, found []string, err error) {
	for _, src := range testCommandSources {
		b, err := os.ReadFile(filepath.Join(root, src.file))
		if err != nil {
			return "", nil, err
		}
		var got []string
		for i, line := range strings.Split(string(b), "\n") {
			if m := src.line.FindStringSubmatch(line); m != nil {
				got = append(got, m[1])
				if len(got) > 1 {
					found = append(found, fmt.Sprintf("%s:%d: a second test command", src.file, i+1))
				}
			}
		}
		switch {
		case len(got) == 0:
			found = append(found, fmt.Sprintf("%s: no test command found", src.file))
			if src.file == "README.md" {
				return "", found, nil // nothing to compare the others with
			}
		case src.file == "README.md":
			cmd = got[0]
		case got[0] != cmd:
			found = append(found, fmt.Sprintf("%s: runs %q, README.md %q", src.file, got[0], cmd))
		}
	}
	args := strings.Fields(cmd)
	if args[len(args)-1] != "./..." {
		found = append(found, fmt.Sprintf("README.md: the test command %q does not end with ./...", cmd))
	}
	for _, a := range args[2 : len(args)-1] {
		if !strings.HasPrefix(a, "./") {
			continue
		}
		if fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(a))); err != nil || !fi.IsDir() {
			found = append(found, fmt.Sprintf("README.md: the test command names %s, which is not a directory of the tree", a))
		}
	}
	return cmd, found, nil
}
