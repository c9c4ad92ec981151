package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedSkeletonsBuildAndPassAsGenerated is what a new author does:
// init a policy and a driver module outside this repository, then run
// their tests, and for the policy `policy build` and `policy test`. The
// skeletons reach the SDK through the go.mod's replace of this checkout.
func TestGeneratedSkeletonsBuildAndPassAsGenerated(t *testing.T) {
	// Parallel: its time is the go command building two modules of its
	// own in a temporary directory and a WASM module; it changes no
	// working directory or environment.
	t.Parallel()
	if testing.Short() {
		t.Skip("builds two modules and a WASM module")
	}
	sdk, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	goTest := func(dir string) {
		t.Helper()
		cmd := exec.Command("go", "test", "-count=1", "./...")
		cmd.Dir = dir
		// With the flags of the module's static builds
		// (fleettest.BuildStatic): the SDK's dependencies (gRPC,
		// go-plugin, protobuf) are then in the build cache already, where
		// a default build compiles them again (this test took 276 s
		// instead of 87 in a cold-cache suite run). Nothing generated
		// uses cgo or reads its source paths.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -trimpath"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go test in the generated %s: %v\n%s", dir, err, out)
		}
	}

	pol := filepath.Join(root, "nocanary")
	if code, out := runPluginCLI("policy", "init", pol, "--sdk", sdk); code != 0 {
		t.Fatalf("policy init: exit %d: %s", code, out)
	}
	gomod, err := os.ReadFile(filepath.Join(pol, "go.mod"))
	if err != nil || !strings.Contains(string(gomod), "replace github.com/hivelet/hivelet => "+sdk) {
		t.Fatalf("the go.mod does not replace the SDK with the checkout (%v):\n%s", err, gomod)
	}
	goTest(pol)
	wasm := filepath.Join(pol, "nocanary.wasm")
	if code, out := runPluginCLI("policy", "build", pol); code != 0 {
		t.Fatalf("policy build: exit %d: %s", code, out)
	}
	cases := filepath.Join(pol, "cases.json")
	// The module's initialisation gets a minute (generousLoad): beside the
	// suite's other packages a Go guest's start once passed the agent's 2 s
	// here (.ci/run failed on it); the calls keep the agent's deadline.
	if code, out := runPluginCLI(append([]string{"policy", "test", wasm, cases}, generousLoad...)...); code != 0 || !strings.Contains(out, "3 of 3 cases passed") {
		t.Fatalf("policy test: exit %d: %s", code, out)
	}
	// Control: the same command fails a case the module does not meet, so
	// the pass above is the cases' doing.
	b, _ := os.ReadFile(cases)
	if err := os.WriteFile(cases, []byte(strings.Replace(string(b), `"reason_contains": ["ID order"]`, `"reason_contains": ["by rack"]`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := runPluginCLI(append([]string{"policy", "test", wasm, cases}, generousLoad...)...); code != 1 || !strings.Contains(out, `"by rack"`) {
		t.Fatalf("a case the module fails: exit %d: %s", code, out)
	}

	drv := filepath.Join(root, "runner")
	if code, out := runPluginCLI("driver", "init", drv, "--sdk", sdk); code != 0 {
		t.Fatalf("driver init: exit %d: %s", code, out)
	}
	goTest(drv)

	// init writes only into an empty directory.
	if code, out := runPluginCLI("driver", "init", drv, "--sdk", sdk); code != 2 || !strings.Contains(out, "not empty") {
		t.Fatalf("init over an existing module: exit %d: %s", code, out)
	}
}

func TestInitWithoutACheckoutSaysHowToPointAtOne(t *testing.T) {
	dir := t.TempDir()
	if code, out := runPluginCLI("policy", "init", filepath.Join(dir, "p"), "--sdk", dir); code != 2 || !strings.Contains(out, "no go.mod of module github.com/hivelet/hivelet") {
		t.Fatalf("exit %d: %s", code, out)
	}
	if _, err := findSDK(""); err != nil {
		t.Fatalf("control: the checkout around the working directory is found: %v", err)
	}
}
