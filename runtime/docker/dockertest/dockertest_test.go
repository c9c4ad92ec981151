package dockertest

import (
	"fmt"
	"testing"
)

// recorder stands in for a test to see whether Client skipped or failed it.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}

func TestAnUnreachableEngineFailsTheTestsWhenDockerIsRequiredAndSkipsThemOtherwise(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/hivelet-test/docker.sock")
	for _, c := range []struct {
		require     string
		wantSkipped bool
		wantFailed  bool
	}{
		{"1", false, true},
		{"", true, false},
		{"0", true, false},
	} {
		t.Setenv(RequireEnv, c.require)
		r := &recorder{TB: t}
		if got := NewEnv("unreachable", Program).Client(r); got != nil {
			t.Errorf("%s=%q: got a client for an unreachable engine", RequireEnv, c.require)
		}
		if r.skipped != c.wantSkipped || r.failed != c.wantFailed {
			t.Errorf("%s=%q: skipped %v failed %v (%s), want skipped %v failed %v",
				RequireEnv, c.require, r.skipped, r.failed, r.msg, c.wantSkipped, c.wantFailed)
		}
	}
}
