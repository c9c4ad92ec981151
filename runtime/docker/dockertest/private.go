package dockertest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/runtime/docker"
)

// PrivateEngine is a Docker engine of the test's own, for the faults of
// the engine itself (a restart, with and without live-restore; an engine
// down for a while): a dockerd in its own network namespace, with its own
// data root, exec root (so its own containerd, with its own root and
// socket), pidfile and socket, no bridge, no iptables rules, and an empty
// configuration file (so the machine's /etc/docker/daemon.json is not
// read). Stopping it disturbs neither the machine's engine nor the tests
// using it. Its containers have no network but loopback.
//
// It needs root and a dockerd binary: without them the test skips, or
// fails under HIVELET_REQUIRE_DOCKER=1. Everything it ran is removed at
// the test's cleanup: its containers, the daemon (ended by its PID), its
// mounts and directories.
type PrivateEngine struct {
	t           testing.TB
	dir         string
	sock        string
	logPath     string
	liveRestore bool
	storage     string
	cmd         *exec.Cmd
	done        chan struct{}
	client      *docker.Client
}

// StartPrivateEngine starts a private engine (with --live-restore when
// liveRestore) and loads image tag, running binary (Env.Binary), into it.
func StartPrivateEngine(t testing.TB, liveRestore bool, tag string, binary []byte) *PrivateEngine {
	t.Helper()
	dockerd, err := exec.LookPath("dockerd")
	if err == nil && os.Geteuid() != 0 {
		err = errors.New("a private dockerd needs root")
	}
	if err != nil {
		if Required() {
			t.Fatalf("private docker engine: %v", err)
		} else {
			t.Skipf("private docker engine unavailable (set %s=1 to make this a failure): %v", RequireEnv, err)
		}
		return nil
	}
	dir, err := os.MkdirTemp("", "hvpd") // short: the containerd socket lives below it
	if err != nil {
		t.Fatal(err)
	}
	e := &PrivateEngine{t: t, dir: dir, sock: filepath.Join(dir, "d.sock"), logPath: filepath.Join(dir, "dockerd.log"), liveRestore: liveRestore}
	t.Cleanup(e.cleanup)
	if err := os.WriteFile(filepath.Join(dir, "daemon.json"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The default storage driver first (overlay2 on this machine's ext4),
	// then vfs, which works on any filesystem.
	var errs []error
	for _, storage := range []string{"", "vfs"} {
		e.storage = storage
		if err := e.start(dockerd); err != nil {
			errs = append(errs, fmt.Errorf("storage driver %q: %w", storage, err))
			continue
		}
		errs = nil
		break
	}
	if errs != nil {
		t.Fatalf("starting a private dockerd: %v", errors.Join(errs...))
	}
	e.client, err = docker.New(docker.Options{Host: e.Host()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := LoadBinaryImage(ctx, e.client, tag, binary); err != nil {
		t.Fatalf("loading %s into the private engine: %v", tag, err)
	}
	return e
}

// Host is the engine's address, for docker.Options.Host or DOCKER_HOST.
func (e *PrivateEngine) Host() string { return "unix://" + e.sock }

// Client is a client of the private engine.
func (e *PrivateEngine) Client() *docker.Client { return e.client }

// PID is the running daemon's process ID.
func (e *PrivateEngine) PID() int { return e.cmd.Process.Pid }

func (e *PrivateEngine) args() []string {
	a := []string{
		"--config-file", filepath.Join(e.dir, "daemon.json"),
		"--data-root", filepath.Join(e.dir, "data"),
		"--exec-root", filepath.Join(e.dir, "exec"),
		"--pidfile", filepath.Join(e.dir, "d.pid"),
		"-H", e.Host(),
		"--bridge=none", "--iptables=false", "--ip-masq=false", "--ip-forward=false",
		"--log-level=warn",
	}
	if e.storage != "" {
		a = append(a, "--storage-driver", e.storage)
	}
	if e.liveRestore {
		a = append(a, "--live-restore")
	}
	return a
}

func (e *PrivateEngine) start(dockerd string) error {
	logf, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(dockerd, e.args()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own network namespace: a dockerd given --bridge=none deletes the
	// host's docker0 at start (moby's removeDefaultBridgeInterface), which
	// breaks the machine's engine; in a namespace of its own it touches
	// only its own links.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM, Cloneflags: syscall.CLONE_NEWNET}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	e.cmd, e.done = cmd, done
	c, err := docker.New(docker.Options{Host: e.Host()})
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.Info(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("dockerd exited (%v) before it served; its log:\n%s", cmd.ProcessState, e.logTail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			e.kill()
			return fmt.Errorf("dockerd did not serve within 60s: %v; its log:\n%s", err, e.logTail())
		}
	}
}

// Start starts the engine again after Stop; it fails the test if it does
// not serve within a minute.
func (e *PrivateEngine) Start() {
	e.t.Helper()
	dockerd, err := exec.LookPath("dockerd")
	if err == nil {
		err = e.start(dockerd)
	}
	if err != nil {
		e.t.Fatalf("starting the private dockerd again: %v", err)
	}
}

// Stop shuts the engine down as its service manager would (SIGTERM) and
// waits for it to exit: without live-restore it stops its containers
// first; with it, they keep running.
func (e *PrivateEngine) Stop() {
	e.t.Helper()
	if e.cmd == nil || e.exited() {
		return
	}
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(60 * time.Second):
		e.kill()
		e.t.Fatalf("the private dockerd did not exit within 60s of SIGTERM; its log:\n%s", e.logTail())
	}
}

// Restart is Stop then Start.
func (e *PrivateEngine) Restart() {
	e.t.Helper()
	e.Stop()
	e.Start()
}

func (e *PrivateEngine) exited() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

func (e *PrivateEngine) kill() {
	if e.cmd != nil && !e.exited() {
		_ = e.cmd.Process.Kill()
		<-e.done
	}
}

func (e *PrivateEngine) logTail() string {
	b, _ := os.ReadFile(e.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// cleanup removes every container of the engine (all of them are the
// test's), stops it, unmounts what it left mounted below its directory
// and removes the directory.
func (e *PrivateEngine) cleanup() {
	if e.t.Failed() {
		e.t.Logf("private dockerd log (tail):\n%s", e.logTail())
	}
	if e.cmd != nil && e.exited() && e.liveRestore {
		// Its containers may still run (live-restore): bring it back to
		// remove them.
		if dockerd, err := exec.LookPath("dockerd"); err == nil {
			_ = e.start(dockerd)
		}
	}
	if e.client != nil && e.cmd != nil && !e.exited() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if list, err := e.client.ListContainers(ctx, nil); err == nil {
			for _, c := range list {
				_ = e.client.RemoveContainer(ctx, c.ID, true)
			}
		}
		cancel()
	}
	if e.client != nil {
		_ = e.client.Close()
	}
	if e.cmd != nil && !e.exited() {
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.done:
		case <-time.After(60 * time.Second):
			e.kill()
		}
	}
	for _, m := range mountsBelow(e.dir) {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	_ = os.RemoveAll(e.dir)
}

// mountsBelow lists the mount points at or below dir, deepest first.
func mountsBelow(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if mp := fields[4]; mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}
