package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// WazeroCacheDir is one wazero compilation cache for every test process of
// the suite, and for later runs on the machine, as the go command's build
// cache is for packages. Under -race wazero compiles a built-in policy in
// about 12 s against 1.1 s without (its compiler is Go code, instrumented
// like ours), and the policies package, the CLI's policy tests and the
// example policy each compiled the same modules again into directories of
// their own, never removed. wazero keys an entry by the module's bytes and
// the options that change its code (listeners, termination checks) and the
// CPU's features, under a directory named by its version, architecture and
// OS, and writes it by rename, so concurrent processes share it safely. A test of the cache
// itself, or of a compilation, uses a directory of its own.
func WazeroCacheDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "hivelet-test-wazero-cache")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("the tests' wazero cache: %v", err)
	}
	return dir
}
