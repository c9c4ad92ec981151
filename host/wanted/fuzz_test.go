package wanted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// The fuzz targets of this file feed each KV decoder a key and a value
// (the bytes any client of the bucket could put) and check what the readers
// of the decoded record rely on:
//   - the decoder never panics or hangs;
//   - a rejection is an error that says why: a *model.DecodeError with a
//     reason (naming the field when there is one), the size limit, or a
//     message naming the key the value does not belong under;
//   - an accepted record belongs under its key: the key parses as a key of
//     its bucket (every part a key token) and its parts are the record's
//     own node, namespace, job, version, group, index;
//   - an accepted record has no nil map or nil map entry that a reader
//     indexes (node attributes and meta, deployment groups, task states);
//   - an accepted record re-encodes (json.Marshal, as every writer
//     encodes) to bytes that decode again under the same key to the same
//     record, byte for byte.
// Seeds are records as the writers encode them (json.Marshal of model
// values), the records of the examples/reconcile and examples/rollout
// fixtures, and the committed corpus under testdata/fuzz.

// fuzzDecode runs one decoder on an input with a watchdog: Go's fuzzer has
// no per-input deadline, so a hang would only show as a stalled count.
func fuzzDecode[T any](t *testing.T, decode Decoder[T], key string, value []byte) (*T, error) {
	watchdog := time.AfterFunc(30*time.Second, func() { panic(fmt.Sprintf("decoding hangs on key %q value %q", key, value)) })
	defer watchdog.Stop()
	return decode(key, value)
}

// checkRejection: a refused value says why. keyErr is the text a key
// mismatch must contain.
func checkRejection(t *testing.T, key string, value []byte, err error) {
	t.Helper()
	msg := err.Error()
	if strings.TrimSpace(msg) == "" {
		t.Fatalf("rejected %q with an empty error", value)
	}
	var de *model.DecodeError
	var ve model.ValidationErrors
	switch {
	case errors.Is(err, ErrOversize):
		if len(value) <= MaxValueSize {
			t.Fatalf("a value of %d bytes rejected as oversize", len(value))
		}
	case errors.As(err, &de):
		if strings.TrimSpace(de.Reason) == "" {
			t.Fatalf("decode error without a reason: %#v", de)
		}
		if strings.HasPrefix(de.Reason, "unknown field ") && len(de.Reason) <= len("unknown field ") {
			t.Fatalf("unknown field error that names no field: %q", msg)
		}
	case errors.As(err, &ve):
		for _, fe := range ve {
			if fe.Message == "" {
				t.Fatalf("validation error without a message: %q", msg)
			}
		}
	default:
		if !strings.Contains(msg, fmt.Sprintf("%q", key)) && msg != "job has no id" {
			t.Fatalf("rejection of %q under key %q neither locates a field nor names the key: %q", value, key, msg)
		}
	}
}

// checkRoundTrip: an accepted record, encoded as the writers encode it,
// decodes again under the same key to the same encoding.
func checkRoundTrip[T any](t *testing.T, decode Decoder[T], key string, v *T) {
	t.Helper()
	first, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("accepted record does not encode: %v", err)
	}
	again, err := decode(key, first)
	if err != nil {
		t.Fatalf("accepted record, re-encoded, is rejected: %v\n%s", err, first)
	}
	second, err := json.Marshal(again)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Fatalf("round trip differs:\n%s\n---\n%s", first, second)
	}
}

func FuzzDecodeJob(f *testing.F) {
	for _, s := range seeds(f).jobs {
		f.Add(s.key, s.value)
	}
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		j, err := fuzzDecode(t, DecodeJob, key, value)
		if err != nil {
			checkRejection(t, key, value, err)
			return
		}
		ns, id, ok := ParseJobKey(key)
		if !ok || ns != NamespaceOr(j.Namespace) || id != j.ID {
			t.Fatalf("job %q of namespace %q accepted under key %q", j.ID, j.Namespace, key)
		}
		if err := j.Validate(); err != nil {
			t.Fatalf("accepted job does not validate: %v", err)
		}
		checkRoundTrip(t, DecodeJob, key, j)
	})
}

