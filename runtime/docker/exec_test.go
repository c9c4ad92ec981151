package docker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hivelet/hivelet/runtime/docker"
)

// TestExecRunsACommandInARunningContainer: the command's exit code and
// both its streams come back, the output cut at the bound given; a
// command that outlives its context returns the context's error; a
// container that does not exist is ErrNotFound.
func TestExecRunsACommandInARunningContainer(t *testing.T) {
	c := env.Client(t)
	id := run(t, c, docker.ContainerSpec{}, "serve", "8080")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, out, err := c.Exec(ctx, id, []string{"/app", "exit", "3"}, 1024)
	if err != nil || code != 3 || string(out) != "hello stdout\nhello stderr\n" && string(out) != "hello stderr\nhello stdout\n" {
		t.Fatalf("exec = %d %q %v", code, out, err)
	}
	if _, out, err := c.Exec(ctx, id, []string{"/app", "exit", "0"}, 5); err != nil || len(out) != 5 {
		t.Fatalf("capped exec = %q %v", out, err)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if _, _, err := c.Exec(short, id, []string{"/app", "run"}, 1024); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a command past its deadline: %v", err)
	}
	if _, _, err := c.Exec(ctx, "hivelet-no-such-container", []string{"/app"}, 1024); !errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("exec in a missing container: %v", err)
	}
}
