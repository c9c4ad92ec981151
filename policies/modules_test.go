package policies

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hivelet/hivelet/policies/build"
)

// built caches Go guests built by the tests (one build per test binary).
var built = struct {
	sync.Mutex
	wasm map[string][]byte
}{wasm: map[string][]byte{}}

// goGuest builds the Go policy package in dir (relative to this package)
// with the same toolchain and flags as `hivelet policy build`.
func goGuest(t testing.TB, dir string) []byte {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	if b, ok := built.wasm[dir]; ok {
		return b
	}
	out := filepath.Join(t.TempDir(), "guest.wasm")
	if err := build.Module(context.Background(), dir, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	built.wasm[dir] = b
	return b
}

// watModule returns a committed, assembled test module.
func watModule(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "wat", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCommittedWatModulesMatchTheirSources reassembles every .wat with wabt
// and compares it with the committed .wasm the other tests load. Without
// wat2wasm (apt-get install wabt) it cannot check and says so.
func TestCommittedWatModulesMatchTheirSources(t *testing.T) {
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		t.Skip("wat2wasm (Debian package wabt) is not installed; the committed .wasm files are used as they are")
	}
	wats, _ := filepath.Glob(filepath.Join("testdata", "wat", "*.wat"))
	if len(wats) < 8 {
		t.Fatalf("found %d .wat files, want the raw policy and the hostile ones", len(wats))
	}
	for _, wat := range wats {
		out := filepath.Join(t.TempDir(), "m.wasm")
		if b, err := exec.Command("wat2wasm", wat, "-o", out).CombinedOutput(); err != nil {
			t.Fatalf("wat2wasm %s: %v: %s", wat, err, b)
		}
		got, _ := os.ReadFile(out)
		want, err := os.ReadFile(wat[:len(wat)-len(".wat")] + ".wasm")
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s does not match its committed .wasm: reassemble it with wat2wasm", wat)
		}
	}
}

// TestCommittedBuiltinsMatchTheirSources rebuilds every built-in module
// with the fixed flags and checks the embedded bytes are identical, so the
// sources and the modules the agent runs never drift.
func TestCommittedBuiltinsMatchTheirSources(t *testing.T) {
	if got, want := runtimeVersion(t), BuiltinGoVersion(); got != want {
		t.Fatalf("the built-ins were built with %s, this toolchain is %s: run `go generate ./policies`", want, got)
	}
	for _, name := range BuiltinNames() {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), name+".wasm")
			if err := build.Module(context.Background(), filepath.Join("builtin", name), out); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(out)
			want, _ := BuiltinWasm(name)
			if len(want) == 0 || string(got) != string(want) {
				t.Fatalf("builtin/%s.wasm (%d bytes, sha256 %s) differs from a rebuild of its source (%d bytes, sha256 %s): run `go generate ./policies`",
					name, len(want), Digest(want), len(got), Digest(got))
			}
		})
	}
}

func runtimeVersion(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out[:len(out)-1])
}
