package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/internal/testutil"
)

// echoWorld is a fake fleet source: a view whose generation is the number of
// changes logged.
type echoWorld struct{ fakeChanges }

func newEchoWorld() *echoWorld {
	return &echoWorld{fakeChanges{view: &fleet.View{Allocs: fleet.MapOf(map[string]wanted.AllocState{}), Deployments: fleet.MapOf(map[string]wanted.DeploymentState{}),
		Revisions: map[string]uint64{fleet.KindJobs: 10, fleet.KindNodes: 3, fleet.KindAllocs: 20, fleet.KindDeployments: 5}}}}
}

// log appends one change (one generation) and leaves rec under its key in
// the view (nil: no record, a delete).
func (w *echoWorld) log(kind, key string, rev uint64, rec any) {
	w.view.Generation++
	// The job the record belongs to, before and after, as the source
	// says (Change.Jobs): the key's, here.
	var jk string
	if _, ns, job, _, ok := wanted.ParseAllocKeyFull(key); ok && kind == fleet.KindAllocs {
		jk = wanted.JobKey(ns, job)
	} else if ns, job, _, _, ok := wanted.ParseSlotKey(key); ok && kind == fleet.KindRollout {
		jk = wanted.JobKey(ns, job)
	} else if ns, job, ok := wanted.ParseSummaryKey(key); ok && kind == fleet.KindRollout {
		jk = wanted.JobKey(ns, job)
	}
	jobs := [2]string{jk, jk}
	if rec == nil {
		jobs[1] = ""
	}
	w.changes = append(w.changes, fleet.Change{Gen: w.view.Generation, Kind: kind, Key: key, Revision: rev, Jobs: jobs})
	switch r := rec.(type) {
	case *model.Allocation:
		w.view.Allocs = w.view.Allocs.With(key, wanted.AllocState{Key: key, Revision: rev, Value: r})
	case *model.Deployment:
		w.view.Deployments = w.view.Deployments.With(key, wanted.DeploymentState{Key: key, Revision: rev, Value: r})
	case nil:
		w.view.Allocs = w.view.Allocs.Without(key)
		w.view.Deployments = w.view.Deployments.Without(key)
	}
	if rev > w.view.Revisions[kind] {
		w.view.Revisions[kind] = rev
	}
}

// TestOnlyEchoesSkipsExactlyThisNodesOwnAllocationWrites: changes are an
// echo only when every one of them is a write of this agent and nothing
// else changed; each case states whether a pass must run.
func TestOnlyEchoesSkipsExactlyThisNodesOwnAllocationWrites(t *testing.T) {
	al := &model.Allocation{ID: "a"}
	cases := []struct {
		name   string
		primed bool
		own    []uint64
		do     func(w *echoWorld)
		echo   bool
	}{
		{"own writes 21 and 22 only", true, []uint64{21, 22}, func(w *echoWorld) {
			w.log(fleet.KindAllocs, "n2.x", 21, al)
			w.log(fleet.KindAllocs, "n2.y", 22, al)
		}, true},
		{"control: 22 written by another node", true, []uint64{21}, func(w *echoWorld) {
			w.log(fleet.KindAllocs, "n2.x", 21, al)
			w.log(fleet.KindAllocs, "n2.y", 22, al)
		}, false},
		{"control: own write, and a job changed", true, []uint64{21}, func(w *echoWorld) {
			w.log(fleet.KindAllocs, "n2.x", 21, al)
			w.log(fleet.KindJobs, "default.web", 11, nil)
		}, false},
		{"control: a deployment changed", true, nil, func(w *echoWorld) {
			w.log(fleet.KindDeployments, "default.web.1", 6, &model.Deployment{ID: "d9"})
		}, false},
		{"control: a generation the log does not account for", true, []uint64{21}, func(w *echoWorld) {
			w.log(fleet.KindAllocs, "n2.x", 21, al)
			w.view.Generation += 3
		}, false},
		{"control: no pass read a view yet", false, []uint64{21}, func(w *echoWorld) {
			w.log(fleet.KindAllocs, "n2.x", 21, al)
		}, false},
		{"nothing moved", true, nil, func(w *echoWorld) {}, true},
		{"control: a bucket pulled whole", true, nil, func(w *echoWorld) {
			w.log(fleet.KindIntents, "", 1, nil)
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newEchoWorld()
			w.view.Generation = 100
			var e ownEchoes
			if c.primed {
				e.passed(w.view)
			}
			for _, r := range c.own {
				e.add(r)
			}
			c.do(w)
			if got, _ := e.onlyEchoes(w); got != c.echo {
				t.Fatalf("onlyEchoes = %v, want %v", got, c.echo)
			}
		})
	}
}

