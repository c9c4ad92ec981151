package policies

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/internal/policywire"
)

// The fuzz targets of this file put arbitrary bytes where a policy module's
// answers are: through the real engine (wazero, the pool, the restore), a
// guest whose answer is whatever the fuzzer chose, and check what the
// reconciler is promised:
//   - any answer yields either the module's choice, valid within the
//     request's bounds (a canary set of distinct eligible nodes, no more than
//     asked, with a reason when fewer; a known completion verdict, revert
//     only with fail and only when a group has auto_revert), or a fault of
//     kind invalid_output or policy_error, reported once, after which the
//     answer is exactly the native default, its reason prefixed;
//   - never a panic, never a node outside the candidates;
//   - the handshake (ABI version, kinds, manifest) of a module either loads
//     it with exactly what it declared or refuses it with the documented
//     fault kind and a reason.

// echoModule assembles a policy module whose answer to either decision is
// the first string of its input (the canary input's job ID, the completion
// input's deployment ID), so that the fuzzer's bytes come back as the
// module's answer. abi and kinds are what its handshake exports declare;
// manifest is its manifest text.
func echoModule(abi, kinds int32, manifest []byte) []byte {
	const manifestAt = 1024
	uleb := func(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
	sleb := func(b []byte, v int64) []byte {
		for {
			c := byte(v & 0x7f)
			v >>= 7
			if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
				return append(b, c)
			}
			b = append(b, c|0x80)
		}
	}
	section := func(b []byte, id byte, body []byte) []byte {
		return append(uleb(append(b, id), uint64(len(body))), body...)
	}
	name := func(b []byte, s string) []byte { return append(uleb(b, uint64(len(s))), s...) }

	m := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	m = section(m, 1, []byte{4, // types
		0x60, 0, 1, 0x7f, // () -> i32
		0x60, 0, 1, 0x7e, // () -> i64
		0x60, 1, 0x7f, 1, 0x7f, // (i32) -> i32
		0x60, 2, 0x7f, 0x7f, 1, 0x7e}) // (i32, i32) -> i64
	m = section(m, 3, []byte{6, 0, 0, 1, 2, 3, 3})
	m = section(m, 5, []byte{1, 0, 4}) // one memory, 4 pages: the input goes at 64 KiB
	var ex []byte
	ex = append(ex, 7)
	for i, n := range []string{exportABIVersion, exportKinds, exportManifest, exportAlloc, exportCanary, exportCompletion} {
		ex = append(name(ex, n), 0, byte(i))
	}
	ex = append(name(ex, exportMemory), 2, 0)
	m = section(m, 7, ex)

	body := func(code ...byte) []byte {
		return append(uleb(nil, uint64(len(code)+2)), append(append([]byte{0}, code...), 0x0b)...)
	}
	echo := []byte{
		0x20, 0, 0x41, 4, 0x6a, 0xad, 0x42, 32, 0x86, // (p+4) << 32
		0x20, 0, 0x28, 2, 0, 0xad, 0x84, //  | load32(p): the string's length
	}
	code := []byte{6}
	code = append(code, body(sleb([]byte{0x41}, int64(abi))...)...)
	code = append(code, body(sleb([]byte{0x41}, int64(kinds))...)...)
	code = append(code, body(sleb([]byte{0x42}, int64(manifestAt)<<32|int64(len(manifest)))...)...)
	code = append(code, body(0x41, 0x80, 0x80, 0x04)...) // 65536
	code = append(code, body(echo...)...)
	code = append(code, body(echo...)...)
	m = section(m, 10, code)
	if len(manifest) > 0 {
		data := []byte{1, 0, 0x41}
		data = sleb(data, manifestAt)
		data = append(data, 0x0b)
		data = append(uleb(data, uint64(len(manifest))), manifest...)
		m = section(m, 11, data)
	}
	return m
}

