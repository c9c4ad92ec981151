package build

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAPolicyOutsideAModuleIsToldHowToReachTheSDK(t *testing.T) {
	dir := t.TempDir() // outside any module
	src := "package main\n\nimport _ \"github.com/hivelet/hivelet/sdk/policy\"\n\nfunc main() {}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Module(context.Background(), dir, filepath.Join(dir, "p.wasm"))
	if err == nil || !strings.Contains(err.Error(), "replace github.com/hivelet/hivelet => ") {
		t.Fatalf("want the replace hint, got %v", err)
	}
	for _, c := range []struct {
		stderr string
		hint   bool
	}{
		{"go: go.mod file not found in current directory or any parent directory", true},
		{"main.go:3:8: no required module provides package github.com/hivelet/hivelet/sdk/policy; to add it:", true},
		{"go: github.com/hivelet/hivelet@v0.1.0: reading https://proxy.golang.org/...: 404 Not Found", true},
		// Control: an ordinary compile error gets no hint.
		{"./main.go:7:2: undefined: choose", false},
	} {
		if got := hint(c.stderr) != ""; got != c.hint {
			t.Errorf("hint for %q: %v, want %v", c.stderr, got, c.hint)
		}
	}
}
