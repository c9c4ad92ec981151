package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/manager"
)

// recordHandler hands every log record's message to a channel.
type recordHandler struct{ msgs chan<- string }

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.msgs <- r.Message
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

func TestSIGHUPLoadsADriverAddedToThePluginDirectory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := t.TempDir()
	msgs := make(chan string, 16)
	log := slog.New(recordHandler{msgs})
	m, err := manager.New(manager.Config{PluginDir: dir, StateDir: testutil.ShortTempDir(t, "hvr"), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Kill()
	hup := make(chan os.Signal)
	added := make(chan string, 4)
	go reloadPlugins(ctx, hup, m, log, func(name string) { added <- name })

	waitFor := func(want string) {
		t.Helper()
		for {
			select {
			case got := <-msgs:
				if got == want {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no %q logged", want)
			}
		}
	}
	// A SIGHUP with nothing new rescans and adds nothing.
	hup <- syscall.SIGHUP
	waitFor("rescanned the plugin directory")
	select {
	case n := <-added:
		t.Fatalf("a rescan of an unchanged directory added %q", n)
	default:
	}
	// Control: a driver dropped into the directory is added by the next one.
	if err := os.WriteFile(filepath.Join(dir, manager.ExternalPrefix+"late"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	hup <- syscall.SIGHUP
	select {
	case n := <-added:
		if n != "late" {
			t.Fatalf("added %q, want late", n)
		}
	case <-ctx.Done():
		t.Fatal("the added driver was not reported")
	}
}
