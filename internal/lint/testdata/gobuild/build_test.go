package gobuild

import (
	"context"
	"os/exec"
)

func builds(ctx context.Context) {
	_ = exec.Command("go", "build", "-o", "bin", ".")
	_ = exec.CommandContext(ctx, "go", "build", "./cmd/x")
	_ = exec.Command("go", "test", "./...")    // a test run: not a build
	_ = exec.Command("go", "env", "GOVERSION") // not a build
	_ = exec.Command("echo", "go", "build")    // literal words after another program: still reported
}
