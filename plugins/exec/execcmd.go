package exec

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hivelet/hivelet/internal/wait"
	"github.com/hivelet/hivelet/plugins/internal/proc"
	"github.com/hivelet/hivelet/sdk/driver"
)

var _ driver.TaskExecer = (*Driver)(nil)

// ExecTask runs command as the task's main process runs: with its
// environment, its working directory and its user and group, all read
// from /proc/<pid> of that process (so a task recovered after a plugin
// restart, whose config the driver no longer has, is served too). A
// relative command is looked up in the task's PATH, then in its working
// directory. The command's process group is killed when ctx ends.
func (d *Driver) ExecTask(ctx context.Context, taskID string, command []string) (*driver.ExecResult, error) {
	t, err := d.tasks.Get(taskID)
	if err != nil {
		return nil, err
	}
	if t.exit.Exited() || !proc.Same(t.pid, t.startTicks) {
		return nil, fmt.Errorf("running a command in task %s: the task is not running", taskID)
	}
	env, cwd, uid, gid, err := processContext(ctx, t.pid)
	if err != nil {
		return nil, fmt.Errorf("running a command in task %s: %w", taskID, err)
	}
	cmd := osexec.CommandContext(ctx, lookInPath(command[0], env, cwd), command[1:]...)
	cmd.Env, cmd.Dir = env, cwd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if uid != os.Geteuid() || gid != os.Getegid() {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out := &capped{max: driver.MaxExecOutput}
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	var ee *osexec.ExitError
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("running %q in task %s: %w", command[0], taskID, ctx.Err())
	case errors.As(err, &ee):
		code := ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		return &driver.ExecResult{ExitCode: code, Output: out.buf.Bytes()}, nil
	case err != nil:
		return nil, fmt.Errorf("running %q in task %s: %w", command[0], taskID, err)
	}
	return &driver.ExecResult{Output: out.buf.Bytes()}, nil
}

// processContext reads a process's environment, working directory and
// effective user and group from /proc.
func processContext(ctx context.Context, pid int) (env []string, cwd string, uid, gid int, err error) {
	dir := "/proc/" + strconv.Itoa(pid)
	raw, err := readEnviron(ctx, dir)
	if err != nil {
		return nil, "", 0, 0, fmt.Errorf("reading the task's environment: %w", err)
	}
	for _, kv := range bytes.Split(raw, []byte{0}) {
		if len(kv) > 0 {
			env = append(env, string(kv))
		}
	}
	if cwd, err = os.Readlink(dir + "/cwd"); err != nil {
		return nil, "", 0, 0, fmt.Errorf("reading the task's working directory: %w", err)
	}
	f, err := os.Open(dir + "/status")
	if err != nil {
		return nil, "", 0, 0, fmt.Errorf("reading the task's user: %w", err)
	}
	defer f.Close()
	uid, gid = -1, -1
	for sc := bufio.NewScanner(f); sc.Scan(); {
		// "Uid:	real	effective	saved	fs"
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		switch fields[0] {
		case "Uid:":
			uid, _ = strconv.Atoi(fields[2])
		case "Gid:":
			gid, _ = strconv.Atoi(fields[2])
		}
	}
	if uid < 0 || gid < 0 {
		return nil, "", 0, 0, errors.New("reading the task's user: no Uid or Gid in its status")
	}
	return env, cwd, uid, gid, nil
}

// execSettle bounds how long readEnviron waits for an exec under way.
const execSettle = 2 * time.Second

// readEnviron reads /proc/<pid>/environ (dir is /proc/<pid>). cmd.Start
// returns once execve has passed its point of no return, but the kernel
// records where the new program's environment lies only after that, while
// it lays out the program's stack: until then the file reads as empty (a
// command run right after StartTask got an empty environment 2 times in
// 300, beside two busy loops). Every task this driver starts has an environment
// (PATH and its marks at least), so an empty read is an exec under way:
// it is read again, until it is not empty, ctx ends or execSettle passes.
func readEnviron(ctx context.Context, dir string) ([]byte, error) {
	deadline := time.Now().Add(execSettle)
	for pause := 50 * time.Microsecond; ; pause = min(2*pause, 5*time.Millisecond) {
		raw, err := os.ReadFile(dir + "/environ")
		if err != nil || len(raw) > 0 {
			return raw, err
		}
		if time.Now().After(deadline) {
			return nil, errors.New("it is empty (the process's exec did not complete)")
		}
		if !wait.For(ctx, pause) {
			return nil, ctx.Err()
		}
	}
}

// lookInPath resolves a command without a slash in the PATH of env, then
// in dir; anything else is returned as given.
func lookInPath(name string, env []string, dir string) string {
	if strings.Contains(name, "/") {
		return name
	}
	var path string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range append(filepath.SplitList(path), dir) {
		if d == "" {
			continue
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return name
}

// capped keeps the first max bytes written to it.
type capped struct {
	max int
	buf bytes.Buffer
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