func FuzzDecodeJobVersion(f *testing.F) {
	for _, s := range seeds(f).jobs {
		var j model.Job
		if json.Unmarshal(s.value, &j) == nil {
			f.Add(JobVersionKey(j.Namespace, j.ID, j.Version), s.value)
		}
	}
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		j, err := fuzzDecode(t, DecodeJobVersion, key, value)
		if err != nil {
			checkRejection(t, key, value, err)
			return
		}
		ns, id, v, ok := ParseDeploymentKey(key)
		if !ok || ns != NamespaceOr(j.Namespace) || id != j.ID || v != j.Version {
			t.Fatalf("version %d of job %q (namespace %q) accepted under key %q", j.Version, j.ID, j.Namespace, key)
		}
		if err := j.Validate(); err != nil {
			t.Fatalf("accepted job version does not validate: %v", err)
		}
		checkRoundTrip(t, DecodeJobVersion, key, j)
	})
}

func FuzzDecodeNode(f *testing.F) {
	for _, s := range seeds(f).nodes {
		f.Add(s.key, s.value)
	}
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		n, err := fuzzDecode(t, DecodeNode, key, value)
		if err != nil {
			checkRejection(t, key, value, err)
			return
		}
		if !ValidToken(key) || n.ID != key {
			t.Fatalf("node %q accepted under key %q", n.ID, key)
		}
		if n.Attributes == nil || n.Meta == nil {
			t.Fatalf("accepted node with nil attributes or meta: %+v", n)
		}
		checkRoundTrip(t, DecodeNode, key, n)
	})
}

func FuzzDecodeAlloc(f *testing.F) {
	for _, s := range seeds(f).allocs {
		f.Add(s.key, s.value)
	}
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		a, err := fuzzDecode(t, DecodeAlloc, key, value)
		if err != nil {
			checkRejection(t, key, value, err)
			return
		}
		node, ns, job, id, ok := ParseAllocKeyFull(key)
		if !ok || node != a.NodeID || ns != NamespaceOr(a.Namespace) || job != a.JobID || id != a.ID {
			t.Fatalf("allocation %q of node %q, job %q (namespace %q) accepted under key %q", a.ID, a.NodeID, a.JobID, a.Namespace, key)
		}
		for name, ts := range a.TaskStates {
			if ts == nil {
				t.Fatalf("accepted allocation with a null state for task %q", name)
			}
		}
		checkRoundTrip(t, DecodeAlloc, key, a)
	})
}

func FuzzDecodeDeployment(f *testing.F) {
	for _, s := range seeds(f).deployments {
		f.Add(s.key, s.value)
	}
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		d, err := fuzzDecode(t, DecodeDeployment, key, value)
		if err != nil {
			checkRejection(t, key, value, err)
			return
		}
		ns, job, v, ok := ParseDeploymentKey(key)
		if !ok || ns != NamespaceOr(d.Namespace) || job != d.JobID || v != d.JobVersion {
			t.Fatalf("deployment of version %d of job %q (namespace %q) accepted under key %q", d.JobVersion, d.JobID, d.Namespace, key)
		}
		if d.TaskGroups == nil {
			t.Fatal("accepted deployment with nil task groups (the reconciler adds groups to the map)")
		}
		for name, st := range d.TaskGroups {
			if st == nil {
				t.Fatalf("accepted deployment with a null state for group %q", name)
			}
		}
		checkRoundTrip(t, DecodeDeployment, key, d)
	})
}

func FuzzDecodeSlot(f *testing.F) {
	for _, s := range seeds(f).slots {
		f.Add(s.key, s.value)
	}
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		sl, err := fuzzDecode(t, DecodeSlot, key, value)
		if err != nil {
			checkRejection(t, key, value, err)
			return
		}
		ns, job, group, index, ok := ParseSlotKey(key)
		if !ok || ns != NamespaceOr(sl.Namespace) || job != sl.JobID || group != GroupToken(sl.Group) || index != sl.Index {
			t.Fatalf("slot %d of group %q of job %q (namespace %q) accepted under key %q", sl.Index, sl.Group, sl.JobID, sl.Namespace, key)
		}
		checkRoundTrip(t, DecodeSlot, key, sl)
	})
}

