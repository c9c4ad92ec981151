package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/testutil"
)

func TestBootPullSeesWhatWasPutBeforeTheAgentStarted(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	writer := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	putRaw(t, writer, "default.web", jobJSON("web", 1, ""))
	putRaw(t, writer, "default.web", jobJSON("web", 2, "")) // only the latest counts
	putRaw(t, writer, "default.api", jobJSON("api", 1, ""))
	putRaw(t, writer, "default.gone", jobJSON("gone", 1, ""))
	ctx := context.Background()
	if err := writer.Jobs.Delete(ctx, "default.gone"); err != nil {
		t.Fatal(err)
	}

	src := runSource(t, mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{}), SourceConfig{Log: log})
	waitSynced(t, src)
	v := src.View()
	if !v.Synced {
		t.Fatal("view not synced after Synced closed")
	}
	if got, _ := jobVersion(v, "web"); got != 2 {
		t.Fatalf("web version %d, want 2", got)
	}
	if got, _ := jobVersion(v, "api"); got != 1 {
		t.Fatalf("api version %d, want 1", got)
	}
	// A key deleted before boot was never decoded: nothing to run, nothing to stop.
	if st := v.Jobs.At("default.gone"); wanted.OrderFor(st) != wanted.OrderNone {
		t.Fatalf("a key deleted before boot orders %v", wanted.OrderFor(st))
	}
}

func TestTheWatchSeesLivePuts(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, logs := testLog(t)
	writer := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	src := runSource(t, mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{}), SourceConfig{Log: log})
	waitSynced(t, src)
	if !strings.Contains(logs.String(), "quiet=no_key") {
		t.Fatalf("an empty jobs bucket was not logged as quiet no_key:\n%s", logs)
	}
	gen := src.View().Generation
	sub, unsubscribe := src.Subscribe()
	defer unsubscribe()
	putRaw(t, writer, "default.web", jobJSON("web", 1, ""))
	for _, ch := range []<-chan struct{}{src.Changed(), sub} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("a consumer got no change signal")
		}
	}
	testutil.Eventually(t, 5*time.Second, "web v1 in view", hasJob(src, "web", 1))
	if src.View().Generation <= gen {
		t.Fatal("generation did not advance")
	}
	for i := 2; i <= 50; i++ {
		putRaw(t, writer, "default.web", jobJSON("web", i, ""))
	}
	testutil.Eventually(t, 5*time.Second, "web v50 in view", hasJob(src, "web", 50))
}

func TestAServerRestartUnderARunningWatcherMissesNothing(t *testing.T) {
	dir := t.TempDir()
	port := testutil.FreePort(t)
	srv := startServer(t, dir, port)
	log, logs := testLog(t)
	obs := newObs()
	conn := connect(t, srv.ClientURL(), log, obs)
	src := runSource(t, mustEnsure(t, conn, BucketOptions{}), SourceConfig{Log: log, Observer: obs})
	waitSynced(t, src)

	// A separate writer that reconnects on its own.
	wc, err := Connect(context.Background(), ConnConfig{URLs: []string{srv.ClientURL()}, RequestTimeout: time.Second}, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	writer := mustEnsure(t, wc, BucketOptions{})
	putRaw(t, writer, "default.web", jobJSON("web", 1, ""))
	testutil.Eventually(t, 5*time.Second, "web v1 before restart", hasJob(src, "web", 1))

	// For comparison only: a raw watcher left to nats.go alone.
	rawKV, err := connect(t, srv.ClientURL(), log, nil).JetStream().KeyValue(context.Background(), "t_jobs")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rawKV.WatchAll(context.Background(), jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Stop()

	srv.Shutdown()
	startServer(t, dir, port)
	restarted := time.Now()

	// Writes right after the restart, possibly before the watcher is back:
	// the resumed watch must deliver them all.
	ctx := context.Background()
	var put2 bool
	testutil.Eventually(t, 10*time.Second, "writer reconnected and wrote", func() bool {
		rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		if !put2 {
			if _, err := writer.Jobs.Put(rctx, "default.web", jobJSON("web", 2, "")); err != nil {
				return false
			}
			put2 = true
		}
		_, err := writer.Jobs.Put(rctx, "default.api", jobJSON("api", 1, ""))
		return err == nil
	})
	// A burst of distinct keys right after: every one must arrive.
	for i := range 20 {
		id := fmt.Sprintf("burst-%02d", i)
		putRaw(t, writer, "default."+id, jobJSON(id, 1, ""))
	}
	took := testutil.Eventually(t, 10*time.Second, "every write after the restart seen", func() bool {
		if !hasJob(src, "web", 2)() || !hasJob(src, "api", 1)() {
			return false
		}
		for i := range 20 {
			if !hasJob(src, fmt.Sprintf("burst-%02d", i), 1)() {
				return false
			}
		}
		return true
	})
	since := time.Since(restarted)
	t.Logf("watch resumed and delivered %s after the server came back (%s after the writes)", since, took)
	select {
	case e := <-raw.Updates():
		t.Logf("for comparison, a raw watcher not re-created delivered %v by then", e != nil)
	default:
		t.Logf("for comparison, a raw watcher not re-created was still silent %s after the restart", time.Since(restarted))
	}
	if since > 5*time.Second {
		t.Fatalf("the watch took %s to resume: not re-created from the reconnect handler?", since)
	}
	if obs.get(func(o *countingObserver) map[string]int { return o.restarts }, KindJobs+"/reconnect") == 0 {
		t.Fatalf("no reconnect restart counted; logs:\n%s", logs)
	}
	// The resumed watch starts the disruption guard of liveness readers.
	if at := src.ResumedAt(KindJobs); at.Before(restarted.Add(-time.Second)) {
		t.Fatalf("ResumedAt %v after a reconnect at %v: the guard would not hold", at, restarted)
	}
	obs.mu.Lock()
	states := fmt.Sprint(obs.states)
	obs.mu.Unlock()
	if !strings.Contains(states, "reconnecting connected") || conn.State() != StateConnected {
		t.Fatalf("connection states seen: %s, now %s", states, conn.State())
	}
	late := newObs()
	conn.SetObserver(late)
	late.mu.Lock()
	if fmt.Sprint(late.states) != "[connected]" {
		t.Errorf("a late observer was told %v", late.states)
	}
	late.mu.Unlock()
	// And the live path keeps working after the resume.
	putRaw(t, writer, "default.web", jobJSON("web", 3, ""))
	testutil.Eventually(t, 5*time.Second, "web v3 after the resume", hasJob(src, "web", 3))
}

// A watch that ends under the source (its consumer could not be recreated)
// is replaced by one that resumes after the last applied revision: what
// changed meanwhile is delivered, puts and purges alike, and nothing the
// source already had is sent again.
func TestAnEndedWatchIsResumedAfterItsLastRevision(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, logs := testLog(t)
	obs := newObs()
	writer := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	putRaw(t, writer, "default.web", jobJSON("web", 1, ""))
	putRaw(t, writer, "default.old", jobJSON("old", 1, ""))

	putRaw(t, writer, "default.still", jobJSON("still", 1, "")) // unchanged: a whole pull would send it again

	st := mustEnsure(t, connect(t, srv.ClientURL(), log, obs), BucketOptions{})
	src, watched := runWatchedSource(t, st, SourceConfig{Log: log, Observer: obs, Kinds: []string{KindJobs}})
	waitSynced(t, src)
	testutil.Eventually(t, 5*time.Second, "boot pull", hasJob(src, "old", 1))

	// End the watch under the source, then change the bucket while no watch
	// listens: only the replacement can learn these.
	before := src.Delivered()[KindJobs].Entries
	first := watched.all()[0]
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	putRaw(t, writer, "default.web", jobJSON("web", 2, ""))
	if err := writer.Jobs.Purge(context.Background(), "default.old"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "repair pull saw the put made while the watch was down", hasJob(src, "web", 2))
	testutil.Eventually(t, 5*time.Second, "purged job orphaned, not stopped", func() bool {
		st := src.View().Jobs.At("default.old")
		return wanted.OrderFor(st) == wanted.OrderKeep
	})
	if n := obs.get(func(o *countingObserver) map[string]int { return o.restarts }, KindJobs+"/ended"); n != 1 {
		t.Fatalf("ended restarts counted %d, want 1", n)
	}
	if !strings.Contains(logs.String(), "watch ended; re-creating it") || !strings.Contains(logs.String(), "full_pull=false") {
		t.Fatalf("the ended watch was not logged as resumed:\n%s", logs)
	}
	// The put and the purge, not the bucket again (a whole pull sends the
	// last entry of every key: still's too, 3).
	if got := src.Delivered()[KindJobs].Entries - before; got != 2 {
		t.Fatalf("the replacement delivered %d entries, want the 2 changes made while no watch listened", got)
	}
	n := len(watched.all())
	if n < 2 {
		t.Fatal("no replacement watcher was created")
	}
	// The replacement watches live.
	putRaw(t, writer, "default.web", jobJSON("web", 3, ""))
	testutil.Eventually(t, 5*time.Second, "live put on the replacement", hasJob(src, "web", 3))
}

// An ended watch of a bucket whose expiries are markers with a TTL (the
// nodes bucket) resumes only while those markers can still be there: when
// the watch last delivered longer ago than half the marker TTL, the bucket
// is pulled whole (a marker gone by then would leave an expired node
// present). Control: ended right after a delivery, it resumes.
func TestAnEndedWatchPullsWholeWhenAMarkerMayHaveExpired(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, logs := testLog(t)
	opts := BucketOptions{NodeTTL: 2 * time.Second}
	owner := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), opts)
	st := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), opts)
	src, watched := runWatchedSource(t, st, SourceConfig{Log: log, Kinds: []string{KindNodes}})
	waitSynced(t, src)
	endWatch := func(n int) {
		t.Helper()
		all := watched.all()
		w := all[len(all)-1]
		if err := w.Stop(); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 5*time.Second, "the ended watch replaced", func() bool {
			return len(watched.all()) == n
		})
	}
	put := func(id string) {
		t.Helper()
		if _, err := owner.ForNode(id).PutNode(context.Background(), nodeRecord(id)); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 5*time.Second, id+" seen", func() bool { return src.View().Node(id) != nil })
	}

	put("n1")
	endWatch(2)
	if !strings.Contains(logs.String(), "full_pull=false") {
		t.Fatalf("ended right after a delivery, the watch was not resumed:\n%s", logs)
	}
	// n1's expiry is delivered (a marker); then n2, and nothing for longer
	// than half the 2 s marker TTL, well before n2 expires.
	testutil.Eventually(t, 10*time.Second, "n1 expired", func() bool { return src.View().Node("n1").Status == model.NodeStatusDown })
	put("n2")
	time.Sleep(1100 * time.Millisecond)
	endWatch(3)
	if !strings.Contains(logs.String(), "full_pull=true") {
		t.Fatalf("ended %s after its last delivery with 2 s markers, the watch was resumed:\n%s", "1.1 s", logs)
	}
}