// TestAnEchoCountsAsReadAndOldRevisionsAreForgotten: once an echo is
// recognised, the next change is judged from it; a write whose echo a pass
// already read is not remembered.
func TestAnEchoCountsAsReadAndOldRevisionsAreForgotten(t *testing.T) {
	w := newEchoWorld()
	w.view.Revisions[fleet.KindAllocs] = 5
	var e ownEchoes
	e.passed(w.view)
	e.add(4) // read by the pass already
	if len(e.revs) != 0 {
		t.Fatalf("a revision the pass read is remembered: %v", e.revs)
	}
	e.add(6)
	w.log(fleet.KindAllocs, "n2.x", 6, &model.Allocation{ID: "x"})
	if ok, _ := e.onlyEchoes(w); !ok {
		t.Fatal("own write 6 not recognised")
	}
	if len(e.revs) != 0 {
		t.Fatalf("revisions up to the echo not forgotten: %v", e.revs)
	}
	// Control: 7 is someone else's; judged from 6, not from 5.
	w.log(fleet.KindAllocs, "n2.y", 7, &model.Allocation{ID: "y"})
	if ok, _ := e.onlyEchoes(w); ok {
		t.Fatal("a foreign write 7 taken for an echo")
	}
}

// TestOnlyEchoesRecognisesOwnKeysAndPlannedCreationsWithoutTheirRevisions:
// an echo that arrives before its put's reply is still recognised, by what
// the view holds at that revision while this node's write of it is in
// flight; each control differs in one thing.
func TestOnlyEchoesRecognisesOwnKeysAndPlannedCreationsWithoutTheirRevisions(t *testing.T) {
	t0 := time.Unix(1000, 0)
	planned := &model.Deployment{ID: "d1", JobID: "web", JobVersion: 2, Status: model.DeploymentRunning, ModifyTime: t0}
	al := &model.Allocation{ID: "a"}
	dep := func(mod time.Time) *model.Deployment {
		d := *planned
		d.ModifyTime = mod
		return &d
	}
	cases := []struct {
		name string
		do   func(w *echoWorld)
		echo bool
	}{
		{"this node's key at the new revision", func(w *echoWorld) { w.log(fleet.KindAllocs, "n1.default.web.a", 21, al) }, true},
		{"control: this node's key of an allocation it is not writing (someone else's write)", func(w *echoWorld) {
			w.log(fleet.KindAllocs, "n1.default.web.z", 21, &model.Allocation{ID: "z"})
		}, false},
		{"control: another node's key at the new revision", func(w *echoWorld) { w.log(fleet.KindAllocs, "n2.default.web.b", 21, al) }, false},
		{"control: this node's key deleted", func(w *echoWorld) { w.log(fleet.KindAllocs, "n1.default.web.a", 21, nil) }, false},
		{"control: this node's key overwritten since by a write not known", func(w *echoWorld) {
			w.log(fleet.KindAllocs, "n1.default.web.a", 21, al)
			w.view.Allocs = w.view.Allocs.With("n1.default.web.a", wanted.AllocState{Key: "n1.default.web.a", Revision: 30, Value: al})
		}, false},
		{"the planned creation, as planned", func(w *echoWorld) { w.log(fleet.KindDeployments, "default.web.2", 6, dep(t0)) }, true},
		{"control: the same deployment changed since", func(w *echoWorld) {
			w.log(fleet.KindDeployments, "default.web.2", 6, dep(t0.Add(time.Second)))
		}, false},
		{"control: two changes, the first one overwritten", func(w *echoWorld) {
			w.log(fleet.KindDeployments, "default.web.2", 6, dep(t0))
			w.log(fleet.KindDeployments, "default.web.2", 7, dep(t0))
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newEchoWorld()
			e := ownEchoes{nodePrefix: "n1.", writing: func(id string) bool { return id == "a" }}
			e.passed(w.view)
			e.creating(planned)
			c.do(w)
			if got, _ := e.onlyEchoes(w); got != c.echo {
				t.Fatalf("onlyEchoes = %v, want %v", got, c.echo)
			}
		})
	}
}