func fuzzEngine(f *testing.F) (*Engine, *faultLog) {
	e, faults, _ := newTestEngine(f, Options{CacheDir: f.TempDir(), PoolSize: 1})
	if _, err := e.Load(context.Background(), "echo", "", echoModule(ABIVersion, int32(KindCanary|KindCompletion), nil)); err != nil {
		f.Fatal(err)
	}
	return e, faults
}

// newFaults returns the faults reported since the last call.
func newFaults(l *faultLog, seen *int) []*Fault {
	all := l.all()
	got := all[*seen:]
	*seen = len(all)
	return got
}

func FuzzCanaryAnswer(f *testing.F) {
	e, faults := fuzzEngine(f)
	seen := 0
	answer := func(ids []string, reason string) []byte {
		return policywire.AppendCanaryOutput(nil, policywire.CanaryOutput{NodeIDs: ids, Reason: reason})
	}
	f.Add(answer([]string{"n1"}, "r"), uint8(1), uint8(3))
	f.Add(answer([]string{"n2", "n0"}, ""), uint8(2), uint8(3))
	f.Add(answer(nil, "nobody has the meta key"), uint8(2), uint8(3))
	f.Add(answer([]string{"n1", "n1"}, "twice"), uint8(2), uint8(3))
	f.Add(answer([]string{"n9"}, "not a candidate"), uint8(1), uint8(3))
	f.Add(answer([]string{"n0", "n1", "n2"}, "more than asked"), uint8(2), uint8(3))
	f.Add(policywire.AppendError(nil, "cannot choose"), uint8(1), uint8(3))
	f.Add([]byte{9}, uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, raw []byte, count, candidates uint8) {
		nodes := make([]*model.Node, candidates%16)
		for i := range nodes {
			nodes[i] = &model.Node{ID: "n" + strconv.Itoa(i), Status: model.NodeStatusReady,
				Attributes: map[string]string{}, Meta: map[string]string{}}
		}
		slices.SortFunc(nodes, func(a, b *model.Node) int { return strings.Compare(a.ID, b.ID) })
		req := reconcile.CanaryRequest{JobID: string(raw), JobVersion: 2, DeploymentID: "d", Group: "g", Percent: 50,
			Count: int(count % 8), Eligible: nodes, Policy: &model.PolicyRef{Name: "echo"}}
		got, err := e.ChooseCanaries(context.Background(), req)
		if err != nil {
			t.Fatalf("ChooseCanaries returned an error: %v", err)
		}
		checkCanaryChoice(t, req, got)
		fs := newFaults(faults, &seen)
		out, derr := policywire.DecodeCanaryOutput(raw)
		if derr == nil {
			derr = validateCanary(&req, out)
		}
		switch {
		case len(fs) > 1:
			t.Fatalf("%d faults reported for one decision", len(fs))
		case len(fs) == 1:
			f := fs[0]
			if derr == nil {
				t.Fatalf("fault %v for a valid answer %+v", f, out)
			}
			if (f.Kind != FaultInvalidOutput && f.Kind != FaultPolicyError) || f.Reason == "" || f.Decision != "canary" || f.Policy != "echo" {
				t.Fatalf("fault of kind %q, reason %q, decision %q, policy %q", f.Kind, f.Reason, f.Decision, f.Policy)
			}
			native := NativeCanary(req)
			native.Reason = "policy fault, native default: " + native.Reason
			if !reflect.DeepEqual(got, native) {
				t.Fatalf("after a fault: %+v, want the native default %+v", got, native)
			}
		default:
			if derr != nil {
				t.Fatalf("answer %q accepted, but it is invalid: %v", raw, derr)
			}
			if !slices.Equal(got.NodeIDs, out.NodeIDs) || got.Reason != out.Reason {
				t.Fatalf("module answered %+v, the decision is %+v", out, got)
			}
		}
	})
}