func TestAbsenceInTheBucketIsNotADeletionOrder(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, logs := testLog(t)
	writer := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	for _, id := range []string{"deleted", "purged", "stopped"} {
		putRaw(t, writer, "default."+id, jobJSON(id, 1, ""))
	}
	src := runSource(t, mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{}), SourceConfig{Log: log, Kinds: []string{KindJobs}})
	waitSynced(t, src)
	ctx := context.Background()
	if err := writer.Jobs.Delete(ctx, "default.deleted"); err != nil {
		t.Fatal(err)
	}
	if err := writer.Jobs.Purge(ctx, "default.purged"); err != nil {
		t.Fatal(err)
	}
	// Control: an explicit stop = true does stop.
	putRaw(t, writer, "default.stopped", jobJSON("stopped", 2, `,"stop":true`))
	testutil.Eventually(t, 5*time.Second, "all three changes applied", func() bool {
		v := src.View()
		return v.Jobs.At("default.deleted").Absent && v.Jobs.At("default.purged").Absent && hasJob(src, "stopped", 2)()
	})
	v := src.View()
	want := map[string]wanted.Order{"default.deleted": wanted.OrderKeep, "default.purged": wanted.OrderKeep, "default.stopped": wanted.OrderStop}
	for k, o := range want {
		if got := wanted.OrderFor(v.Jobs.At(k)); got != o {
			t.Errorf("%s orders %v, want %v", k, got, o)
		}
	}
	if got := v.Orphaned(); len(got) != 2 {
		t.Errorf("orphaned = %v, want the deleted and the purged job", got)
	}
	if !strings.Contains(logs.String(), "not a deletion order") {
		t.Errorf("absence not logged:\n%s", logs)
	}
}

func TestAMissingBucketIsQuietAndNotADeletionOrder(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, logs := testLog(t)
	c := connect(t, srv.ClientURL(), log, nil)
	st, err := OpenStore(context.Background(), c, Names("t"))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Missing()) != 7 {
		t.Fatalf("missing = %v", st.Missing())
	}
	if _, _, err := st.GetJob(context.Background(), "", "web"); !errors.Is(err, ErrNoBucket) {
		t.Fatalf("GetJob on a missing bucket: %v", err)
	}
	src := runSource(t, st, SourceConfig{Log: log, Kinds: []string{KindJobs}})
	waitSynced(t, src)
	if n := src.View().Jobs.Len(); n != 0 {
		t.Fatalf("jobs from a missing bucket: %d", n)
	}
	if !strings.Contains(logs.String(), "quiet=no_bucket") {
		t.Fatalf("no quiet no_bucket line:\n%s", logs)
	}
	// Control: once the bucket appears, its job is seen.
	writer := mustEnsure(t, c, BucketOptions{})
	putRaw(t, writer, "default.web", jobJSON("web", 1, ""))
	testutil.Eventually(t, 15*time.Second, "job seen once the bucket exists", hasJob(src, "web", 1))
}