func FuzzDecodeVerdict(f *testing.F) {
	for _, s := range seeds(f).verdicts {
		f.Add(s.key, s.value)
	}
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		v, err := fuzzDecode(t, DecodeVerdict, key, value)
		if err != nil {
			checkRejection(t, key, value, err)
			return
		}
		node, _, ok := ParseDownKey(key)
		if !ok || node != v.Node {
			t.Fatalf("loss verdict of node %q accepted under key %q", v.Node, key)
		}
		checkRoundTrip(t, DecodeVerdict, key, v)
	})
}

func FuzzDecodeIntent(f *testing.F) {
	for _, s := range seeds(f).intents {
		f.Add(s.key, s.value)
	}
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		in, err := fuzzDecode(t, decodeIntentRecord, key, value)
		if err != nil {
			checkRejection(t, key, value, err)
			return
		}
		// The merge the owning agent applies must say what the intent says.
		n := MergeIntent(model.Node{ID: "n", Eligibility: model.Eligible}, *in)
		if (in.Drain != nil || in.Eligibility == model.Ineligible) != (n.Eligibility == model.Ineligible) {
			t.Fatalf("intent %+v merges to eligibility %q", in, n.Eligibility)
		}
		checkRoundTrip(t, decodeIntentRecord, key, in)
	})
}

type seed struct {
	key   string
	value []byte
}

type seedSet struct {
	jobs, nodes, allocs, deployments, slots, verdicts, intents []seed
}

