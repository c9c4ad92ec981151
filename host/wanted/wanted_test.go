package wanted

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
)

const goodJob = `{"id":"web","type":"system","version":%d,"groups":[{"name":"g","count":1,"tasks":[{"name":"t","driver":"mock"}]}]%s}`

func job(version int, extra string) []byte {
	return []byte(fmt.Sprintf(goodJob, version, extra))
}

func put(rev uint64, v []byte) Entry {
	return Entry{Key: "default.web", Value: v, Revision: rev, Op: OpPut}
}

// run applies a sequence of entries from an empty state.
func run(entries ...Entry) (JobState, []Effect) {
	var st JobState
	var effs []Effect
	for _, e := range entries {
		var eff Effect
		st, eff = ApplyJob(st, e)
		effs = append(effs, eff)
	}
	return st, effs
}

func TestAbsenceIsNeverADeletionOrder(t *testing.T) {
	cases := []struct {
		name    string
		entries []Entry
		want    Order
	}{
		{"declared job runs (control)", []Entry{put(1, job(1, ""))}, OrderRun},
		{"stop = true stops (control)", []Entry{put(1, job(1, "")), put(2, job(2, `,"stop":true`))}, OrderStop},
		{"deleted key keeps running, orphaned", []Entry{put(1, job(1, "")), {Key: "default.web", Revision: 2, Op: OpDelete}}, OrderKeep},
		{"purged key keeps running, orphaned", []Entry{put(1, job(1, "")), {Key: "default.web", Revision: 2, Op: OpPurge}}, OrderKeep},
		{"key missing from a full pull keeps running", []Entry{put(1, job(1, "")), {Key: "default.web", Op: OpPurge}}, OrderKeep},
		{"never declared: nothing", nil, OrderNone},
		{"deleted before ever decoding: nothing", []Entry{{Key: "default.web", Revision: 3, Op: OpDelete}}, OrderNone},
		{"re-declared after deletion runs again", []Entry{put(1, job(1, "")), {Key: "default.web", Revision: 2, Op: OpDelete}, put(3, job(2, ""))}, OrderRun},
		{"purge of a stopped job does not revive it", []Entry{put(1, job(1, `,"stop":true`)), {Key: "default.web", Revision: 2, Op: OpPurge}}, OrderStop},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, _ := run(c.entries...)
			if got := OrderFor(st); got != c.want {
				t.Fatalf("OrderFor = %v, want %v (state %+v)", got, c.want, st)
			}
			if got, want := IsDeletionOrder(st), c.want == OrderStop; got != want {
				t.Fatalf("IsDeletionOrder = %v, want %v", got, want)
			}
			if c.want == OrderKeep && st.Value == nil {
				t.Fatal("an orphaned job lost its last good version")
			}
		})
	}
}

func TestARejectedPutKeepsTheLastGoodVersion(t *testing.T) {
	cases := []struct {
		name   string
		value  []byte
		reason string
	}{
		{"unknown field", job(2, `,"surprise":1`), "unknown field"},
		{"unknown enum value", []byte(`{"id":"web","type":"service","version":2,"groups":[]}`), "unknown value"},
		{"wrong type", []byte(`{"id":"web","type":"system","version":"two","groups":[]}`), "cannot use"},
		{"oversize value", append(job(2, ""), make([]byte, MaxValueSize)...), "size limit"},
		{"not JSON", []byte(`job "web" {}`), "invalid JSON"},
		{"key names another job", []byte(`{"id":"api","type":"system","version":2,"groups":[]}`), "belongs under key"},
		{"no id", []byte(`{"type":"system","version":2,"groups":[]}`), "no id"},
		{"trailing data", append(job(2, ""), []byte(` {}`)...), "after the JSON document"},
		{"negative count", []byte(`{"id":"web","type":"system","version":2,"groups":[{"name":"g","count":-1,"tasks":[{"name":"t","driver":"mock"}]}]}`), "count must be 0 or more"},
		{"count past the bound", []byte(`{"id":"web","type":"system","version":2,"groups":[{"name":"g","count":100000000,"tasks":[{"name":"t","driver":"mock"}]}]}`), "count must be at most"},
		{"canary out of range", []byte(`{"id":"web","type":"system","version":2,"groups":[{"name":"g","count":1,"update":{"max_parallel":1,"canary":150},"tasks":[{"name":"t","driver":"mock"}]}]}`), "canary"},
		{"stop spelled twice", job(2, `,"stop":false,"STOP":true`), "repeats"},
		{"stop in another case", job(2, `,"Stop":true`), "must be spelled"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, effs := run(put(1, job(1, "")), put(2, c.value))
			if effs[0] != EffectAccepted {
				t.Fatalf("control: first version not accepted: %v", effs[0])
			}
			if effs[1] != EffectRejected {
				t.Fatalf("effect = %v, want rejected", effs[1])
			}
			if st.Value == nil || st.Value.Version != 1 || st.Revision != 1 {
				t.Fatalf("last good version not kept: %+v", st)
			}
			if st.Rejection == nil || st.Rejection.Revision != 2 || !strings.Contains(st.Rejection.Reason, c.reason) {
				t.Fatalf("rejection = %+v, want reason containing %q", st.Rejection, c.reason)
			}
			if OrderFor(st) != OrderRun {
				t.Fatalf("order = %v, want run (the last good version stays in force)", OrderFor(st))
			}
			// A good put afterwards clears the rejection.
			st, eff := ApplyJob(st, put(3, job(3, "")))
			if eff != EffectAccepted || st.Rejection != nil || st.Value.Version != 3 {
				t.Fatalf("a later good put did not take over: %v %+v", eff, st)
			}
		})
	}
}