func TestAMalformedJobPutStraightIntoTheBucketIsRejectedAndVisible(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, logs := testLog(t)
	obs := newObs()
	writer := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	src := runSource(t, mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{}), SourceConfig{Log: log, Observer: obs})
	waitSynced(t, src)
	putRaw(t, writer, "default.web", jobJSON("web", 1, ""))
	testutil.Eventually(t, 5*time.Second, "web v1", hasJob(src, "web", 1))
	rev := putRaw(t, writer, "default.web", jobJSON("web", 2, `,"groups_extra":[]`))
	testutil.Eventually(t, 5*time.Second, "rejection visible", func() bool { return len(src.View().Rejections()) == 1 })
	v := src.View()
	r := v.Rejections()[0]
	if r.Key != "default.web" || r.Revision != rev || r.Bucket != "t_jobs" || !strings.Contains(r.Reason, "unknown field") {
		t.Fatalf("rejection %+v", r)
	}
	if got, _ := jobVersion(v, "web"); got != 1 {
		t.Fatalf("last good version not kept: %d", got)
	}
	if wanted.OrderFor(v.Jobs.At("default.web")) != wanted.OrderRun {
		t.Fatal("the last good version is not in force")
	}
	testutil.Eventually(t, 5*time.Second, "rejection counted", func() bool {
		return obs.get(func(o *countingObserver) map[string]int { return o.rejected }, KindJobs+"/default.web") == 1
	})
	if !strings.Contains(logs.String(), "declaration rejected") {
		t.Fatalf("rejection not logged:\n%s", logs)
	}
	// Control: a good version clears it.
	putRaw(t, writer, "default.web", jobJSON("web", 3, ""))
	testutil.Eventually(t, 5*time.Second, "web v3 clears the rejection", func() bool {
		return hasJob(src, "web", 3)() && len(src.View().Rejections()) == 0
	})
}

func TestCASRaceBetweenTwoWritersHasExactlyOneWinner(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	a := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	b := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	casRace(t, a, b)
}

