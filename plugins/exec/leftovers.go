package exec

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hivelet/hivelet/plugins/internal/proc"
)

// A start interrupted by a crash of the plugin (SIGKILLed after the task's
// process started, before its handle reached the host) leaves a running
// process that no handle names: the host got an error and retries the
// start, or gives up and destroys the task by its ID. The process carries
// its marks in its environment, set atomically by execve, the way the
// docker driver labels a container:
//
//   - EnvTaskID, the task's ID, which the host uses again for the retry;
//   - EnvStartKey, a digest of what was started (command, arguments,
//     environment, directory, user).
//
// A retried StartTask of a task the driver does not track looks for a live
// process group leader carrying the task's ID (leftovers): one with the
// same start key, running as the task's user, is adopted (the retry
// answers with its handle, nothing runs twice); any other is killed with
// its group, every process of which is gone before the new start.
// DestroyTask of a task it does not track kills such leftovers the same way
// (TestAStartInterruptedByAPluginSIGKILLIsAdoptedOrDestroyed,
// TestAKilledLeftoverIsGoneWithItsWholeGroup).
//
// Limits: a task that empties or rewrites its environment before exec'ing
// (env -i) loses its marks and would be started again; an adopted task,
// like a recovered one, is not the plugin's child: its exit status comes
// from its status keeper's file (status.go), and is unknown without one
// (errUnknownExit).
const (
	// EnvTaskID is the variable naming the task in its process's
	// environment.
	EnvTaskID = "HIVELET_EXEC_TASK_ID"
	// EnvStartKey is the variable holding the digest of the start.
	EnvStartKey = "HIVELET_EXEC_START_KEY"
)

// startKey digests what cmd starts and as whom: two starts with the same
// key run the same thing.
func startKey(cmd *osexec.Cmd, cred *syscall.Credential) string {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s;", len(s), s) }
	field(cmd.Path)
	for _, a := range cmd.Args {
		field(a)
	}
	field("--env")
	for _, e := range cmd.Env {
		field(e)
	}
	field(cmd.Dir)
	uid, gid := os.Geteuid(), os.Getegid()
	if cred != nil {
		uid, gid = int(cred.Uid), int(cred.Gid)
	}
	field(strconv.Itoa(uid) + ":" + strconv.Itoa(gid))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// leftover is a live process group leader that carries a task's ID.
type leftover struct {
	pid   int
	ticks uint64
	key   string
	uid   int
}

// leftovers lists the live process group leaders whose environment names
// taskID, oldest first. A process whose environment cannot be read (it
// belongs to another user and we are not root) is not a task of ours.
func leftovers(taskID string) ([]leftover, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	want := []byte(EnvTaskID + "=" + taskID)
	var out []leftover
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		st, err := proc.ReadStat(pid)
		if err != nil || st.PGID != pid || st.State == "Z" || st.State == "X" {
			continue
		}
		// An empty read is a process whose exec is still under way
		// (readEnviron): not a leftover of a crashed plugin, whose
		// restart and retry take far longer than an exec.
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		var l leftover
		found := false
		for _, kv := range bytes.Split(env, []byte{0}) {
			switch {
			case bytes.Equal(kv, want):
				found = true
			case bytes.HasPrefix(kv, []byte(EnvStartKey+"=")):
				l.key = string(kv[len(EnvStartKey)+1:])
			}
		}
		if !found {
			continue
		}
		fi, err := os.Stat("/proc/" + e.Name())
		if err != nil {
			continue
		}
		sys, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		l.pid, l.ticks, l.uid = pid, st.StartTicks, int(sys.Uid)
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ticks < out[j].ticks })
	return out, nil
}

// killLeftover SIGKILLs a leftover's process group (if its leader is still
// the process found) and returns once every process of the group has
// exited, within ctx.
//
// The leader's exit alone is not enough: a SIGKILL sent to a group is only
// pending in each member until the scheduler runs it, so the leader (the
// status keeper) can be gone while the task's own process still shows
// running (state R with SIGKILL pending: 41 of 300 kills of a keeper, its
// task shell and a sleep, beside two busy loops), or while a task of many
// threads still frees its memory and closes its files (a listening socket
// among them) for tens of milliseconds. The retried start would then begin
// beside the task it replaces, and could not bind its port; a DestroyTask
// would return before the task is gone
// (TestAKilledLeftoverIsGoneWithItsWholeGroup).
func killLeftover(ctx context.Context, l leftover) error {
	if !proc.Same(l.pid, l.ticks) {
		return nil
	}
	if err := unix.Kill(-l.pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("killing process group %d: %w", l.pid, err)
	}
	if err := waitGroupGone(ctx, l.pid); err != nil {
		return fmt.Errorf("waiting for process group %d to die: %w", l.pid, err)
	}
	return nil
}

// waitGroupGone returns once every process of group pgid (its leader
// included) has exited, once all its members have been sent SIGKILL:
// nothing joins the group after that (the kernel signals a child forked as
// the signal was sent, and a killed process forks no more), and the
// group's ID is not given to another group while a member lives. It waits
// on each member's exit in turn (a pidfd), not on a timer, until a scan
// finds none running.
func waitGroupGone(ctx context.Context, pgid int) error {
	for {
		members, err := groupMembers(pgid)
		if err != nil {
			return err
		}
		running := false
		for _, m := range members {
			was, err := waitGone(ctx, m)
			if err != nil {
				return err
			}
			running = running || was
		}
		if !running {
			return nil
		}
	}
}

// groupMembers lists the processes of group pgid, zombies included: a
// process whose main thread has exited reads as a zombie while its other
// threads may still be exiting.
func groupMembers(pgid int) ([]proc.Stat, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var out []proc.Stat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := proc.ReadStat(pid); err == nil && st.PGID == pgid {
			out = append(out, st)
		}
	}
	return out, nil
}

// waitGone returns once process m has exited, every thread of it, and
// reports whether it was still running when called. A pidfd is readable
// only then, after the process's memory is freed and its files closed;
// /proc shows a process as a zombie as soon as its main thread exits.
func waitGone(ctx context.Context, m proc.Stat) (bool, error) {
	fd, err := unix.PidfdOpen(m.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil { // no pidfds (before Linux 5.3): what /proc shows
		if !proc.Same(m.PID, m.StartTicks) {
			return false, nil
		}
		return true, proc.WaitExit(ctx, m.PID, m.StartTicks)
	}
	defer unix.Close(fd)
	// The pidfd is the process listed only if its PID is still that
	// process's (a zombie's stat is still there).
	if st, err := proc.ReadStat(m.PID); err != nil || st.StartTicks != m.StartTicks {
		return false, nil
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for timeout := 0; ; timeout = 50 {
		if err := ctx.Err(); err != nil {
			return true, err
		}
		n, err := unix.Poll(fds, timeout)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return true, fmt.Errorf("waiting for pid %d to exit: %w", m.PID, err)
		}
		if n > 0 {
			return timeout > 0, nil
		}
	}
}

// startedAt converts a process's start ticks into wall time, from the
// boot time in /proc/stat; the zero time if that cannot be read.
func startedAt(ticks uint64) time.Time {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			boot, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}
			}
			return time.Unix(boot, 0).Add(time.Duration(ticks) * time.Second / clockTicks)
		}
	}
	return time.Time{}
}
