package manager_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/manager"
)

// externalPlugin writes hivelet-driver-NAME into dir: a script serving the
// mock driver through the test binary, as a third-party plugin would.
func externalPlugin(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, manager.ExternalPrefix+name)
	script := fmt.Sprintf("#!/bin/sh\nexec %q plugin serve mock\n", os.Args[0])
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAnUnpinnedPluginIsWarnedAboutWithHowToPinIt(t *testing.T) {
	dir := t.TempDir()
	loose := externalPlugin(t, dir, "loose")
	pinnedPath := externalPlugin(t, dir, "pinned")
	pinnedSum, err := manager.FileSHA256(pinnedPath)
	if err != nil {
		t.Fatal(err)
	}
	looseSum, err := manager.FileSHA256(loose)
	if err != nil {
		t.Fatal(err)
	}
	var logs testutil.SyncBuffer
	newManager(t, manager.Config{PluginDir: dir, Checksums: map[string]string{"pinned": pinnedSum},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	var warned []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "not pinned") {
			warned = append(warned, line)
		}
	}
	if len(warned) != 1 {
		t.Fatalf("want one warning, for the unpinned plugin only (the pinned one and the built-ins are the control); got %q", warned)
	}
	for _, want := range []string{"plugin=loose", looseSum, fmt.Sprintf(`plugin \"loose\" { sha256 = \"%s\" }`, looseSum)} {
		if !strings.Contains(warned[0], want) {
			t.Errorf("the warning lacks %q: %s", want, warned[0])
		}
	}
}

func TestRescanAddsAPluginThatAppeared(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	externalPlugin(t, dir, "early")
	m := newManager(t, manager.Config{PluginDir: dir})
	if _, err := m.Driver(ctx, "early"); err != nil {
		t.Fatal(err)
	}
	earlyPID, _ := m.PID("early")

	externalPlugin(t, dir, "late")
	// The directory is read only by New and Rescan: before the rescan the
	// new plugin does not exist for the manager.
	if _, err := m.Driver(ctx, "late"); err == nil {
		t.Fatal("a plugin added after New was found without a rescan")
	}
	added, err := m.Rescan()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(added, []string{"late"}) {
		t.Fatalf("rescan added %v, want [late]", added)
	}
	d, err := m.Driver(ctx, "late")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := d.Info(ctx); err != nil || info.Name != "mock" {
		t.Fatalf("info of the added plugin: %+v %v", info, err)
	}
	// The running plugin is neither relaunched nor reported again.
	if pid, up := m.PID("early"); !up || pid != earlyPID {
		t.Fatalf("the running plugin changed: pid %d (was %d), up %v", pid, earlyPID, up)
	}
	if again, err := m.Rescan(); err != nil || len(again) != 0 {
		t.Fatalf("a second rescan added %v (%v), want nothing", again, err)
	}
}

// A file in the plugin directory named like a built-in driver does not
// replace it silently: unpinned, it is refused (loudly) and the built-in
// kept; pinned by its SHA-256 (control), it replaces the built-in.
func TestAFileNamedLikeABuiltinIsRefusedUnlessPinned(t *testing.T) {
	dir := t.TempDir()
	shadow := externalPlugin(t, dir, "exec")
	sum, err := manager.FileSHA256(shadow)
	if err != nil {
		t.Fatal(err)
	}
	find := func(m *manager.Manager, name string) manager.Plugin {
		t.Helper()
		for _, p := range m.Plugins() {
			if p.Name == name {
				return p
			}
		}
		t.Fatalf("no plugin %s", name)
		return manager.Plugin{}
	}
	var logs testutil.SyncBuffer
	m := newManager(t, manager.Config{PluginDir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if p := find(m, "exec"); !p.Builtin || p.Path != os.Args[0] {
		t.Fatalf("unpinned: exec is %+v, want the built-in", p)
	}
	if !strings.Contains(logs.String(), "refusing a plugin file named like a built-in driver") || !strings.Contains(logs.String(), shadow) {
		t.Fatalf("the refusal was not logged with the file:\n%s", logs.String())
	}
	if _, err := m.Rescan(); err != nil {
		t.Fatal(err)
	}
	if p := find(m, "exec"); !p.Builtin {
		t.Fatalf("unpinned, after a rescan: exec is %+v, want the built-in", p)
	}

	pinned := newManager(t, manager.Config{PluginDir: dir, Checksums: map[string]string{"exec": sum}})
	if p := find(pinned, "exec"); p.Builtin || p.Path != shadow {
		t.Fatalf("pinned: exec is %+v, want the file %s", p, shadow)
	}
}
