package manager

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
)

func TestPluginLogLinesKeepLevelMessageAndAttributes(t *testing.T) {
	cases := []struct {
		line string
		want []string
	}{
		{`{"time":"x","level":"WARN","msg":"disk low","alloc_id":"a1"}`, []string{"level=WARN", `msg="disk low"`, "alloc_id=a1"}},
		{`{"@timestamp":"x","@level":"error","@message":"boom","@module":"go-plugin"}`, []string{"level=ERROR", "msg=boom", "module=go-plugin"}},
		{`panic: runtime error`, []string{"level=INFO", `msg="panic: runtime error"`}},
	}
	for _, tc := range cases {
		var buf bytes.Buffer
		emitLine(context.Background(), slog.New(slog.NewTextHandler(&buf, nil)).With("plugin", "x"), []byte(tc.line))
		got := buf.String()
		for _, part := range append(tc.want, "plugin=x") {
			if !strings.Contains(got, part) {
				t.Errorf("%s: %q missing from %s", tc.line, part, got)
			}
		}
		if strings.Contains(got, "@timestamp") || strings.Contains(got, "time=x") {
			t.Errorf("%s: the plugin's timestamp leaked as an attribute: %s", tc.line, got)
		}
	}
}

func TestTailFollowsAppendsAndARotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.log")
	if err := os.WriteFile(path, []byte("old line before the tail\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	out := &testutil.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		tailLog(ctx, path, fi.Size(), slog.New(slog.NewTextHandler(out, nil)), 5*time.Millisecond)
		close(done)
	}()
	defer func() { cancel(); <-done }()
	waitLog := func(s string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(out.String(), s) {
			if time.Now().After(deadline) {
				t.Fatalf("%q never logged; got %s", s, out.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	_, _ = f.WriteString("first\nhalf")
	waitLog("first")
	if strings.Contains(out.String(), "half") || strings.Contains(out.String(), "old line") {
		t.Fatalf("partial or old line emitted: %s", out.String())
	}
	_, _ = f.WriteString(" done\n")
	f.Close()
	waitLog("half done")
	// Rotation: a new, longer file replaces the old one.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Repeat("x", 100)+" after rotation\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitLog("after rotation")
}

func TestRotateLogOnlyPastTheLimit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.log")
	if err := os.WriteFile(path, []byte("small"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rotateLog(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".1"); err == nil {
		t.Fatal("a small log was rotated")
	}
	if err := os.Truncate(path, maxLogSize); err != nil {
		t.Fatal(err)
	}
	if err := rotateLog(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".1"); err != nil {
		t.Fatal("a full log was not rotated")
	}
}
