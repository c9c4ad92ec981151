package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/jobspec"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/host/wanted"
)

// webHCL is the spec of job web; versions differ in the mock task's run_for.
const webHCL = `job "web" {
  type = "system"
  datacenters = ["dc1"]
  update {
    max_parallel      = 1
    canary            = 50
    auto_revert       = true
    healthy_deadline  = "1m"
    progress_deadline = "10m"
  }
  group "g" {
    task "t" {
      driver = "mock"
      config {
        run_for = "%s"
      }
    }
  }
}
`

// rolloutWorld is a fleet written into the buckets the way agents write
// it: three live nodes n1..n3, job web at version 2 (version 1 recorded
// and successful), v2's record canarying on n1 and n2.
type rolloutWorld struct {
	t     *testing.T
	ctx   context.Context
	st    *fleet.Store
	flags []string
	dir   string
}

func newRolloutWorld(t *testing.T) *rolloutWorld {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	emb, err := fleet.StartEmbedded(ctx, fleet.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := fleet.Connect(ctx, fleet.ConnConfig{URLs: []string{emb.ClientURL()}, FailFast: true}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := fleet.EnsureBuckets(ctx, conn, fleet.Names("ro"), fleet.BucketOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		conn.Close()
		emb.Shutdown()
	})
	w := &rolloutWorld{t: t, ctx: ctx, st: st, flags: []string{"--nats", emb.ClientURL(), "--bucket-prefix", "ro"}, dir: t.TempDir()}
	for v, img := range []string{"1h", "2h"} {
		j := w.job(uint64(v+1), img)
		if _, err := st.PutJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		if err := st.PutJobVersion(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		if _, err := st.ForNode(id).PutNode(ctx, &model.Node{ID: id, Name: id, Datacenter: "dc1", NodePool: "default", Status: model.NodeStatusReady,
			Eligibility: model.Eligible, Attributes: map[string]string{}, Meta: map[string]string{}, RolloutProtocol: 1,
			Drivers: map[string]model.DriverInfo{"mock": {Detected: true, Healthy: true}}}); err != nil {
			t.Fatal(err)
		}
	}
	w.record(1, func(d *model.Deployment) {
		d.Status, d.StatusDescription = model.DeploymentSuccessful, model.DescSuccessful
	})
	w.record(2, func(d *model.Deployment) {
		d.StatusDescription = model.DescNeedsPromotion
		d.TaskGroups["g"].CanaryNodes, d.TaskGroups["g"].DesiredCanaries = []string{"n1", "n2"}, 2
		d.TaskGroups["g"].CanaryPolicy, d.TaskGroups["g"].CanaryReason = "default", "chose 2 of 3 ready nodes (50%)"
	})
	// n1 runs v2 (a canary, not healthy yet), n2 holds the slot for its
	// replacement, n3 still runs v1.
	w.alloc("b-n1", "n1", 2, nil)
	w.alloc("a-n2", "n2", 1, nil)
	w.alloc("b-n2", "n2", 2, nil)
	w.alloc("a-n3", "n3", 1, nil)
	sl := model.Slot{JobID: "web", JobVersion: 2, DeploymentID: reconcile.DeploymentID("", "web", 2), Group: "g", Index: 0,
		Holder: "n2", OldAlloc: "a-n2", NewAlloc: "b-n2", Nonce: "x"}
	if _, err := st.TakeSlot(ctx, wanted.SlotKey("", "web", "g", 0), sl, time.Hour); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *rolloutWorld) job(v uint64, img string) *model.Job {
	w.t.Helper()
	j, err := jobspec.Parse("web.hcl", []byte(strings.ReplaceAll(webHCL, "%s", img)))
	if err != nil {
		w.t.Fatal(err)
	}
	j.Version = v
	return j
}

// jobFile writes the spec with image img and returns its path.
func (w *rolloutWorld) jobFile(img string) string {
	p := filepath.Join(w.dir, img+".hcl")
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(webHCL, "%s", img)), 0o600); err != nil {
		w.t.Fatal(err)
	}
	return p
}