// Other nodes' record changes are batched (nodeChangeEvery) and other
// nodes' allocations and slots of a job decided on a timer wait for it
// (deputyLast); any other change, this node's own record or allocation, a
// paced job's summary, a job not paced or paced no more, a whole-bucket
// change or a log that no longer reaches back makes a pass at once.
// Nothing is marked read.
func TestWaitsUntilTellsChangesThatCanWaitFromEverythingElse(t *testing.T) {
	al := &model.Allocation{ID: "a"}
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	batchAt := now.Add(time.Second)
	pacedAt := now.Add(300 * time.Millisecond)
	paced := &pacedJobs{base: pacedEvery{"default.web": pacedAt, "default.gone": now.Add(-time.Millisecond)}}
	cases := []struct {
		name string
		do   func(w *echoWorld)
		at   time.Time // zero: a pass at once
		why  string
	}{
		{"two other nodes joined", func(w *echoWorld) {
			w.log(fleet.KindNodes, "n3", 4, nil)
			w.log(fleet.KindNodes, "n4", 5, nil)
		}, batchAt, causeNodesBatched},
		{"another node's allocation of a paced job", func(w *echoWorld) {
			w.log(fleet.KindAllocs, "n3.default.web.x", 21, al)
		}, pacedAt, causePaced},
		{"a slot of a paced job, another node's allocation and a join", func(w *echoWorld) {
			w.log(fleet.KindRollout, "slot.default.web.g.3", 7, nil)
			w.log(fleet.KindAllocs, "n3.default.web.x", 21, al)
			w.log(fleet.KindNodes, "n4", 5, nil)
		}, pacedAt, causePaced},
		{"this agent's own allocation write, known by its revision, beside a paced change", func(w *echoWorld) {
			w.log(fleet.KindAllocs, "n2.default.web.a", 30, al)
			w.log(fleet.KindAllocs, "n3.default.web.x", 31, al)
		}, pacedAt, causePaced},
		{"control: this node's own record", func(w *echoWorld) { w.log(fleet.KindNodes, "n2", 4, nil) }, time.Time{}, ""},
		{"control: another node, and an allocation of a job not paced", func(w *echoWorld) {
			w.log(fleet.KindNodes, "n3", 4, nil)
			w.log(fleet.KindAllocs, "n3.default.api.x", 21, al)
		}, time.Time{}, ""},
		{"control: a job whose timed decision is due", func(w *echoWorld) {
			w.log(fleet.KindAllocs, "n3.default.gone.x", 21, al)
		}, time.Time{}, ""},
		{"control: this node's allocation of a paced job, not known as its write", func(w *echoWorld) {
			w.log(fleet.KindAllocs, "n2.default.web.b", 21, al)
		}, time.Time{}, ""},
		{"control: another node's allocation key that names no job", func(w *echoWorld) {
			w.log(fleet.KindAllocs, "n3.x", 21, al)
		}, time.Time{}, ""},
		{"control: a paced job's summary", func(w *echoWorld) {
			w.log(fleet.KindRollout, "sum.default.web", 7, nil)
		}, time.Time{}, ""},
		{"control: a paced job's record", func(w *echoWorld) {
			w.log(fleet.KindDeployments, "default.web.2", 6, nil)
		}, time.Time{}, ""},
		{"control: the nodes bucket pulled whole", func(w *echoWorld) { w.log(fleet.KindNodes, "", 4, nil) }, time.Time{}, ""},
		{"control: an intent", func(w *echoWorld) { w.log(fleet.KindIntents, "n3", 2, nil) }, time.Time{}, ""},
		{"control: nothing new", func(w *echoWorld) {}, time.Time{}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newEchoWorld()
			e := &ownEchoes{nodePrefix: "n2."}
			e.passed(w.view)
			e.add(30)
			c.do(w)
			at, why, ok := e.waitsUntil(w, "n2", batchAt, paced, now)
			if ok != !c.at.IsZero() || !at.Equal(c.at) || why != c.why {
				t.Fatalf("waitsUntil = %v, %q, %v; want %v, %q", at, why, ok, c.at, c.why)
			}
			if ok {
				if at2, _, ok2 := e.waitsUntil(w, "n2", batchAt, paced, now); !ok2 || !at2.Equal(at) {
					t.Fatal("the changes were marked read")
				}
			}
		})
	}
	// Not primed (no pass yet): a pass.
	w := newEchoWorld()
	w.log(fleet.KindNodes, "n3", 4, nil)
	if _, _, ok := (&ownEchoes{}).waitsUntil(w, "n2", batchAt, paced, now); ok {
		t.Fatal("batched before any pass")
	}
}

