// Package build turns a Go policy package into a WASM reactor module with the
// standard toolchain, reproducibly. It is used by `hivelet policy build`, by
// `go generate ./policies` for the built-ins, and by the test that checks the
// committed built-in modules match their sources.
//
// The module it builds is the one docs/policy-abi.md specifies; its
// reproducibility is what lets a job pin a digest (docs/policy-abi.md,
// "Distribution and pinning").
package build

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Flags returns the fixed flags every policy module is built with. They
// make the build reproducible: the same sources and toolchain give the same
// bytes (TestCommittedBuiltinsMatchTheirSources relies on it).
func Flags() []string {
	return []string{"-buildmode=c-shared", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid="}
}

// Module compiles the Go policy package in dir into a WASM reactor module at
// out, with the Go toolchain found in PATH. dir is a package directory (a
// relative one is resolved from the working directory).
func Module(ctx context.Context, dir, out string) error {
	absOut, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("building policy %s: %w", dir, err)
	}
	args := append([]string{"build"}, Flags()...)
	args = append(args, "-o", absOut, ".")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOFLAGS=", "GOWASM=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building policy %s: %w: %s%s", dir, err, strings.TrimSpace(stderr.String()), hint(stderr.String()))
	}
	return nil
}

// hint explains the failures of a policy built outside this repository
// whose go.mod does not reach the SDK, which is not on a module proxy yet.
func hint(stderr string) string {
	for _, sign := range []string{"go.mod file not found", "cannot find module providing package github.com/hivelet/hivelet",
		"no required module provides package github.com/hivelet/hivelet", "github.com/hivelet/hivelet@"} {
		if strings.Contains(stderr, sign) {
			return "\n(the policy's module must reach github.com/hivelet/hivelet, which is not on a module proxy yet:" +
				" add `require github.com/hivelet/hivelet v0.0.0-00010101000000-000000000000` and" +
				" `replace github.com/hivelet/hivelet => /path/to/hivelet` to its go.mod and run go mod tidy," +
				" or start from `hivelet policy init DIR`)"
		}
	}
	return ""
}
