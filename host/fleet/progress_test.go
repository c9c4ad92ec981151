package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
)

// The fault of issue 11 (5), watch half: health said "synced" while the
// watch made no progress. The probe finds nothing while the watch keeps up
// (control), names a watch that stays behind its bucket without applying
// anything for the window (its source stopped), and a bucket whose stream
// is gone.
func TestAWatchWhoseBucketIsGoneOrThatStallsIsAProblemForTheProbe(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	writer := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	st := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	src := NewSource(st, SourceConfig{Log: log, Kinds: []string{KindJobs}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitSynced(t, src)
	probe := NewWatchProbe(src, 10*time.Second)
	t0 := time.Now()

	// Keeping up: a put is applied, no problem at any time.
	putRaw(t, writer, "default.web", jobJSON("web", 1, ""))
	testutil.Eventually(t, 5*time.Second, "the put applied", hasJob(src, "web", 1))
	if p := probe.Check(context.Background(), t0); len(p) != 0 {
		t.Fatalf("a watch keeping up: %v", p)
	}
	if p := probe.Check(context.Background(), t0.Add(time.Minute)); len(p) != 0 {
		t.Fatalf("a watch keeping up, a minute on: %v", p)
	}

	// The watch stops (its source ends): behind, first within the window,
	// then past it without progress.
	cancel()
	<-done
	putRaw(t, writer, "default.web", jobJSON("web", 2, ""))
	if p := probe.Check(context.Background(), t0.Add(2*time.Minute)); len(p) != 0 {
		t.Fatalf("behind for no time yet: %v", p)
	}
	p := probe.Check(context.Background(), t0.Add(2*time.Minute+10*time.Second))
	if len(p) != 1 || !strings.Contains(p[0], "no progress for 10s") || !strings.Contains(p[0], "bucket t_jobs") {
		t.Fatalf("a watch behind without progress past the window: %v", p)
	}
	if got := probe.Problems(); len(got) != 1 || got[0] != p[0] {
		t.Fatalf("Problems %v, want the last Check's %v", got, p)
	}

	// The bucket's stream is deleted under it.
	if err := writer.Conn().JetStream().DeleteKeyValue(context.Background(), writer.Names().Jobs); err != nil {
		t.Fatal(err)
	}
	p = probe.Check(context.Background(), t0.Add(3*time.Minute))
	if len(p) != 1 || !strings.Contains(p[0], "bucket t_jobs cannot be read") {
		t.Fatalf("a deleted bucket: %v", p)
	}
}