// checkCanaryChoice: whoever answered, the choice is within the request.
func checkCanaryChoice(t *testing.T, req reconcile.CanaryRequest, got reconcile.CanaryChoice) {
	t.Helper()
	if len(got.NodeIDs) > req.Count {
		t.Fatalf("%d canaries chosen, %d asked for", len(got.NodeIDs), req.Count)
	}
	if len(got.NodeIDs) < req.Count && strings.TrimSpace(got.Reason) == "" {
		t.Fatalf("%d canaries of %d without a reason", len(got.NodeIDs), req.Count)
	}
	seen := map[string]bool{}
	for _, id := range got.NodeIDs {
		if seen[id] {
			t.Fatalf("node %q chosen twice", id)
		}
		seen[id] = true
		if !slices.ContainsFunc(req.Eligible, func(n *model.Node) bool { return n.ID == id }) {
			t.Fatalf("node %q chosen, not a candidate", id)
		}
	}
}

func FuzzCompletionAnswer(f *testing.F) {
	e, faults := fuzzEngine(f)
	seen := 0
	for _, out := range []policywire.CompletionOutput{{Decision: policywire.Continue, Reason: "waiting"}, {Decision: policywire.Promote},
		{Decision: policywire.Succeed, Reason: "done"}, {Decision: policywire.Fail, Reason: "unhealthy"}, {Decision: policywire.Fail, Revert: true, Reason: "revert"}} {
		f.Add(policywire.AppendCompletionOutput(nil, out), true)
		f.Add(policywire.AppendCompletionOutput(nil, out), false)
	}
	f.Add(policywire.AppendError(nil, "no verdict"), true)
	f.Add([]byte{0, 7, 0, 0, 0, 0, 0}, true)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw []byte, autoRevert bool) {
		in := genCompletion(2, now)
		in.Deployment.ID = string(raw)
		in.Policy = &model.PolicyRef{Name: "echo"}
		for _, st := range in.Deployment.TaskGroups {
			st.AutoRevert = autoRevert
		}
		got, err := e.DecideCompletion(context.Background(), in)
		if err != nil {
			t.Fatalf("DecideCompletion returned an error: %v", err)
		}
		switch got.Decision {
		case reconcile.DecisionContinue, reconcile.DecisionPromote, reconcile.DecisionSucceed, reconcile.DecisionFail:
		default:
			t.Fatalf("decision %q", got.Decision)
		}
		if got.Revert && (got.Decision != reconcile.DecisionFail || !autoRevert) {
			t.Fatalf("revert with %q, auto_revert %v", got.Decision, autoRevert)
		}
		fs := newFaults(faults, &seen)
		out, derr := policywire.DecodeCompletionOutput(raw)
		if derr == nil {
			derr = validateCompletion(&in, out)
		}
		switch {
		case len(fs) > 1:
			t.Fatalf("%d faults reported for one decision", len(fs))
		case len(fs) == 1:
			f := fs[0]
			if derr == nil {
				t.Fatalf("fault %v for a valid answer %+v", f, out)
			}
			if (f.Kind != FaultInvalidOutput && f.Kind != FaultPolicyError) || f.Reason == "" || f.Decision != "completion" {
				t.Fatalf("fault of kind %q, reason %q, decision %q", f.Kind, f.Reason, f.Decision)
			}
			native := NativeCompletion(in)
			native.Reason = "policy fault, native default: " + native.Reason
			if !reflect.DeepEqual(got, native) {
				t.Fatalf("after a fault: %+v, want the native default %+v", got, native)
			}
		default:
			if derr != nil {
				t.Fatalf("answer %q accepted, but it is invalid: %v", raw, derr)
			}
			if want := reconcile.Decision(out.Decision.String()); got.Decision != want || got.Revert != out.Revert || got.Reason != out.Reason {
				t.Fatalf("module answered %+v, the decision is %+v", out, got)
			}
		}
	})
}

