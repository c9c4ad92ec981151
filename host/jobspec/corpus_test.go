package jobspec_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/jobspec"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/plugins/exec"
	"github.com/hivelet/hivelet/plugins/mock"
	"github.com/hivelet/hivelet/sdk/driver"
)

// corpusCase is a corpus file's header (testdata/corpus/README.md).
type corpusCase struct {
	shape, verdict, want string
	vars                 []string
}

func readHeader(t *testing.T, name string, src []byte) corpusCase {
	t.Helper()
	var c corpusCase
	for _, line := range strings.Split(string(src), "\n") {
		rest, ok := strings.CutPrefix(line, "# ")
		if !ok {
			if strings.HasPrefix(line, "#") {
				continue
			}
			break
		}
		key, val, _ := strings.Cut(rest, ":")
		val = strings.TrimSpace(val)
		switch key {
		case "shape":
			c.shape = val
		case "verdict":
			c.verdict = val
		case "want":
			c.want = val
		case "vars":
			c.vars = strings.Fields(val)
		}
	}
	if c.shape == "" || !slices.Contains([]string{"runs", "refused", "driver"}, c.verdict) || (c.verdict != "runs" && c.want == "") {
		t.Fatalf("%s: header needs shape, a verdict (runs, refused, driver) and, unless it runs, want: %+v", name, c)
	}
	return c
}

// driverProblems checks what the built-in driver checks at start: that it
// exists, that the config matches its schema, and (docker) that each
// ports label is one of the group's network and each cap_add is allowed on
// a node with the default docker settings, and that no container is
// privileged (docker.allow_privileged is off by default, as in Nomad).
func driverProblems(job *model.Job) []string {
	// raw_exec is the exec driver under Nomad's name, on agents that enable it.
	schemas := map[string]*driver.Schema{"docker": docker.Schema(), "exec": exec.Schema(), "mock": mock.Schema(), "raw_exec": exec.Schema()}
	var out []string
	for _, g := range job.Groups {
		labels := map[string]bool{}
		if g.Network != nil {
			for _, p := range g.Network.Ports {
				labels[p.Label] = true
			}
		}
		for _, task := range g.Tasks {
			schema, ok := schemas[task.Driver]
			if !ok {
				out = append(out, fmt.Sprintf("task %s: driver %q is not one of the built-in drivers", task.Name, task.Driver))
				continue
			}
			cfg := task.Config
			if cfg == nil {
				cfg = map[string]any{}
			}
			if err := driver.ValidateConfig(schema, cfg); err != nil {
				out = append(out, fmt.Sprintf("task %s: %v", task.Name, err))
			}
			if task.Driver == "docker" {
				ls, _ := cfg["ports"].([]any)
				for _, l := range ls {
					if s, _ := l.(string); !labels[s] {
						out = append(out, fmt.Sprintf("task %s: ports label %v is not in the group's network", task.Name, l))
					}
				}
				if cfg["privileged"] == true {
					out = append(out, fmt.Sprintf("task %s: privileged: \"privileged\" needs docker.allow_privileged on the node", task.Name))
				}
				caps, _ := cfg["cap_add"].([]any)
				for i, c := range caps {
					name := strings.TrimPrefix(strings.ToLower(fmt.Sprint(c)), "cap_")
					if !slices.Contains(docker.DefaultAllowCaps, name) {
						out = append(out, fmt.Sprintf("task %s: cap_add[%d]: %q needs docker.allow_caps on the node", task.Name, i, name))
					}
				}
			}
		}
	}
	return out
}

// TestTheCorpusGetsItsVerdicts runs every community-shaped job file of
// testdata/corpus through job validate (and what the built-in driver
// checks at start) and compares with the verdict its header states.
func TestTheCorpusGetsItsVerdicts(t *testing.T) {
	files, err := filepath.Glob("testdata/corpus/*.nomad")
	if err != nil || len(files) < 30 {
		t.Fatalf("corpus: %d files (%v), want at least 30", len(files), err)
	}
	tally := map[string]int{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := readHeader(t, f, src)
		tally[c.verdict]++
		t.Run(filepath.Base(f), func(t *testing.T) {
			// As hivelet job validate reads it: with the built-in drivers'
			// schemas (a config value is converted to its field's type).
			job, err := jobspec.ParseWith(f, src, jobspec.Inputs{Vars: c.vars, Drivers: map[string]*driver.Schema{
				"docker": docker.Schema(), "exec": exec.Schema(), "mock": mock.Schema(), "raw_exec": exec.Schema()}})
			switch c.verdict {
			case "refused":
				if err == nil {
					t.Fatalf("validated; want it refused with %q", c.want)
				}
				if !strings.Contains(err.Error(), c.want) {
					t.Fatalf("refused with\n%v\nwant %q among the errors", err, c.want)
				}
				for _, line := range strings.Split(err.Error(), "\n") {
					if !strings.HasPrefix(line, f+":") {
						t.Errorf("an error without its file position: %q", line)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("refused:\n%v", err)
			}
			problems := driverProblems(job)
			if c.verdict == "runs" {
				if len(problems) > 0 {
					t.Fatalf("parses, but the driver would refuse it: %v", problems)
				}
				return
			}
			if !strings.Contains(strings.Join(problems, "\n"), c.want) {
				t.Fatalf("driver problems %v, want %q", problems, c.want)
			}
		})
	}
	t.Logf("corpus: %d files: %d run, %d refused by the parser, %d refused by the driver", len(files), tally["runs"], tally["refused"], tally["driver"])
}
