// Package dockertest gives tests a real Docker engine and images to run on
// it without any registry: it builds a static Go program (CGO_ENABLED=0),
// wraps the binary in a one-layer `FROM scratch` image written by hand in the
// `docker save` format, and loads it with the Engine API.
//
// Policy for an unreachable engine: when HIVELET_REQUIRE_DOCKER=1 (CI sets
// it) a test fails, never skips; otherwise it skips with the reason.
//
// Everything a test creates must be removable by label: use RemoveContainers
// in t.Cleanup (or TestMain) with a label unique to the run.
//
// The Docker tests it serves, and how CI runs them, are described in
// docs/docker-driver.md ("Tests").
package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hivelet/hivelet/runtime/docker"
)

// RequireEnv is the environment variable that turns "engine unreachable"
// from a skip into a failure.
const RequireEnv = "HIVELET_REQUIRE_DOCKER"

// Required reports whether tests must fail when the engine is unreachable.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Env is one test package's Docker environment: a client and one image of
// a Go program, built once (on first use) and removed by Close. Use one Env
// per package, from a package variable set up in TestMain.
type Env struct {
	// Tag is the image's tag, unique to this Env.
	Tag string
	// RunID is unique to this Env: label what the tests create with it.
	RunID string

	src    string
	once   sync.Once
	client *docker.Client
	binary []byte
	err    error
}

// NewEnv prepares an environment whose image runs the Go program mainSrc
// (a complete `package main` file using only the standard library).
func NewEnv(name, mainSrc string) *Env {
	id := RandomID()
	return &Env{Tag: "hivelet-test/" + name + ":" + id, RunID: id, src: mainSrc}
}

// Client returns the engine client, building the image on first use. It
// skips the test (or fails it, under HIVELET_REQUIRE_DOCKER=1) when the
// engine is unreachable, and fails it if the image cannot be built.
func (e *Env) Client(t testing.TB) *docker.Client {
	t.Helper()
	e.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		e.client, e.err = Reachable(ctx)
		if e.err != nil {
			return
		}
		e.binary, e.err = BuildGoBinary(ctx, e.src)
		if e.err == nil {
			e.err = LoadBinaryImage(ctx, e.client, e.Tag, e.binary)
		}
		if e.err != nil {
			e.err = fmt.Errorf("building test image: %w", e.err)
		}
	})
	if e.err != nil {
		if e.client == nil && !Required() {
			t.Skipf("docker engine unreachable (set %s=1 to make this a failure): %v", RequireEnv, e.err)
			return nil
		}
		t.Fatalf("docker test environment: %v", e.err)
		return nil
	}
	return e.client
}

// Binary is the test program's static binary (for Registry.AddImage).
func (e *Env) Binary(t testing.TB) []byte {
	t.Helper()
	e.Client(t)
	return e.binary
}

// Close removes the image (if it was built) and closes the client.
func (e *Env) Close() {
	if e.client == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = e.client.RemoveImage(ctx, e.Tag)
	_ = e.client.Close()
}

// Reachable returns a client for the engine of the environment, or an error
// if the engine does not answer.
func Reachable(ctx context.Context) (*docker.Client, error) {
	c, err := docker.New(docker.Options{})
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Info(pctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// RandomID is a short random hex string for unique names and labels.
func RandomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// RemoveContainers force-removes every container carrying all of labels.
// It is meant for t.Cleanup and refuses an empty label set (which would
// match every container of the engine).
func RemoveContainers(ctx context.Context, c *docker.Client, labels map[string]string) error {
	if len(labels) == 0 {
		return fmt.Errorf("refusing to remove containers without a label filter")
	}
	list, err := c.ListContainers(ctx, labels)
	if err != nil {
		return err
	}
	for _, s := range list {
		if err := c.RemoveContainer(ctx, s.ID, true); err != nil {
			return err
		}
	}
	return nil
}

// BuildGoImage compiles mainSrc as a static linux binary for the host's
// architecture and loads it as image tag, whose entrypoint is the binary.
func BuildGoImage(ctx context.Context, c *docker.Client, tag, mainSrc string) error {
	bin, err := BuildGoBinary(ctx, mainSrc)
	if err != nil {
		return err
	}
	return LoadBinaryImage(ctx, c, tag, bin)
}

// BuildGoBinary compiles mainSrc (a `package main` file using only the
// standard library) as a static linux binary and returns it.
func BuildGoBinary(ctx context.Context, mainSrc string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "hivelet-dockertest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(mainSrc), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module testprog\n\ngo 1.22\n"), 0o644); err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "app")
	if err := BuildStatic(ctx, dir, bin); err != nil {
		return nil, err
	}
	return os.ReadFile(bin)
}

