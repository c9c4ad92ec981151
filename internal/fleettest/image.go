package fleettest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hivelet/hivelet/runtime/docker/dockertest"
)

// ImageRepo is the repository of the images BuildImage makes; the tag is
// the content hash of the two binaries.
const ImageRepo = "hivelet-fleettest"

// LabelImage marks the images BuildImage makes, so that the images of
// earlier builds can be found and removed.
const LabelImage = "hivelet.fleettest.image"

// Image is a built fleet image and the host's copy of its hivelet binary
// (which the tests use as the CLI).
type Image struct {
	// Tag names the image: ImageRepo:<first 12 hex digits of the binaries'
	// SHA-256>.
	Tag string
	// CLI is the path of the static hivelet binary on the host, the same
	// bytes as /hivelet in the image.
	CLI string
	// Built is how long building the binaries and the image took (zero
	// parts when cached).
	Built time.Duration
}

var (
	imageOnce sync.Once
	image     Image
	imageErr  error
)

// RequireDocker skips the test when the Docker engine does not answer, or
// fails it when HIVELET_REQUIRE_DOCKER=1 (as CI sets it): a fleet test in CI
// never passes by not running.
func RequireDocker(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("fleet test: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, err := docker(ctx, "version", "--format", "{{.Server.Version}}")
	if err == nil && strings.TrimSpace(out) != "" {
		return
	}
	if dockertest.Required() {
		t.Fatalf("fleettest: the Docker engine is unreachable and %s=1: %v %s", dockertest.RequireEnv, err, out)
		return
	}
	t.Skipf("fleettest: the Docker engine is unreachable (set %s=1 to make this a failure): %v %s", dockertest.RequireEnv, err, out)
}

// BuildImage builds, once per test process, the static binaries hivelet
// (./cmd/hivelet of the module at repoRoot) and nats-server (the
// github.com/nats-io/nats-server/v2 module of its go.mod), and the image of
// examples/fleet/Dockerfile holding them, tagged by their content: an image
// with that tag already present is used as it is. Images of earlier builds
// (other tags, labelled LabelImage) are removed unless a container uses
// them.
//
// The binaries are built by BuildStatic, with the flags of
// examples/fleet/build.sh (and without VCS stamping, so a commit that
// changes no Go file changes no byte, and the image is reused): the two
// share the Go build cache, and after either the other mostly links.
func BuildImage(t testing.TB, repoRoot string) Image {
	t.Helper()
	imageOnce.Do(func() { image, imageErr = buildImage(repoRoot) })
	if imageErr != nil {
		t.Fatalf("fleettest: building the fleet image: %v", imageErr)
	}
	return image
}

func buildImage(repoRoot string) (Image, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		return Image{}, err
	}
	dockerfile := filepath.Join(root, "examples", "fleet", "Dockerfile")
	if _, err := os.Stat(dockerfile); err != nil {
		return Image{}, fmt.Errorf("%s is not the repository root: %w", repoRoot, err)
	}
	// One fixed directory, each binary replaced by rename: a binary a
	// running process uses keeps its inode, and no directory is left per run.
	cache := filepath.Join(os.TempDir(), "hivelet-fleettest-bin")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return Image{}, err
	}
	tmp, err := os.MkdirTemp(cache, "build-")
	if err != nil {
		return Image{}, err
	}
	defer os.RemoveAll(tmp)
	// Both main packages in one go build: they compile in parallel.
	if err := BuildStatic(ctx, root, tmp+string(filepath.Separator), "./cmd/hivelet", "github.com/nats-io/nats-server/v2"); err != nil {
		return Image{}, err
	}
	sum := sha256.New()
	for _, name := range []string{"hivelet", "nats-server"} {
		if err := hashFile(sum, filepath.Join(tmp, name)); err != nil {
			return Image{}, err
		}
	}
	tag := ImageRepo + ":" + hex.EncodeToString(sum.Sum(nil))[:12]
	cli := filepath.Join(cache, "hivelet")
	if err := os.Rename(filepath.Join(tmp, "hivelet"), cli); err != nil {
		return Image{}, err
	}
	if _, err := docker(ctx, "image", "inspect", "--format", "{{.Id}}", tag); err != nil {
		// The build context holds only what the Dockerfile copies.
		bin := filepath.Join(tmp, "ctx", "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			return Image{}, err
		}
		if err := copyFile(dockerfile, filepath.Join(tmp, "ctx", "Dockerfile")); err != nil {
			return Image{}, err
		}
		if err := copyFile(cli, filepath.Join(bin, "hivelet")); err != nil {
			return Image{}, err
		}
		if err := os.Rename(filepath.Join(tmp, "nats-server"), filepath.Join(bin, "nats-server")); err != nil {
			return Image{}, err
		}
		if out, err := dockerEnv(ctx, []string{"DOCKER_BUILDKIT=0"}, "build", "-q", "--label", LabelImage+"=1",
			"-t", tag, filepath.Join(tmp, "ctx")); err != nil {
			return Image{}, fmt.Errorf("docker build: %w\n%s", err, out)
		}
	}
	removeOldImages(ctx, tag)
	return Image{Tag: tag, CLI: cli, Built: time.Since(start)}, nil
}

// BuildStatic runs go build in dir for pkgs, writing to out (a file, or a
// directory when out ends in a separator), with the flags of
// examples/fleet/build.sh (dockertest.GoBuildStatic: CGO_ENABLED=0,
// GOOS=linux, -trimpath, -ldflags=-s -w, and no VCS stamp). Every test of the module that builds
// hivelet or a plugin builds it this way, so that they share one compile
// of each package in the Go build cache: a build with other flags compiles
// every package again (from a cold cache, 115 s and 220 CPU-seconds here
// for hivelet and nats-server; the same build of hivelet after it, 2.7 s).
//
// Builds run one at a time across the test processes of the machine (an
// exclusive lock on a file in os.TempDir()): two processes compiling the
// same packages at once would each compile them; the second to take the
// lock finds them in the cache and mostly links.
func BuildStatic(ctx context.Context, dir, out string, pkgs ...string) error {
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "hivelet-go-build.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return fmt.Errorf("go build: the build lock: %w", err)
	}
	defer lock.Close() // releases the lock, as the process's exit would
	if err := flock(ctx, lock); err != nil {
		return fmt.Errorf("go build: waiting for another test process's build: %w", err)
	}
	return dockertest.GoBuildStatic(ctx, dir, out, nil, pkgs...)
}

// flock takes an exclusive lock on f, or gives up when ctx ends (the
// blocking call runs on a goroutine of its own, which ends when f is
// closed or the lock is taken).
func flock(ctx context.Context, f *os.File) error {
	done := make(chan error, 1)
	go func() { done <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// removeOldImages removes the images of earlier builds; an image a
// container still uses (another run in progress) is refused by the engine
// and kept.
func removeOldImages(ctx context.Context, keep string) {
	out, err := docker(ctx, "image", "ls", "--filter", "label="+LabelImage+"=1", "--format", "{{.Repository}}:{{.Tag}}")
	if err != nil {
		return
	}
	for _, ref := range strings.Fields(out) {
		if ref != keep && strings.HasPrefix(ref, ImageRepo+":") {
			_, _ = docker(ctx, "image", "rm", ref)
		}
	}
}

func hashFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// docker runs the Docker CLI and returns its combined output.
func docker(ctx context.Context, args ...string) (string, error) {
	return dockerEnv(ctx, nil, args...)
}

func dockerEnv(ctx context.Context, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
