package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// traversableAllocDir lets exec tasks, which run as "nobody" unless their
// job says otherwise (plugins/exec), reach their allocation directory when
// it lies inside the state directory: every directory from the state
// directory down to the allocation directory gets the search bit for
// group and others (0o011), never the read bit, so nothing in the state
// directory can be listed, and what must stay private there (state.db,
// nats.token, node-id, the plugin sockets' directory) has its own 0600 or
// 0700 mode. An agent not running as root runs its tasks as itself and
// changes nothing.
func traversableAllocDir(stateDir, allocDir string, log *slog.Logger) error {
	if os.Geteuid() != 0 {
		return nil
	}
	sd, err := filepath.Abs(stateDir)
	if err != nil {
		return err
	}
	ad, err := filepath.Abs(allocDir)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(sd, ad)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil // elsewhere: its parents are the operator's
	}
	for d := filepath.Dir(ad); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("making the allocation directory reachable for exec tasks: %w", err)
		}
		if m := fi.Mode().Perm(); m&0o011 != 0o011 {
			if err := os.Chmod(d, m|0o011); err != nil {
				return fmt.Errorf("making the allocation directory reachable for exec tasks: %w", err)
			}
			log.Info("directory made traversable (not listable) for exec tasks running as another user", "path", d, "mode", fmt.Sprintf("%#o", m|0o011))
		}
		if d == sd || d == filepath.Dir(d) {
			return nil
		}
	}
}
