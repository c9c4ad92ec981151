package fleet

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The embedded NATS server is authenticated by default: anyone who can
// reach it can declare jobs, and an exec task runs commands as the agent's
// user. The agent generates a token at first start and keeps it, mode
// 0600, in its state directory (TokenFile); whoever can read that file
// holds the fleet. So that the CLI finds it without flags, the agent also
// copies it, 0600, into a directory of the user it runs as, named by port
// (DiscoveryPath); the CLI looks there, then in the default state
// directory (FindToken). A user who cannot read either is refused by the
// server (TestTheEmbeddedServerRefusesAClientWithoutTheToken).

// TokenFile is the token's file name in the agent's state directory.
const TokenFile = "nats.token"

// LoadOrCreateToken returns the token kept in dir, creating a random one
// (256 bits, mode 0600) if there is none.
func LoadOrCreateToken(dir string) (token, path string, err error) {
	path = filepath.Join(dir, TokenFile)
	token, err = LoadOrCreateSecret(path)
	if err != nil {
		return "", path, fmt.Errorf("the NATS credentials: %w", err)
	}
	return token, path, nil
}

// LoadOrCreateSecret returns the secret kept in the file at path, creating
// a random one (256 bits, hex, mode 0600) if there is none: the NATS token
// and the HTTP API's.
func LoadOrCreateSecret(path string) (string, error) {
	token, err := ReadToken(path)
	if err == nil {
		return token, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	token = hex.EncodeToString(b[:])
	if err := writePrivate(path, token); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return token, nil
}

// ReadToken reads a token file. A file that exists but is not readable by
// this user says so (the agent's user can read it, this one cannot).
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrPermission) {
		return "", fmt.Errorf("the NATS credentials %s are not readable by this user (uid %d): run as a user who can read them: %w", path, os.Getuid(), err)
	}
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("the NATS credentials %s are empty", path)
	}
	return t, nil
}

// writePrivate writes text to path, mode 0600, replacing it atomically.
func writePrivate(path, text string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.WriteString(text + "\n"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// discoveryDir is this user's directory of published tokens: under the
// user's cache directory, else a 0700 directory of this uid under the
// system's temporary directory (refused if another user owns it).
func discoveryDir() (string, error) {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "hivelet", "nats"), nil
	}
	d := filepath.Join(os.TempDir(), fmt.Sprintf("hivelet-%d", os.Getuid()), "nats")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	for _, p := range []string{filepath.Dir(d), d} {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || int(st.Uid) != os.Getuid() || !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
			return "", fmt.Errorf("%s is not a private directory of uid %d: not using it", p, os.Getuid())
		}
	}
	return d, nil
}

// DiscoveryPath is where the token of the embedded server on port is
// published for this user's CLI.
func DiscoveryPath(port int) (string, error) {
	d, err := discoveryDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, strconv.Itoa(port)+".token"), nil
}

// PublishToken copies token to DiscoveryPath(port). The returned function
// removes the copy if it still holds this token (the agent's exit).
func PublishToken(port int, token string) (path string, unpublish func(), err error) {
	path, err = DiscoveryPath(port)
	if err != nil {
		return "", func() {}, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return path, func() {}, err
	}
	if err := writePrivate(path, token); err != nil {
		return path, func() {}, err
	}
	return path, func() {
		if t, err := ReadToken(path); err == nil && t == token {
			_ = os.Remove(path)
		}
	}, nil
}

// DefaultStateDir is a non-dev agent's state directory unless configured.
const DefaultStateDir = "/var/lib/hivelet"

// FindToken finds the token for the CLI dialing urls (comma-separated):
// the explicit file if given, else, when the first URL is a loopback
// address, the token an agent of this user published for its port, then
// that of an agent on the default port with the default state directory.
// No token found is ("", "", nil): the server may need none. A file found
// but unreadable is an error naming it.
func FindToken(urls, explicitFile string) (token, from string, err error) {
	if explicitFile != "" {
		t, err := ReadToken(explicitFile)
		return t, explicitFile, err
	}
	first, _, _ := strings.Cut(urls, ",")
	u, perr := url.Parse(strings.TrimSpace(first))
	if perr != nil || !isLoopback(u.Hostname()) {
		return "", "", nil
	}
	port := DefaultNATSPort
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			return "", "", nil
		}
	}
	var candidates []string
	if p, err := DiscoveryPath(port); err == nil {
		candidates = append(candidates, p)
	}
	if port == DefaultNATSPort {
		candidates = append(candidates, filepath.Join(DefaultStateDir, TokenFile))
	}
	for _, c := range candidates {
		t, err := ReadToken(c)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		return t, c, err
	}
	return "", "", nil
}
