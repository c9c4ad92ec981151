package bucket

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hivelet/hivelet/internal/testutil"
)

func TestAgentsRacingToCreateABucketAllOpenIt(t *testing.T) {
	_, js := testutil.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := Open(ctx, js(), "hv_x", time.Second); !errors.Is(err, ErrMissing) {
		t.Fatalf("open before any agent: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		j := js()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = Ensure(ctx, j, jetstream.KeyValueConfig{Bucket: "hv_x", History: 2}, 5*time.Second)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("agent %d: %v", i, err)
		}
	}
	kv, err := Open(ctx, js(), "hv_x", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := kv.Status(ctx); err != nil || st.History() != 2 {
		t.Fatalf("bucket status %v %v", st, err)
	}
}
