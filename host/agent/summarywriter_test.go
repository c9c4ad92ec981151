package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/rollout"
	"github.com/hivelet/hivelet/host/state"
	"github.com/hivelet/hivelet/internal/testutil"
)

// slowRecords is a DeploymentWriter whose record compare-and-sets wait
// for release; it notes the summaries written.
type slowRecords struct {
	*fleet.Store
	release chan struct{}
	mu      sync.Mutex
	sums    []*model.RolloutSummary
}

func (s *slowRecords) ModifyDeployment(ctx context.Context, ns, job string, v uint64, attempts int, decide func(model.Deployment) (*model.Deployment, error)) (*model.Deployment, uint64, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	return s.Store.ModifyDeployment(ctx, ns, job, v, attempts, decide)
}

func (s *slowRecords) PutSummary(ctx context.Context, sum *model.RolloutSummary) error {
	s.mu.Lock()
	s.sums = append(s.sums, sum)
	s.mu.Unlock()
	return s.Store.PutSummary(ctx, sum)
}

func (s *slowRecords) written() []*model.RolloutSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*model.RolloutSummary(nil), s.sums...)
}

// A pass's summary is written while the same pass's record
// compare-and-set still waits (the waiters' admission does not queue
// behind the record), and a summary derived within SummaryEvery of the
// last one written for the same deployment is dropped (the once-a-second
// bound), while one of another deployment is not.
func TestASummaryIsWrittenApartFromTheRecordsWritesAndAtMostOnceASecond(t *testing.T) {
	w := newWorld(t)
	st, err := state.Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	recs := &slowRecords{Store: w.store, release: make(chan struct{})}
	a, err := New(Config{Node: func() *model.Node { return nodeRecord("node-1") }, Source: fleetSource(w), Store: st,
		Drivers: &drivers{m: nil}, Deployments: recs, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.summaryLoop(ctx)

	job := mockJob("web", 2, nil)
	now := time.Now()
	sum := func(dep string, at time.Time) *model.RolloutSummary {
		return &model.RolloutSummary{JobID: "web", JobVersion: 2, DeploymentID: dep, Steward: "node-1", Time: at}
	}
	transition := rollout.Transition{Kind: "progress", Version: 2, Apply: func(cur model.Deployment) (*model.Deployment, error) { return nil, nil }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.carryOut(ctx, rolloutWork{job: job, dec: rollout.Decision{Transitions: []rollout.Transition{transition}, Summary: sum("web-2", now)}})
	}()
	testutil.Eventually(t, 5*time.Second, "the summary written while the record's write waits", func() bool {
		return len(recs.written()) == 1
	})
	select {
	case <-done:
		t.Fatal("the record's write returned before it was released")
	default:
	}
	close(recs.release)
	<-done

	// 300 ms later, the same deployment: dropped. Another deployment: written.
	a.queueSummary("default.web", sum("web-2", now.Add(300*time.Millisecond)))
	a.queueSummary("default.api", &model.RolloutSummary{JobID: "api", JobVersion: 1, DeploymentID: "api-1", Time: now.Add(300 * time.Millisecond)})
	testutil.Eventually(t, 5*time.Second, "the other deployment's summary", func() bool {
		return len(recs.written()) == 2
	})
	a.queueSummary("default.web", sum("web-2", now.Add(1100*time.Millisecond)))
	testutil.Eventually(t, 5*time.Second, "a summary a second after the last", func() bool {
		return len(recs.written()) == 3
	})
	time.Sleep(200 * time.Millisecond)
	got := recs.written()
	if len(got) != 3 || got[1].JobID != "api" || !got[2].Time.Equal(now.Add(1100*time.Millisecond)) {
		for _, s := range got {
			t.Logf("written: %s %s %v", s.JobID, s.DeploymentID, s.Time.Sub(now))
		}
		t.Fatalf("%d summaries written, want the first, api's and the one a second later", len(got))
	}
}
