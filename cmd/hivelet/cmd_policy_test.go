package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/hivelet/hivelet/internal/testutil"
)

// runPolicyCLI runs the CLI in-process and returns its exit code and output.
func runPolicyCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	root := newRootCmd()
	root.SetArgs(append(args, "--cache-dir", testutil.WazeroCacheDir(t))) // the suite's one cache
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.Execute()
	if err == nil {
		return 0, out.String()
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code, out.String() + err.Error()
	}
	return 1, out.String() + err.Error()
}

func writeJSON(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const canaryInput = `{"canary": {"job_id": "web", "job_version": 2, "deployment_id": "d1", "group": "g",
 "percent": 50, "count": 2, "eligible": [
  {"id": "n3", "name": "h3", "datacenter": "dc1", "node_pool": "default", "status": "ready", "eligibility": "eligible", "attributes": {}, "meta": {}},
  {"id": "n1", "name": "h1", "datacenter": "dc2", "node_pool": "default", "status": "ready", "eligibility": "eligible", "attributes": {}, "meta": {}},
  {"id": "n2", "name": "h2", "datacenter": "dc1", "node_pool": "default", "status": "ready", "eligibility": "eligible", "attributes": {}, "meta": {}}]}}`

const completionInput = `{"completion": {"now": "2027-01-01T00:00:00Z",
 "deployment": {"id": "d1", "job_id": "web", "job_version": 2, "status": "running",
  "task_groups": {"g": {"desired_total": 3, "desired_canaries": 1, "auto_promote": true}}},
 "groups": {"g": {"placed": 1, "healthy": 1, "canaries_healthy": 1}}}}`

// generous are the deadlines of the tests below that are not about
// deadlines: the agent's (100 ms a call, 2 s a module's initialisation)
// judge a module on a node, and under -race beside three other test
// packages on two cores a Go guest's first call once took longer
// (TestPolicyEvalPrintsTheDecisionReasonAndTime failed .ci/run on it).
// (`policy test` judges calls by the agent's deadline, as a node would:
// only its initialisation gets more.)
var (
	generous     = []string{"--deadline", "10s", "--load-deadline", "1m"}
	generousLoad = []string{"--load-deadline", "1m"}
)

func TestPolicyEvalPrintsTheDecisionReasonAndTime(t *testing.T) {
	// Parallel: most of its time is compiling three built-in modules under
	// -race in this process; its files are its own, the cache is shared
	// (policyCache) and safe for concurrent use.
	t.Parallel()
	code, out := runPolicyCLI(t, append([]string{"policy", "eval", "builtin:percent", "--input", writeJSON(t, "in.json", canaryInput)}, generous...)...)
	if code != 0 || !strings.Contains(out, "canaries: n1 n2") || !strings.Contains(out, "reason:") || !strings.Contains(out, "time:") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, out = runPolicyCLI(t, append([]string{"policy", "eval", "builtin:spread", "--input", writeJSON(t, "in.json", canaryInput)}, generous...)...)
	if code != 0 || !strings.Contains(out, "canaries: n2 n1") {
		t.Fatalf("spread: exit %d:\n%s", code, out)
	}
	code, out = runPolicyCLI(t, append([]string{"policy", "eval", "builtin:default", "--input", writeJSON(t, "in.json", completionInput)}, generous...)...)
	if code != 0 || !strings.Contains(out, "decision: promote") {
		t.Fatalf("completion: exit %d:\n%s", code, out)
	}
}

func TestPolicyTestExitsNonZeroWithADiffOnAMismatch(t *testing.T) {
	t.Parallel() // as TestPolicyEvalPrintsTheDecisionReasonAndTime: a compile, files of its own
	cases := func(want string) string {
		return fmt.Sprintf(`{"cases": [
 {"name": "first two by id", "input": %s, "want": {"node_ids": ["n1", "n2"]}},
 {"name": "second", "input": %s, "want": {"node_ids": %s}}]}`, canaryInput, canaryInput, want)
	}
	code, out := runPolicyCLI(t, append([]string{"policy", "test", "builtin:percent", writeJSON(t, "ok.json", cases(`["n1", "n2"]`))}, generousLoad...)...)
	if code != 0 || !strings.Contains(out, "2 of 2 cases passed") {
		t.Fatalf("control: exit %d:\n%s", code, out)
	}
	code, out = runPolicyCLI(t, append([]string{"policy", "test", "builtin:percent", writeJSON(t, "bad.json", cases(`["n2", "n3"]`))}, generousLoad...)...)
	if code != 1 || !strings.Contains(out, "FAIL second") || !strings.Contains(out, "node_ids: want [n2 n3], got [n1 n2]") || !strings.Contains(out, "1 of 2 cases passed") {
		t.Fatalf("mismatch: exit %d:\n%s", code, out)
	}
}

func TestPolicyTestRunsTheExampleCasesFile(t *testing.T) {
	t.Parallel() // as TestPolicyEvalPrintsTheDecisionReasonAndTime: a build and a compile into files of its own
	wasm := filepath.Join(t.TempDir(), "canarymeta.wasm")
	code, out := runPolicyCLI(t, "policy", "build", "../../examples/policies/canarymeta", "-o", wasm)
	if code != 0 || !strings.Contains(out, "sha256") {
		t.Fatalf("build: exit %d:\n%s", code, out)
	}
	code, out = runPolicyCLI(t, append([]string{"policy", "test", wasm, "../../examples/policies/canarymeta/cases.json"}, generousLoad...)...)
	if code != 0 || !strings.Contains(out, "5 of 5 cases passed") {
		t.Fatalf("test: exit %d:\n%s", code, out)
	}
	// inspect loads the module too (its initialisation hit the 2 s load
	// deadline once under the suite's load).
	code, out = runPolicyCLI(t, append([]string{"policy", "inspect", wasm}, generousLoad...)...)
	if code != 0 || !strings.Contains(out, "kinds:       canary") || !strings.Contains(out, "meta canary") || !strings.Contains(out, "abi version: 2") {
		t.Fatalf("inspect: exit %d:\n%s", code, out)
	}
}

func TestPolicyCommandsRefuseBadInputWithExitCode2(t *testing.T) {
	t.Parallel() // as TestPolicyEvalPrintsTheDecisionReasonAndTime: compiles, reads its own files
	for _, args := range [][]string{
		{"policy", "eval", "builtin:percent", "--input", "/nonexistent.json"},
		{"policy", "eval", "builtin:percent", "--input", writeJSON(t, "x.json", `{"canary": {}, "completion": {}}`)},
		{"policy", "eval", "builtin:percent", "--input", writeJSON(t, "y.json", `{"canary": {"unknown_field": 1}}`)},
		{"policy", "inspect", "builtin:nope"},
		{"policy", "inspect", "../../policies/testdata/wat/abi9.wasm"},
		{"policy", "test", "builtin:percent", writeJSON(t, "z.json", `{"cases": []}`)},
	} {
		if code, out := runPolicyCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2:\n%s", args, code, out)
		}
	}
	// Control: a good invocation exits 0. Its module's initialisation
	// (a Go guest's runtime start) is given a minute, not the agent's 2 s:
	// with the suite's other packages running beside it, it once took
	// longer, and this test is about exit codes, not load times.
	if code, out := runPolicyCLI(t, "policy", "inspect", "builtin:quorum", "--load-deadline", "1m"); code != 0 || !strings.Contains(out, "kinds:       completion") {
		t.Fatalf("control: exit %d:\n%s", code, out)
	}
}

