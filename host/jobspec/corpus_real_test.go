package jobspec_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/jobspec"
	"github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/plugins/exec"
	"github.com/hivelet/hivelet/plugins/mock"
	"github.com/hivelet/hivelet/sdk/driver"
)

// realEntry is one line of testdata/corpus/real/MANIFEST.tsv.
type realEntry struct {
	file, repo, commit, path, licence, sha256, verdict, excluded, want string
	vars                                                               []string
	line                                                               int
}

const realManifest = "testdata/corpus/real/MANIFEST.tsv"

// permissive are the licences whose files may be kept and redistributed
// with their notice; a file under any other (or none) has no place in the
// manifest.
var permissive = []string{"MIT", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "MPL-2.0"}

func readRealManifest(t *testing.T) []realEntry {
	t.Helper()
	f, err := os.Open(realManifest)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []realEntry
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c := strings.Split(line, "\t")
		if len(c) != 10 {
			t.Fatalf("%s:%d: %d fields, want 10", realManifest, n, len(c))
		}
		var vars []string
		if c[8] != "-" {
			vars = strings.Fields(c[8])
		}
		out = append(out, realEntry{c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[9], vars, n})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTheRealCorpusManifestNamesASourceAndALicenceForEveryFile: each entry
// names a repository other than hashicorp/nomad (BUSL), a full commit, a
// permissive licence, the file's SHA-256, a verdict and, for a refusal,
// the text it must contain; the files are at least 25, and unique.
func TestTheRealCorpusManifestNamesASourceAndALicenceForEveryFile(t *testing.T) {
	entries := readRealManifest(t)
	if len(entries) < 25 {
		t.Fatalf("%d entries, want at least 25", len(entries))
	}
	hex40, hex64 := regexp.MustCompile(`^[0-9a-f]{40}$`), regexp.MustCompile(`^[0-9a-f]{64}$`)
	seen := map[string]bool{}
	for _, e := range entries {
		at := func(format string, args ...any) {
			t.Errorf("%s:%d (%s): "+format, append([]any{realManifest, e.line, e.file}, args...)...)
		}
		if seen[e.file] {
			at("listed twice")
		}
		seen[e.file] = true
		if strings.EqualFold(e.repo, "hashicorp/nomad") || strings.Count(e.repo, "/") != 1 {
			at("repository %q: an owner/name other than hashicorp/nomad", e.repo)
		}
		if !hex40.MatchString(e.commit) || !hex64.MatchString(e.sha256) {
			at("commit %q and sha256 %q must be full hex", e.commit, e.sha256)
		}
		if !slices.Contains(permissive, e.licence) {
			at("licence %q is not one of %v", e.licence, permissive)
		}
		switch {
		case e.verdict == "runs" && e.want == "" && e.excluded == "-":
		case e.verdict == "refused" && e.want != "" && slices.Contains([]string{"-", "csi", "vault", "periodic", "parameterized", "service"}, e.excluded):
		case e.verdict == "driver" && e.want != "" && e.excluded == "-":
		default:
			at("verdict %q, excluded %q, want %q: a file runs (not excluded, no want), or is refused (by the parser, or by the driver: driver) with a want", e.verdict, e.excluded, e.want)
		}
	}
}

// realCorpusDir is where the real files are: $HIVELET_REAL_CORPUS, else
// testdata/corpus/real/files ("" when neither holds any).
func realCorpusDir() string {
	for _, d := range []string{os.Getenv("HIVELET_REAL_CORPUS"), "testdata/corpus/real/files"} {
		if d == "" {
			continue
		}
		if m, _ := filepath.Glob(filepath.Join(d, "*.nomad")); len(m) > 0 {
			return d
		}
	}
	return ""
}

// TestTheRealCorpusGetsItsVerdicts runs every real job file of the
// manifest, byte for byte as published (its SHA-256 is checked first),
// through job validate with the built-in drivers' schemas (as the CLI
// does), then through what the driver checks at start (driverProblems),
// and compares with the verdict the manifest states. A refusal must name
// the file and a position on every line. It logs the pass rate over the
// files that count (not excluded). Without the files (README.md, "Real
// files") it skips, unless HIVELET_REQUIRE_REAL_CORPUS=1.
func TestTheRealCorpusGetsItsVerdicts(t *testing.T) {
	dir := realCorpusDir()
	if dir == "" {
		if os.Getenv("HIVELET_REQUIRE_REAL_CORPUS") == "1" {
			t.Fatal("no real corpus files: set HIVELET_REAL_CORPUS to their directory (testdata/corpus/README.md)")
		}
		t.Skip("no real corpus files here: set HIVELET_REAL_CORPUS to their directory (testdata/corpus/README.md, \"Real files\")")
	}
	schemas := map[string]*driver.Schema{"docker": docker.Schema(), "exec": exec.Schema(), "mock": mock.Schema(), "raw_exec": exec.Schema()}
	entries := readRealManifest(t)
	counted, runs, caps := 0, 0, 0
	why := map[string]int{}
	for _, e := range entries {
		if e.excluded == "-" {
			counted++
			switch e.verdict {
			case "runs":
				runs++
			case "driver":
				caps++
			}
		} else {
			why[e.excluded]++
		}
		t.Run(e.file, func(t *testing.T) {
			name := filepath.Join(dir, e.file)
			src, err := os.ReadFile(name)
			if errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("missing: fetch %s at %s, path %s", e.repo, e.commit, e.path)
			} else if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(src)
			if got := hex.EncodeToString(sum[:]); got != e.sha256 {
				t.Fatalf("sha256 %s, want %s: not the published file", got, e.sha256)
			}
			job, err := jobspec.ParseWith(name, src, jobspec.Inputs{Drivers: schemas, Vars: e.vars})
			if e.verdict == "refused" {
				if err == nil {
					t.Fatalf("validated; want it refused with %q", e.want)
				}
				if !strings.Contains(err.Error(), e.want) {
					t.Fatalf("refused with\n%v\nwant %q among the errors", err, e.want)
				}
				for _, line := range strings.Split(err.Error(), "\n") {
					if !regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `:\d+:\d+: `).MatchString(line) {
						t.Errorf("an error without its file:line:col: %q", line)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("refused:\n%v", err)
			}
			problems := driverProblems(job)
			if e.verdict == "runs" {
				if len(problems) > 0 {
					t.Fatalf("parses, but the driver would refuse it: %v", problems)
				}
				return
			}
			if !strings.Contains(strings.Join(problems, "\n"), e.want) {
				t.Fatalf("driver problems %v, want %q", problems, e.want)
			}
		})
	}
	t.Logf("real corpus: %d files; %d count (excluded: %v); %d of them run unchanged on a node with default settings (%d%%), %d more need the node's docker.allow_caps or allow_privileged, as in Nomad (%d%%)",
		len(entries), counted, why, runs, 100*runs/max(1, counted), caps, 100*(runs+caps)/max(1, counted))
}
