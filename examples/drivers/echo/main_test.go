package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/fleettest"
	"github.com/hivelet/hivelet/plugins/manager"
	"github.com/hivelet/hivelet/sdk/driver"
)

// TestTheExampleDriverWorksAsAnExternalPlugin builds this program, drops it
// in a plugin directory as hivelet-driver-echo, and drives it through the
// plugin manager exactly as the agent would.
func TestTheExampleDriverWorksAsAnExternalPlugin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "hve")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	pluginDir := filepath.Join(dir, "plugins")
	bin := filepath.Join(pluginDir, "hivelet-driver-echo")
	// Built as the module's other test binaries are (static, the same
	// flags): the packages it shares with them compile once. It may wait
	// for another test process's build of the module first.
	bctx, bcancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer bcancel()
	if err := fleettest.BuildStatic(bctx, ".", bin, "."); err != nil {
		t.Fatalf("building the example: %v", err)
	}
	sum, err := manager.FileSHA256(bin)
	if err != nil {
		t.Fatal(err)
	}
	found, err := manager.Discover("", nil, pluginDir)
	if err != nil || len(found) != 1 || found[0].Name != "echo" {
		t.Fatalf("discovered %+v %v", found, err)
	}
	m, err := manager.New(manager.Config{PluginDir: pluginDir, StateDir: filepath.Join(dir, "s"),
		Checksums: map[string]string{"echo": sum}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Kill()
	d, err := m.Driver(ctx, "echo")
	if err != nil {
		t.Fatal(err)
	}
	info, err := d.Info(ctx)
	if err != nil || info.Name != "echo" {
		t.Fatalf("info %+v %v", info, err)
	}

	// The host validates a task against the driver's schema before starting it.
	schema, err := d.ConfigSchema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]any{"mesage": "hi", "count": "three"}
	err = driver.ValidateConfig(schema, bad)
	var ce *driver.ConfigError
	if !errors.As(err, &ce) || len(ce.Fields) != 3 {
		t.Fatalf("validation of %v: %v", bad, err)
	}
	good := map[string]any{"message": "hello", "count": 3, "interval": "10ms", "exit_code": 4}
	if err := driver.ValidateConfig(schema, good); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "stdout")
	h, err := d.StartTask(ctx, &driver.TaskConfig{ID: "a1/greeter", StdoutPath: out, Config: good})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := d.WaitTask(ctx, h.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r == nil || r.ExitCode != 4 {
		t.Fatalf("exit %+v", r)
	}
	if b, _ := os.ReadFile(out); string(b) != "hello\nhello\nhello\n" {
		t.Fatalf("stdout %q", b)
	}

	// Stopping a long task interrupts it.
	h2, err := d.StartTask(ctx, &driver.TaskConfig{ID: "a1/long", StdoutPath: out,
		Config: map[string]any{"message": "x", "count": 1000, "interval": "1s"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.StopTask(ctx, h2.TaskID, 5*time.Second, "SIGINT"); err != nil {
		t.Fatal(err)
	}
	st, err := d.InspectTask(ctx, h2.TaskID)
	if err != nil || st.State != driver.TaskStateExited || st.ExitResult.Signal != 2 {
		t.Fatalf("stopped task %+v %v", st, err)
	}
	if err := d.SignalTask(ctx, h2.TaskID, "SIGHUP"); err == nil || !strings.Contains(err.Error(), "no signals") {
		t.Fatalf("signal: %v", err)
	}
	if err := d.DestroyTask(ctx, h2.TaskID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := d.InspectTask(ctx, h2.TaskID); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("destroyed task: %v", err)
	}
}
