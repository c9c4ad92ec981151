// Package proc reads what the plugin manager and the exec driver need to
// know about a process from Linux's /proc and pidfds: its start time (which,
// with the PID, identifies a process across PID reuse), whether it is
// alive, and when it exits, for processes that are not our children.
//
// It never signals or reaps anything.
//
// What the plugin manager does with these facts is described in
// docs/drivers.md ("How the host runs plugins").
package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrGone is returned for a process that does not exist (any more).
var ErrGone = errors.New("process does not exist")

// Stat is the part of /proc/<pid>/stat we use.
type Stat struct {
	PID int
	// State is the one-letter state ("R", "S", "Z"...).
	State string
	PPID  int
	PGID  int
	// Session is the session ID.
	Session int
	// UTime and STime are CPU time in clock ticks.
	UTime, STime uint64
	// StartTicks is the start time in clock ticks after boot: with the PID
	// it identifies a process, since the kernel never gives a PID to two
	// processes at the same tick.
	StartTicks uint64
	// RSSPages is the resident set size in pages.
	RSSPages int64
}

// ReadStat parses /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			return Stat{}, fmt.Errorf("reading stat of pid %d: %w", pid, ErrGone)
		}
		return Stat{}, fmt.Errorf("reading stat of pid %d: %w", pid, err)
	}
	return parseStat(pid, string(b))
}

// parseStat parses the text of /proc/<pid>/stat. The command name (field 2)
// is in parentheses and may itself contain spaces and parentheses, so the
// fields are counted from the last ')'.
func parseStat(pid int, s string) (Stat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Stat{}, fmt.Errorf("parsing stat of pid %d: no command field", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 22 {
		return Stat{}, fmt.Errorf("parsing stat of pid %d: %d fields", pid, len(f)+2)
	}
	st := Stat{PID: pid, State: f[0]}
	var errs []error
	num := func(n int) uint64 {
		v, err := strconv.ParseUint(f[n-3], 10, 64)
		errs = append(errs, err)
		return v
	}
	st.PPID = int(num(4))
	st.PGID = int(num(5))
	st.Session = int(num(6))
	st.UTime = num(14)
	st.STime = num(15)
	st.StartTicks = num(22)
	rss, err := strconv.ParseInt(f[24-3], 10, 64)
	errs = append(errs, err)
	st.RSSPages = rss
	if err := errors.Join(errs...); err != nil {
		return Stat{}, fmt.Errorf("parsing stat of pid %d: %w", pid, err)
	}
	return st, nil
}

// StartTicks returns a live process's start time, or ErrGone for a process
// that does not exist or is a zombie (it has exited; only its exit status
// is left).
func StartTicks(pid int) (uint64, error) {
	st, err := ReadStat(pid)
	if err != nil {
		return 0, err
	}
	if st.State == "Z" || st.State == "X" {
		return 0, fmt.Errorf("pid %d has exited: %w", pid, ErrGone)
	}
	return st.StartTicks, nil
}

// Same reports whether pid is still the live process that started at
// startTicks (false if it exited, or the PID now belongs to another
// process).
func Same(pid int, startTicks uint64) bool {
	t, err := StartTicks(pid)
	return err == nil && t == startTicks
}

// WaitExit blocks until the process exits or ctx ends. It works for any
// process, child or not, through a pidfd (readable once the process has
// exited), and reports within a few milliseconds. It returns nil when the
// process exited (or was already gone) and ctx.Err() when ctx ended first.
// startTicks guards against PID reuse: a PID that already belongs to
// another process counts as exited.
func WaitExit(ctx context.Context, pid int, startTicks uint64) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return pollExit(ctx, pid, startTicks)
	}
	defer unix.Close(fd)
	// Checked after opening the pidfd: if this is still our process now,
	// the pidfd refers to it.
	if !Same(pid, startTicks) {
		return nil
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := unix.Poll(fds, 50)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return pollExit(ctx, pid, startTicks)
		}
		if n > 0 {
			return nil
		}
	}
}

// pollExit is WaitExit's fallback when pidfds are unavailable.
func pollExit(ctx context.Context, pid int, startTicks uint64) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for Same(pid, startTicks) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Group returns the stat of every live process whose process group is pgid.
func Group(pgid int) ([]Stat, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var out []Stat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := ReadStat(pid)
		if err != nil || st.PGID != pgid || st.State == "Z" {
			continue
		}
		out = append(out, st)
	}
	return out, nil
}
