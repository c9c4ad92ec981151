package manager_test

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/manager"
)

// envProbe is the variable the test-only "mock-env" plugin requires.
const envProbe = "HIVELET_TEST_PLUGIN_ENV"

func TestConfigEnvReachesThePluginProcessAndOnlyThatPlugin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Control: without the entry the plugin refuses to serve.
	bare := newManager(t, manager.Config{Builtins: []string{"mock-env"}, StartTimeout: 5 * time.Second})
	if _, err := bare.Driver(ctx, "mock-env"); err == nil {
		t.Fatal("mock-env served without its environment entry: the probe proves nothing")
	}
	// An entry for another plugin does not reach it either.
	other := newManager(t, manager.Config{Builtins: []string{"mock-env", "mock"}, StartTimeout: 5 * time.Second,
		Env: map[string][]string{"mock": {envProbe + "=granted"}}})
	if _, err := other.Driver(ctx, "mock-env"); err == nil {
		t.Fatal("an Env entry for plugin mock reached plugin mock-env")
	}
	m := newManager(t, manager.Config{Builtins: []string{"mock-env"},
		Env: map[string][]string{"mock-env": {envProbe + "=granted"}}})
	d, err := m.Driver(ctx, "mock-env")
	if err != nil {
		t.Fatalf("with Env set the plugin should serve: %v", err)
	}
	if _, err := d.Info(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestOnRestartIsCalledOncePerRelaunchAfterASIGKILL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	restarts := map[string]int{}
	m := newManager(t, manager.Config{Builtins: []string{"mock", "exec"}, MinBackoff: 10 * time.Millisecond,
		OnRestart: func(p string) { mu.Lock(); restarts[p]++; mu.Unlock() }})
	count := func(p string) int { mu.Lock(); defer mu.Unlock(); return restarts[p] }
	for _, name := range []string{"mock", "exec"} {
		if _, err := m.Driver(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if n := count("mock") + count("exec"); n != 0 {
		t.Fatalf("first launches counted as %d restarts", n)
	}
	for round := 1; round <= 2; round++ {
		old, _ := m.PID("mock")
		if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 10*time.Second, "the relaunch", func() bool {
			pid, up := m.PID("mock")
			return up && pid != old && count("mock") == round
		})
	}
	time.Sleep(50 * time.Millisecond)
	if got := count("mock"); got != 2 {
		t.Errorf("mock: %d restarts counted, want 2", got)
	}
	// Control: the plugin that was not killed counted nothing.
	if got := count("exec"); got != 0 {
		t.Errorf("exec was never killed but counted %d restarts", got)
	}
}