func FuzzModuleHandshake(f *testing.F) {
	// No compilation cache: every input is another module.
	e, err := New(context.Background(), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), PoolSize: 1, FollowInterval: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { e.Close(context.Background()) })
	f.Add(int32(1), int32(3), []byte(""))
	f.Add(int32(2), int32(1), []byte("field name datacenter\nattr $key=os.name\nmeta *\nref $by\n# comment"))
	f.Add(int32(2), int32(2), []byte("attr"))
	f.Add(int32(9), int32(3), []byte(""))
	f.Add(int32(0), int32(3), []byte(""))
	f.Add(int32(-1), int32(3), []byte(""))
	f.Add(int32(2), int32(0), []byte(""))
	f.Add(int32(2), int32(4), []byte(""))
	f.Add(int32(2), int32(3), []byte("ref literal"))
	f.Add(int32(2), int32(3), []byte("field size"))
	f.Fuzz(func(t *testing.T, abi, kinds int32, manifest []byte) {
		if len(manifest) > 3*65536 {
			return // past the module's memory: a load fault of another kind
		}
		m, err := e.Compile(context.Background(), "fuzz", echoModule(abi, kinds, manifest))
		wantManifest, merr := parseManifest(string(manifest))
		var want FaultKind
		switch {
		case uint32(abi) < MinABIVersion || uint32(abi) > ABIVersion:
			want = FaultABIVersion
		case Kind(kinds)&^(KindCanary|KindCompletion) != 0 || kinds == 0:
			want = FaultLoad
		case len(manifest) > maxManifest || merr != nil:
			want = FaultLoad
		}
		if want == "" {
			if err != nil {
				t.Fatalf("module (abi %d, kinds %d, manifest %q) refused: %v", abi, kinds, manifest, err)
			}
			defer m.close(context.Background())
			if m.ABI != uint32(abi) || m.Kinds != Kind(kinds) || !reflect.DeepEqual(m.Manifest, wantManifest) {
				t.Fatalf("loaded as abi %d, kinds %v, manifest %+v; declared %d, %d, %+v", m.ABI, m.Kinds, m.Manifest, abi, kinds, wantManifest)
			}
			return
		}
		if err == nil {
			m.close(context.Background())
			t.Fatalf("module (abi %d, kinds %d, manifest %q) loaded, want a %s fault", abi, kinds, manifest, want)
		}
		fl, ok := AsFault(err)
		if !ok || fl.Kind != want || fl.Reason == "" || fl.Decision != "load" {
			t.Fatalf("refusal %v (%T), want a load fault of kind %s with a reason", err, err, want)
		}
		if want == FaultABIVersion && !strings.Contains(fl.Reason, fmt.Sprintf("version %d", uint32(abi))) {
			t.Fatalf("ABI refusal does not name the version: %q", fl.Reason)
		}
	})
}

func FuzzParseManifest(f *testing.F) {
	f.Add("field name datacenter node_pool class\nattr $key=os.name\nmeta *\nattr *\nmeta rack\nref $by=meta.rack\n# comment\n\n", "by", "attr.kernel.name")
	f.Add("ref $by", "by", "datacenter")
	f.Add("attr $k", "x", "")
	f.Add("bogus x", "", "")
	f.Fuzz(func(t *testing.T, text, param, value string) {
		m, err := parseManifest(text)
		if err != nil {
			if !strings.Contains(err.Error(), "manifest") {
				t.Fatalf("refusal does not say it is the manifest's: %q", err)
			}
			return
		}
		// Its kept lines are a manifest that parses to the same.
		again, err := parseManifest(strings.Join(m.Lines, "\n"))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("lines %q parse again to %+v, %v; first %+v", m.Lines, again, err, m)
		}
		nodes := genNodes(3, 2)
		fields, attr, meta := m.keys(map[string]string{param: value}, nodes)
		if fields&^policywire.FieldAll != 0 {
			t.Fatalf("fields %#x beyond the known bits", fields)
		}
		for _, keys := range [][]string{attr, meta} {
			if !slices.IsSorted(keys) || len(slices.Compact(slices.Clone(keys))) != len(keys) {
				t.Fatalf("key table %q is not sorted and distinct", keys)
			}
			if slices.Contains(keys, "") {
				t.Fatalf("key table %q holds an empty key", keys)
			}
		}
	})
}
