package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/hivelet/hivelet/plugins/manager"
)

// reloadPluginsOnHUP rescans the plugin directory each time the agent gets
// SIGHUP, until ctx ends: a driver dropped into the directory after start
// becomes usable without a restart (docs/drivers.md, "Adding a driver to a
// running agent"). Without it SIGHUP would end the agent.
func reloadPluginsOnHUP(ctx context.Context, m *manager.Manager, log *slog.Logger, added func(name string)) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reloadPlugins(ctx, hup, m, log, added)
}

// reloadPlugins rescans m's plugin directory on each value from hup and
// calls added with the name of each plugin that appeared. It returns when
// ctx ends.
func reloadPlugins(ctx context.Context, hup <-chan os.Signal, m *manager.Manager, log *slog.Logger, added func(name string)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		names, err := m.Rescan()
		if err != nil {
			log.Error("rescanning the plugin directory", "err", err)
			continue
		}
		log.Info("rescanned the plugin directory", "added", names)
		for _, n := range names {
			added(n)
		}
	}
}
