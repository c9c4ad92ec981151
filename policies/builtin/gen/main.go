// Command gen rebuilds the built-in policy modules from their sources
// (policies/builtin/<name>) into policies/builtin/<name>.wasm, and records
// the toolchain in policies/builtin/GOVERSION. Run it through
// `go generate ./policies`.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/hivelet/hivelet/policies/build"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	entries, err := os.ReadDir("builtin")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "gen" {
			continue
		}
		dir := filepath.Join("builtin", e.Name())
		if err := build.Module(ctx, dir, filepath.Join("builtin", e.Name()+".wasm")); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join("builtin", "GOVERSION"), []byte(runtime.Version()+"\n"), 0o644)
}