// Nodes joining one after the other make an agent pass about once a second,
// not once per join, and every join is applied (the fleet is counted).
func TestOtherNodesJoiningAreAppliedInBatches(t *testing.T) {
	w := newWorld(t)
	n := w.newNodeResync("node-1", nil, "", time.Hour)
	defer n.stop(true)
	n.waitPasses(t, 1)
	before := n.agent.Status().Passes
	start := time.Now()
	const joins = 30
	for k := 0; k < joins; k++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := w.store.ForNode(fmt.Sprintf("joiner-%02d", k)).PutNode(ctx, nodeRecord(fmt.Sprintf("joiner-%02d", k)))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // 30 joins over 1.5 s
	}
	testutil.Eventually(t, 10*time.Second, "every join counted", func() bool { return n.agent.Fleet().Live == joins+1 })
	took := time.Since(start)
	passes := n.agent.Status().Passes - before
	// At most one pass per nodeChangeEvery, plus the first at once.
	if most := uint64(took/nodeChangeEvery) + 2; passes > most {
		t.Fatalf("%d passes for %d joins in %v: more than one a second", passes, joins, took.Round(time.Millisecond))
	}
	t.Logf("%d joins in %v: %d passes", joins, took.Round(time.Millisecond), passes)
}

// TestOwnDeploymentWritesAreEchoesByTheRevisionTheyReturned: a deployment
// write of this agent is an echo by the revision its write returned; a
// change of a key it is writing, before the reply, makes no pass and is
// not marked read, and the write's end says a pass must follow; each
// control differs in one thing.
func TestOwnDeploymentWritesAreEchoesByTheRevisionTheyReturned(t *testing.T) {
	const key = "default.web.2"
	d := &model.Deployment{ID: "d1", JobID: "web", JobVersion: 2, Status: model.DeploymentRunning}
	primed := func() (*echoWorld, *ownEchoes) {
		w := newEchoWorld()
		w.view.Generation = 100
		e := &ownEchoes{}
		e.passed(w.view)
		return w, e
	}
	t.Run("a write's revision known before its echo", func(t *testing.T) {
		w, e := primed()
		e.beginDeploymentWrite(key)
		if e.endDeploymentWrite(key, 6) {
			t.Fatal("nothing was postponed, yet the write's end asks for a pass")
		}
		w.log(fleet.KindDeployments, key, 6, d)
		if ok, why := e.onlyEchoes(w); !ok {
			t.Fatalf("own write 6 not an echo (cause %q)", why)
		}
		if len(e.depRevs) != 0 || e.seenDepRev != 6 {
			t.Fatalf("revision 6 not counted as read: revs %v, seen %d", e.depRevs, e.seenDepRev)
		}
		// Control: the next write of the key is someone else's.
		w.log(fleet.KindDeployments, key, 7, d)
		if ok, why := e.onlyEchoes(w); ok || why != fleet.KindDeployments {
			t.Fatalf("a foreign write 7 after the echo: echo %v, cause %q", ok, why)
		}
	})
	t.Run("control: a foreign write of a key this agent is not writing", func(t *testing.T) {
		w, e := primed()
		w.log(fleet.KindDeployments, key, 6, d)
		if ok, _ := e.onlyEchoes(w); ok {
			t.Fatal("a foreign write taken for an echo")
		}
	})
	// postponedThenEnded logs a change of key at revision 6 while this
	// agent writes it, checks that it waits unread, then ends the write
	// at rev (0: failed) and checks that the end asks for a pass.
	postponedThenEnded := func(t *testing.T, rev uint64) (*echoWorld, *ownEchoes) {
		w, e := primed()
		e.beginDeploymentWrite(key)
		w.log(fleet.KindDeployments, key, 6, d)
		if ok, _ := e.onlyEchoes(w); !ok {
			t.Fatal("a change of a key under write made a pass before the write's end")
		}
		if e.seenGen != 100 {
			t.Fatalf("the postponed change was marked read (generation %d)", e.seenGen)
		}
		if !e.endDeploymentWrite(key, rev) {
			t.Fatalf("the write's end (revision %d) does not ask for the pass a postponed change needs", rev)
		}
		return w, e
	}
	t.Run("an echo before the reply waits for it", func(t *testing.T) {
		w, e := postponedThenEnded(t, 6)
		if ok, why := e.onlyEchoes(w); !ok {
			t.Fatalf("judged again with the revision known, the echo makes a pass (cause %q)", why)
		}
		if e.seenGen != 101 {
			t.Fatalf("the echo not marked read after its revision came (generation %d)", e.seenGen)
		}
	})
	t.Run("control: the write fails, and the change was someone else's", func(t *testing.T) {
		w, e := postponedThenEnded(t, 0)
		if ok, _ := e.onlyEchoes(w); ok {
			t.Fatal("a foreign write taken for an echo after this agent's write failed")
		}
	})
	t.Run("control: postponed, then another job changed", func(t *testing.T) {
		w, e := primed()
		e.beginDeploymentWrite(key)
		w.log(fleet.KindDeployments, key, 6, d)
		w.log(fleet.KindJobs, "default.api", 11, nil)
		if ok, why := e.onlyEchoes(w); ok || why != fleet.KindJobs {
			t.Fatalf("a job change beside a postponed one: echo %v, cause %q", ok, why)
		}
	})
	t.Run("a revision a pass already read is not remembered", func(t *testing.T) {
		w, e := primed()
		e.beginDeploymentWrite(key)
		w.log(fleet.KindDeployments, key, 6, d)
		e.passed(w.view) // a pass read the echo before the write's reply
		e.endDeploymentWrite(key, 6)
		if len(e.depRevs) != 0 {
			t.Fatalf("a revision the pass read is remembered: %v", e.depRevs)
		}
	})
}

