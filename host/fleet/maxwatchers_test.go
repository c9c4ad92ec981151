package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// A bucket takes more watches than the server's default consumer limit per
// stream (1,000): a fleet of more than a thousand agents can watch it.
// Control: a bucket made the plain way refuses the 1,001st watch with the
// server's "maximum consumers limit reached".
func TestABucketTakesMoreWatchersThanTheServersDefaultConsumerLimit(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	c := connect(t, srv.ClientURL(), log, nil)
	st := mustEnsure(t, c, BucketOptions{NodeTTL: time.Minute})
	ctx := context.Background()
	plain, err := c.JetStream().CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1100
	watch := func(bucket string) (int, error) {
		for i := range n {
			w, err := watchKV(ctx, c.JetStream(), bucket, nil, 0, 0)
			if err != nil {
				return i, err
			}
			t.Cleanup(func() { _ = w.Stop() })
		}
		return n, nil
	}
	if got, err := watch(plain.Bucket()); got != 1000 || !errors.Is(err, jetstream.ErrMaximumConsumersLimit) {
		t.Fatalf("plain bucket: %d watches, then %v; want the server's limit after 1,000", got, err)
	}
	if got, err := watch(st.Jobs.Bucket()); err != nil {
		t.Fatalf("hivelet's jobs bucket refused watch %d: %v", got+1, err)
	}
	for _, b := range st.buckets() {
		stream, err := c.JetStream().Stream(ctx, "KV_"+b.name)
		if err != nil {
			t.Fatal(err)
		}
		if m := stream.CachedInfo().Config.MaxConsumers; m != DefaultMaxWatchers {
			t.Errorf("bucket %s: consumer limit %d, want %d", b.name, m, DefaultMaxWatchers)
		}
	}
}

// An existing bucket's lower limit is raised by the next agent's
// EnsureBuckets; a higher one (an operator's) is kept.
func TestEnsureBucketsRaisesALowerConsumerLimitAndKeepsAHigherOne(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	c := connect(t, srv.ClientURL(), log, nil)
	st := mustEnsure(t, c, BucketOptions{NodeTTL: time.Minute, MaxWatchers: 50})
	ctx := context.Background()
	limit := func(name string) int {
		t.Helper()
		stream, err := c.JetStream().Stream(ctx, "KV_"+name)
		if err != nil {
			t.Fatal(err)
		}
		return stream.CachedInfo().Config.MaxConsumers
	}
	if got := limit(st.Jobs.Bucket()); got != 50 {
		t.Fatalf("limit %d, want 50", got)
	}
	mustEnsure(t, c, BucketOptions{NodeTTL: time.Minute, MaxWatchers: 2000})
	if got := limit(st.Nodes.Bucket()); got != 2000 {
		t.Fatalf("after a raise: %d, want 2000", got)
	}
	mustEnsure(t, c, BucketOptions{NodeTTL: time.Minute, MaxWatchers: 10})
	if got := limit(st.Nodes.Bucket()); got != 2000 {
		t.Fatalf("after a lower wish: %d, want 2000 kept", got)
	}
}

// An account whose own consumer limit is below the wanted one keeps it:
// EnsureBuckets says so in the log and goes on (the buckets work, up to the
// account's limit), rather than refusing to start.
func TestEnsureBucketsUnderALowerAccountConsumerLimitWarnsAndGoesOn(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	acc := srv.Server().GlobalAccount()
	if err := acc.UpdateJetStreamLimits(map[string]server.JetStreamAccountLimits{"": {MaxMemory: -1, MaxStore: -1, MaxStreams: -1, MaxConsumers: 30}}); err != nil {
		t.Fatal(err)
	}
	log, buf := testLog(t)
	c := connect(t, srv.ClientURL(), log, nil)
	st := mustEnsure(t, c, BucketOptions{NodeTTL: time.Minute})
	if !strings.Contains(buf.String(), "the account's consumer limit is below") {
		t.Fatalf("no warning in the log:\n%s", buf.String())
	}
	if _, err := st.Jobs.Put(context.Background(), "default.web", []byte("{}")); err != nil {
		t.Fatal(err)
	}
}
