package exec_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/plugins/exec"
	"github.com/hivelet/hivelet/plugins/internal/proc"
	"github.com/hivelet/hivelet/sdk/driver"
)

// envBallast makes the test binary (TestMain) a ballast: a task's process
// that is slow to die. It holds this many pages of memory, each one a
// mapping of its own, written to, and a listening TCP socket, then writes
// "<pid> <port>" to the file named by envBallastReady and blocks.
const (
	envBallast      = "HIVELET_TEST_EXEC_BALLAST_PAGES"
	envBallastReady = "HIVELET_TEST_EXEC_BALLAST_READY"
)

// ballastPages makes the kernel take tens of milliseconds to tear the
// ballast down once it is killed: its main thread shows as a zombie within
// a millisecond, its last thread exits (and its socket closes) 33 to
// 60 ms after the SIGKILL, against 0.4 to 10 ms for the shell killed with
// it (8 kills, on the machine of this test's first runs). It stays below
// the kernel's default limit of 65,530 mappings a process.
const ballastPages = 40000

// holdBallast is the ballast's body; it never returns.
func holdBallast(pages string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "ballast:", err)
		os.Exit(2)
	}
	n, err := strconv.Atoi(pages)
	if err != nil || n <= 0 {
		fail(fmt.Errorf("%s=%q: want a number of pages", envBallast, pages))
	}
	size := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, n*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		fail(err)
	}
	_ = unix.Madvise(mem, unix.MADV_NOHUGEPAGE)
	for i := 0; i < n; i++ {
		mem[i*size] = 1
	}
	// Every other page read-only: each page stays a mapping of its own,
	// which the kernel frees one by one at exit.
	for i := 1; i < n; i += 2 {
		if err := unix.Mprotect(mem[i*size:(i+1)*size], unix.PROT_READ); err != nil {
			fail(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	ready := os.Getenv(envBallastReady)
	line := fmt.Sprintf("%d %d\n", os.Getpid(), ln.Addr().(*net.TCPAddr).Port)
	if err := os.WriteFile(ready+".tmp", []byte(line), 0o600); err != nil {
		fail(err)
	}
	if err := os.Rename(ready+".tmp", ready); err != nil {
		fail(err)
	}
	for {
		time.Sleep(time.Hour)
	}
}

// What an interrupted start left is gone, every process of its group and
// every thread of each, by the time the call that kills it returns: a
// retried start with another config must not begin while the task it
// replaces still runs or holds its port, and DestroyTask must not report
// a task destroyed while it is not. A SIGKILL sent to a group is pending
// in each process until the scheduler runs it, and a process of many
// threads and mappings (here the ballast; any Go server) frees its memory
// and closes its files for milliseconds after its main thread is a zombie,
// long after the shell leading the group (as the status keeper leads a
// task's group) is gone. Before the fix the driver waited for the leader
// alone: both calls returned with the ballast's port still taken.
func TestAKilledLeftoverIsGoneWithItsWholeGroup(t *testing.T) {
	for _, how := range []string{"destroy", "replace"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			dir := testutil.ShortTempDir(t, "hvl")
			id := "alloc-" + how + "/app"
			ready := filepath.Join(dir, "ballast")
			// The leftover: a shell leading its group, carrying the
			// task's marks (of another start), with the ballast as its
			// child.
			leader := osexec.Command("/bin/sh", "-c", `"$0" & wait`, os.Args[0])
			leader.Env = []string{"PATH=" + os.Getenv("PATH"), exec.EnvTaskID + "=" + id, exec.EnvStartKey + "=another-start",
				envBallast + "=" + strconv.Itoa(ballastPages), envBallastReady + "=" + ready}
			leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := leader.Start(); err != nil {
				t.Fatal(err)
			}
			pgid := leader.Process.Pid
			t.Cleanup(func() {
				_ = unix.Kill(-pgid, unix.SIGKILL)
				_ = leader.Wait()
			})
			testutil.Eventually(t, 20*time.Second, "the ballast holding its pages and port", func() bool {
				_, err := os.Stat(ready)
				return err == nil
			})
			b, err := os.ReadFile(ready)
			if err != nil {
				t.Fatal(err)
			}
			var ballast, port int
			if _, err := fmt.Sscan(string(b), &ballast, &port); err != nil {
				t.Fatalf("the ballast's line %q: %v", b, err)
			}
			pidfd, err := unix.PidfdOpen(ballast, 0)
			if err != nil {
				t.Skipf("no pidfd for the ballast (Linux before 5.3?): %v", err)
			}
			defer unix.Close(pidfd)
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			// Control: the group is the shell and the ballast, which holds
			// its pages and its port: there is something to kill, it dies
			// slowly, and the port shows when it is gone.
			members, err := proc.Group(pgid)
			if err != nil {
				t.Fatal(err)
			}
			held := false
			for _, m := range members {
				held = held || (m.PID == ballast && m.RSSPages >= ballastPages)
			}
			if len(members) != 2 || !held {
				t.Fatalf("the leftover's group before the kill: %+v, want the shell %d and the ballast %d holding %d pages", members, pgid, ballast, ballastPages)
			}
			if ln, err := net.Listen("tcp", addr); !errors.Is(err, syscall.EADDRINUSE) {
				if ln != nil {
					ln.Close()
				}
				t.Fatalf("listening on the ballast's %s before the kill: %v, want EADDRINUSE", addr, err)
			}

			d := exec.NewWithOptions(exec.Options{AgentUser: true})
			at := time.Now()
			switch how {
			case "destroy":
				if err := d.DestroyTask(ctx, id, true); err != nil {
					t.Fatalf("destroying what the interrupted start left: %v", err)
				}
			case "replace":
				tc := &driver.TaskConfig{ID: id, AllocID: "alloc-" + how, TaskName: "app", AllocDir: dir,
					Config: map[string]any{"command": "/bin/sh", "args": []any{"-c", "while :; do sleep 1; done"}}}
				if _, err := d.StartTask(ctx, tc); err != nil {
					t.Fatalf("a start with another config: %v", err)
				}
				t.Cleanup(func() { _ = d.DestroyTask(context.Background(), id, true) })
			}
			took := time.Since(at)
			// The port first: it is free once the ballast's last thread
			// has closed its files.
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatalf("%s returned (after %v) with the leftover's port still taken: %v", how, took, err)
			}
			ln.Close()
			if n, _ := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, 0); n != 1 {
				st, _ := proc.ReadStat(ballast)
				t.Fatalf("%s returned (after %v) with the ballast not exited: %+v", how, took, st)
			}
			if left, err := proc.Group(pgid); err != nil || len(left) != 0 {
				t.Fatalf("%s returned (after %v) with the leftover's group alive: %+v %v", how, took, left, err)
			}
			t.Logf("%s returned %v after it began, the leftover's group gone and its port free", how, took.Round(time.Microsecond))
		})
	}
}