func (w *rolloutWorld) record(v uint64, mod func(d *model.Deployment)) {
	w.t.Helper()
	d := &model.Deployment{ID: reconcile.DeploymentID("", "web", v), JobID: "web", JobVersion: v, Status: model.DeploymentRunning,
		StatusDescription: model.DescRunning, Protocol: 1, TaskGroups: map[string]*model.DeploymentState{"g": {MaxParallel: 1,
			AutoRevert: true, DesiredTotal: 3, ProgressDeadline: model.Duration(10 * time.Minute)}}}
	mod(d)
	if _, _, created, err := w.st.CreateDeployment(w.ctx, d); err != nil || !created {
		w.t.Fatalf("creating record v%d: %v", v, err)
	}
}

func (w *rolloutWorld) alloc(id, node string, v uint64, healthy *bool) {
	w.t.Helper()
	a := &model.Allocation{ID: id, Name: "web.g[0]", JobID: "web", JobVersion: v, TaskGroup: "g", NodeID: node,
		DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning}
	if healthy != nil {
		a.DeploymentStatus = &model.AllocDeploymentStatus{Healthy: healthy}
		if !*healthy {
			a.ClientDescription = "task t failed its check"
		}
	}
	if v == 2 {
		a.DeploymentID = reconcile.DeploymentID("", "web", 2)
	}
	if _, err := w.st.ForNode(node).PutAlloc(w.ctx, a); err != nil {
		w.t.Fatal(err)
	}
}

func (w *rolloutWorld) run(args ...string) (string, string, int) {
	w.t.Helper()
	return cli(w.t, append(args, w.flags...)...)
}

func (w *rolloutWorld) stored(v uint64) *model.Deployment {
	w.t.Helper()
	d, _, err := w.st.GetDeployment(w.ctx, "", "web", v)
	if err != nil {
		w.t.Fatal(err)
	}
	return d
}

func ptr[T any](v T) *T { return &v }

func TestPromoteIsRefusedWithTheCoresReasonUntilTheCanariesAreHealthy(t *testing.T) {
	w := newRolloutWorld(t)
	w.alloc("b-n1", "n1", 2, ptr(true)) // one of two canaries healthy
	out, errs, code := w.run("deployment", "promote", "web")
	if code != 1 || !strings.Contains(errs, "group g has 1/2 healthy canaries") {
		t.Fatalf("promote with 1/2 healthy canaries: exit %d\n%s\n%s", code, out, errs)
	}
	if d := w.stored(2); d.TaskGroups["g"].Promoted {
		t.Fatal("a refused promotion was written")
	}
	_, errs, code = w.run("deployment", "promote", "--group", "nosuch", "web")
	if code != 1 || !strings.Contains(errs, `no group "nosuch"`) {
		t.Fatalf("promote of an unknown group: exit %d %s", code, errs)
	}
	// Control: with both canaries healthy the same command promotes, by
	// the CLI, at the server's time.
	w.alloc("b-n2", "n2", 2, ptr(true))
	before := time.Now().Add(-time.Minute)
	out, errs, code = w.run("deployment", "promote", "--group", "g", "1de8") // a deployment ID prefix
	if code != 0 {
		t.Fatalf("promote: exit %d\n%s\n%s", code, out, errs)
	}
	d := w.stored(2)
	g := d.TaskGroups["g"]
	if !g.Promoted || g.PromotedBy != "cli" || g.PromotedAt.Before(before) || d.Nonce == "" {
		t.Fatalf("stored after promote: %+v nonce %q", g, d.Nonce)
	}
	if g.RequireProgressBy.IsZero() || d.StatusDescription != model.DescRunning {
		t.Fatalf("promotion did not restart the deadline or the description: %+v %q", g, d.StatusDescription)
	}
	// Promoting again has nothing to do.
	if out, _, code = w.run("deployment", "promote", "web"); code != 0 || !strings.Contains(out, "nothing to do") {
		t.Fatalf("second promote: exit %d %s", code, out)
	}
}

