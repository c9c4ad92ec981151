package policies

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// TestEveryFaultKindFallsBackToTheNativeDefaultAndIsReported runs one real
// hostile module per fault kind through the engine's CanaryChooser and
// CompletionDecider. Each must: answer exactly the native default, report
// one fault of the right kind (hook, metric), and leave the engine working:
// the same engine then evaluates a well-behaved module (the control), whose
// answer must come from the module, not the fallback.
func TestEveryFaultKindFallsBackToTheNativeDefaultAndIsReported(t *testing.T) {
	hostile := goGuest(t, "testdata/hostile")
	raw := watModule(t, "raw")
	cases := []struct {
		name       string
		wasm       []byte
		completion bool
		do         string
		want       FaultKind
		atLoad     bool
		control    []byte // a well-behaved module for the control call
		controlDo  string
	}{
		{name: "go panic traps", wasm: hostile, do: "panic", want: FaultTrap, control: hostile},
		{name: "go panic in completion traps", wasm: hostile, completion: true, do: "panic", want: FaultTrap, control: hostile},
		{name: "wat unreachable traps", wasm: watModule(t, "trap"), want: FaultTrap, control: raw},
		{name: "go infinite loop hits the deadline", wasm: hostile, do: "loop", want: FaultDeadline, control: hostile},
		{name: "wat infinite loop hits the deadline", wasm: watModule(t, "loop"), want: FaultDeadline, control: raw},
		{name: "go allocation past the cap", wasm: hostile, do: "hoard", want: FaultMemory, control: hostile},
		{name: "wat memory.grow past the cap", wasm: watModule(t, "grow"), want: FaultMemory, control: raw},
		{name: "declared memory over the cap", wasm: watModule(t, "bigmem"), want: FaultMemory, atLoad: true, control: raw},
		{name: "missing canary export", wasm: watModule(t, "noexport"), want: FaultMissingExport, atLoad: true, control: raw},
		{name: "not a policy module", wasm: minimalModule, want: FaultMissingExport, atLoad: true, control: raw},
		{name: "other ABI version", wasm: watModule(t, "abi9"), want: FaultABIVersion, atLoad: true, control: raw},
		{name: "unknown node ID", wasm: hostile, do: "unknown", want: FaultInvalidOutput, control: hostile},
		{name: "duplicate node ID", wasm: hostile, do: "duplicate", want: FaultInvalidOutput, control: hostile},
		{name: "more canaries than asked", wasm: hostile, do: "toomany", want: FaultInvalidOutput, control: hostile},
		{name: "an existing canary is not eligible", wasm: hostile, do: "existing", want: FaultInvalidOutput, control: hostile},
		{name: "fewer than asked without a reason", wasm: hostile, do: "fewer", want: FaultInvalidOutput, control: hostile},
		{name: "answer out of bounds", wasm: watModule(t, "outofbounds"), want: FaultInvalidOutput, control: raw},
		{name: "undefined status byte", wasm: watModule(t, "badstatus"), want: FaultInvalidOutput, control: raw},
		{name: "unknown decision", wasm: hostile, completion: true, do: "unknown-decision", want: FaultInvalidOutput, control: hostile},
		{name: "revert without fail", wasm: hostile, completion: true, do: "revert-without-fail", want: FaultInvalidOutput, control: hostile},
		{name: "revert without auto_revert", wasm: hostile, completion: true, do: "revert-without-auto-revert", want: FaultInvalidOutput, control: hostile},
		{name: "not a wasm module at all", wasm: []byte("#!/bin/sh\necho hi\n"), want: FaultLoad, atLoad: true, control: raw},
	}
	nodes := genNodes(20, 3)
	existing := []string{"node-000000-0a1b2c3d"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The deadline under test is the default 100 ms; the other
			// kinds get a minute so that a loaded machine cannot turn
			// them into deadline faults (growing memory to the cap, 16 MiB
			// in 1 MiB steps, once took 2.5 s beside the rest of the
			// suite, and 10.3 s in a .ci/run, which failed on it).
			deadline := time.Minute
			if tc.want == FaultDeadline {
				deadline = 100 * time.Millisecond
			}
			e, faults, reg := newTestEngine(t, Options{MemoryLimitPages: 256, Deadline: deadline})
			ctx := context.Background()
			_, err := e.Load(ctx, "suspect", "", tc.wasm)
			if tc.atLoad {
				f, ok := AsFault(err)
				if !ok || f.Kind != tc.want {
					t.Fatalf("Load: got %v, want a %s fault", err, tc.want)
				}
				if tc.want == FaultABIVersion && !(strings.Contains(f.Reason, "version 9") && strings.Contains(f.Reason, "versions 1 to 2")) {
					t.Errorf("the ABI refusal must name both versions: %q", f.Reason)
				}
			} else if err != nil {
				t.Fatalf("Load: %v", err)
			}
			ref := &model.PolicyRef{Name: "suspect", Params: map[string]string{"do": tc.do}}
			loadFaults := len(faults.all())
			start := time.Now()
			if tc.completion {
				in := genCompletion(3, time.Unix(1_800_000_000, 0))
				in.Policy = ref
				in.Deployment.TaskGroups["group-01"].AutoRevert = false
				for _, s := range in.Deployment.TaskGroups {
					s.AutoRevert = false
				}
				got, err := e.DecideCompletion(context.Background(), in)
				want := NativeCompletion(in)
				if err != nil || got.Decision != want.Decision || got.Revert != want.Revert {
					t.Fatalf("got %+v, %v; want the native default %+v", got, err, want)
				}
			} else {
				req := canaryReq(nodes[1:], 3, ref)
				req.Existing = existing
				got, err := e.ChooseCanaries(context.Background(), req)
				if want := NativeCanary(req); err != nil || !slices.Equal(got.NodeIDs, want.NodeIDs) {
					t.Fatalf("got %+v, %v; want the native default %v", got, err, want.NodeIDs)
				}
			}
			if took := time.Since(start); took > max(2*time.Second, deadline) {
				t.Errorf("the faulty decision took %v (deadline %v)", took, deadline)
			}
			all := faults.all()
			if len(all) != loadFaults+1 {
				t.Fatalf("got faults %v, want exactly one more than the %d at load", all, loadFaults)
			}
			f := all[len(all)-1]
			decision := "canary"
			if tc.completion {
				decision = "completion"
			}
			if f.Kind != tc.want || f.Decision != decision || f.Policy != "suspect" || f.DeploymentID != "d-7f3a" {
				t.Fatalf("got fault %+v, want kind %s for decision %s of policy suspect, deployment d-7f3a", f, tc.want, decision)
			}
			if !tc.atLoad && f.Digest != Digest(tc.wasm) {
				t.Errorf("fault digest %q, want the module's %q", f.Digest, Digest(tc.wasm))
			}
			if n := counterValue(t, reg, "hivelet_policy_faults_total", map[string]string{"decision": decision, "kind": string(tc.want)}); n != 1 {
				t.Errorf("hivelet_policy_faults_total{decision=%s,kind=%s} = %v, want 1", decision, tc.want, n)
			}

			// Control: the same engine answers from a well-behaved module.
			if _, err := e.Load(ctx, "control", "", tc.control); err != nil {
				t.Fatalf("loading the control: %v", err)
			}
			cref := &model.PolicyRef{Name: "control", Params: map[string]string{"do": tc.controlDo}}
			if tc.completion {
				in := genCompletion(3, time.Unix(1_800_000_000, 0))
				in.Policy = cref
				got, err := e.DecideCompletion(context.Background(), in)
				if err != nil || got.Reason != "well behaved" {
					t.Fatalf("control: got %+v, %v; want the module's answer", got, err)
				}
			} else {
				got, err := e.ChooseCanaries(context.Background(), canaryReq(nodes, 3, cref))
				if err != nil || strings.HasPrefix(got.Reason, "policy fault") || len(got.NodeIDs) != 3 {
					t.Fatalf("control: got %+v, %v; want the module's answer", got, err)
				}
			}
			if n := len(faults.all()); n != len(all) {
				t.Fatalf("the control reported faults: %v", faults.all()[len(all):])
			}
		})
	}
}

