package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hivelet/hivelet/host/config"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/node"
	"github.com/hivelet/hivelet/host/state"
)

// localTraces reads, before the node ID is loaded (and perhaps created),
// what the state and allocation directories say about an earlier life of
// this node. Dev mode keeps nothing across starts: no traces.
func localTraces(store *state.Store, rc *config.Resolved, allocRoot string, dev bool) (state.Traces, error) {
	if dev {
		return state.Traces{}, nil
	}
	recs, err := store.Allocs()
	if err != nil {
		return state.Traces{}, err
	}
	t := state.Traces{StoreFresh: store.Fresh(), StoreAllocs: len(recs)}
	if len(recs) > 0 {
		return t, nil
	}
	idFile := filepath.Join(rc.StateDir, node.IDFile)
	if _, err := os.Stat(idFile); err == nil {
		t.NodeIDFile = idFile
	}
	if t.AllocDirs, err = subdirs(allocRoot); err != nil {
		return t, err
	}
	if t.PluginSockets, err = subdirs(filepath.Join(rc.StateDir, "plugins-run", "sockets")); err != nil {
		return t, err
	}
	return t, nil
}

// subdirs lists the directories in dir (none if dir does not exist).
func subdirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// checkLostState fails the start, loudly, when the store holds no
// allocation while the node's files or its allocations in NATS say it ran
// some (issue 11: an empty state.db taken for a new node placed everything
// again beside the tasks still running). accept starts anyway, warned.
func checkLostState(ctx context.Context, t state.Traces, allocs *fleet.NodeWriter, storePath string, accept bool, log *slog.Logger) error {
	if t.StoreAllocs > 0 {
		return nil
	}
	live, err := allocs.LiveAllocKeys(ctx)
	if err != nil {
		return fmt.Errorf("checking for a lost state store: %w", err)
	}
	t.FleetAllocs = live
	why := state.LostState(t)
	if len(why) == 0 {
		return nil
	}
	if accept {
		log.Warn("starting on an empty state store although this node ran allocations (-accept-lost-state): their tasks are not reattached and may run twice",
			"store", storePath, "traces", strings.Join(why, "; "))
		return nil
	}
	log.Error("the state store is empty but this node ran allocations: refusing to start", "store", storePath, "traces", strings.Join(why, "; "))
	return fmt.Errorf("state store %s holds no allocations, but this node ran some: %s. Starting on it would run them again beside the tasks still running. "+
		"Restore the store from a backup, or stop those tasks and start with -accept-lost-state", storePath, strings.Join(why, "; "))
}
