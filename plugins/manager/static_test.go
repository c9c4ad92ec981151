package manager_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/manager"
	"github.com/hivelet/hivelet/sdk/driver"
)

// The environment of the test-only "mock-static" plugin: the file it
// appends a line to per Capabilities or ConfigSchema call, and the file
// that names its schema's one field (read at each call).
const (
	staticCallsEnv = "HIVELET_TEST_STATIC_CALLS"
	staticFieldEnv = "HIVELET_TEST_STATIC_FIELD"
)

// staticCounting is the mock driver with its two static answers counted.
type staticCounting struct {
	driver.Driver
	calls, field string
}

func (d *staticCounting) note(what string) {
	f, err := os.OpenFile(d.calls, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if _, err := f.WriteString(what + "\n"); err != nil {
		panic(err)
	}
}

func (d *staticCounting) Capabilities(ctx context.Context) (driver.Capabilities, error) {
	d.note("capabilities")
	return driver.Capabilities{SendSignals: true, FSIsolation: "none"}, nil
}

func (d *staticCounting) ConfigSchema(context.Context) (*driver.Schema, error) {
	d.note("schema")
	name, err := os.ReadFile(d.field)
	if err != nil {
		return nil, err
	}
	return &driver.Schema{Fields: map[string]*driver.Field{strings.TrimSpace(string(name)): {Type: driver.TypeString}}}, nil
}

// A driver's capabilities and config schema are asked once per plugin
// process, not once per start (each start validates its task against the
// schema), and asked again of a relaunched process, which may be a new
// build of the plugin.
func TestStaticAnswersAreAskedOncePerPluginProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	calls, field := filepath.Join(dir, "calls"), filepath.Join(dir, "field")
	setField := func(name string) {
		t.Helper()
		if err := os.WriteFile(field, []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	setField("first")
	m := newManager(t, manager.Config{Builtins: []string{"mock-static"}, MinBackoff: 10 * time.Millisecond,
		Env: map[string][]string{"mock-static": {staticCallsEnv + "=" + calls, staticFieldEnv + "=" + field}}})
	d, err := m.Driver(ctx, "mock-static")
	if err != nil {
		t.Fatal(err)
	}
	counts := func() (caps, schemas int) {
		t.Helper()
		b, err := os.ReadFile(calls)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, l := range strings.Fields(string(b)) {
			switch l {
			case "capabilities":
				caps++
			case "schema":
				schemas++
			}
		}
		return caps, schemas
	}
	ask := func(want string) {
		t.Helper()
		for range 5 {
			s, err := d.ConfigSchema(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := s.Fields[want]; !ok || len(s.Fields) != 1 {
				t.Fatalf("schema fields %v, want only %q", s.Fields, want)
			}
			c, err := d.Capabilities(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !c.SendSignals || c.FSIsolation != "none" {
				t.Fatalf("capabilities %+v", c)
			}
		}
	}
	ask("first")
	if c, s := counts(); c != 1 || s != 1 {
		t.Fatalf("after 5 asks of each: %d Capabilities and %d ConfigSchema calls reached the plugin, want 1 and 1", c, s)
	}
	// The process's answer stands while it runs, whatever its source says
	// now; a new process is asked again and gives the new answer.
	setField("second")
	ask("first")
	old, _ := m.PID("mock-static")
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "a relaunched plugin", func() bool {
		pid, up := m.PID("mock-static")
		return up && pid != old
	})
	ask("second")
	if c, s := counts(); c != 2 || s != 2 {
		t.Fatalf("after a relaunch: %d Capabilities and %d ConfigSchema calls in all, want 2 and 2", c, s)
	}
}