// minimalModule is the smallest valid WASM module: no exports at all.
var minimalModule = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

// TestATrappedInstanceIsDiscardedAndTheNextCallStartsClean: after a panic,
// the module keeps working from a fresh instance whose state is the
// post-initialisation state.
func TestATrappedInstanceIsDiscardedAndTheNextCallStartsClean(t *testing.T) {
	e, _, _ := newTestEngine(t, Options{PoolSize: 1})
	m, err := e.Load(context.Background(), "hostile", "", goGuest(t, "testdata/hostile"))
	if err != nil {
		t.Fatal(err)
	}
	nodes := genNodes(5, 1)
	_, err = m.Canary(context.Background(), canaryReq(nodes, 2, &model.PolicyRef{Name: "hostile", Params: map[string]string{"do": "panic"}}))
	if f, ok := AsFault(err); !ok || f.Kind != FaultTrap {
		t.Fatalf("got %v, want a trap", err)
	}
	for range 3 {
		got, err := m.Canary(context.Background(), canaryReq(nodes, 2, &model.PolicyRef{Name: "hostile"}))
		if err != nil || got.Reason != "well behaved; calls=1" {
			t.Fatalf("after the trap: got %+v, %v; want a clean answer", got, err)
		}
	}
}

// TestAModuleCannotKeepStateBetweenEvaluations: the hostile module counts
// its calls in a global and answers a different node each call if the
// counter survives. Through the engine every answer is the first call's;
// the control calls the same instance twice without the restore and sees
// the counter move, so the module really does try to keep state.
func TestAModuleCannotKeepStateBetweenEvaluations(t *testing.T) {
	e, _, _ := newTestEngine(t, Options{PoolSize: 1})
	m, err := e.Load(context.Background(), "hostile", "", goGuest(t, "testdata/hostile"))
	if err != nil {
		t.Fatal(err)
	}
	nodes := genNodes(5, 1)
	ref := &model.PolicyRef{Name: "hostile", Params: map[string]string{"do": "state"}}
	req := canaryReq(nodes, 1, ref)
	for i := range 20 {
		got, err := m.Canary(context.Background(), req)
		if err != nil || got.Reason != "calls=1" || got.NodeIDs[0] != nodes[0].ID {
			t.Fatalf("evaluation %d: got %+v, %v; want calls=1 on %s", i, got, err, nodes[0].ID)
		}
	}
	// Control: the same instance, called twice with no restore in between.
	inst, err := m.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fields, attr, meta := m.Manifest.keys(ref.Params, nodes)
	input := appendCanaryInput(nil, &req, fields, attr, meta)
	// Without the restore, the buffer allocated before the snapshot may not
	// be reused (docs/policy-abi.md): allocate per call.
	inst.inCap = 0
	var reasons []string
	for range 2 {
		raw, err := m.call(context.Background(), inst, inst.canary, exportCanary, input, time.Unix(0, 0), 1)
		if err != nil {
			t.Fatal(err)
		}
		reasons = append(reasons, string(raw))
	}
	m.release(inst, true)
	if !strings.Contains(reasons[0], "calls=1") || !strings.Contains(reasons[1], "calls=2") {
		t.Fatalf("control: without the restore the counter must move; answers %q", reasons)
	}
}