func TestARejectedFirstVersionPlacesNothing(t *testing.T) {
	st, effs := run(put(1, job(1, `,"surprise":1`)))
	if effs[0] != EffectRejected || OrderFor(st) != OrderNone || st.Rejection == nil {
		t.Fatalf("got %v %v %+v", effs, OrderFor(st), st)
	}
}

func TestApplyingIsIdempotentByRevision(t *testing.T) {
	st, effs := run(put(5, job(2, "")), put(5, job(2, "")), put(4, job(1, "")), put(6, job(3, "")))
	want := []Effect{EffectAccepted, EffectNone, EffectNone, EffectAccepted}
	for i := range want {
		if effs[i] != want[i] {
			t.Fatalf("effects = %v, want %v", effs, want)
		}
	}
	if st.Value.Version != 3 || st.Revision != 6 || st.Applied != 6 {
		t.Fatalf("state %+v", st)
	}
	// A synthetic absence (revision 0) applies once, and does not lower Applied.
	st, eff := ApplyJob(st, Entry{Key: "default.web", Op: OpPurge})
	if eff != EffectAbsent || st.Applied != 6 {
		t.Fatalf("synthetic purge: %v %+v", eff, st)
	}
	if _, eff := ApplyJob(st, Entry{Key: "default.web", Op: OpPurge}); eff != EffectNone {
		t.Fatalf("a second absence changed something: %v", eff)
	}
}

func TestAnExpiredHeartbeatMakesTheNodeDown(t *testing.T) {
	rec := []byte(`{"id":"n1","name":"n1","datacenter":"dc1","node_pool":"default","status":"ready","eligibility":"eligible","attributes":{},"meta":{}}`)
	st, eff := ApplyNode(NodeState{}, Entry{Key: "n1", Value: rec, Revision: 1})
	if eff != EffectAccepted || NodeView(st).Status != model.NodeStatusReady {
		t.Fatalf("control: node not ready: %v %+v", eff, NodeView(st))
	}
	st, eff = ApplyNode(st, Entry{Key: "n1", Revision: 2, Op: OpPurge})
	if eff != EffectAbsent {
		t.Fatalf("effect %v", eff)
	}
	n := NodeView(st)
	if n == nil || n.Status != model.NodeStatusDown || n.Name != "n1" {
		t.Fatalf("node view after expiry: %+v", n)
	}
	if st.Value.Status != model.NodeStatusReady {
		t.Fatal("NodeView modified the stored record")
	}
}

func TestFailClosedWhenTheNodeCannotEnumerateItsTasks(t *testing.T) {
	cases := []struct {
		name string
		in   Enumeration
		act  bool
		want string
	}{
		{"everything readable (control)", Enumeration{DriverErrs: map[string]error{"docker": nil}}, true, ""},
		{"state store unreadable", Enumeration{StoreErr: errors.New("bolt: timeout")}, false, "state store unreadable"},
		{"a driver unreachable", Enumeration{DriverErrs: map[string]error{"docker": errors.New("plugin exited"), "exec": nil}}, false, "driver docker"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := MayAct(c.in)
			if v.Act != c.act || !strings.Contains(v.Reason, c.want) {
				t.Fatalf("MayAct = %+v, want act=%v reason containing %q", v, c.act, c.want)
			}
		})
	}
}

