package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/internal/testutil"
)

// natsToken is the token the agent generated in its state directory.
func (p *agentProc) natsToken() string {
	p.t.Helper()
	tok, err := fleet.ReadToken(filepath.Join(p.dir, "state", fleet.TokenFile))
	if err != nil {
		p.t.Fatal(err)
	}
	return tok
}

// cliAs runs the CLI as uid/gid with the given environment (nothing of
// this process's), returning the exit code and output.
func (p *agentProc) cliAs(uid, gid uint32, env []string, args ...string) (int, string) {
	p.t.Helper()
	cmd := exec.Command(p.bin, append(args, "-nats", p.natsURL)...)
	cmd.Env = env
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String()
	}
	if err != nil {
		p.t.Fatalf("running %v as uid %d: %v", args, uid, err)
	}
	return 0, out.String()
}

// The fault of issue 11 (security): any local user could drive the
// embedded NATS and, through an exec task, run commands as root. Now the
// agent generates a token at its first start (0600 in its state
// directory, kept across restarts); a client without it is refused; the
// CLI of the agent's user finds it by itself; another user (nobody) who
// cannot read it is refused with a message saying why. Control: the
// explicit insecure_no_auth option serves without credentials, warned.
func TestEndToEndTheEmbeddedNATSIsAuthenticatedByDefault(t *testing.T) {
	// Parallel (with the other end-to-end tests that mostly wait): its time
	// is three starts and graceful stops of its agent; the agent, its NATS,
	// ports, directories and published token (keyed by its own port) are
	// its own, and nothing it checks depends on how fast it went.
	t.Parallel()
	p := newAgent(t, "")
	p.start()
	tokPath := filepath.Join(p.dir, "state", fleet.TokenFile)
	fi, err := os.Stat(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s has mode %v, want 0600", tokPath, fi.Mode().Perm())
	}
	token := p.natsToken()

	if nc, err := nats.Connect(p.natsURL, nats.Timeout(3*time.Second), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("a client without credentials was served")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("a client without credentials: %v, want an authorization violation", err)
	}
	nc, err := nats.Connect(p.natsURL, nats.Token(token), nats.Timeout(3*time.Second), nats.NoReconnect())
	if err != nil {
		t.Fatalf("a client with the token: %v", err)
	}
	nc.Close()

	// The agent's user: the CLI finds the credentials.
	if code, out := p.cli("node", "status"); code != 0 {
		t.Fatalf("node status as the agent's user: exit %d\n%s", code, out)
	}
	// Another user: refused, with the reason; pointing at the file it
	// cannot read says so.
	nobody := []string{"HOME=/nonexistent", "PATH=/usr/bin:/bin"}
	code, out := p.cliAs(65534, 65534, nobody, "node", "status")
	if code == 0 || !strings.Contains(out, "the server requires credentials and none were found for this user") {
		t.Fatalf("node status as nobody: exit %d\n%s", code, out)
	}
	code, out = p.cliAs(65534, 65534, append(nobody, "HIVELET_NATS_TOKEN_FILE="+tokPath), "node", "status")
	if code == 0 || !strings.Contains(out, "are not readable by this user (uid 65534)") {
		t.Fatalf("node status as nobody with the root-only token file: exit %d\n%s", code, out)
	}

	// The token is kept across a restart.
	p.signal(syscall.SIGTERM)
	p.start()
	if again := p.natsToken(); again != token {
		t.Fatal("the token changed across a restart")
	}
	if code, out := p.cli("node", "status"); code != 0 {
		t.Fatalf("node status after the restart: exit %d\n%s", code, out)
	}

	// Control: explicitly unauthenticated, warned.
	p.signal(syscall.SIGTERM)
	port := testutil.FreePort(t)
	p.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", port)
	p.writeConfig(fmt.Sprintf("http {\n  address = %q\n}\nnats {\n  embedded {\n    port = %d\n    insecure_no_auth = true\n  }\n}\n", p.apiAddr, port))
	p.start()
	if !p.logHas("accepts clients WITHOUT credentials") {
		t.Fatal("an unauthenticated listener without its warning")
	}
	nc, err = nats.Connect(p.natsURL, nats.Timeout(3*time.Second), nats.NoReconnect())
	if err != nil {
		t.Fatalf("insecure_no_auth: a client without credentials: %v", err)
	}
	nc.Close()
}

// -dev is authenticated too: the CLI of the same user finds the token
// (published for the port), and the copy goes when the agent exits.
func TestEndToEndADevAgentIsAuthenticatedAndItsCLIFindsTheCredentials(t *testing.T) {
	p := newAgent(t, "")
	p.spawn("-dev", "-config", p.cfgPath, "-no-policies")
	testutil.Eventually(t, 30*time.Second, "dev agent serving", func() bool { code, _ := p.health(); return code != 0 })
	port := strings.TrimPrefix(p.natsURL, "nats://127.0.0.1:")
	published, err := fleet.DiscoveryPath(atoi(t, port))
	if err != nil {
		t.Fatal(err)
	}
	if nc, err := nats.Connect(p.natsURL, nats.Timeout(3*time.Second), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("the dev agent's NATS served a client without credentials")
	}
	if code, out := p.cli("node", "status"); code != 0 {
		t.Fatalf("node status against the dev agent: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(published); err != nil {
		t.Fatalf("the published token: %v", err)
	}
	p.signal(syscall.SIGTERM)
	if _, err := os.Stat(published); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the dev agent's published token outlived it: %v", err)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}
