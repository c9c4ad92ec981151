package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/builtin"
	"github.com/hivelet/hivelet/plugins/manager"
	"github.com/hivelet/hivelet/sdk/driver"
)

func runPluginCLI(args ...string) (int, string) {
	var out bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.Execute()
	if err == nil {
		return 0, out.String()
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code, out.String() + err.Error()
	}
	return 1, out.String() + err.Error()
}

func TestPluginListShowsBuiltinsAndExternalsWithTheirSHA256(t *testing.T) {
	dir := t.TempDir()
	ext := filepath.Join(dir, "hivelet-driver-thing")
	if err := os.WriteFile(ext, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Not plugins: wrong prefix, not executable.
	_ = os.WriteFile(filepath.Join(dir, "other-driver"), []byte("x"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "hivelet-driver-noexec"), []byte("x"), 0o644)
	extSum, _ := manager.FileSHA256(ext)
	self, _ := os.Executable()
	selfSum, _ := manager.FileSHA256(self)

	code, out := runPluginCLI("plugin", "list", "--plugin-dir", dir, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var rows []pluginRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := map[string]pluginRow{}
	for _, r := range rows {
		got[r.Name] = r
	}
	for _, n := range builtin.Names() {
		if r := got[n]; r.Kind != "builtin" || r.SHA256 != selfSum {
			t.Errorf("builtin %s: %+v", n, r)
		}
	}
	if r := got["thing"]; r.Kind != "external" || r.SHA256 != extSum || r.Path != ext {
		t.Errorf("external: %+v", r)
	}
	if len(rows) != len(builtin.Names())+1 {
		t.Errorf("rows %+v", rows)
	}

	code, out = runPluginCLI("plugin", "list", "--plugin-dir", dir, "--pin", "thing="+strings.Repeat("0", 64))
	if code != 1 || !strings.Contains(out, "MISMATCH") {
		t.Fatalf("mismatching pin: exit %d: %s", code, out)
	}
	// Control: the right pin passes.
	if code, out := runPluginCLI("plugin", "list", "--plugin-dir", dir, "--pin", "thing="+extSum); code != 0 {
		t.Fatalf("matching pin: exit %d: %s", code, out)
	}
	if code, _ := runPluginCLI("plugin", "list", "--pin", "nonsense"); code != 2 {
		t.Fatalf("malformed pin: exit %d", code)
	}
	if code, _ := runPluginCLI("plugin", "serve", "nope"); code != 2 {
		t.Fatalf("serve of an unknown driver: exit %d", code)
	}
}

// TestBuiltinsAreServedByTheHiveletBinaryReexecuted lets the manager run
// the real binary (the package's one build of it, sharedBinary) as
// `hivelet plugin serve NAME` for each built-in.
func TestBuiltinsAreServedByTheHiveletBinaryReexecuted(t *testing.T) {
	bin := sharedBinary(t) // first: the build may wait for another test process's
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := testutil.ShortTempDir(t, "hvc")
	m, err := manager.New(manager.Config{SelfExe: bin, Builtins: []string{"exec", "mock"}, StateDir: filepath.Join(dir, "s")})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Kill()
	for _, name := range []string{"exec", "mock"} {
		d, err := m.Driver(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := d.Info(ctx)
		if err != nil || info.Name != name {
			t.Fatalf("%s: info %+v %v", name, info, err)
		}
		pid, _ := m.PID(name)
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if want := bin + "\x00plugin\x00serve\x00" + name + "\x00"; string(cmdline) != want {
			t.Fatalf("%s plugin runs %q, want %q", name, cmdline, want)
		}
	}
	d, _ := m.Driver(ctx, "exec")
	out := filepath.Join(dir, "out")
	h, err := d.StartTask(ctx, &driver.TaskConfig{ID: "t", StdoutPath: out,
		Config: map[string]any{"command": "/bin/echo", "args": []any{"hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := d.WaitTask(ctx, h.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r == nil || !r.Successful() {
		t.Fatalf("exit %+v", r)
	}
	if b, _ := os.ReadFile(out); string(b) != "hi\n" {
		t.Fatalf("stdout %q", b)
	}
}
