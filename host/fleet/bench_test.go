package fleet

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// reportLatency records the median and p99 of the samples as custom metrics.
func reportLatency(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	q := func(p float64) float64 {
		return float64(samples[int(p*float64(len(samples)-1))].Microseconds())
	}
	b.ReportMetric(q(0.5), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

// benchConns returns a writer store and a reader conn, in-process or over
// loopback TCP.
func benchConns(b *testing.B, inproc bool) (*Store, *Conn) {
	srv := startServer(b, b.TempDir(), -1)
	cfg := ConnConfig{URLs: []string{srv.ClientURL()}, FailFast: true}
	if inproc {
		cfg = ConnConfig{InProcess: srv.Server(), FailFast: true}
	}
	w, err := Connect(context.Background(), cfg, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Close)
	r, err := Connect(context.Background(), cfg, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Close)
	return mustEnsure(b, w, BucketOptions{}), r
}

// BenchmarkPutToWatchDelivery: KV put → the change visible to a consumer,
// through this package's Source (signal + View) versus a raw nats.go
// WatchAll, in the same run.
func BenchmarkPutToWatchDelivery(b *testing.B) {
	for _, transport := range []string{"inproc", "tcp"} {
		b.Run("raw/"+transport, func(b *testing.B) {
			writer, reader := benchConns(b, transport == "inproc")
			kv, err := reader.JetStream().KeyValue(context.Background(), writer.Names().Jobs)
			if err != nil {
				b.Fatal(err)
			}
			w, err := kv.WatchAll(context.Background(), jetstream.UpdatesOnly())
			if err != nil {
				b.Fatal(err)
			}
			defer w.Stop()
			val := jobJSON("web", 1, "")
			samples := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				rev, err := writer.Jobs.Put(context.Background(), "default.web", val)
				if err != nil {
					b.Fatal(err)
				}
				for e := range w.Updates() {
					if e != nil && e.Revision() >= rev {
						break
					}
				}
				samples = append(samples, time.Since(start))
			}
			b.StopTimer()
			reportLatency(b, samples)
		})
		b.Run("source/"+transport, func(b *testing.B) {
			writer, reader := benchConns(b, transport == "inproc")
			st := mustEnsure(b, reader, BucketOptions{})
			src := runSource(b, st, SourceConfig{Kinds: []string{KindJobs}})
			waitSynced(b, src)
			samples := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				val := jobJSON("web", i+1, "")
				start := time.Now()
				rev, err := writer.Jobs.Put(context.Background(), "default.web", val)
				if err != nil {
					b.Fatal(err)
				}
				for src.View().Revisions[KindJobs] < rev {
					<-src.Changed()
				}
				samples = append(samples, time.Since(start))
			}
			b.StopTimer()
			reportLatency(b, samples)
		})
	}
}

// BenchmarkBootPull1000Jobs: from nothing to a synced view of 1,000 jobs
// (decoded, closed) through a Source, versus a raw WatchAll reading the same
// entries to its initial-state marker without decoding.
func BenchmarkBootPull1000Jobs(b *testing.B) {
	writer, reader := benchConns(b, false)
	ctx := context.Background()
	for i := range 1000 {
		id := fmt.Sprintf("job-%04d", i)
		if _, err := writer.Jobs.Put(ctx, "default."+id, jobJSON(id, 1, "")); err != nil {
			b.Fatal(err)
		}
	}
	st := mustEnsure(b, reader, BucketOptions{})
	b.Run("raw", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			w, err := st.Jobs.WatchAll(ctx)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for e := range w.Updates() {
				if e == nil {
					break
				}
				n++
			}
			_ = w.Stop()
			if n != 1000 {
				b.Fatalf("pulled %d", n)
			}
		}
	})
	b.Run("source", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			src := NewSource(st, SourceConfig{Kinds: []string{KindJobs}})
			sctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = src.Run(sctx) }()
			<-src.Synced()
			if n := src.View().Jobs.Len(); n != 1000 {
				b.Fatalf("pulled %d", n)
			}
			cancel()
			<-done
		}
	})
}