// BuildStatic runs `go build` in dir (a main package, the module of its
// own that TestProgram writes) with cgo off, writing the binary to out.
func BuildStatic(ctx context.Context, dir, out string) error {
	return GoBuildStatic(ctx, dir, out, []string{"GOWORK=off", "GOFLAGS=-mod=mod"}, ".")
}

// GoBuildStatic runs go build in dir for pkgs, writing to out (a file, or a
// directory when out ends in a separator), as the static binaries of the
// tests' FROM scratch images are built: CGO_ENABLED=0, GOOS=linux,
// -trimpath, -ldflags=-s -w, no VCS stamp; env is added to the
// environment. It is the one `go build` of the module's tests
// (fleettest.BuildStatic runs the module's own builds through it).
func GoBuildStatic(ctx context.Context, dir, out string, env []string, pkgs ...string) error {
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out}, pkgs...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux"), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %w\n%s", strings.Join(pkgs, " "), dir, err, b)
	}
	return nil
}

// LoadBinaryImage loads an image with one layer holding binary as /app
// (the entrypoint) and an empty /tmp, tagged tag.
func LoadBinaryImage(ctx context.Context, c *docker.Client, tag string, binary []byte) error {
	tarball, err := ImageTar(tag, binary)
	if err != nil {
		return err
	}
	return c.LoadImage(ctx, bytes.NewReader(tarball))
}

// ImageTar writes a `docker save` image archive: one layer holding binary as
// /app, /tmp (mode 1777), and a config whose entrypoint is /app.
func ImageTar(tag string, binary []byte) ([]byte, error) {
	layerTar, config, err := imageParts(binary)
	if err != nil {
		return nil, err
	}
	mtime := time.Unix(0, 0)
	layerSum := sha256.Sum256(layerTar)
	layerHex := hex.EncodeToString(layerSum[:])
	layer := bytes.NewBuffer(layerTar)
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   configName,
		"RepoTags": []string{tag},
		"Layers":   []string{layerHex + "/layer.tar"},
	}})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	add := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: layerHex + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime}); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{layerHex + "/layer.tar", layer.Bytes()},
		{configName, config},
		{"manifest.json", manifest},
	} {
		if err := add(f.name, f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// imageParts returns the uncompressed layer tar (binary as /app, and /tmp)
// and the image config JSON whose entrypoint is /app.
func imageParts(binary []byte) (layerTar, config []byte, err error) {
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	mtime := time.Unix(0, 0)
	if err := lw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: mtime}); err != nil {
		return nil, nil, err
	}
	if err := lw.WriteHeader(&tar.Header{Name: "app", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(binary)), ModTime: mtime}); err != nil {
		return nil, nil, err
	}
	if _, err := lw.Write(binary); err != nil {
		return nil, nil, err
	}
	if err := lw.Close(); err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(layer.Bytes())
	created := time.Now().UTC().Format(time.RFC3339Nano)
	config, err = json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      created,
		"config": map[string]any{
			"Entrypoint": []string{"/app"},
			"Env":        []string{"PATH=/"},
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(sum[:])}},
		"history": []map[string]any{{"created": created, "created_by": "hivelet dockertest"}},
	})
	if err != nil {
		return nil, nil, err
	}
	return layer.Bytes(), config, nil
}
