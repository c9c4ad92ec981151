package policies

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// embeddedJetStream starts an in-process NATS server with JetStream and
// returns a JetStream context on an in-process connection to it.
func embeddedJetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	srv := testutil.StartNATS(t, &server.Options{JetStream: true, StoreDir: t.TempDir()})
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestPushedPoliciesReachAnAgentVerifiedAndCached: push, list, fetch by
// name and by pinned digest, load through Ensure, and serve from the cache.
func TestPushedPoliciesReachAnAgentVerifiedAndCached(t *testing.T) {
	ctx := context.Background()
	js := embeddedJetStream(t)
	cache := t.TempDir()
	s := NewStore(js, "", cache)
	raw := watModule(t, "raw")
	if got, err := s.List(ctx); err != nil || len(got) != 0 {
		t.Fatalf("empty bucket: %v %v", got, err)
	}
	sp, err := s.Push(ctx, "first-nodes", raw)
	if err != nil || sp.Digest != Digest(raw) {
		t.Fatalf("push: %+v %v", sp, err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "first-nodes" || list[0].Digest != Digest(raw) || list[0].Size != uint64(len(raw)) {
		t.Fatalf("list: %+v %v", list, err)
	}
	e, faults, _ := newTestEngine(t, Options{})
	ref := &model.PolicyRef{Name: "first-nodes", Digest: "sha256:" + Digest(raw)}
	if err := s.Ensure(ctx, e, ref); err != nil {
		t.Fatal(err)
	}
	got, err := e.ChooseCanaries(context.Background(), canaryReq(genNodes(10, 2), 2, ref))
	if err != nil || got.Reason != "first nodes as sent (raw WAT)" || len(faults.all()) != 0 {
		t.Fatalf("decision: %+v %v %v", got, err, faults.all())
	}
	if b, err := os.ReadFile(filepath.Join(cache, Digest(raw)+".wasm")); err != nil || string(b) != string(raw) {
		t.Fatalf("not cached: %v", err)
	}
	// A new version under the same name; the pinned digest still fetches
	// the old bytes, the bare name the new ones.
	other := watModule(t, "trap")
	if _, err := s.Push(ctx, "first-nodes", other); err != nil {
		t.Fatal(err)
	}
	s2 := NewStore(js, "", t.TempDir()) // another agent, empty cache
	if b, d, err := s2.Fetch(ctx, "first-nodes", Digest(raw)); err != nil || d != Digest(raw) || string(b) != string(raw) {
		t.Fatalf("pinned fetch: %s %v", d, err)
	}
	if _, d, err := s2.Fetch(ctx, "first-nodes", ""); err != nil || d != Digest(other) {
		t.Fatalf("current fetch: %s %v", d, err)
	}
}

// TestATamperedModuleIsRefused: bytes in the bucket that do not match the
// digest they are stored under are refused (and not cached, and not
// loaded); a corrupted cache entry is dropped and refetched. The control
// is the untampered fetch in the same bucket.
func TestATamperedModuleIsRefused(t *testing.T) {
	ctx := context.Background()
	js := embeddedJetStream(t)
	cache := t.TempDir()
	s := NewStore(js, "", cache)
	raw, evil := watModule(t, "raw"), watModule(t, "loop")
	if _, err := s.Push(ctx, "good", raw); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Push(ctx, "victim", raw); err != nil {
		t.Fatal(err)
	}
	// Tamper: replace the content-addressed object with other bytes.
	obs, err := js.ObjectStore(ctx, DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, modulePrefix+Digest(raw), evil); err != nil {
		t.Fatal(err)
	}
	e, faults, _ := newTestEngine(t, Options{})
	ref := &model.PolicyRef{Name: "victim", Digest: Digest(raw)}
	err = s.Ensure(ctx, e, ref)
	if f, ok := AsFault(err); !ok || f.Kind != FaultDigestMismatch {
		t.Fatalf("Ensure: got %v, want a digest mismatch", err)
	}
	if _, err := os.Stat(filepath.Join(cache, Digest(raw)+".wasm")); !os.IsNotExist(err) {
		t.Fatal("the tampered bytes were cached")
	}
	got, _ := e.ChooseCanaries(context.Background(), canaryReq(genNodes(5, 1), 1, ref))
	if all := faults.all(); len(all) < 2 || all[len(all)-1].Kind != FaultDigestMismatch {
		t.Fatalf("decision on the refused module: %+v, faults %v", got, all)
	}
	// Control: the name's current object is intact.
	if b, _, err := s.Fetch(ctx, "good", ""); err != nil || string(b) != string(raw) {
		t.Fatalf("control fetch: %v", err)
	}
	// A corrupted cache entry is not served.
	if err := os.WriteFile(filepath.Join(cache, Digest(raw)+".wasm"), evil, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, ok := s.cached(Digest(raw)); ok || b != nil {
		t.Fatal("a corrupt cache entry was served")
	}
}

// TestEnsureLoadsABuiltinNamedByAJob: a bare built-in name with no pushed
// module of that name loads the built-in (and only it); the control is an
// unknown name, which is not loaded.
func TestEnsureLoadsABuiltinNamedByAJob(t *testing.T) {
	ctx := context.Background()
	s := NewStore(embeddedJetStream(t), "", t.TempDir())
	e, faults, _ := newTestEngine(t, Options{})
	if err := s.Ensure(ctx, e, &model.PolicyRef{Name: "spread", Params: map[string]string{"attribute": "${node.datacenter}"}}); err != nil {
		t.Fatal(err)
	}
	got, err := e.ChooseCanaries(context.Background(), canaryReq(genNodes(9, 3), 3, &model.PolicyRef{Name: "spread", Params: map[string]string{"attribute": "${node.datacenter}"}}))
	if err != nil || len(faults.all()) != 0 || got.Reason != "spread across 3 values of ${node.datacenter}" {
		t.Fatalf("got %+v, %v, faults %v", got, err, faults.all())
	}
	if len(e.builtins) != 1 {
		t.Fatalf("loaded %d built-ins, want only spread", len(e.builtins))
	}
	if err := s.Ensure(ctx, e, &model.PolicyRef{Name: "no-such-policy"}); err == nil {
		t.Fatal("control: an unknown policy was ensured")
	}
}

// TestANamePushedAgainIsEvaluatedAtItsNewDigestAfterTheNextSync: an agent
// that loaded v1 of a name switches to v2's bytes at the next Refresh
// after v2 is pushed (a differing reason proves which bytes answered),
// while a job pinned to v1's digest keeps v1. Control: before the push,
// Refresh changes nothing.
func TestANamePushedAgainIsEvaluatedAtItsNewDigestAfterTheNextSync(t *testing.T) {
	ctx := context.Background()
	js := embeddedJetStream(t)
	s := NewStore(js, "", t.TempDir())
	v1, v2 := watModule(t, "raw"), watModule(t, "immutable")
	const reason1, reason2 = "raw module says continue", "calls=1"
	if _, err := s.Push(ctx, "rollout", v1); err != nil {
		t.Fatal(err)
	}
	// The background follower is off: the syncs are the explicit Refresh
	// calls (TestTheEngineFollowsANamePushedAgainInTheBackground covers it).
	e, faults, _ := newTestEngine(t, Options{FollowInterval: -1})
	byName := &model.PolicyRef{Name: "rollout"}
	pinned := &model.PolicyRef{Name: "rollout", Digest: "sha256:" + Digest(v1)}
	decide := func(ref *model.PolicyRef) string {
		t.Helper()
		in := genCompletion(1, time.Unix(1_700_000_000, 0))
		in.Policy = ref
		d, err := e.DecideCompletion(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return d.Reason
	}
	for _, ref := range []*model.PolicyRef{byName, pinned} {
		if err := s.Ensure(ctx, e, ref); err != nil {
			t.Fatal(err)
		}
	}
	if got := decide(byName); got != reason1 {
		t.Fatalf("v1 by name answered %q, want %q", got, reason1)
	}
	if err := s.Refresh(ctx, e); err != nil || e.Current("rollout") != Digest(v1) {
		t.Fatalf("control: refresh with nothing pushed: %v, current %s", err, e.Current("rollout"))
	}
	if _, err := s.Push(ctx, "rollout", v2); err != nil {
		t.Fatal(err)
	}
	if got := decide(byName); got != reason1 {
		t.Fatalf("before the sync: %q, want v1's %q (decisions never fetch)", got, reason1)
	}
	if err := s.Refresh(ctx, e); err != nil {
		t.Fatal(err)
	}
	if got := decide(byName); got != reason2 || e.Current("rollout") != Digest(v2) {
		t.Fatalf("after the sync by name: %q (current %s), want v2's %q", got, e.Current("rollout"), reason2)
	}
	if got := decide(pinned); got != reason1 {
		t.Fatalf("pinned to v1: %q, want %q", got, reason1)
	}
	// An agent that starts now (Ensure only) evaluates the same bytes.
	e2, _, _ := newTestEngine(t, Options{})
	if err := NewStore(js, "", t.TempDir()).Ensure(ctx, e2, byName); err != nil || e2.Current("rollout") != Digest(v2) {
		t.Fatalf("a new agent: %v, current %s, want v2", err, e2.Current("rollout"))
	}
	// A pinned Ensure after the push does not move the name back.
	e3, _, _ := newTestEngine(t, Options{})
	s3 := NewStore(js, "", t.TempDir())
	for _, ref := range []*model.PolicyRef{byName, pinned} {
		if err := s3.Ensure(ctx, e3, ref); err != nil {
			t.Fatal(err)
		}
	}
	if e3.Current("rollout") != Digest(v2) {
		t.Fatalf("a pinned reference moved the name to %s", e3.Current("rollout"))
	}
	if len(faults.all()) != 0 {
		t.Fatalf("faults: %v", faults.all())
	}
}

// TestBuiltinNamesAreReservedAgainstPushedModules: a push under a
// built-in's bare name is refused and a job naming it runs the built-in
// even if the bucket holds an object of that name (pushed before the rule,
// written directly); a load under it is refused. Control: another name
// pushes and loads.
func TestBuiltinNamesAreReservedAgainstPushedModules(t *testing.T) {
	ctx := context.Background()
	js := embeddedJetStream(t)
	s := NewStore(js, "", t.TempDir())
	raw := watModule(t, "raw")
	for _, name := range []string{"default", "spread", "builtin:quorum"} {
		if _, err := s.Push(ctx, name, raw); err == nil {
			t.Fatalf("push under %q accepted", name)
		}
	}
	if _, err := s.Push(ctx, "my-default", raw); err != nil {
		t.Fatalf("control push: %v", err)
	}
	// A legacy object under a built-in's name, bypassing Push.
	obs, err := js.ObjectStore(ctx, DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: namePrefix + "default", Metadata: map[string]string{metaDigest: Digest(raw)}}, bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	e, _, _ := newTestEngine(t, Options{})
	for _, name := range []string{"default", "my-default"} {
		if err := s.Ensure(ctx, e, &model.PolicyRef{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	builtin, _ := BuiltinWasm("default")
	if got := e.Current("default"); got != Digest(builtin) {
		t.Fatalf("\"default\" resolves to %s, want the built-in %s", got, Digest(builtin))
	}
	if got := e.Current("my-default"); got != Digest(raw) {
		t.Fatalf("control: my-default resolves to %s, want the pushed %s", got, Digest(raw))
	}
	in := genCompletion(1, time.Unix(1_700_000_000, 0))
	in.Policy = &model.PolicyRef{Name: "default"}
	if d, _ := e.DecideCompletion(context.Background(), in); d.Reason == "raw module says continue" {
		t.Fatal("the pushed module shadowed the built-in")
	}
	if _, err := e.Load(ctx, "quorum", "", raw); err == nil {
		t.Fatal("a custom module loaded under a built-in's name")
	}
}

// TestTheEngineFollowsANamePushedAgainInTheBackground: with no call from
// the agent after Ensure, the engine's follower switches a name-only
// reference to the version pushed next, within a few intervals; a job
// pinned to v1 keeps v1. Control: before the push, the name answers v1.
func TestTheEngineFollowsANamePushedAgainInTheBackground(t *testing.T) {
	ctx := context.Background()
	js := embeddedJetStream(t)
	s := NewStore(js, "", t.TempDir())
	v1, v2 := watModule(t, "raw"), watModule(t, "immutable")
	if _, err := s.Push(ctx, "rollout", v1); err != nil {
		t.Fatal(err)
	}
	e, _, _ := newTestEngine(t, Options{FollowInterval: 20 * time.Millisecond})
	byName := &model.PolicyRef{Name: "rollout"}
	pinned := &model.PolicyRef{Name: "rollout", Digest: Digest(v1)}
	for _, ref := range []*model.PolicyRef{byName, pinned} {
		if err := s.Ensure(ctx, e, ref); err != nil {
			t.Fatal(err)
		}
	}
	decide := func(ref *model.PolicyRef) string {
		in := genCompletion(1, time.Unix(1_700_000_000, 0))
		in.Policy = ref
		d, _ := e.DecideCompletion(context.Background(), in)
		return d.Reason
	}
	if got := decide(byName); got != "raw module says continue" {
		t.Fatalf("control: v1 answered %q", got)
	}
	if _, err := s.Push(ctx, "rollout", v2); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the name to answer with the pushed module", func() bool { return decide(byName) == "calls=1" })
	if got := decide(pinned); got != "raw module says continue" {
		t.Fatalf("pinned to v1: %q", got)
	}
}