func TestAHostWritesOnlyItsOwnKeys(t *testing.T) {
	cases := []struct {
		key  string
		node bool
		own  bool
	}{
		{"n1.default.web.a1", false, true},
		{"n2.default.web.a1", false, false},
		{"n1.a1", false, false}, // the layout before jobs were in the key
		{"n1.default.web.", false, false},
		{"n1", false, false},
		{"n1.", false, false},
		{"n1", true, true},
		{"n2", true, false},
	}
	for _, c := range cases {
		got := OwnsAllocKey("n1", c.key)
		if c.node {
			got = OwnsNodeKey("n1", c.key)
		}
		if got != c.own {
			t.Errorf("node n1 owns %q (node key %v) = %v, want %v", c.key, c.node, got, c.own)
		}
	}
}

func TestKeysRoundTrip(t *testing.T) {
	if ns, id, ok := ParseJobKey(JobKey("", "web")); !ok || ns != "default" || id != "web" {
		t.Fatalf("job key: %s %s %v", ns, id, ok)
	}
	if n, ns, j, a, ok := ParseAllocKeyFull(AllocKey("n1", "", "web", "a-1")); !ok || n != "n1" || ns != "default" || j != "web" || a != "a-1" {
		t.Fatalf("alloc key: %s %s %s %s %v", n, ns, j, a, ok)
	}
	if k := AllocKey("n1", "prod", "web", "a-1"); k != "n1.prod.web.a-1" || AllocJobFilter("prod", "web") != "*.prod.web.*" {
		t.Fatalf("alloc key %q, filter %q", k, AllocJobFilter("prod", "web"))
	}
	for _, g := range []string{"g", "web api", "=x", "a.b"} {
		ns, j, gt, i, ok := ParseSlotKey(SlotKey("", "web", g, 3))
		if !ok || ns != "default" || j != "web" || gt != GroupToken(g) || i != 3 {
			t.Fatalf("slot key of group %q: %s %s %s %d %v", g, ns, j, gt, i, ok)
		}
	}
	if GroupToken("=x") == "=x" || GroupToken("g") != "g" || GroupToken("web api") == GroupToken("web_api") {
		t.Fatal("group tokens collide")
	}
	if ns, j, v, ok := ParseDeploymentKey(DeploymentKey("prod", "web", 7)); !ok || ns != "prod" || j != "web" || v != 7 {
		t.Fatalf("deployment key: %s %s %d %v", ns, j, v, ok)
	}
	if err := CheckTokens("web", "a.b"); err == nil {
		t.Fatal("a dot inside a token was accepted")
	}
	if err := CheckTokens("web-1", "x_y=z/w"); err != nil {
		t.Fatal(err)
	}
}

func TestIntentMergesDrainAndEligibility(t *testing.T) {
	base := model.Node{ID: "n1", Status: model.NodeStatusReady}
	cases := []struct {
		name string
		in   Intent
		elig model.Eligibility
		drn  bool
	}{
		{"no intent: eligible", Intent{}, model.Eligible, false},
		{"ineligible", Intent{Eligibility: model.Ineligible}, model.Ineligible, false},
		{"drain implies ineligible", Intent{Drain: &model.DrainStrategy{}}, model.Ineligible, true},
	}
	for _, c := range cases {
		n := MergeIntent(base, c.in)
		if n.Eligibility != c.elig || (n.Drain != nil) != c.drn {
			t.Errorf("%s: %+v", c.name, n)
		}
		if n.Ready() != (c.elig == model.Eligible && !c.drn) {
			t.Errorf("%s: Ready() = %v", c.name, n.Ready())
		}
	}
	b, _ := EncodeIntent(Intent{Eligibility: model.Ineligible})
	if in, err := DecodeIntent(b); err != nil || in.Eligibility != model.Ineligible {
		t.Fatalf("intent round trip: %+v %v", in, err)
	}
	if _, err := DecodeIntent([]byte(`{"eligibility":"maybe"}`)); err == nil {
		t.Fatal("an unknown eligibility was accepted")
	}
}

func TestQuietCasesEachHaveTheirOwnLine(t *testing.T) {
	seen := map[string]bool{}
	for _, q := range []Quiet{QuietNoBucket, QuietNoKey, QuietNotConfigured} {
		m := q.Message()
		if m == "" || seen[m] || q.String() == "unknown" {
			t.Fatalf("quiet case %d has no distinct message: %q", q, m)
		}
		seen[m] = true
	}
}
