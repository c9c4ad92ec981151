package testutil

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream starts a JetStream-enabled server (StartNATS) with a store in a
// temporary directory and returns a client on it; connect gives more
// clients on the same server (each closed at the test's cleanup).
func JetStream(t testing.TB) (js jetstream.JetStream, connect func() jetstream.JetStream) {
	t.Helper()
	s := StartNATS(t, &server.Options{JetStream: true, StoreDir: t.TempDir()})
	connect = func() jetstream.JetStream {
		t.Helper()
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatalf("testutil.JetStream: %v", err)
			return nil
		}
		t.Cleanup(nc.Close)
		j, err := jetstream.New(nc)
		if err != nil {
			t.Fatalf("testutil.JetStream: %v", err)
			return nil
		}
		return j
	}
	return connect(), connect
}
