package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// An embedded server given a token refuses a client without it and serves
// one with it (control); the token is generated once, 0600, and kept; the
// copy published for a port is what FindToken finds for a loopback URL of
// that port, and only for one.
func TestTheEmbeddedServerRefusesAClientWithoutTheToken(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	token, path, err := LoadOrCreateToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || len(token) != 64 {
		t.Fatalf("token file %s: %v %v, token of %d chars; want 0600 and 64", path, fi.Mode(), err, len(token))
	}
	if again, _, err := LoadOrCreateToken(dir); err != nil || again != token {
		t.Fatalf("second load: %v; the token changed: %v", err, again != token)
	}

	srv, err := StartEmbedded(context.Background(), EmbeddedConfig{StoreDir: t.TempDir(), Port: -1, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	if _, err := Connect(context.Background(), ConnConfig{URLs: []string{srv.ClientURL()}, FailFast: true, RequestTimeout: time.Second}, nil, nil); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("a client without the token: %v, want an authorization violation", err)
	}
	c, err := Connect(context.Background(), ConnConfig{URLs: []string{srv.ClientURL()}, Token: token, FailFast: true, RequestTimeout: time.Second}, nil, nil)
	if err != nil {
		t.Fatalf("a client with the token: %v", err)
	}
	c.Close()
	in, err := Connect(context.Background(), ConnConfig{InProcess: srv.Server(), Token: token, FailFast: true, RequestTimeout: time.Second}, nil, nil)
	if err != nil {
		t.Fatalf("the agent's in-process client with the token: %v", err)
	}
	in.Close()

	url := srv.ClientURL()
	if got, from, err := FindToken(url, ""); err != nil || got != "" {
		t.Fatalf("nothing published yet: found %q from %s, %v", got, from, err)
	}
	pub, unpublish, err := PublishToken(srv.Port(), token)
	if err != nil {
		t.Fatal(err)
	}
	if got, from, err := FindToken(url, ""); err != nil || got != token || from != pub {
		t.Fatalf("published: found %q from %s, %v; want the token from %s", got, from, err, pub)
	}
	if got, _, _ := FindToken(fmt.Sprintf("nats://10.1.2.3:%d", srv.Port()), ""); got != "" {
		t.Fatal("a token published for a local port was offered to another host")
	}
	if got, from, err := FindToken("nats://10.1.2.3:4222", path); err != nil || got != token || from != path {
		t.Fatalf("explicit file: %q from %s, %v", got, from, err)
	}
	unpublish()
	if _, err := os.Stat(pub); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unpublished copy: %v", err)
	}
}