// TestADecisionNamingAnUnloadedOrWrongKindPolicyFallsBack covers the
// resolution faults, with a control that resolves.
func TestADecisionNamingAnUnloadedOrWrongKindPolicyFallsBack(t *testing.T) {
	e, faults, _ := newTestEngine(t, Options{})
	loadBuiltin(t, e, "percent")
	loadBuiltin(t, e, "default")
	nodes := genNodes(10, 2)
	for _, tc := range []struct {
		ref  *model.PolicyRef
		want FaultKind
	}{
		{&model.PolicyRef{Name: "nope"}, FaultNotLoaded},
		{&model.PolicyRef{Name: "builtin:default"}, FaultNotLoaded}, // a completion policy
		{&model.PolicyRef{Name: "percent", Digest: strings.Repeat("ab", 32)}, FaultNotLoaded},
	} {
		before := len(faults.all())
		got, _ := e.ChooseCanaries(context.Background(), canaryReq(nodes, 2, tc.ref))
		all := faults.all()
		if len(all) != before+1 || all[len(all)-1].Kind != tc.want || !strings.HasPrefix(got.Reason, "policy fault") {
			t.Fatalf("%+v: got %+v and faults %v, want a %s fallback", tc.ref, got, all[before:], tc.want)
		}
	}
	before := len(faults.all())
	got, err := e.ChooseCanaries(context.Background(), canaryReq(nodes, 2, &model.PolicyRef{Name: "builtin:percent"}))
	if err != nil || len(faults.all()) != before || strings.HasPrefix(got.Reason, "policy fault") {
		t.Fatalf("control: got %+v, %v, faults %v", got, err, faults.all()[before:])
	}
}