func TestPauseResumeAndFailMoveTheRecordByTheCoresRules(t *testing.T) {
	w := newRolloutWorld(t)
	out, errs, code := w.run("deployment", "pause", "web")
	if code != 0 || w.stored(2).Status != model.DeploymentPaused || w.stored(2).PausedAt.IsZero() {
		t.Fatalf("pause: exit %d %s %s %+v", code, out, errs, w.stored(2))
	}
	if out, _, code = w.run("deployment", "pause", "web"); code != 0 || !strings.Contains(out, "nothing to do") {
		t.Fatalf("pause again: exit %d %s", code, out)
	}
	if _, errs, code = w.run("deployment", "resume", "web@2"); code != 0 || w.stored(2).Status != model.DeploymentRunning {
		t.Fatalf("resume: exit %d %s", code, errs)
	}
	if ev := w.stored(2).Events; len(ev) < 2 || ev[len(ev)-1].Kind != model.EventResumed {
		t.Fatalf("events: %+v", ev)
	}
	out, errs, code = w.run("deployment", "fail", "web")
	d := w.stored(2)
	if code != 0 || d.Status != model.DeploymentFailed || d.StatusDescription != model.DescFailedByUser {
		t.Fatalf("fail: exit %d %s %s %+v", code, out, errs, d)
	}
	// auto_revert: the revert is pending to the newest stable version.
	if d.Revert == nil || d.Revert.Status != model.RevertPending || d.Revert.ToVersion != 1 || !strings.Contains(out, "rolling back to version 1") {
		t.Fatalf("revert after fail: %+v\n%s", d.Revert, out)
	}
	// A terminal record is final: resume is refused with the core's reason.
	if _, errs, code = w.run("deployment", "resume", "web"); code != 1 || !strings.Contains(errs, "is failed, not paused") {
		t.Fatalf("resume of a failed deployment: exit %d %s", code, errs)
	}
}

func TestRolloutCommandsExitTwoOnBadUsageWithTheUsageLine(t *testing.T) {
	w := newRolloutWorld(t)
	for _, args := range [][]string{
		{"deployment", "promote"},
		{"deployment", "promote", "a", "b"},
		{"deployment", "pause", "--bogus", "web"},
		{"job", "revert", "web"},
		{"job", "revert", "web", "x"},
		{"job", "run"},
		{"job", "history", "--bogus", "web"},
		{"deployment", "status", "a", "b"},
		{"deployment", "status", "--watch=maybe", "web"},
		{"reconcile", "--rollout", "extra"},
	} {
		if _, errs, code := w.run(args...); code != 2 || !strings.Contains(errs, "usage:") {
			t.Errorf("%v: exit %d, %s", args, code, errs)
		}
	}
	for _, args := range [][]string{
		{"deployment", "fail", "nosuchjob"},
		{"job", "revert", "nosuchjob", "1"},
		{"job", "revert", "web", "9"},
	} {
		if _, errs, code := w.run(args...); code != 2 {
			t.Errorf("%v: exit %d, %s", args, code, errs)
		}
	}
	// Control: a well-formed command on the same fleet succeeds.
	if _, errs, code := w.run("deployment", "pause", "web"); code != 0 {
		t.Fatalf("pause: exit %d %s", code, errs)
	}
}

