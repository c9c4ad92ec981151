package builtin

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hivelet/hivelet/plugins/exec"
	"github.com/hivelet/hivelet/sdk/driver"
)

func TestRawExecIsOffUnlessEnabled(t *testing.T) {
	if slices.Contains(Names(), RawExec) {
		t.Fatalf("Names() = %v: raw_exec must be off by default", Names())
	}
	if on := EnabledNames(true); !slices.Contains(on, RawExec) || !slices.IsSorted(on) || len(on) != len(Names())+1 {
		t.Fatalf("EnabledNames(true) = %v", on)
	}
	if _, ok := Registry()[RawExec]; !ok {
		t.Fatal("raw_exec has no constructor: `plugin serve raw_exec` could not find it")
	}
}

// TestARawExecTaskIsAnExecProcessUnderItsOwnName: the handle names
// raw_exec, a second driver instance (a restarted plugin) recovers the
// process from it, and a handle of another driver is not taken.
func TestARawExecTaskIsAnExecProcessUnderItsOwnName(t *testing.T) {
	ctx := context.Background()
	d, _ := newRawExec()
	if info, err := d.Info(ctx); err != nil || info.Name != RawExec {
		t.Fatalf("info %+v %v", info, err)
	}
	dir := t.TempDir()
	tc := &driver.TaskConfig{ID: "a1/t", AllocID: "a1", TaskName: "t", AllocDir: dir,
		Config:     map[string]any{"command": "/bin/sleep", "args": []any{"30"}},
		StdoutPath: filepath.Join(dir, "t.stdout"), StderrPath: filepath.Join(dir, "t.stderr")}
	h, err := d.StartTask(ctx, tc)
	if err != nil {
		t.Fatal(err)
	}
	if h.Driver != RawExec {
		t.Fatalf("handle driver %q, want raw_exec", h.Driver)
	}
	again, _ := newRawExec()
	if err := again.RecoverTask(ctx, h); err != nil {
		t.Fatalf("recovering from the raw_exec handle: %v", err)
	}
	foreign := *h
	foreign.Driver = exec.Name
	if err := again.RecoverTask(ctx, &foreign); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("an exec handle given to raw_exec: %v, want ErrTaskNotFound", err)
	}
	if err := again.StopTask(ctx, h.TaskID, time.Second, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ch, err := again.WaitTask(wctx, h.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := <-ch; !ok {
		t.Fatal("the task did not exit after its stop")
	}
}
