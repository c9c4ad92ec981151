package fleettest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/runtime/docker/dockertest"
)

// TestALeftoverIsARunWhoseProcessIsGoneOrThatIsTooOld: a run of a live
// process created a minute ago is kept (the control); a dead process, an
// old run and unreadable labels are leftovers.
func TestALeftoverIsARunWhoseProcessIsGoneOrThatIsTooOld(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	alive := func(pid int) bool { return pid == 42 }
	recent := now.Add(-time.Minute).Unix()
	old := now.Add(-staleAfter - time.Second).Unix()
	for _, c := range []struct {
		line     string
		run      string
		leftover bool
	}{
		{"r1 42 " + itoa(recent), "r1", false},
		{"r2 43 " + itoa(recent), "r2", true},
		{"r3 42 " + itoa(old), "r3", true},
		{"r4 <no value> <no value>", "r4", true},
		{"r5", "r5", true},
		{"", "", false},
	} {
		run, got := leftover(c.line, now, alive)
		if run != c.run || got != c.leftover {
			t.Errorf("leftover(%q) = %q, %v; want %q, %v", c.line, run, got, c.run, c.leftover)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestAnAgentPastTheLastFileGetsACycledFileRenamed: agents 1 and 2 read
// their own files as they are; agent 3 (no file) reads agent 1's with its
// name changed, and nothing else.
func TestAnAgentPastTheLastFileGetsACycledFileRenamed(t *testing.T) {
	dir := t.TempDir()
	for i, body := range []string{"name       = \"agent-1\"\nmeta = { rack = \"r1\" }\n", "name = \"agent-2\"\n"} {
		if err := os.WriteFile(filepath.Join(dir, "agent-"+strconv.Itoa(i+1)+".hcl"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := agentConfig(dir, 2)
	if err != nil || got != "name = \"agent-2\"\n" {
		t.Fatalf("agent 2: %q, %v", got, err)
	}
	got, err = agentConfig(dir, 3)
	if err != nil || got != "name = \"agent-3\"\nmeta = { rack = \"r1\" }\n" {
		t.Fatalf("agent 3: %q, %v", got, err)
	}
	if _, err := agentConfig(t.TempDir(), 1); err == nil {
		t.Fatal("a directory without agent files gave a configuration")
	}
}

// TestRemoveLeftoversRemovesACrashedRunAndKeepsALiveOne: a network labelled
// with the ID of a process that has exited is removed; one labelled with
// this process's ID (a run in progress: the control) is kept.
func TestRemoveLeftoversRemovesACrashedRunAndKeepsALiveOne(t *testing.T) {
	RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	now := itoa(time.Now().Unix())
	nets := map[string]int{ // name: the PID on its label
		"hvfleet-leftover-" + dockertest.RandomID(): gone.Process.Pid,
		"hvfleet-live-" + dockertest.RandomID():     os.Getpid(),
	}
	for name, pid := range nets {
		run := strings.TrimPrefix(name, "hvfleet-")
		if _, err := docker(ctx, "network", "create", "--label", LabelRun+"="+run, "--label", LabelPID+"="+strconv.Itoa(pid),
			"--label", LabelCreated+"="+now, name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeRun(run) })
	}
	RemoveLeftovers(t)
	for name, pid := range nets {
		_, err := docker(ctx, "network", "inspect", name)
		if exists := err == nil; exists != (pid == os.Getpid()) {
			t.Errorf("network %s (pid %d) exists: %v", name, pid, exists)
		}
	}
}