// casRace runs the compare-and-set checks between two stores.
func casRace(t *testing.T, a, b *Store) {
	ctx := context.Background()
	// Create: exactly one creates, the other adopts the winner's record.
	type res struct {
		d       *model.Deployment
		rev     uint64
		created bool
		err     error
	}
	out := make([]res, 2)
	var wg sync.WaitGroup
	for i, st := range []*Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := deployment("web", 1)
			d.ID = []string{"from-a", "from-b"}[i]
			r := res{}
			r.d, r.rev, r.created, r.err = st.CreateDeployment(ctx, d)
			out[i] = r
		}()
	}
	wg.Wait()
	for _, r := range out {
		if r.err != nil {
			t.Fatal(r.err)
		}
	}
	if out[0].created == out[1].created {
		t.Fatalf("created: %v and %v, want exactly one", out[0].created, out[1].created)
	}
	if out[0].d.ID != out[1].d.ID || out[0].rev != out[1].rev {
		t.Fatalf("the loser did not adopt the winner's record: %s@%d vs %s@%d", out[0].d.ID, out[0].rev, out[1].d.ID, out[1].rev)
	}
	// Update at the same revision: exactly one wins, the loser sees ErrLostRace.
	rev := out[0].rev
	errs := make([]error, 2)
	for i, st := range []*Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := *out[0].d
			d.StatusDescription = []string{"a", "b"}[i]
			_, errs[i] = st.UpdateDeployment(ctx, &d, rev)
		}()
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case errors.Is(err, ErrLostRace) && errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d winners, want 1 (%v)", wins, errs)
	}
	// The loser re-reads and re-decides: ModifyDeployment from both sides,
	// concurrently, each adding its own group: both changes land.
	for i, st := range []*Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := []string{"ga", "gb"}[i]
			_, _, errs[i] = st.ModifyDeployment(ctx, "", "web", 1, 0, func(cur model.Deployment) (*model.Deployment, error) {
				next := cur
				next.TaskGroups = map[string]*model.DeploymentState{}
				for k, v := range cur.TaskGroups {
					next.TaskGroups[k] = v
				}
				next.TaskGroups[name] = &model.DeploymentState{DesiredTotal: 1}
				return &next, nil
			})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// A replica may answer a read before applying the last write: wait for
	// it rather than read once.
	var d *model.Deployment
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		d, _, err = a.GetDeployment(ctx, "", "web", 1)
		if err == nil && d.TaskGroups["ga"] != nil && d.TaskGroups["gb"] != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a concurrent modification was lost: %v (%v)", d, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAnExpiredHeartbeatIsSeenDownByAnotherWatcher(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, logs := testLog(t)
	opts := BucketOptions{NodeTTL: time.Second}
	owner := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), opts)
	src := runSource(t, mustEnsure(t, connect(t, srv.ClientURL(), log, nil), opts), SourceConfig{Log: log, Kinds: []string{KindNodes}})
	waitSynced(t, src)
	ctx := context.Background()
	if _, err := owner.ForNode("n1").PutNode(ctx, nodeRecord("n1")); err != nil {
		t.Fatal(err)
	}
	// Control: n2 keeps heartbeating and stays ready.
	hbCtx, stopHB := context.WithCancel(ctx)
	defer stopHB()
	go func() {
		for hbCtx.Err() == nil {
			_, _ = owner.ForNode("n2").PutNode(hbCtx, nodeRecord("n2"))
			time.Sleep(200 * time.Millisecond)
		}
	}()
	testutil.Eventually(t, 5*time.Second, "both nodes ready", func() bool {
		v := src.View()
		n1, n2 := v.Node("n1"), v.Node("n2")
		return n1 != nil && n2 != nil && n1.Status == model.NodeStatusReady && n2.Status == model.NodeStatusReady
	})
	took := testutil.Eventually(t, 10*time.Second, "n1 down after its heartbeat expired", func() bool {
		return src.View().Node("n1").Status == model.NodeStatusDown
	})
	t.Logf("n1 seen down %s after being seen ready (TTL 1s)", took)
	if n2 := src.View().Node("n2"); n2.Status != model.NodeStatusReady {
		t.Fatalf("control: the heartbeating node is %s", n2.Status)
	}
	// The source logs the expiry just after it makes the view that shows
	// it: wait for the line rather than read the log once.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "node seen down") {
		if time.Now().After(deadline) {
			t.Fatalf("expiry not logged:\n%s", logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A writer cannot write another node's record.
	if _, err := owner.ForNode("n1").PutNode(ctx, nodeRecord("n2")); !errors.Is(err, wanted.ErrNotOwner) {
		t.Fatalf("writing another node's record: %v", err)
	}
	a := &model.Allocation{ID: "a1", NodeID: "n2", JobID: "web", DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning}
	if _, err := owner.ForNode("n1").PutAlloc(ctx, a); !errors.Is(err, wanted.ErrNotOwner) {
		t.Fatalf("writing another node's allocation: %v", err)
	}
	if _, err := owner.ForNode("n2").PutAlloc(ctx, a); err != nil {
		t.Fatalf("control: writing its own allocation: %v", err)
	}
}

func TestTheViewCarriesAllocationsAndDeploymentsWithTheirRevisions(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	st := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	src := runSource(t, st, SourceConfig{Log: log})
	waitSynced(t, src)
	ctx := context.Background()
	w := st.ForNode("n1")
	for _, id := range []string{"a1", "a2"} {
		a := &model.Allocation{ID: id, NodeID: "n1", JobID: "web", TaskGroup: "g", DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning}
		if _, err := w.PutAlloc(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 5*time.Second, "two allocations", func() bool { return len(src.View().AllocsOf("n1")) == 2 })
	if err := w.DeleteAlloc(ctx, "", "web", "a1"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "a1 forgotten", func() bool {
		as := src.View().AllocsOf("n1")
		return len(as) == 1 && as[0].ID == "a2"
	})
	if n := len(src.View().AllocsOf("n2")); n != 0 {
		t.Fatalf("another node has %d allocations", n)
	}

	_, rev, created, err := st.CreateDeployment(ctx, deployment("web", 4))
	if err != nil || !created {
		t.Fatal(created, err)
	}
	testutil.Eventually(t, 5*time.Second, "deployment in view", func() bool { _, r, ok := src.View().Deployment("", "web", 4); return ok && r == rev })
	d, vrev, _ := src.View().Deployment("", "web", 4)
	next := *d
	next.Status = model.DeploymentSuccessful
	nrev, err := st.UpdateDeployment(ctx, &next, vrev)
	if err != nil {
		t.Fatalf("updating at the view's revision: %v", err)
	}
	// The old revision is now stale: a second writer using it loses.
	if _, err := st.UpdateDeployment(ctx, &next, vrev); !errors.Is(err, ErrLostRace) {
		t.Fatalf("stale revision: %v", err)
	}
	testutil.Eventually(t, 5*time.Second, "updated deployment in view", func() bool {
		d, r, ok := src.View().Deployment("", "web", 4)
		return ok && r == nrev && d.Status == model.DeploymentSuccessful
	})
	// Idempotent create of the same job version returns the stored record.
	cur, crev, created, err := st.CreateDeployment(ctx, deployment("web", 4))
	if err != nil || created || crev != nrev || cur.Status != model.DeploymentSuccessful {
		t.Fatalf("second create: %v %d %v %+v", created, crev, err, cur)
	}
}

func TestARecreatedBucketIsReadAgainFromItsFirstRevision(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, logs := testLog(t)
	wc := connect(t, srv.ClientURL(), log, nil)
	writer := mustEnsure(t, wc, BucketOptions{})
	st := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	src, watched := runWatchedSource(t, st, SourceConfig{Log: log, Kinds: []string{KindJobs}})
	waitSynced(t, src)
	for v := 1; v <= 5; v++ {
		putRaw(t, writer, "default.web", jobJSON("web", v, ""))
	}
	putRaw(t, writer, "default.old", jobJSON("old", 1, ""))
	testutil.Eventually(t, 5*time.Second, "web v5", hasJob(src, "web", 5))

	// The bucket is deleted and created again: revisions restart at 1.
	if err := wc.JetStream().DeleteKeyValue(context.Background(), "t_jobs"); err != nil {
		t.Fatal(err)
	}
	writer = mustEnsure(t, wc, BucketOptions{})
	if rev := putRaw(t, writer, "default.web", jobJSON("web", 6, "")); rev != 1 {
		t.Fatalf("revision in the new bucket %d, want 1", rev)
	}
	// End the watch now rather than waiting for nats.go to notice.
	all := watched.all()
	_ = all[len(all)-1].Stop()
	testutil.Eventually(t, 10*time.Second, "web v6 at revision 1 of the new bucket", hasJob(src, "web", 6))
	// The keys the new bucket does not hold are marked at the end of its
	// pull (the watch's end-of-pull marker), which a view taken between
	// the pull's entries and that marker does not show yet: wait for it
	// (a check made at once failed once under a loaded CI run).
	testutil.Eventually(t, 10*time.Second, "the job absent from the new bucket kept (orphaned)", func() bool {
		return wanted.OrderFor(src.View().Jobs.At("default.old")) == wanted.OrderKeep
	})
	if !strings.Contains(logs.String(), "bucket was re-created") {
		t.Fatalf("re-creation not logged:\n%s", logs)
	}
	// And live puts keep arriving.
	putRaw(t, writer, "default.web", jobJSON("web", 7, ""))
	testutil.Eventually(t, 5*time.Second, "web v7", hasJob(src, "web", 7))
}

// TestTwoOperatorsChangingOneNodesIntentBothLand: drain and eligibility are
// written by compare-and-set, so concurrent changes from two CLIs (two
// connections) do not overwrite each other.
func TestTwoOperatorsChangingOneNodesIntentBothLand(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	a := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	b := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	ctx := context.Background()
	for round := 0; round < 5; round++ {
		node := fmt.Sprintf("node-%d", round)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, _, errs[0] = a.ModifyIntent(ctx, node, func(in *wanted.Intent) { in.Drain = &model.DrainStrategy{Deadline: model.Duration(time.Minute)} })
		}()
		go func() {
			defer wg.Done()
			_, _, errs[1] = b.ModifyIntent(ctx, node, func(in *wanted.Intent) { in.Eligibility = model.Ineligible })
		}()
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		in, _, err := a.GetIntent(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		if in.Drain == nil || in.Eligibility != model.Ineligible {
			t.Fatalf("round %d: a change was lost: %+v", round, in)
		}
	}
	// Control: a plain PutIntent of a stale read does lose the other change,
	// which is what the compare-and-set prevents.
	stale, _, _ := a.GetIntent(ctx, "node-x")
	if _, _, err := b.ModifyIntent(ctx, "node-x", func(in *wanted.Intent) { in.Eligibility = model.Ineligible }); err != nil {
		t.Fatal(err)
	}
	stale.Drain = &model.DrainStrategy{}
	if _, err := a.PutIntent(ctx, "node-x", stale); err != nil {
		t.Fatal(err)
	}
	if in, _, _ := a.GetIntent(ctx, "node-x"); in.Eligibility == model.Ineligible {
		t.Fatal("control: a blind put kept the other writer's change; the test cannot tell CAS from a put")
	}
}

// A NATS server that comes back with an empty store: the source that may
// create the fleet's buckets (the agent's) creates them again, notices the
// new buckets (their creation time), pulls them whole, and sees a job
// written at revision 1 of the new bucket; a job the new bucket lacks is
// kept (orphaned), never stopped. Nobody else created the buckets here:
// the writer only puts, through the handles it opened before.
func TestAServerBackWithAnEmptyStoreGetsItsBucketsBackAndIsReadFromRevisionOne(t *testing.T) {
	port := testutil.FreePort(t)
	srv := startServer(t, t.TempDir(), port)
	log, logs := testLog(t)
	conn := connect(t, srv.ClientURL(), log, nil)
	st := mustEnsure(t, conn, BucketOptions{})
	var recreated, ensured atomic.Int32
	src := runSource(t, st, SourceConfig{Log: log, Recreate: func(ctx context.Context) error {
		recreated.Add(1)
		_, err := EnsureBuckets(ctx, conn, Names("t"), BucketOptions{})
		if err == nil {
			ensured.Add(1)
		}
		return err
	}})
	waitSynced(t, src)
	wc, err := Connect(context.Background(), ConnConfig{URLs: []string{srv.ClientURL()}, RequestTimeout: time.Second}, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	writer := mustEnsure(t, wc, BucketOptions{})
	for v := 1; v <= 3; v++ {
		putRaw(t, writer, "default.web", jobJSON("web", v, ""))
	}
	testutil.Eventually(t, 5*time.Second, "web v3", hasJob(src, "web", 3))

	srv.Shutdown()
	startServer(t, t.TempDir(), port) // same address, empty store
	var rev uint64
	defer func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs)
		}
	}()
	testutil.Eventually(t, 20*time.Second, "a put into the re-created jobs bucket", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r, err := writer.Jobs.Put(ctx, "default.fresh", jobJSON("fresh", 1, ""))
		rev = r
		return err == nil
	})
	if rev != 1 {
		t.Fatalf("the new bucket's first revision is %d, want 1 (was it re-created?)", rev)
	}
	testutil.Eventually(t, 20*time.Second, "fresh v1 at revision 1 of the new bucket", hasJob(src, "fresh", 1))
	if recreated.Load() == 0 || !strings.Contains(logs.String(), "creating the fleet's buckets again") {
		t.Fatalf("the buckets were not re-created by the source (%d calls); logs:\n%s", recreated.Load(), logs)
	}
	if st := src.View().Jobs.At("default.web"); wanted.OrderFor(st) != wanted.OrderKeep {
		t.Fatalf("a job absent from the new bucket orders %v, want keep (orphaned)", wanted.OrderFor(st))
	}
	// Every bucket is back, not only the one that noticed first. The jobs
	// bucket can be read (above) while the re-creation still creates the
	// others, one request each (seen in a suite run: t_allocs not found
	// 0.4 s after the restart): wait for it to end first.
	testutil.Eventually(t, 20*time.Second, "the re-creation of the buckets to end", func() bool { return ensured.Load() > 0 })
	for _, name := range []string{"t_nodes", "t_allocs", "t_deployments"} {
		if _, err := conn.JetStream().KeyValue(context.Background(), name); err != nil {
			t.Fatalf("bucket %s after the re-creation: %v", name, err)
		}
	}
	putRaw(t, writer, "default.fresh", jobJSON("fresh", 2, ""))
	testutil.Eventually(t, 5*time.Second, "fresh v2", hasJob(src, "fresh", 2))
}

