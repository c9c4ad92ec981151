package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
)

// The -update flag rewrites the expected plans of examples/reconcile. It is
// registered only if no other test file of this package did already.
var _ = func() bool {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
	return true
}()

func updating() bool { return flag.Lookup("update").Value.String() == "true" }

const examplesDir = "../../examples/reconcile"

// TestEveryReconcileExamplePrintsItsExpectedPlanByteForByte runs each
// examples/reconcile/<name>.json and compares the output with
// <name>.plan.json (go test ./cmd/hivelet -run ReconcileExample -update
// rewrites them).
func TestEveryReconcileExamplePrintsItsExpectedPlanByteForByte(t *testing.T) {
	fixtures, err := filepath.Glob(filepath.Join(examplesDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fx := range fixtures {
		if strings.HasSuffix(fx, ".plan.json") {
			continue
		}
		n++
		t.Run(filepath.Base(fx), func(t *testing.T) {
			var out, errb bytes.Buffer
			root := newRootCmd()
			root.SetArgs([]string{"reconcile", "-f", fx})
			root.SetOut(&out)
			root.SetErr(&errb)
			if err := root.Execute(); err != nil {
				t.Fatalf("reconcile %s: %v", fx, err)
			}
			golden := strings.TrimSuffix(fx, ".json") + ".plan.json"
			if updating() {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("missing expected plan (run with -update): %v", err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Errorf("%s: plan differs from %s\ngot:\n%s", fx, golden, out.Bytes())
			}
		})
	}
	if n < 5 {
		t.Fatalf("only %d example fixtures", n)
	}
}

func TestReconcileReadsTheFixtureFromStdin(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(examplesDir, "first-placement.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(examplesDir, "first-placement.plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	root := newRootCmd()
	root.SetArgs([]string{"reconcile", "-f", "-"})
	root.SetIn(bytes.NewReader(data))
	root.SetOut(&out)
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("stdin plan differs:\n%s", out.Bytes())
	}
}

func TestAMalformedFixtureExitsWithCode2AndNamesTheField(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(examplesDir, "node-down-lost.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, from, to, wantInErr string
	}{
		{"unknown top-level field", `"disconnect_handling"`, `"colour": 1, "disconnect_handling"`, `unknown field "colour"`},
		{"bad client status", `"client_status": "running"`, `"client_status": "sleeping"`, "live_allocs[0].client_status"},
		{"bad node status", `"status": "down"`, `"status": "zombie"`, "tainted_nodes.node-b.status"},
		{"bad job type", `"type": "system"`, `"type": "service"`, "job.type"},
		{"bad now", `"now": "2026-01-01T12:00:00Z"`, `"now": "noon"`, "now"},
		{"missing now", `"now": "2026-01-01T12:00:00Z",`, ``, "now: missing"},
		{"trailing data", "", "", "after the JSON document"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := strings.Replace(string(good), c.from, c.to, 1)
			if c.from == "" {
				doc += "{}"
			} else if doc == string(good) {
				t.Fatalf("fixture edit %q did not apply", c.from)
			}
			_, err := reconcileFixture([]byte(doc))
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), c.wantInErr) {
				t.Fatalf("got %v, want exit code 2 naming %q", err, c.wantInErr)
			}
			path := filepath.Join(dir, "bad.json")
			if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			if code := runQuiet(t, "reconcile", "-f", path); code != 2 {
				t.Fatalf("exit code %d, want 2", code)
			}
		})
	}
	// Control: the unedited fixture succeeds with exit code 0.
	if _, err := reconcileFixture(good); err != nil {
		t.Fatalf("control: %v", err)
	}
	var de *model.DecodeError
	_, err = reconcileFixture([]byte(`{"job": 1}`))
	if !errors.As(err, &de) || de.Path != "job" {
		t.Errorf("a DecodeError naming job: %v", err)
	}
}

// runQuiet runs the CLI with stdout and stderr discarded and returns its
// exit code.
func runQuiet(t *testing.T, args ...string) int {
	t.Helper()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = devnull, devnull
	defer func() { os.Stdout, os.Stderr = oldOut, oldErr }()
	return run(args)
}