// seeds are records encoded as their writers encode them: a few written
// here with every field set, and every record of the examples' fixtures,
// decoded into its model type and encoded again.
func seeds(tb testing.TB) seedSet {
	tb.Helper()
	var s seedSet
	add := func(list *[]seed, key string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		*list = append(*list, seed{key, b})
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	yes, no, rev := true, false, uint64(1)

	add(&s.nodes, "n1", &model.Node{ID: "n1", Name: "host-1", Datacenter: "dc1", NodePool: "default", Class: "gpu",
		Status: model.NodeStatusReady, Eligibility: model.Eligible, Drain: &model.DrainStrategy{Deadline: model.Duration(time.Hour), Started: now},
		Attributes: map[string]string{"os.name": "linux"}, Meta: map[string]string{"rack": "r1"},
		Drivers:     map[string]model.DriverInfo{"mock": {Detected: true, Healthy: true, HealthDesc: "ok", Attributes: map[string]string{"driver.mock": "1"}}},
		HeartbeatAt: now, RolloutProtocol: 1, BootID: "b-1"})
	s.nodes = append(s.nodes, seed{"n2", []byte(`{"id":"n2","name":"","datacenter":"","node_pool":"","status":"down","eligibility":"ineligible","attributes":null,"meta":null,"drivers":{"exec":{"detected":true,"healthy":false,"health_description":"old name"}}}`)})

	add(&s.allocs, AllocKey("n1", "", "web", "a-1"), &model.Allocation{ID: "a-1", Name: "web.g[0]", JobID: "web", JobVersion: 3, TaskGroup: "g", NodeID: "n1",
		DesiredStatus: model.DesiredRun, DesiredTransition: model.DesiredTransition{Migrate: &yes}, ClientStatus: model.ClientRunning,
		DeploymentID: "d-1", DeploymentStatus: &model.AllocDeploymentStatus{Healthy: &no, Canary: true, Timestamp: now},
		States: []model.AllocState{{Field: model.AllocStateClientStatus, Value: "running", Time: now}}, PreviousAllocation: "a-0",
		TaskStates: map[string]*model.TaskState{"t": {State: "running", Restarts: 2, StartedAt: now, Events: []model.TaskEvent{{Type: "Started", Message: "m", Time: now}}}},
		Ports:      []model.AllocatedPort{{Label: "http", Value: 20000, To: 8080, HostIP: "127.0.0.1"}}, CreateTime: now, ModifyTime: now})
	add(&s.allocs, AllocKey("n2", "ops", "web", "a-2"), &model.Allocation{ID: "a-2", Name: "web.g[0]", Namespace: "ops", JobID: "web", TaskGroup: "g", NodeID: "n2",
		DesiredStatus: model.DesiredStop, ClientStatus: model.ClientComplete})

	add(&s.deployments, DeploymentKey("", "web", 3), &model.Deployment{ID: "d-1", JobID: "web", JobVersion: 3, Status: model.DeploymentRunning,
		StatusDescription: model.DescRunning, TaskGroups: map[string]*model.DeploymentState{"g": {AutoRevert: true, AutoPromote: true,
			ProgressDeadline: model.Duration(10 * time.Minute), CanaryNodes: []string{"n1"}, PlacedCanaries: []string{"a-1"}, DesiredCanaries: 1,
			DesiredTotal: 4, PlacedAllocs: 1, HealthyAllocs: 1, RequireProgressBy: now, MaxParallel: 1, CanaryPolicy: "builtin:default",
			CanaryReason: "r", PromotedAt: now, PromotedBy: "cli"}},
		CreateTime: now, ModifyTime: now, Events: []model.DeploymentEvent{{Time: now, Kind: model.EventCanary, Message: "chose n1"}},
		Protocol: 1, CreatedBy: "n1", Nonce: "x", PausedAt: now, PausedTotal: model.Duration(time.Second), RevertOf: &rev,
		Revert: &model.DeploymentRevert{Status: model.RevertDone, ToVersion: 1, AsVersion: 4, Reason: "r"}})

	add(&s.slots, SlotKey("", "web", "g", 0), &model.Slot{JobID: "web", JobVersion: 3, DeploymentID: "d-1", Group: "g", Index: 0,
		Holder: "n1", BootID: "b-1", OldAlloc: "a-0", NewAlloc: "a-1", Nonce: "x"})
	add(&s.slots, SlotKey("ops", "web", "a group.", 2), &model.Slot{Namespace: "ops", JobID: "web", JobVersion: 3, DeploymentID: "d-1",
		Group: "a group.", Index: 2, Holder: "n1", OldAlloc: "a-0", NewAlloc: "a-1", Nonce: "x"})

	add(&s.verdicts, DownKey("n3", 17), &model.LossVerdict{Node: "n3", DownSince: now, WrittenBy: "n1"})

	add(&s.intents, NodeKey("n1"), Intent{Eligibility: model.Ineligible, Drain: &model.DrainStrategy{Deadline: model.Duration(time.Hour), Started: now}, UpdatedAt: now})
	add(&s.intents, NodeKey("n2"), Intent{})

	s.jobs = append(s.jobs, seed{"default.web", job(1, "")}, seed{"default.web", job(2, `,"stop":true`)})
	fixtureSeeds(tb, &s, add)
	return s
}

// fixtureSeeds adds every record of the reconcile and rollout fixtures.
func fixtureSeeds(tb testing.TB, s *seedSet, add func(*[]seed, string, any)) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "examples", "reconcile", "*.json"))
	more, _ := filepath.Glob(filepath.Join("..", "..", "examples", "rollout", "*.json"))
	files = append(files, more...)
	if len(files) == 0 {
		tb.Fatal("no fixtures found under examples/reconcile and examples/rollout")
	}
	for _, file := range files {
		if strings.HasSuffix(file, ".plan.json") {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		var fx map[string]json.RawMessage
		if err := json.Unmarshal(data, &fx); err != nil {
			tb.Fatalf("%s: %v", file, err)
		}
		if raw, ok := fx["job"]; ok {
			var j model.Job
			if json.Unmarshal(raw, &j) == nil {
				add(&s.jobs, JobKey(j.Namespace, j.ID), &j)
			}
		}
		for _, name := range []string{"ready_nodes", "not_ready_nodes", "tainted_nodes"} {
			var ns []*model.Node
			if json.Unmarshal(fx[name], &ns) == nil {
				for _, n := range ns {
					add(&s.nodes, NodeKey(n.ID), n)
				}
			}
		}
		for _, name := range []string{"allocs", "live_allocs", "terminal_allocs"} {
			var as []*model.Allocation
			if json.Unmarshal(fx[name], &as) == nil {
				for _, a := range as {
					add(&s.allocs, AllocKey(a.NodeID, a.Namespace, a.JobID, a.ID), a)
				}
			}
		}
		var d model.Deployment
		if json.Unmarshal(fx["deployment"], &d) == nil && d.ID != "" {
			add(&s.deployments, DeploymentKey(d.Namespace, d.JobID, d.JobVersion), &d)
		}
		var records []struct {
			Deployment *model.Deployment `json:"deployment"`
		}
		if json.Unmarshal(fx["records"], &records) == nil {
			for _, r := range records {
				if r.Deployment != nil {
					add(&s.deployments, DeploymentKey(r.Deployment.Namespace, r.Deployment.JobID, r.Deployment.JobVersion), r.Deployment)
				}
			}
		}
		var slots []struct {
			Key  string      `json:"key"`
			Slot *model.Slot `json:"slot"`
		}
		if json.Unmarshal(fx["slots"], &slots) == nil {
			for _, sl := range slots {
				if sl.Slot != nil {
					add(&s.slots, sl.Key, sl.Slot)
				}
			}
		}
	}
}