// A NATS server that comes back with an empty store into which someone else
// (a CLI, another agent) has already created the buckets and written a job
// at revision 1 before this source reconnects: the source's resumed watch
// must not start after its old revision in the new bucket. It reads the
// bucket's epoch again after a reconnect and pulls the new bucket whole.
// (Seen in CI, cmd/hivelet TestEndToEndNATSBackWithAnEmptyStore...: the job
// run by the CLI into the re-created buckets was never placed.) The new
// store is prepared on another port and then served at the old address, so
// the buckets exist before the source can reach it, every time.
func TestAReconnectIntoBucketsSomeoneElseRecreatedReadsThemFromRevisionOne(t *testing.T) {
	port := testutil.FreePort(t)
	srv := startServer(t, t.TempDir(), port)
	log, logs := testLog(t)
	st := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	src := runSource(t, st, SourceConfig{Log: log, Kinds: []string{KindJobs}})
	waitSynced(t, src)
	writer := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	for v := 1; v <= 3; v++ {
		putRaw(t, writer, "default.web", jobJSON("web", v, ""))
	}
	testutil.Eventually(t, 5*time.Second, "web v3", hasJob(src, "web", 3))
	defer func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs)
		}
	}()

	srv.Shutdown()
	dir := t.TempDir()
	prep := startServer(t, dir, -1)
	pc := connect(t, prep.ClientURL(), log, nil)
	fresh := mustEnsure(t, pc, BucketOptions{})
	if rev := putRaw(t, fresh, "default.fresh", jobJSON("fresh", 1, "")); rev != 1 {
		t.Fatalf("the new bucket's first revision is %d, want 1", rev)
	}
	pc.Close()
	prep.Shutdown()
	startServer(t, dir, port) // the old address, serving the new buckets

	testutil.Eventually(t, 20*time.Second, "fresh v1, revision 1 of a bucket created by someone else", hasJob(src, "fresh", 1))
	if !strings.Contains(logs.String(), "bucket was re-created") {
		t.Fatalf("re-creation not noticed:\n%s", logs)
	}
	if st := src.View().Jobs.At("default.web"); wanted.OrderFor(st) != wanted.OrderKeep {
		t.Fatalf("a job absent from the new bucket orders %v, want keep (orphaned)", wanted.OrderFor(st))
	}
}

// A source counts what its watches deliver, by bucket: every entry once,
// with its key's and value's bytes.
func TestASourceCountsWhatItsWatchesDeliver(t *testing.T) {
	srv := startServer(t, t.TempDir(), testutil.FreePort(t))
	conn := connect(t, srv.ClientURL(), nil, nil)
	st := mustEnsure(t, conn, BucketOptions{})
	src := runSource(t, st, SourceConfig{})
	waitSynced(t, src)
	if d := src.Delivered()[KindJobs]; d.Entries != 0 {
		t.Fatalf("an empty bucket delivered %+v", d)
	}
	want := uint64(0)
	for v := 1; v <= 3; v++ {
		val := jobJSON("web", v, "")
		putRaw(t, st, "default.web", val)
		want += uint64(len("default.web") + len(val))
	}
	testutil.Eventually(t, 5*time.Second, "web v3", hasJob(src, "web", 3))
	if d := src.Delivered()[KindJobs]; d.Entries != 3 || d.Bytes != want {
		t.Fatalf("delivered %+v, want 3 entries of %d bytes", d, want)
	}
}

// allocStore starts a server with the fleet's buckets and returns its store
// and a writer of one allocation of a job on a node.
func allocStore(t *testing.T) (*Store, func(node, job, id string)) {
	srv := startServer(t, t.TempDir(), testutil.FreePort(t))
	conn := connect(t, srv.ClientURL(), nil, nil)
	st := mustEnsure(t, conn, BucketOptions{})
	return st, func(node, job, id string) {
		t.Helper()
		if _, err := st.ForNode(node).PutAlloc(context.Background(), &model.Allocation{ID: id, NodeID: node, Namespace: "default", JobID: job, TaskGroup: "g"}); err != nil {
			t.Fatal(err)
		}
	}
}

// A source with a filter for the allocations bucket receives one job's
// allocations, on every node, and not the rest of the fleet's: at the pull,
// while watching, and for deletions.
func TestAFilteredSourceReceivesOnlyTheAllocationsOfItsJob(t *testing.T) {
	st, put := allocStore(t)
	ctx := context.Background()
	put("n1", "web", "w1")
	put("n2", "web", "w2")
	put("n1", "db", "d1")
	put("n2", "web2", "x1") // a job whose name starts like web's
	src := runSource(t, st, SourceConfig{Kinds: []string{KindAllocs},
		Filters: map[string][]string{KindAllocs: {wanted.AllocJobFilter("default", "web")}}})
	waitSynced(t, src)
	keys := func() []string {
		var out []string
		for k, a := range src.View().Allocs.All() {
			if !a.Absent {
				out = append(out, k)
			}
		}
		sort.Strings(out)
		return out
	}
	if got := strings.Join(keys(), " "); got != "n1.default.web.w1 n2.default.web.w2" {
		t.Fatalf("after the pull the view holds %q, want web's two allocations only", got)
	}
	put("n3", "db", "d2")
	put("n3", "web", "w3")
	if err := st.ForNode("n1").DeleteAlloc(ctx, "default", "web", "w1"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "w3 seen and w1 gone", func() bool {
		return strings.Join(keys(), " ") == "n2.default.web.w2 n3.default.web.w3"
	})
	// Control: an unfiltered source of the same bucket got all of them.
	all := runSource(t, st, SourceConfig{Kinds: []string{KindAllocs}})
	waitSynced(t, all)
	if d, a := src.Delivered()[KindAllocs].Entries, all.Delivered()[KindAllocs].Entries; d != 4 || a < 6 {
		t.Fatalf("the filtered source received %d entries (want 4: w1, w2, w3, w1's delete), the unfiltered %d (want ≥ 6)", d, a)
	}
}

