package manager

import (
	"fmt"
	"os"
	"sort"
	"syscall"
)

// checkOwner refuses a directory not owned by this process's user.
func checkOwner(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("checking %s: %w", dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s belongs to uid %d, not to this user (%d): refusing to put plugin sockets there", dir, st.Uid, os.Getuid())
	}
	return nil
}

func sortPlugins(ps []Plugin) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
}