// TestTheFuzzSeedsAreAcceptedRecords: every seed is a record its decoder
// accepts, so the fuzzers start from the inside of each format (control:
// the same value under another key is rejected).
func TestTheFuzzSeedsAreAcceptedRecords(t *testing.T) {
	s := seeds(t)
	check := func(kind string, list []seed, min int, decode func(key string, value []byte) error) {
		if len(list) < min {
			t.Errorf("%d %s seeds, want at least %d", len(list), kind, min)
		}
		for _, sd := range list {
			if err := decode(sd.key, sd.value); err != nil {
				t.Errorf("%s seed under %q rejected: %v\n%s", kind, sd.key, err, sd.value)
			}
			if decode(sd.key+"x", sd.value) == nil {
				t.Errorf("%s seed accepted under another key %q", kind, sd.key+"x")
			}
		}
	}
	ignore := func(err error) error { return err }
	check("job", s.jobs, 5, func(k string, v []byte) error { _, err := DecodeJob(k, v); return ignore(err) })
	check("node", s.nodes, 5, func(k string, v []byte) error { _, err := DecodeNode(k, v); return err })
	check("allocation", s.allocs, 5, func(k string, v []byte) error { _, err := DecodeAlloc(k, v); return err })
	check("deployment", s.deployments, 5, func(k string, v []byte) error { _, err := DecodeDeployment(k, v); return err })
	check("slot", s.slots, 2, func(k string, v []byte) error { _, err := DecodeSlot(k, v); return err })
	check("verdict", s.verdicts, 1, func(k string, v []byte) error { _, err := DecodeVerdict(k, v); return err })
	for _, sd := range s.intents {
		if _, err := DecodeIntent(sd.value); err != nil {
			t.Errorf("intent seed rejected: %v", err)
		}
	}
}

// FuzzApplyEntries applies a sequence of jobs-bucket entries, decoded from
// the fuzzer's bytes (three bytes an entry: op, revision, which value), to
// one key's record, as a watch that resumes, repeats and reorders would
// deliver them, and checks the record against the rules readers rely on
// after every entry: Applied is the highest revision seen (revision 0 is a
// synthetic entry, applied regardless); an entry at or below it changes
// nothing; Value changes only on an accepted put, to that put's job, with
// Revision that put's revision; a rejected put keeps the last good value and
// says why; a delete or purge marks the key absent and keeps the value; the
// order a job's state gives (OrderFor) follows from the value and absence.
func FuzzApplyEntries(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 2, 2, 1, 3, 0, 0, 3, 1})
	f.Add([]byte{0, 5, 1, 0, 4, 0, 2, 0, 0, 0, 6, 2, 1, 6, 0})
	f.Add([]byte{1, 1, 0, 0, 0, 0, 2, 0, 0})
	values := [][]byte{job(1, ""), job(2, `,"stop":true`), []byte(`{"id":"web","type":"service"}`)}
	f.Fuzz(func(t *testing.T, data []byte) {
		var st JobState
		for i := 0; i+2 < len(data); i += 3 {
			e := Entry{Key: "default.web", Op: Op(data[i] % 3), Revision: uint64(data[i+1] % 8)}
			if e.Op == OpPut {
				e.Value = values[int(data[i+2])%len(values)]
			}
			prev := st
			next, eff := ApplyJob(prev, e)
			if e.Revision != 0 && e.Revision <= prev.Applied {
				if eff != EffectNone || !sameState(next, prev) {
					t.Fatalf("entry %+v at or below applied %d changed the record (%v)", e, prev.Applied, eff)
				}
				continue
			}
			if want := max(prev.Applied, e.Revision); next.Applied != want {
				t.Fatalf("applied %d after %+v on %d, want %d", next.Applied, e, prev.Applied, want)
			}
			switch {
			case e.Op != OpPut && prev.Absent:
				seen := prev
				seen.Applied = next.Applied
				if eff != EffectNone || !sameState(next, seen) {
					t.Fatalf("a delete of an absent key changed the record (%v)", eff)
				}
			case e.Op != OpPut:
				if eff != EffectAbsent || !next.Absent || next.Value != prev.Value || next.Rejection != nil {
					t.Fatalf("a delete gave %v, absent %v, value kept %v", eff, next.Absent, next.Value == prev.Value)
				}
			case eff == EffectAccepted:
				if next.Value == nil || next.Revision != e.Revision || next.Absent || next.Rejection != nil {
					t.Fatalf("an accepted put left %+v", next)
				}
				if put, _ := DecodeJob(e.Key, e.Value); put == nil || put.Version != next.Value.Version || put.Stop != next.Value.Stop {
					t.Fatalf("accepted value %+v is not the put's %s", next.Value, e.Value)
				}
			case eff == EffectRejected:
				if next.Value != prev.Value || next.Revision != prev.Revision || next.Rejection == nil || next.Rejection.Reason == "" || next.Rejection.Revision != e.Revision {
					t.Fatalf("a rejected put left %+v (before %+v)", next, prev)
				}
			default:
				t.Fatalf("a put had effect %v", eff)
			}
			if next.Revision > next.Applied {
				t.Fatalf("value revision %d above applied %d", next.Revision, next.Applied)
			}
			order := OrderFor(next)
			switch {
			case next.Value == nil && order != OrderNone,
				next.Value != nil && next.Value.Stop && order != OrderStop,
				next.Value != nil && !next.Value.Stop && next.Absent && order != OrderKeep,
				next.Value != nil && !next.Value.Stop && !next.Absent && order != OrderRun:
				t.Fatalf("order %v for value %v, absent %v", order, next.Value != nil, next.Absent)
			}
			st = next
		}
	})
}