// SetFilters moves a running watch to new filters: the keys the new
// filters match are pulled (Watched names a filter once its pull is
// complete), the keys no filter matches any more leave the View, and the
// changes after it arrive for the new filters only. Control: the filter
// kept across the change never leaves Watched.
func TestAFilterChangePullsTheNewKeysAndDropsTheOld(t *testing.T) {
	st, put := allocStore(t)
	put("n1", "web", "w1")
	put("n2", "web", "w2")
	put("n2", "db", "d2")
	put("n3", "db", "d3")
	own := wanted.AllocKeyPrefix("n1")
	web, db := wanted.AllocJobFilter("default", "web"), wanted.AllocJobFilter("default", "db")
	src := runSource(t, st, SourceConfig{Kinds: []string{KindAllocs}, Filters: map[string][]string{KindAllocs: {own, web}}})
	waitSynced(t, src)
	keysIn := func(v *View) string {
		var out []string
		for k, a := range v.Allocs.All() {
			if !a.Absent {
				out = append(out, k)
			}
		}
		sort.Strings(out)
		return strings.Join(out, " ")
	}
	keys := func() string { return keysIn(src.View()) }
	if got := keys(); got != "n1.default.web.w1 n2.default.web.w2" {
		t.Fatalf("first filters: %q", got)
	}
	if v := src.View(); !v.Watches(KindAllocs, web) || v.Watches(KindAllocs, db) {
		t.Fatalf("watched %v", v.Watched)
	}
	src.SetFilters(KindAllocs, []string{db, own})
	if v := src.View(); v.Watches(KindAllocs, web) || !v.Watches(KindAllocs, own) {
		t.Fatalf("right after the change: watched %v, want the kept filter only", v.Watched)
	}
	testutil.Eventually(t, 5*time.Second, "db's pull complete", func() bool { return src.View().Watches(KindAllocs, db) })
	if got := keys(); got != "n1.default.web.w1 n2.default.db.d2 n3.default.db.d3" {
		t.Fatalf("after the change: %q (web's other allocation must be gone, db's pulled)", got)
	}
	put("n4", "web", "w4")
	put("n4", "db", "d4")
	testutil.Eventually(t, 5*time.Second, "d4 seen", func() bool { return strings.Contains(keys(), "n4.default.db.d4") })
	if strings.Contains(keys(), "w4") {
		t.Fatalf("a key of a dropped filter arrived: %q", keys())
	}
	// Back to the whole bucket: nothing is filtered, every key is held.
	// Until that pull is complete, no filter counts as watched.
	src.SetFilters(KindAllocs, nil)
	// A view that counts a filter watched holds every key: the pull may
	// be complete already (the test's goroutine can be descheduled that
	// long under load), never half done.
	if v := src.View(); v.Watches(KindAllocs, own) && strings.Count(keysIn(v), " ") != 5 {
		t.Fatalf("widening: watched %v before the whole pull (%q)", v.Watched, keysIn(v))
	}
	testutil.Eventually(t, 5*time.Second, "the whole bucket", func() bool { return src.View().Watched == nil })
	if got := strings.Count(keys(), " "); got != 5 || !src.View().Watches(KindAllocs, web) {
		t.Fatalf("unfiltered: %q, watched %v", keys(), src.View().Watched)
	}
}

