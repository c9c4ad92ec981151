package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// exitOf spawns the agent with flags on p's state directory and config and
// waits for it to exit; it returns the exit code and the log it wrote.
func (p *agentProc) exitOf(flags ...string) (int, string) {
	p.t.Helper()
	logBefore := len(p.logText())
	p.spawn(append([]string{"-state-dir", filepath.Join(p.dir, "state"), "-config", p.cfgPath, "-no-policies"}, flags...)...)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		p.t.Fatal("the agent did not exit")
	}
	p.logf.Close()
	return p.cmd.ProcessState.ExitCode(), p.logText()[logBefore:]
}

// The faults of issue 11 (3, 4), end to end: a node that ran an allocation
// loses its state.db (removed, then emptied), and the agent must not take
// itself for a new node and place the allocation again: it refuses to
// start, naming the store and every trace of what it ran, and starts
// nothing. A truncated store fails the start with its path and the
// damage, without a panic. Control: -accept-lost-state starts the agent,
// warned.
func TestEndToEndALostOrDamagedStateStoreFailsTheStartClosedAndLoudly(t *testing.T) {
	p := newAgent(t, "")
	p.start()
	dir := t.TempDir()
	if code, out := p.cli("job", "run", e2eFile(t, dir, "v1.hcl", mockJobHCL("one", ""))); code != 0 {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	live := liveOf(p.allocs(), "web")
	if len(live) != 1 || live[0].ClientStatus != model.ClientRunning {
		t.Fatalf("live allocations: %+v", live)
	}
	p.signal(syscall.SIGTERM) // a normal shutdown: the task keeps running
	storePath := filepath.Join(p.dir, "state", "state.db")
	intact, err := os.ReadFile(storePath)
	if err != nil {
		t.Fatal(err)
	}

	for _, loss := range []struct {
		name string
		do   func() error
	}{
		{"removed", func() error { return os.Remove(storePath) }},
		{"emptied", func() error { return os.Truncate(storePath, 0) }},
	} {
		if err := os.WriteFile(storePath, intact, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := loss.do(); err != nil {
			t.Fatal(err)
		}
		code, out := p.exitOf()
		for _, want := range []string{"state store " + storePath + " holds no allocations", "node ID file", "allocation directories remain", "NATS holds 1 live allocations", "-accept-lost-state"} {
			if !strings.Contains(out, want) {
				t.Errorf("store %s: the agent's output lacks %q (exit %d):\n%s", loss.name, want, code, out)
			}
		}
		if code == 0 || strings.Contains(out, "agent API") || strings.Contains(out, "reconcile pass") {
			t.Fatalf("store %s: the agent exited %d after acting:\n%s", loss.name, code, out)
		}
	}

	// A truncated store (its two meta pages left, the pages they point to
	// cut off): the path and the damage, no panic.
	if err := os.WriteFile(storePath, intact[:8192], 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := p.exitOf()
	if code == 0 || strings.Contains(out, "panic") || !strings.Contains(out, storePath) || !strings.Contains(out, "state store is corrupt: truncated to") {
		t.Fatalf("truncated store: exit %d, output:\n%s", code, out)
	}

	// Control: told to, the agent starts on the empty store, and warns.
	if err := os.Remove(storePath); err != nil {
		t.Fatal(err)
	}
	p.startWith("-no-policies", "-accept-lost-state")
	if !p.logHas("starting on an empty state store although this node ran allocations") {
		t.Fatal("-accept-lost-state started without its warning")
	}
}
