package exec

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/hivelet/hivelet/sdk/driver"
)

// An exit status reaches only the process's parent. After a plugin restart
// the exec driver is no longer its tasks' parent (the kernel gave them to
// init), so it would see a recovered task exit but not how: a batch task
// that succeeded would be reported failed and run again. So that the status
// survives the plugin, a task is started as the foreground child of a
// /bin/sh, the status keeper (statusScript), which leads the task's process
// group, outlives every catchable signal sent to the group (its traps run
// no command; the task, which does not inherit them, gets each signal as
// if the keeper were not there), waits for the task, writes its status to
// a file of the allocation directory and ends the way the task did: with
// its exit code, or killed by the same signal. A recovered or adopted task's
// exit is then read from that file (readStatus); only when the file holds
// nothing (the keeper itself SIGKILLed, the file removed) is it unknown.
//
// The keeper is used when the host has /bin/sh, the task has an allocation
// directory and its command is one the task's user can execute
// (runnableBy); otherwise the command is started directly, as before, and
// a start the kernel refuses still fails the start with its reason. Cost:
// one shell per task (dash: ~1 MB of resident memory, mostly shared). The
// PID a handle records is the keeper's (the group leader); the task's own
// is reported as the "pid" attribute once it runs (mainPID). The status
// file is the task's user's: a task can rewrite its own status, no other.
//
// TestARecoveredTaskExitsWithItsOwnStatus.
const statusScript = `trap : HUP INT QUIT TERM USR1 USR2 ALRM PIPE WINCH URG TSTP TTIN TTOU
"$@"
s=$?
printf '%s\n' "$s" >"$0"
if [ "$s" -gt 128 ] && [ "$s" -le 192 ]; then trap - $((s - 128)); kill -$((s - 128)) $$; fi
exit "$s"`

// keeperShell is the shell the status keeper runs in.
const keeperShell = "/bin/sh"

// statusPath is where the keeper of task id writes its status: a file of
// the allocation directory named by a digest of the ID (a task ID holds
// characters a file name should not).
func statusPath(allocDir, id string) string {
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(allocDir, ".hivelet-exit-"+hex.EncodeToString(sum[:8]))
}

// prepareStatus creates the task's status file empty, owned by the task's
// user (cred nil: the driver's), and reports whether it could.
func prepareStatus(path string, cred *syscall.Credential) bool {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return false
	}
	f.Close()
	if cred != nil && int(cred.Uid) != os.Geteuid() {
		if err := os.Chown(path, int(cred.Uid), int(cred.Gid)); err != nil {
			os.Remove(path)
			return false
		}
	}
	return true
}

// readStatus reads what the keeper wrote: the exit of the task, by the
// shell's convention (128+n: killed by signal n). ok is false when the
// file holds no status.
func readStatus(path string) (res *driver.ExitResult, ok bool) {
	if path == "" {
		return nil, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 || n > 255 {
		return nil, false
	}
	if n > 128 && n <= 192 {
		return &driver.ExitResult{ExitCode: n, Signal: n - 128}, true
	}
	return &driver.ExitResult{ExitCode: n}, true
}

// runnableBy reports whether the kernel would let cred (nil: the driver's
// own user) execute path from dir: a regular file with an execute bit for
// that user, below directories it may search. It decides only whether the
// keeper may run the command in its place; a "no" starts the command
// directly, so the kernel's own refusal is what the start reports.
func runnableBy(path, dir string, cred *syscall.Credential) bool {
	if !filepath.IsAbs(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			return false
		}
		path = filepath.Join(dir, path)
	}
	uid := os.Geteuid()
	gids := map[int]bool{os.Getegid(): true}
	if cred != nil {
		uid = int(cred.Uid)
		gids = map[int]bool{int(cred.Gid): true}
		for _, g := range cred.Groups {
			gids[int(g)] = true
		}
	} else if gs, err := os.Getgroups(); err == nil {
		for _, g := range gs {
			gids[g] = true
		}
	}
	allowed := func(fi os.FileInfo) bool {
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return false
		}
		mode := fi.Mode().Perm()
		switch {
		case uid == 0:
			return fi.IsDir() || mode&0o111 != 0
		case int(st.Uid) == uid:
			return mode&0o100 != 0
		case gids[int(st.Gid)]:
			return mode&0o010 != 0
		default:
			return mode&0o001 != 0
		}
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || !allowed(fi) {
		return false
	}
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || !allowed(fi) {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// mainPID is the task's own process under its keeper: the keeper's one
// child (0 if it has none yet, or more than one).
func mainPID(keeper int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(keeper) + "/task/" + strconv.Itoa(keeper) + "/children")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		return 0
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return n
}

// haveShell reports whether the keeper's shell is there.
func haveShell() bool {
	fi, err := os.Stat(keeperShell)
	return err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0
}