func TestJobRevertWritesTheRecordedSpecAsTheNextVersionAndHistoryShowsIt(t *testing.T) {
	w := newRolloutWorld(t)
	out, errs, code := w.run("job", "revert", "web", "1")
	if code != 0 || !strings.Contains(out, "version 3 written (revert of version 1)") {
		t.Fatalf("revert: exit %d %s %s", code, out, errs)
	}
	cur, _, err := w.st.GetJob(w.ctx, "", "web")
	if err != nil || cur.Version != 3 || cur.RevertOf == nil || *cur.RevertOf != 1 || !model.SameSpec(cur, w.job(1, "1h")) {
		t.Fatalf("job after revert: %+v %v", cur, err)
	}
	if v3, err := w.st.GetJobVersion(w.ctx, "", "web", 3); err != nil || v3.RevertOf == nil {
		t.Fatalf("version 3 not recorded: %+v %v", v3, err)
	}
	// The job already runs version 1's spec: a second revert is refused.
	if _, errs, code = w.run("job", "revert", "web", "1"); code != 1 || !strings.Contains(errs, "already runs the spec of version 1") {
		t.Fatalf("second revert: exit %d %s", code, errs)
	}
	out, _, code = w.run("job", "history", "web")
	if code != 0 {
		t.Fatalf("history: exit %d", code)
	}
	lines := strings.Split(out, "\n")
	if !strings.Contains(lines[0], "Stable") {
		t.Fatalf("no Stable column: %s", out)
	}
	row := func(v string) []string {
		for _, l := range lines[1:] {
			if f := strings.Fields(l); len(f) > 2 && f[2] == v {
				return f
			}
		}
		t.Fatalf("no version %s in\n%s", v, out)
		return nil
	}
	if r := row("1"); r[4] != "yes" {
		t.Fatalf("version 1 (successful) not stable: %v", r)
	}
	if r := row("2"); r[4] != "no" {
		t.Fatalf("version 2 (running) shown stable: %v", r)
	}
	if r := row("3"); !strings.Contains(strings.Join(r, " "), "revert of version 1") {
		t.Fatalf("version 3 not marked a revert: %v", r)
	}
}

func TestJobRunRecordsEveryVersionItWrites(t *testing.T) {
	w := newRolloutWorld(t)
	if _, errs, code := w.run("job", "run", "--detach", w.jobFile("9h")); code != 0 {
		t.Fatalf("run: exit %d %s", code, errs)
	}
	j, err := w.st.GetJobVersion(w.ctx, "", "web", 3)
	if err != nil || j.Groups[0].Tasks[0].Config["run_for"] != "9h" {
		t.Fatalf("version 3 as recorded: %+v %v", j, err)
	}
	// Control: an unchanged spec writes no version.
	if out, _, code := w.run("job", "run", "--detach", w.jobFile("9h")); code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("rerun: exit %d %s", code, out)
	}
	if _, err := w.st.GetJobVersion(w.ctx, "", "web", 4); err == nil {
		t.Fatal("an unchanged spec recorded a version")
	}
}