// A filter added to a watch whose pull is complete costs the keys of that
// filter, not another pull of every key watched: the new watcher resumes
// after the last revision applied. No change is missed or undone on the
// way: a key of the new filter written before that revision, one written
// after it, one deleted before and one deleted after all end as the
// bucket holds them. Control: the keys kept were not delivered again (a
// whole pull would deliver each of the 30 once more).
func TestAFilterAddedPullsItsOwnKeysAndResumesTheRest(t *testing.T) {
	st, put := allocStore(t)
	ctx := context.Background()
	del := func(node, job, id string) {
		t.Helper()
		if err := st.ForNode(node).DeleteAlloc(ctx, "default", job, id); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 30 {
		put("n2", "web", fmt.Sprintf("w%02d", i))
	}
	put("n2", "db", "d-early")      // before the last revision the watch applies
	put("n3", "db", "d-gone-early") // deleted before it
	del("n3", "db", "d-gone-early")
	put("n3", "db", "d-gone-late") // deleted after it
	web, db := wanted.AllocJobFilter("default", "web"), wanted.AllocJobFilter("default", "db")
	own := wanted.AllocKeyPrefix("n1")
	src := runSource(t, st, SourceConfig{Kinds: []string{KindAllocs}, Filters: map[string][]string{KindAllocs: {own, web}}})
	waitSynced(t, src)
	put("n2", "web", "w-last") // the last revision the watch applies before the change
	testutil.Eventually(t, 5*time.Second, "w-last seen", func() bool { _, ok := src.View().Allocs.Get("n2.default.web.w-last"); return ok })
	put("n4", "db", "d-late") // after it, before the change
	del("n3", "db", "d-gone-late")
	before := src.Delivered()[KindAllocs].Entries
	src.SetFilters(KindAllocs, []string{db, own, web})
	testutil.Eventually(t, 5*time.Second, "db watched", func() bool { return src.View().Watches(KindAllocs, db) })
	put("n5", "db", "d-after") // after the change
	testutil.Eventually(t, 5*time.Second, "d-after seen", func() bool { _, ok := src.View().Allocs.Get("n5.default.db.d-after"); return ok })
	var dbKeys []string
	for k, a := range src.View().Allocs.All() {
		if strings.Contains(k, ".db.") && !a.Absent {
			dbKeys = append(dbKeys, k)
		}
	}
	sort.Strings(dbKeys)
	if got := strings.Join(dbKeys, " "); got != "n2.default.db.d-early n4.default.db.d-late n5.default.db.d-after" {
		t.Fatalf("db's allocations in view: %q", got)
	}
	if !src.View().Watches(KindAllocs, web) {
		t.Fatalf("web no longer watched: %v", src.View().Watched)
	}
	// db's pull: its four keys' last entries; the resumed watch: d-late,
	// d-gone-late's delete and d-after. The 31 web keys are not resent.
	if got := src.Delivered()[KindAllocs].Entries - before; got > 10 {
		t.Fatalf("%d entries delivered for the added filter: the kept keys were pulled again", got)
	}
	if got := src.RestartReasons()[KindAllocs+"/filters"]; got != 1 {
		t.Fatalf("restarts for filters: %d, want 1 (%v)", got, src.RestartReasons())
	}
	// Removing a filter drops its keys at once and pulls nothing.
	before = src.Delivered()[KindAllocs].Entries
	src.SetFilters(KindAllocs, []string{db, own})
	testutil.Eventually(t, 5*time.Second, "web's keys dropped", func() bool {
		for k, a := range src.View().Allocs.All() {
			if strings.Contains(k, ".web.") && !a.Absent {
				return false
			}
		}
		return src.View().Watches(KindAllocs, db)
	})
	if got := src.Delivered()[KindAllocs].Entries - before; got != 0 {
		t.Fatalf("%d entries delivered for a removed filter", got)
	}
}

// matchFilter is the KV key wildcards' meaning: "*" one token, ">" one
// or more at the end.
func TestFilterMatchingFollowsTheKeyWildcards(t *testing.T) {
	for _, c := range []struct {
		filter, key string
		want        bool
	}{
		{"n1.>", "n1.default.web.a", true},
		{"n1.>", "n1", false},
		{"n1.>", "n10.default.web.a", false},
		{"*.default.web.*", "n1.default.web.a", true},
		{"*.default.web.*", "n1.default.web.a.b", false},
		{"*.default.web.*", "n1.default.web", false},
		{"*.default.web.*", "n1.default.web2.a", false},
		{"slot.default.web.>", "slot.default.web.g.0", true},
		{"sum.>", "sum.default.web", true},
		{"sum.>", "slot.default.web.g.0", false},
		{"exact", "exact", true},
		{"exact", "exact.more", false},
	} {
		if got := matchFilter(c.filter, c.key); got != c.want {
			t.Errorf("matchFilter(%q, %q) = %v, want %v", c.filter, c.key, got, c.want)
		}
	}
}

// JobView reads one job's allocations on every node with a source of its
// own (what a narrowed agent's promote reads), and no other job's.
func TestAJobViewHoldsTheJobsAllocationsOnEveryNode(t *testing.T) {
	st, put := allocStore(t)
	put("n1", "web", "w1")
	put("n2", "web", "w2")
	put("n2", "db", "d2")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := st.JobView(ctx, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range v.Allocs.All() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if got := strings.Join(keys, " "); got != "n1.default.web.w1 n2.default.web.w2" {
		t.Fatalf("job view allocations %q", got)
	}
	if !v.Watches(KindAllocs, wanted.AllocJobFilter("default", "web")) || v.Watches(KindAllocs, wanted.AllocJobFilter("default", "db")) {
		t.Fatalf("watched %v", v.Watched)
	}
}

// A source that cannot pull a bucket says which and why: the CLI prints
// that when its first read times out, not only that it timed out.
func TestUnsyncedNamesEachBucketNotPulledYetAndTheErrorItsLastAttemptMet(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	st := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	src := NewSource(st, SourceConfig{Log: log, Kinds: []string{KindJobs, KindAllocs},
		Filters: map[string][]string{KindAllocs: {"a.>.b"}}}) // '>' must end a subject: the server refuses the watch
	if got := src.Unsynced(); got[KindJobs] != "not opened yet" || got[KindAllocs] != "not opened yet" || len(got) != 2 {
		t.Fatalf("before Run: Unsynced %v, want both kinds not opened yet", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	testutil.Eventually(t, 10*time.Second, "the allocations watch refused, the jobs bucket pulled", func() bool {
		got := src.Unsynced()
		_, jobs := got[KindJobs]
		return !jobs && len(got) == 1 && strings.Contains(got[KindAllocs], "creating watcher")
	})
	select {
	case <-src.Synced():
		t.Fatal("Synced closed with a bucket never pulled")
	default:
	}
	t.Logf("unsynced: %v", src.Unsynced())
}

// A watcher that falls behind while its stream keeps its leader is
// re-created without starting the disruption guard (ResumedAt stays
// unset): it was slow, not cut off, and under a thousand agents on two
// cores that happens under load alone. The first watcher's deliveries are
// held back (a consumer starved of CPU); the stall check re-creates it and
// what was written meanwhile arrives.
func TestAWatcherStalledUnderTheSameStreamLeaderResumesWithoutTheDisruptionGuard(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, logs := testLog(t)
	obs := newObs()
	st := mustEnsure(t, connect(t, srv.ClientURL(), log, obs), BucketOptions{})
	src, hold, created := runHeldSource(t, st, log, obs)
	writer := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	putRaw(t, writer, "default.web", jobJSON("web", 1, ""))
	testutil.Eventually(t, 5*time.Second, "web v1 delivered", hasJob(src, "web", 1))

	close(hold)
	putRaw(t, writer, "default.web", jobJSON("web", 2, ""))
	testutil.Eventually(t, 15*time.Second, "web v2 delivered after the stall", hasJob(src, "web", 2))
	if n := obs.get(func(o *countingObserver) map[string]int { return o.restarts }, KindJobs+"/stalled"); n == 0 || created.Load() < 2 {
		t.Fatalf("web v2 arrived without a stalled restart (restarts %v, watchers %d); logs:\n%s", src.Restarts(), created.Load(), logs)
	}
	if at := src.ResumedAt(KindJobs); !at.IsZero() {
		t.Fatalf("ResumedAt %v after a stall under the same leader: the disruption guard would hold for a node TTL; logs:\n%s", at, logs)
	}
	if !strings.Contains(logs.String(), "no disruption guard") {
		t.Fatalf("the re-creation did not say why no guard started; logs:\n%s", logs)
	}
}

// runHeldSource runs a synced Source of the jobs bucket whose first
// watcher delivers nothing more once hold is closed; created counts the
// watchers made.
func runHeldSource(t *testing.T, st *Store, log *slog.Logger, obs Observer) (src *Source, hold chan struct{}, created *atomic.Int32) {
	t.Helper()
	src = NewSource(st, SourceConfig{Log: log, Observer: obs, Kinds: []string{KindJobs}})
	hold, created = make(chan struct{}), new(atomic.Int32)
	src.watchHook = func(_ string, w jetstream.KeyWatcher) jetstream.KeyWatcher {
		if created.Add(1) > 1 {
			return w
		}
		return newHeldWatch(w, hold)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitSynced(t, src)
	return src, hold, created
}

// heldWatch forwards a watcher's entries until hold is closed (a nil hold:
// never), or until it forwarded limit entries (0: no limit), then delivers
// nothing (its updates stay open until Stop).
type heldWatch struct {
	jetstream.KeyWatcher
	out  chan jetstream.KeyValueEntry
	stop chan struct{}
	once sync.Once
}

func newHeldWatch(w jetstream.KeyWatcher, hold <-chan struct{}) *heldWatch {
	return newLimitedWatch(w, hold, 0)
}

func newLimitedWatch(w jetstream.KeyWatcher, hold <-chan struct{}, limit int) *heldWatch {
	h := &heldWatch{KeyWatcher: w, out: make(chan jetstream.KeyValueEntry), stop: make(chan struct{})}
	go func() {
		for n := 0; limit == 0 || n < limit; n++ {
			select {
			case <-hold:
				return
			case <-h.stop:
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				select {
				case h.out <- e:
				case <-hold:
					return
				case <-h.stop:
					return
				}
			}
		}
	}()
	return h
}

func (h *heldWatch) Updates() <-chan jetstream.KeyValueEntry { return h.out }

func (h *heldWatch) Stop() error {
	h.once.Do(func() { close(h.stop) })
	return h.KeyWatcher.Stop()
}

// A bucket whose watchers stall one after the other is checked ever less
// often: each stall in a row doubles the span without progress that counts
// as one, so a server too loaded to deliver is not also handed a consumer
// re-creation every two seconds by every watcher it serves.
func TestWatchersThatStallInARowAreCheckedEverLessOften(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, logs := testLog(t)
	st := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	src := NewSource(st, SourceConfig{Log: log, Kinds: []string{KindJobs}})
	var mu sync.Mutex
	var created []time.Time
	src.watchHook = func(_ string, w jetstream.KeyWatcher) jetstream.KeyWatcher {
		mu.Lock()
		created = append(created, time.Now())
		mu.Unlock()
		return newMutedWatch(w) // every watcher falls silent after its pull
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitSynced(t, src)
	writer := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	stopWrites := make(chan struct{})
	writesDone := make(chan struct{})
	go func() { // the bucket keeps moving ahead of the silent watchers
		defer close(writesDone)
		for v := 1; ; v++ {
			select {
			case <-stopWrites:
				return
			case <-time.After(200 * time.Millisecond):
			}
			putRaw(t, writer, "default.web", jobJSON("web", v, ""))
		}
	}()
	testutil.Eventually(t, 20*time.Second, "three stalled watchers re-created", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(created) >= 4
	})
	close(stopWrites)
	<-writesDone
	mu.Lock()
	gaps := []time.Duration{created[1].Sub(created[0]), created[2].Sub(created[1]), created[3].Sub(created[2])}
	mu.Unlock()
	// Two checks without progress end a watcher: 2 × (1 s ± 25 %) for the
	// first, 2 × (2 s ± 25 %) for the second, 2 × (4 s ± 25 %) for the third.
	if gaps[0] < 1400*time.Millisecond || gaps[0] > 3500*time.Millisecond {
		t.Fatalf("the first stall was declared after %v, want about 2 s; logs:\n%s", gaps[0], logs)
	}
	if gaps[1] <= gaps[0] || gaps[2] <= gaps[1] || gaps[2] < 5500*time.Millisecond {
		t.Fatalf("stalls in a row were declared after %v: the checks did not slow down; logs:\n%s", gaps, logs)
	}
	if n := src.RestartReasons()[KindJobs+"/stalled"]; n < 3 {
		t.Fatalf("%d stalled restarts counted, want at least 3", n)
	}
}

// mutedWatch forwards a watcher's entries up to and including the marker
// that ends its initial values, then nothing (its updates stay open until
// Stop).
type mutedWatch struct {
	jetstream.KeyWatcher
	out  chan jetstream.KeyValueEntry
	stop chan struct{}
	once sync.Once
}

func newMutedWatch(w jetstream.KeyWatcher) *mutedWatch {
	m := &mutedWatch{KeyWatcher: w, out: make(chan jetstream.KeyValueEntry), stop: make(chan struct{})}
	go func() {
		for {
			var e jetstream.KeyValueEntry
			var ok bool
			select {
			case <-m.stop:
				return
			case e, ok = <-w.Updates():
				if !ok {
					return
				}
			}
			select {
			case m.out <- e:
			case <-m.stop:
				return
			}
			if e == nil {
				return // the initial values are delivered: silence from here
			}
		}
	}()
	return m
}

func (m *mutedWatch) Updates() <-chan jetstream.KeyValueEntry { return m.out }

func (m *mutedWatch) Stop() error {
	m.once.Do(func() { close(m.stop) })
	return m.KeyWatcher.Stop()
}

// The span without progress that counts as a stall grows with the fleet
// as the watch's idle heartbeat does: a second up to 250 nodes (as before),
// four at 1,000, six from 1,500, each doubled by the stalls in a row, with
// its window alike.
func TestTheStallCheckPaceGrowsWithTheFleet(t *testing.T) {
	for _, c := range []struct {
		nodes, stalls int
		base          time.Duration
	}{{0, 0, time.Second}, {250, 0, time.Second}, {1000, 0, 4 * time.Second}, {1000, 2, 16 * time.Second},
		{10_000, 0, 6 * time.Second}, {10_000, 9, 6 * time.Second << stallMaxShift}} {
		for range 50 {
			every, window := stallPace(c.stalls, c.nodes)
			if every < c.base*3/4 || every > c.base*5/4 {
				t.Fatalf("%d nodes, %d stalls: a check every %v, want %v ± 25 %%", c.nodes, c.stalls, every, c.base)
			}
			if want := stallWindow * (c.base / stallCheck); window != want {
				t.Fatalf("%d nodes, %d stalls: window %v, want %v", c.nodes, c.stalls, window, want)
			}
		}
	}
}

// A watcher whose pull falls silent part way (its pull request lost while
// the stream elected a leader, after a whole cluster restarted) is
// re-created once silent past a request timeout, and the bucket is pulled
// again whole: the Source syncs with every key, where it would otherwise
// wait on the ordered consumer's own recovery (a CLI read gave up after
// 20 s in the fleet example's test).
func TestAPullThatFallsSilentPartWayIsMadeAgain(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, logs := testLog(t)
	conn := connect(t, srv.ClientURL(), log, nil)
	st := mustEnsure(t, conn, BucketOptions{})
	for _, id := range []string{"a", "b", "c"} {
		putRaw(t, st, "default."+id, jobJSON(id, 1, ""))
	}
	obs := newObs()
	src := NewSource(st, SourceConfig{Log: log, Observer: obs, Kinds: []string{KindJobs}})
	var created atomic.Int32
	src.watchHook = func(_ string, w jetstream.KeyWatcher) jetstream.KeyWatcher {
		if created.Add(1) > 1 {
			return w
		}
		return newLimitedWatch(w, nil, 1) // one key, then silence
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	began := time.Now()
	select {
	case <-src.Synced():
	case <-time.After(15 * time.Second):
		t.Fatalf("not synced after 15 s (watchers %d, stages %v); logs:\n%s", created.Load(), src.Unsynced(), logs)
	}
	took := time.Since(began)
	t.Logf("synced %s after the start, %d watchers", took.Round(time.Millisecond), created.Load())
	if created.Load() < 2 || took < conn.RequestTimeout() {
		t.Fatalf("synced after %s with %d watchers: want a second watcher after a request timeout (%s) of silence", took, created.Load(), conn.RequestTimeout())
	}
	if n := obs.get(func(o *countingObserver) map[string]int { return o.restarts }, KindJobs+"/silent"); n != 1 {
		t.Fatalf("%d restarts counted as silent, want 1 (%v)", n, src.Restarts())
	}
	if !strings.Contains(logs.String(), "watcher silent during its pull") {
		t.Fatalf("the re-creation was not logged; logs:\n%s", logs)
	}
	for _, id := range []string{"a", "b", "c"} {
		if !hasJob(src, id, 1)() {
			t.Fatalf("job %s missing after the second pull; view %v", id, src.View().Jobs)
		}
	}
}