func TestPolicyEvalReportsAFaultWithExitCode1(t *testing.T) {
	code, out := runPolicyCLI(t, "policy", "eval", "../../policies/testdata/wat/loop.wasm", "--input", writeJSON(t, "in.json", canaryInput))
	if code != 1 || !strings.Contains(out, "fault:    deadline") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestPolicyPushAndListUseTheObjectStore(t *testing.T) {
	srv := testutil.StartNATS(t, &server.Options{JetStream: true, StoreDir: t.TempDir()})
	url := srv.ClientURL()
	code, out := runPolicyCLI(t, "policy", "push", "../../policies/testdata/wat/raw.wasm", "--name", "first-nodes", "--nats", url)
	if code != 0 || !strings.Contains(out, "pushed first-nodes") {
		t.Fatalf("push: exit %d:\n%s", code, out)
	}
	code, out = runPolicyCLI(t, "policy", "list", "--nats", url)
	if code != 0 || !strings.Contains(out, "first-nodes") || !strings.Contains(out, "builtin:spread") {
		t.Fatalf("list: exit %d:\n%s", code, out)
	}
	// A module refused at load is not pushed.
	code, out = runPolicyCLI(t, "policy", "push", "../../policies/testdata/wat/abi9.wasm", "--name", "bad", "--nats", url)
	if code != 2 {
		t.Fatalf("push of a refused module: exit %d:\n%s", code, out)
	}
	if _, out = runPolicyCLI(t, "policy", "list", "--nats", url); strings.Contains(out, "bad ") {
		t.Fatalf("the refused module was pushed:\n%s", out)
	}
}