// TestGuestOutputIsLoggedSizeLimitedAndTagged: a module printing 1,000
// lines gets its first OutputLimit bytes logged with its digest, and the
// rest reported as dropped; the control prints nothing.
func TestGuestOutputIsLoggedSizeLimitedAndTagged(t *testing.T) {
	var logs testutil.SyncBuffer
	e, _, _ := newTestEngine(t, Options{OutputLimit: 256, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	wasm := goGuest(t, "testdata/hostile")
	m, err := e.Load(context.Background(), "hostile", "", wasm)
	if err != nil {
		t.Fatal(err)
	}
	nodes := genNodes(5, 1)
	if _, err := m.Canary(context.Background(), canaryReq(nodes, 1, &model.PolicyRef{Name: "x"})); err != nil {
		t.Fatal(err)
	}
	e.resets.Wait()
	if strings.Contains(logs.String(), "policy output") {
		t.Fatalf("control printed: %s", logs.String())
	}
	if _, err := m.Canary(context.Background(), canaryReq(nodes, 1, &model.PolicyRef{Name: "x", Params: map[string]string{"do": "print"}})); err != nil {
		t.Fatal(err)
	}
	e.resets.Wait()
	out := logs.String()
	lines := strings.Count(out, "hostile output line")
	if lines == 0 || lines > 20 || !strings.Contains(out, "policy_digest="+Digest(wasm)) || !strings.Contains(out, "dropped_bytes=") {
		t.Fatalf("got %d logged lines, want a few tagged with the digest and a drop notice:\n%.2000s", lines, out)
	}
}

// TestWaitersGetAnInstanceWhenABusyOneIsDiscarded: with a pool of one, a
// call waiting for the only instance proceeds when that instance traps and
// is discarded (it must not wait forever for it to come back).
func TestWaitersGetAnInstanceWhenABusyOneIsDiscarded(t *testing.T) {
	e, _, _ := newTestEngine(t, Options{PoolSize: 1, Deadline: time.Second})
	m, err := e.Load(context.Background(), "hostile", "", goGuest(t, "testdata/hostile"))
	if err != nil {
		t.Fatal(err)
	}
	nodes := genNodes(5, 1)
	looping := make(chan error, 1)
	go func() {
		_, err := m.Canary(context.Background(), canaryReq(nodes, 1, &model.PolicyRef{Name: "h", Params: map[string]string{"do": "loop"}}))
		looping <- err
	}()
	// The looping call holds the only instance (the pool's one slot is
	// taken and nothing is idle) before the second call starts, so the
	// second must wait for it rather than take it first.
	testutil.Eventually(t, 10*time.Second, "the looping call to take the only instance", func() bool {
		return m.live.Load() == 1 && len(m.idle) == 0
	})
	done := make(chan error, 1)
	go func() {
		_, err := m.Canary(context.Background(), canaryReq(nodes, 1, &model.PolicyRef{Name: "h"}))
		done <- err
	}()
	testutil.Eventually(t, 10*time.Second, "the second call to wait for an instance", func() bool { return m.Waiting() == 1 })
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the waiting call: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting call never got an instance")
	}
	if f, ok := AsFault(<-looping); !ok || f.Kind != FaultDeadline {
		t.Fatalf("the looping call: %v", f)
	}
}

// TestTheSandboxGivesNoFilesNetworkEnvironmentOrArguments: a module trying
// each gets nothing. The control is the same module's well-behaved answer
// through the same engine (so the module does run and report).
func TestTheSandboxGivesNoFilesNetworkEnvironmentOrArguments(t *testing.T) {
	e, faults, _ := newTestEngine(t, Options{})
	m, err := e.Load(context.Background(), "hostile", "", goGuest(t, "testdata/hostile"))
	if err != nil {
		t.Fatal(err)
	}
	nodes := genNodes(3, 1)
	got, err := m.Canary(context.Background(), canaryReq(nodes, 1, &model.PolicyRef{Name: "h", Params: map[string]string{"do": "escape"}}))
	if err != nil {
		t.Fatal(err)
	}
	if want := "file=false dir=false net=false env=0 args=0"; got.Reason != want {
		t.Fatalf("the module reached %q, want %q", got.Reason, want)
	}
	control, err := m.Canary(context.Background(), canaryReq(nodes, 1, &model.PolicyRef{Name: "h"}))
	if err != nil || !strings.HasPrefix(control.Reason, "well behaved") || len(faults.all()) != 0 {
		t.Fatalf("control: %+v %v %v", control, err, faults.all())
	}
}

// TestRandomnessAndTheClockAreFunctionsOfTheInput: the same input gives the
// same random bytes and wall clock; another deployment gives other random
// bytes (the control: the source is not constant); a completion decision
// sees its input's now.
func TestRandomnessAndTheClockAreFunctionsOfTheInput(t *testing.T) {
	e, _, _ := newTestEngine(t, Options{PoolSize: 1})
	m, err := e.Load(context.Background(), "hostile", "", goGuest(t, "testdata/hostile"))
	if err != nil {
		t.Fatal(err)
	}
	nodes := genNodes(3, 1)
	ref := &model.PolicyRef{Name: "h", Params: map[string]string{"do": "random"}}
	a, err1 := m.Canary(context.Background(), canaryReq(nodes, 1, ref))
	b, err2 := m.Canary(context.Background(), canaryReq(nodes, 1, ref))
	other := canaryReq(nodes, 1, ref)
	other.DeploymentID = "d-other"
	c, err3 := m.Canary(context.Background(), other)
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	if a.Reason != b.Reason || !strings.HasSuffix(a.Reason, " 1970-01-01T00:00:00Z") {
		t.Fatalf("same input, different randomness or clock: %q vs %q", a.Reason, b.Reason)
	}
	if strings.Fields(c.Reason)[0] == strings.Fields(a.Reason)[0] {
		t.Fatalf("control: another deployment drew the same random bytes %q", c.Reason)
	}
	now := time.Date(2027, 3, 4, 5, 6, 7, 8, time.UTC)
	in := genCompletion(2, now)
	in.Policy = &model.PolicyRef{Name: "h", Params: map[string]string{"do": "clock"}}
	d, err := m.Completion(context.Background(), in)
	if err != nil || d.Reason != now.Format(time.RFC3339Nano) {
		t.Fatalf("the module's clock read %q, want the input's now %s (%v)", d.Reason, now.Format(time.RFC3339Nano), err)
	}
}

// TestTheDefaultLimitsAre64MiBAnd100ms pins the documented defaults.
func TestTheDefaultLimitsAre64MiBAnd100ms(t *testing.T) {
	var o Options
	o.defaults()
	if o.MemoryLimitPages*wasmPage != 64<<20 || o.Deadline != 100*time.Millisecond {
		t.Fatalf("defaults: %d pages, %v", o.MemoryLimitPages, o.Deadline)
	}
}
