package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// The leader read (T5's re-read) returns the stored record as it is now,
// and not-found for a key never written or deleted; control: the plain
// read agrees with it.
func TestAReadThroughTheStreamLeaderSeesTheStoredRecord(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	st := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	ctx := context.Background()
	if _, err := st.GetDeploymentFromLeader(ctx, "", "web", 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a record never written: %v", err)
	}
	d := &model.Deployment{ID: "d1", JobID: "web", JobVersion: 1, Status: model.DeploymentRunning, TaskGroups: map[string]*model.DeploymentState{}}
	if _, _, _, err := st.CreateDeployment(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.ModifyDeployment(ctx, "", "web", 1, 0, func(cur model.Deployment) (*model.Deployment, error) {
		cur.Status = model.DeploymentPaused
		return &cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetDeploymentFromLeader(ctx, "", "web", 1)
	plain, _, perr := st.GetDeployment(ctx, "", "web", 1)
	if err != nil || perr != nil || got.Status != model.DeploymentPaused || plain.Status != got.Status {
		t.Fatalf("leader read %+v (%v), plain read %+v (%v)", got, err, plain, perr)
	}
	if err := st.Deployments.Delete(ctx, wanted.DeploymentKey("", "web", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetDeploymentFromLeader(ctx, "", "web", 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a deleted record: %v", err)
	}
}

// The server clock is the timestamp of a write read back from the stream
// leader: on this machine it lies between the times taken before and
// after the call, and asking twice does not go back in time.
func TestTheServerClockIsTheLeadersStampOfAFreshWrite(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	st := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	ctx := context.Background()
	before := time.Now()
	first, err := st.ServerNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second, err := st.ServerNow(ctx)
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if first.Before(before.Add(-time.Second)) || second.After(after.Add(time.Second)) || second.Before(first) {
		t.Fatalf("server clock %v then %v, local clock %v … %v", first, second, before, after)
	}
	if m, err := st.leaderGet(ctx, st.names.Rollout, map[string]any{"seq": 1 << 40}); m != nil || err != nil {
		t.Fatalf("a sequence never written: want (nil, nil), got (%+v, %v)", m, err)
	}
}

// A take whose answer was lost lands all the same: the same boot of the
// same holder taking the same replacement again is answered with the slot
// (adopted, at its revision), not refused as if another node held it,
// which left the slot held with nobody acting on it until its TTL. Another
// holder, another boot of this one, or another replacement is refused.
func TestASlotTakenByAnEarlierAttemptOfTheSameTakeIsAdopted(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	st := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	ctx := context.Background()
	sl := model.Slot{JobID: "web", JobVersion: 2, DeploymentID: "d2", Group: "g", Index: 3, Holder: "n1", BootID: "boot-1",
		OldAlloc: "a-old", NewAlloc: "a-new", Nonce: "first"}
	key := wanted.SlotKey("", "web", "g", 3)
	rev, err := st.TakeSlot(ctx, key, sl, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	again := sl
	again.Nonce = "second" // a later decision's
	got, err := st.TakeSlot(ctx, key, again, time.Minute)
	if err != nil || got != rev {
		t.Fatalf("the same take again: revision %d, %v; want the first take's %d", got, err, rev)
	}
	if s := st.Stats(); s.SlotAdopted != 1 || s.SlotConflicts != 0 {
		t.Fatalf("stats %+v: want one adopted, no conflict", s)
	}
	for name, other := range map[string]func(*model.Slot){
		"another holder":      func(s *model.Slot) { s.Holder = "n2" },
		"another boot":        func(s *model.Slot) { s.BootID = "boot-2" },
		"another replacement": func(s *model.Slot) { s.OldAlloc = "a-other" },
		"another deployment":  func(s *model.Slot) { s.DeploymentID = "d3"; s.JobVersion = 3 },
	} {
		o := sl
		other(&o)
		if _, err := st.TakeSlot(ctx, key, o, time.Minute); !errors.Is(err, ErrSlotTaken) {
			t.Fatalf("%s: %v, want ErrSlotTaken", name, err)
		}
	}
	if s := st.Stats(); s.SlotAdopted != 1 || s.SlotConflicts != 4 {
		t.Fatalf("stats %+v: want one adopted, four conflicts", s)
	}
}