// A run that wrote its version and lost the record (the job_versions
// stream's leader gone between the two writes, as when a host dies) is
// repaired by running the same file again: the rerun writes no version
// and records the one in force.
func TestJobRunOfAnUnchangedSpecRecordsTheVersionInForceWhenItsRecordIsMissing(t *testing.T) {
	w := newRolloutWorld(t)
	if _, errs, code := w.run("job", "run", "--detach", w.jobFile("9h")); code != 0 {
		t.Fatalf("run: exit %d %s", code, errs)
	}
	key := wanted.JobVersionKey("", "web", 3)
	if err := w.st.JobVersions.Purge(w.ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.JobVersions.Get(w.ctx, key); err == nil {
		t.Fatal("control: version 3's record still readable after the purge")
	}
	out, errs, code := w.run("job", "run", "--detach", w.jobFile("9h"))
	if code != 0 || !strings.Contains(out, "unchanged (version 3 in force)") {
		t.Fatalf("rerun: exit %d %s %s", code, out, errs)
	}
	e, err := w.st.JobVersions.Get(w.ctx, key)
	if err != nil {
		t.Fatalf("version 3 not recorded by the rerun: %v", err)
	}
	j, err := wanted.DecodeJobVersion(key, e.Value())
	if err != nil || j.Version != 3 || j.Groups[0].Tasks[0].Config["run_for"] != "9h" {
		t.Fatalf("version 3 as recorded by the rerun: %+v %v", j, err)
	}
	if _, err := w.st.GetJobVersion(w.ctx, "", "web", 4); err == nil {
		t.Fatal("the rerun recorded a version it did not write")
	}
}

// groupLines are the aggregate's lines from "  group" up to "  steward".
func groupLines(t *testing.T, out string) string {
	t.Helper()
	i := strings.Index(out, "  group g:")
	j := strings.Index(out, "  steward:")
	if i < 0 || j < i {
		t.Fatalf("no aggregate in\n%s", out)
	}
	return out[i:j]
}

func TestJobRunAndDeploymentStatusShowTheSameDerivedAggregateAndExitOnHealthyCanaries(t *testing.T) {
	w := newRolloutWorld(t)
	w.alloc("b-n1", "n1", 2, ptr(true))
	w.alloc("a-n3", "n3", 1, ptr(false)) // an old allocation: never counted as the version's
	// One canary healthy: job run does not stop at "waiting for manual
	// promotion" (it would hang the operator on an unpromotable rollout).
	out, errs, code := w.run("job", "run", "--timeout", "3s", w.jobFile("2h"))
	if code != 1 || !strings.Contains(errs, "gave up") || strings.Contains(out, "deployment promote") {
		t.Fatalf("job run with 1/2 healthy canaries: exit %d\n%s\n%s", code, out, errs)
	}
	st, _, code := w.run("deployment", "status", "web")
	if code != 0 {
		t.Fatalf("status: exit %d", code)
	}
	want := []string{"canaries 1/2 healthy on n1, n2 (canary policy default: chose 2 of 3 ready nodes (50%))",
		"promoted no; updated 2/3 (healthy 1); in flight 1/1 (n2); waiting 0; outdated 2", "steward: "}
	for _, s := range want {
		if !strings.Contains(st, s) {
			t.Fatalf("status lacks %q:\n%s", s, st)
		}
	}
	// The same function: job run printed exactly these group lines.
	if a, b := groupLines(t, st), groupLines(t, out[strings.LastIndex(out, "deployment 1de85714"):]); a != b {
		t.Fatalf("status and job run differ:\n%s\n---\n%s", a, b)
	}
	// Control: both canaries healthy: job run exits 0 printing the exact
	// promote command.
	w.alloc("b-n2", "n2", 2, ptr(true))
	out, errs, code = w.run("job", "run", "--timeout", "30s", w.jobFile("2h"))
	if code != 0 || !strings.Contains(out, "waiting for manual promotion: hivelet deployment promote web") ||
		!strings.Contains(out, "canaries 2/2 healthy") {
		t.Fatalf("job run with healthy canaries: exit %d\n%s\n%s", code, out, errs)
	}
	if out, _, code = w.run("deployment", "status", "--watch", "--timeout", "30s", "web"); code != 0 || !strings.Contains(out, "hivelet deployment promote web") {
		t.Fatalf("status -watch: exit %d\n%s", code, out)
	}
}

func TestJobRunExitsOneOnFailureSayingWhereItRolledBackTo(t *testing.T) {
	w := newRolloutWorld(t)
	if _, _, err := w.st.ModifyDeployment(w.ctx, "", "web", 2, 0, func(cur model.Deployment) (*model.Deployment, error) {
		cur.Status, cur.StatusDescription = model.DeploymentFailed, model.DescFailedAllocations
		cur.Revert = &model.DeploymentRevert{Status: model.RevertDone, ToVersion: 1, AsVersion: 3}
		return &cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	out, errs, code := w.run("job", "run", "--timeout", "30s", w.jobFile("2h"))
	if code != 1 || !strings.Contains(out, "rolled back to the spec of version 1 as version 3") {
		t.Fatalf("job run of a failed deployment: exit %d\n%s\n%s", code, out, errs)
	}
	if out, _, code = w.run("deployment", "status", "--watch", "web@2"); code != 1 || !strings.Contains(out, "as version 3") {
		t.Fatalf("status -watch of a failed deployment: exit %d\n%s", code, out)
	}
	// Control: a read without -watch is a successful read.
	if _, _, code = w.run("deployment", "status", "web@2"); code != 0 {
		t.Fatalf("status: exit %d", code)
	}
}