func sameState(a, b JobState) bool {
	return a.Value == b.Value && a.Revision == b.Revision && a.Applied == b.Applied && a.Rejection == b.Rejection && a.Absent == b.Absent && a.Time.Equal(b.Time)
}

func FuzzDecodeSummary(f *testing.F) {
	f.Add("sum.default.web", []byte(`{"job_id":"web","job_version":2,"deployment_id":"d","steward":"n1","time":"2026-12-01T12:00:00Z","groups":{"g":{"waiting":[{"node":"n2","alloc":"a2"}],"waiting_total":1,"desired":3,"placed":1,"healthy":1,"unhealthy":0,"pending":0,"outdated":2,"in_flight":1}}}`))
	f.Add("sum.default.a.b", []byte(`{"job_id":"a.b","deployment_id":"d","steward":"n1","time":"2026-12-01T12:00:00Z"}`))
	f.Add("sum.prod.web", []byte(`{"job_id":"web","deployment_id":"d","steward":"n1","time":"2026-12-01T12:00:00Z"}`))
	f.Add("sum.default.web", []byte(`{"job_id":"web","extra":1}`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		v, err := fuzzDecode(t, DecodeSummary, key, value)
		if err != nil {
			checkRejection(t, key, value, err)
			return
		}
		ns, job, ok := ParseSummaryKey(key)
		if !ok || ns != NamespaceOr(v.Namespace) || job != v.JobID {
			t.Fatalf("summary of job %q (namespace %q) accepted under key %q", v.JobID, v.Namespace, key)
		}
		checkRoundTrip(t, DecodeSummary, key, v)
	})
}

// A summary decodes only under its own job's key, and closed.
func TestASummaryDecodesOnlyUnderItsOwnKey(t *testing.T) {
	good := []byte(`{"job_id":"web","deployment_id":"d","steward":"n1","time":"2026-12-01T12:00:00Z"}`)
	if _, err := DecodeSummary("sum.default.web", good); err != nil {
		t.Fatalf("good summary refused: %v", err)
	}
	for key, value := range map[string][]byte{
		"sum.default.db":  good,
		"sum.prod.web":    good,
		"sum.default.a.b": []byte(`{"job_id":"a.b","deployment_id":"d","steward":"n1","time":"2026-12-01T12:00:00Z"}`),
		"sum.default.web": []byte(`{"job_id":"web","surprise":true}`),
	} {
		if _, err := DecodeSummary(key, value); err == nil {
			t.Errorf("%s: %s accepted", key, value)
		}
	}
}
