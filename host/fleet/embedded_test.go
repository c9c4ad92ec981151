package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestTheEmbeddedServerLocksItsStoreAndReportsATakenPort(t *testing.T) {
	dir := t.TempDir()
	a := startServer(t, dir, -1)
	if a.Port() == 0 || !strings.HasPrefix(a.ClientURL(), "nats://127.0.0.1:") {
		t.Fatalf("port %d url %s", a.Port(), a.ClientURL())
	}
	// A second server on the same store dir is refused (the server itself takes no lock).
	if _, err := StartEmbedded(context.Background(), EmbeddedConfig{StoreDir: dir, Port: -1}); err == nil || !strings.Contains(err.Error(), "another process holds it") {
		t.Fatalf("second server on the same store: %v", err)
	}
	// A taken port is a clear error, or a random port with FallbackRandomPort.
	_, err := StartEmbedded(context.Background(), EmbeddedConfig{StoreDir: t.TempDir(), Port: a.Port()})
	if !errors.Is(err, ErrPortInUse) {
		t.Fatalf("taken port: %v", err)
	}
	b, err := StartEmbedded(context.Background(), EmbeddedConfig{StoreDir: t.TempDir(), Port: a.Port(), FallbackRandomPort: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	if b.Port() == a.Port() || b.Port() == 0 {
		t.Fatalf("fallback port %d", b.Port())
	}
	// Only loopback, unless allowed.
	if _, err := StartEmbedded(context.Background(), EmbeddedConfig{StoreDir: t.TempDir(), Host: "0.0.0.0", Port: -1}); err == nil {
		t.Fatal("listened beyond loopback")
	}
	// After shutdown the store can be taken again (control for the lock).
	a.Shutdown()
	c := startServer(t, dir, -1)
	c.Shutdown()
}