// TestARolloutOnOneNodeMakesNoPassOfItsOwnDeploymentWrites: on a node that
// is the only writer of its deployments, no pass is made for a deployment
// change read from the view (every one is this agent's own write, which
// its kick already passed on), while the deployments are created and run
// to success; the control is the operator's write, which does make one.
func TestARolloutOnOneNodeMakesNoPassOfItsOwnDeploymentWrites(t *testing.T) {
	w := newWorld(t)
	n := w.newNodeResync("node-1", nil, "", time.Hour)
	defer n.stop(true)
	n.waitPasses(t, 1)
	const jobs = 4
	for i := range jobs {
		w.putJob(mockJob(fmt.Sprintf("j%d", i), 0, nil))
	}
	testutil.Eventually(t, 20*time.Second, "every deployment successful", func() bool {
		done := 0
		for i := range jobs {
			if d := w.deployment("", fmt.Sprintf("j%d", i), 0); d != nil && d.Status == model.DeploymentSuccessful {
				done++
			}
		}
		return done == jobs
	})
	st := n.agent.Status()
	t.Logf("passes by cause: %v", st.PassCauses)
	if writes := st.RolloutWrites["transition"].Count + st.RolloutWrites["create"].Count; writes < 2*jobs {
		t.Fatalf("only %d deployment writes for %d rollouts: %v", writes, jobs, st.RolloutWrites)
	}
	if c := st.PassCauses["change: "+fleet.KindDeployments]; c != 0 {
		t.Fatalf("%d passes for deployment changes that were all this agent's own writes: %v", c, st.PassCauses)
	}
	// Control: a write this agent did not make is read by a pass.
	before := n.agent.Status().PassCauses["change: "+fleet.KindDeployments]
	_, _, err := w.store.ModifyDeployment(context.Background(), "", "j0", 0, 0, func(cur model.Deployment) (*model.Deployment, error) {
		cur.StatusDescription = "touched by the operator"
		cur.ModifyTime = cur.ModifyTime.Add(time.Millisecond)
		return &cur, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "a pass for the operator's write", func() bool {
		return n.agent.Status().PassCauses["change: "+fleet.KindDeployments] > before
	})
}

// TestAJobHasOneWakeUpPending: a job's wake-up requests replace one
// another, so however many decisions asked, one kick comes, at the newest
// request's time; another job's request is its own.
func TestAJobHasOneWakeUpPending(t *testing.T) {
	a := &Agent{kick: make(chan struct{}, 1)}
	kicks := func(within time.Duration) (n int) {
		deadline := time.After(within)
		for {
			select {
			case <-a.kick:
				n++
			case <-deadline:
				return n
			}
		}
	}
	for i := range 20 {
		a.wakeFor("default.web", time.Duration(30+i)*time.Millisecond, "timer: test")
	}
	if n := kicks(300 * time.Millisecond); n != 1 {
		t.Fatalf("20 requests of one job made %d kicks, want 1", n)
	}
	if p := a.kickWhy.Load(); p == nil || *p != "timer: test" {
		t.Fatalf("the kick's cause is %v", p)
	}
	// The newest request holds, later than the one it replaces.
	start := time.Now()
	a.wakeFor("default.web", 20*time.Millisecond, "timer: test")
	a.wakeFor("default.web", 200*time.Millisecond, "timer: test")
	if n := kicks(120 * time.Millisecond); n != 0 {
		t.Fatalf("a replaced request still kicked (%d kicks)", n)
	}
	if n := kicks(400 * time.Millisecond); n != 1 {
		t.Fatalf("the newest request made %d kicks, want 1", n)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Fatalf("kicked after %v, before the newest request's 200 ms", took)
	}
	// Control: two jobs, two kicks (far enough apart not to coalesce).
	a.wakeFor("default.web", 10*time.Millisecond, "timer: test")
	a.wakeFor("default.api", 150*time.Millisecond, "timer: test")
	if n := kicks(400 * time.Millisecond); n != 2 {
		t.Fatalf("two jobs' requests made %d kicks, want 2", n)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.wakes) != 0 {
		t.Fatalf("wake-ups left after they fired: %v", a.wakes)
	}
}

// Each notification reads only the changes after those the last one
// found can wait; a change that cannot makes a pass at once however many
// came before it, and a later call scans again from the last pass.
func TestWaitsUntilReadsOnlyTheChangesAfterItsLastScan(t *testing.T) {
	al := &model.Allocation{ID: "a"}
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	batchAt := now.Add(time.Second)
	paced := &pacedJobs{base: pacedEvery{"default.web": now.Add(300 * time.Millisecond), "default.api": now.Add(200 * time.Millisecond)}}
	w := newEchoWorld()
	e := &ownEchoes{nodePrefix: "n2."}
	e.passed(w.view)
	w.log(fleet.KindAllocs, "n3.default.web.x", 21, al)
	if at, _, ok := e.waitsUntil(w, "n2", batchAt, paced, now); !ok || !at.Equal(paced.base["default.web"]) {
		t.Fatalf("one paced change: %v %v", at, ok)
	}
	w.log(fleet.KindRollout, "slot.default.api.g.0", 8, nil)
	if at, _, ok := e.waitsUntil(w, "n2", batchAt, paced, now); !ok || !at.Equal(paced.base["default.api"]) {
		t.Fatalf("a second, due sooner: %v %v", at, ok)
	}
	if e.waitGen != w.view.Generation {
		t.Fatalf("scanned to %d, want %d", e.waitGen, w.view.Generation)
	}
	w.log(fleet.KindAllocs, "n3.default.other.x", 22, al)
	if _, _, ok := e.waitsUntil(w, "n2", batchAt, paced, now); ok {
		t.Fatal("a job not paced after two that are: no pass")
	}
	// Another snapshot of the paced jobs: scanned again from the start.
	again := &pacedJobs{over: pacedEvery{"default.web": now.Add(time.Second), "default.api": now.Add(time.Second), "default.other": now.Add(time.Second)}}
	if at, _, ok := e.waitsUntil(w, "n2", batchAt, again, now); !ok || !at.Equal(now.Add(time.Second)) {
		t.Fatalf("rescanned with the new snapshot: %v %v", at, ok)
	}
}
