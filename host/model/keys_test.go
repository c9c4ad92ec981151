package model

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// oddKeys gathers what the model types do not have but checkKeys must
// still judge as the token walk did: two fields whose names differ only in
// case, names that fold only under Unicode rules (the Kelvin sign folds to
// k, the long s to s), a field without a tag, a name that starts like an
// index, raw and untyped values, and recursion through pointers, slices,
// arrays and maps.
type oddKeys struct {
	Lower   int                     `json:"x"`
	Upper   string                  `json:"X"`
	Kelvin  int                     "json:\"\u212aind\""
	LongS   bool                    "json:\"\u017ftop\""
	NoTag   int                     // JSON name "NoTag"
	Skip    int                     `json:"-"`
	Empty   int                     `json:",omitempty"` // JSON name "Empty"
	Bracket int                     `json:"[0]"`
	Raw     json.RawMessage         `json:"raw"`
	Any     any                     `json:"any"`
	Dur     Duration                `json:"dur"`
	Self    *oddKeys                `json:"self"`
	List    []*oddKeys              `json:"list"`
	Arr     [2]map[string]**oddKeys `json:"arr"`
	_       int                     // unexported: not a field of the JSON
}

// twins is a struct with two fields of one JSON name (jsonField takes the
// first), built at run time because go vet refuses such a type in source.
var twinsType = reflect.StructOf([]reflect.StructField{
	{Name: "First", Type: reflect.TypeFor[map[string]int](), Tag: `json:"dup"`},
	{Name: "Second", Type: reflect.TypeFor[[]int](), Tag: `json:"dup"`},
	{Name: "Odd", Type: reflect.TypeFor[*oddKeys](), Tag: `json:"odd"`},
})

// checkedTypes are the types Decode is called with in this package and
// host/wanted (as pointers, as Decode gets them), and a few stranger ones.
var checkedTypes = []reflect.Type{
	reflect.TypeFor[*Job](),
	reflect.TypeFor[*Node](),
	reflect.TypeFor[*Allocation](),
	reflect.TypeFor[*Deployment](),
	reflect.TypeFor[*Slot](),
	reflect.TypeFor[*LossVerdict](),
	reflect.TypeFor[*RolloutSummary](),
	reflect.TypeFor[*oddKeys](),
	reflect.PointerTo(twinsType),
	reflect.TypeFor[*map[string][]oddKeys](),
	reflect.TypeFor[*any](),
	nil,
}

// sameVerdict compares the verdicts of checkKeys and the token walk on one
// document.
func sameVerdict(t reflect.Type, doc []byte) (got, want *DecodeError, ok bool) {
	got, want = checkKeys(doc, t), checkKeysOracle(doc, t)
	if got == nil || want == nil {
		return got, want, got == want
	}
	return got, want, *got == *want
}

func typeName(t reflect.Type) string {
	if t == nil {
		return "<nil>"
	}
	return t.String()
}

// TestCheckKeysGivesTheTokenWalksVerdictsOnHandPickedDocuments pins down
// verdicts by hand, each case named for why; every case is also held to
// the token walk's verdict. Controls: the clean documents get none.
func TestCheckKeysGivesTheTokenWalksVerdictsOnHandPickedDocuments(t *testing.T) {
	job, odd, anyT := reflect.TypeFor[*Job](), reflect.TypeFor[*oddKeys](), reflect.TypeFor[*any]()
	cases := []struct {
		name         string
		typ          reflect.Type
		doc          string
		path, reason string // reason "": no verdict
	}{
		// Controls: a clean document, and distinct map keys that differ in case.
		{"clean job", job, `{"id":"a","type":"system","stop":true,"groups":[{"name":"g","count":1,"tasks":[]}],"meta":{"Rack":"1","rack":"2"}}`, "", ""},
		{"a field spelled in another case", job, `{"id":"a","STOP":true}`, "STOP", `field "STOP" must be spelled "stop"`},
		{"a repeated field, one of them escaped", job, `{"stop":false,"st\u006fp":true}`, "", `key "stop" repeats "stop" in one object`},
		{"a case variant of an earlier field: the repeat is found first", job, `{"stop":false,"Stop":true}`, "", `key "Stop" repeats "stop" in one object`},
		{"an escaped case variant names the key decoded", job, `{"\u0053top":true}`, "Stop", `field "Stop" must be spelled "stop"`},
		{"deep in arrays and maps", job, `{"groups":[{"name":"g"},{"tasks":[{},{"name":"t","config":{"image":"a","image":"b"}}]}]}`, "groups[1].tasks[1].config", `key "image" repeats "image" in one object`},
		{"a wrong case deep down", job, `{"groups":[{"tasks":[{"Driver":"d"}]}]}`, "groups[0].tasks[0].Driver", `field "Driver" must be spelled "driver"`},
		{"keys inside a value that decodes itself are still compared, exactly", job, `{"groups":[{"tasks":[{"kill_timeout":{"a":1,"A":2,"a":3}}]}]}`, "groups[0].tasks[0].kill_timeout", `key "a" repeats "a" in one object`},
		{"keys of an unknown field are compared exactly", job, `{"colour":{"Red":1,"red":2}}`, "", ""},
		{"bad UTF-8 decodes to U+FFFD in both map keys", job, "{\"meta\":{\"\xff\":\"1\",\"\xfe\":\"2\"}}", "meta", "key \"\ufffd\" repeats \"\ufffd\" in one object"},
		{"a lone surrogate is U+FFFD too", job, `{"meta":{"\ud800":"1","\ufffd":"2"}}`, "meta", "key \"\ufffd\" repeats \"\ufffd\" in one object"},
		{"a repeat past smallObject keys", job, `{"meta":{` + manyKeys(40) + `,"k7":"again"}}`, "meta", `key "k7" repeats "k7" in one object`},
		{"no repeat among many keys", job, `{"meta":{` + manyKeys(40) + `}}`, "", ""},
		{"two fields that differ only in case repeat each other", odd, `{"x":1,"X":"a"}`, "", `key "X" repeats "x" in one object`},
		{"the Kelvin sign folds to k, for repeating too", odd, "{\"\u212aind\":1,\"kind\":2}", "", "key \"kind\" repeats \"\u212aind\" in one object"},
		{"the long s folds to s for matching, not for repeating", odd, "{\"\u017ftop\":true,\"stop\":true}", "stop", "field \"stop\" must be spelled \"\u017ftop\""},
		{"a key starting with [ joins without a dot", odd, `{"self":{"[0]":1,"[0]":2}}`, "self", `key "[0]" repeats "[0]" in one object`},
		{"a refused key under [0]", odd, `{"self":{"self":{"[0]":{}, "Self":1}}}`, "self.self.Self", `field "Self" must be spelled "self"`},
		{"the empty key adds nothing to the path", anyT, `{"":{"a":1,"a":2}}`, "", `key "a" repeats "a" in one object`},
		// Bad syntax before the refused key: no verdict. After it: the verdict.
		{"truncated right after a repeated key", job, `{"stop":true,"stop"`, "", `key "stop" repeats "stop" in one object`},
		{"truncated inside the repeated key", job, `{"stop":true,"sto`, "", ""},
		{"a missing comma before the repeat", job, `{"stop":true "stop":false}`, "", ""},
		{"a bad number before the repeat", job, `{"count":01,"count":2}`, "", ""},
		{"a bad escape in an earlier value", job, `{"id":"\x","stop":1,"stop":2}`, "", ""},
		{"a trailing comma before the repeat", job, `{"meta":{"a":"1",},"stop":1,"stop":2}`, "", ""},
		{"bad syntax after the repeat", job, `{"stop":1,"stop":2,}`, "", `key "stop" repeats "stop" in one object`},
		{"trailing data is the decoder's", job, `{"id":"a"} {"stop":1,"stop":2}`, "", ""},
		{"a top-level scalar", job, `"stop"`, "", ""},
		{"an empty document", job, ``, "", ""},
	}
	for _, c := range cases {
		got, want, ok := sameVerdict(c.typ, []byte(c.doc))
		if !ok {
			t.Errorf("%s: checkKeys %+v, the token walk %+v", c.name, got, want)
		}
		switch {
		case c.reason == "" && got != nil:
			t.Errorf("%s: %+v, want no verdict", c.name, got)
		case c.reason != "" && (got == nil || got.Path != c.path || got.Reason != c.reason):
			t.Errorf("%s: %+v, want path %q reason %q", c.name, got, c.path, c.reason)
		}
	}
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":"%d"`, i, i)
	}
	return b.String()
}

var keysDocs = flag.Int("keys.docs", 1000, "random documents of each type TestCheckKeysAgreesWithTheTokenWalk checks")

// TestCheckKeysAgreesWithTheTokenWalk holds checkKeys to the verdicts of
// the token walk it replaced on random documents of the real record types:
// documents shaped like the type, with fields left out, repeated, spelled
// in another case or with escapes, values of the wrong shape, and then
// truncated or with bytes changed. Control: the documents reach every kind
// of verdict, so that agreement cannot come from never judging.
func TestCheckKeysAgreesWithTheTokenWalk(t *testing.T) {
	perType := *keysDocs
	if testing.Short() {
		perType /= 4
	}
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(1, seed))
	count := map[string]int{}
	for _, typ := range checkedTypes {
		for range perType {
			doc := mutate(r, genDoc(r, typ))
			got, want, ok := sameVerdict(typ, doc)
			if !ok {
				t.Fatalf("seed %d, %s %q:\ncheckKeys      %+v\nthe token walk %+v", seed, typeName(typ), doc, got, want)
			}
			switch {
			case want == nil && json.Valid(doc):
				count["valid, no verdict"]++
			case want == nil:
				count["malformed, no verdict"]++
			case strings.Contains(want.Reason, "repeats"):
				count["repeated key"]++
			default:
				count["case variant"]++
			}
			if want != nil && strings.Contains(want.Path, "[") && strings.Contains(want.Path, ".") {
				count["verdict under an index and a key"]++
			}
			if want != nil && !json.Valid(doc) {
				count["verdict on a malformed document"]++
			}
		}
	}
	t.Logf("%d documents: %v", perType*len(checkedTypes), count)
	for _, k := range []string{"valid, no verdict", "malformed, no verdict", "repeated key", "case variant", "verdict under an index and a key", "verdict on a malformed document"} {
		if count[k] < perType/50 {
			t.Errorf("only %d documents with %s", count[k], k)
		}
	}
}

// FuzzCheckKeysMatchesOracle holds checkKeys to the token walk's verdict
// on any bytes, for each of checkedTypes. In CI only its seeds run.
func FuzzCheckKeysMatchesOracle(f *testing.F) {
	f.Add([]byte(`{"id":"a","STOP":true}`), uint8(0))
	f.Add([]byte(`{"stop":false,"st\u006fp":true}`), uint8(0))
	f.Add([]byte(`{"groups":[{"tasks":[{},{"config":{"image":"a","image":"b"}}]}]}`), uint8(0))
	f.Add([]byte("{\"meta\":{\"\xff\":\"1\",\"\xfe\":\"2\"}}"), uint8(1))
	f.Add([]byte(`{"task_groups":{"web":{"canary_nodes":["a"],"desired_total":1,"desired_total":2}}}`), uint8(3))
	f.Add([]byte(`{"groups":{"web":{"waiting":[{"node":"n","alloc":"a"},{"node":"n","Alloc":"a"}]}}}`), uint8(6))
	f.Add([]byte(`{"x":1,"X":"a","\u212aind":2,"self":{"[0]":1,"list":[{"dup":{}}]}}`), uint8(7))
	f.Add([]byte(`{"dup":{"a":1},"DUP":[1],"odd":{"x":1}}`), uint8(8))
	f.Add([]byte(`{"":{"a":1,"a":2}`), uint8(10))
	f.Add([]byte(`[1,-0.5e+3,true,null,"\ud83d\ude00",{"a":[]}]`), uint8(11))
	r := rand.New(rand.NewPCG(2, 3))
	for i, typ := range checkedTypes {
		f.Add(genDoc(r, typ), uint8(i))
	}
	f.Fuzz(func(t *testing.T, doc []byte, which uint8) {
		typ := checkedTypes[int(which)%len(checkedTypes)]
		if got, want, ok := sameVerdict(typ, doc); !ok {
			t.Fatalf("%s %q:\ncheckKeys      %+v\nthe token walk %+v", typeName(typ), doc, got, want)
		}
	})
}

// BenchmarkCheckKeys measures checkKeys against the token walk it replaced
// on the two records every agent decodes most: a rollout summary listing
// 200 waiters and a deployment record.
func BenchmarkCheckKeys(b *testing.B) {
	docs := []struct {
		name string
		typ  reflect.Type
		doc  []byte
	}{
		{"summary200", reflect.TypeFor[*RolloutSummary](), benchSummary(b)},
		{"deployment", reflect.TypeFor[*Deployment](), benchDeployment(b)},
	}
	for _, d := range docs {
		for _, impl := range []struct {
			name  string
			check func([]byte, reflect.Type) *DecodeError
		}{{"tokens", checkKeysOracle}, {"scanner", checkKeys}} {
			b.Run(d.name+"/"+impl.name, func(b *testing.B) {
				b.SetBytes(int64(len(d.doc)))
				b.ReportAllocs()
				for b.Loop() {
					if de := impl.check(d.doc, d.typ); de != nil {
						b.Fatal(de)
					}
				}
			})
		}
	}
}

func benchSummary(b testing.TB) []byte {
	t0 := time.Date(2026, 12, 5, 11, 0, 0, 123456789, time.UTC)
	g := &GroupSummary{WaitingTotal: 240, Desired: 1000, Placed: 1000, Healthy: 760, Pending: 8, Outdated: 240, InFlight: 8}
	for i := range 200 {
		g.Waiting = append(g.Waiting, SummaryWaiter{Node: fmt.Sprintf("node-%04d", 37*i%1000), Alloc: benchUUID(i)})
	}
	for i := range 8 {
		g.Assigned = append(g.Assigned, i)
		g.Slots = append(g.Slots, SummarySlot{Index: i, Holder: fmt.Sprintf("node-%04d", 500+i)})
	}
	s := RolloutSummary{Namespace: "default", JobID: "web", JobVersion: 7, DeploymentID: benchUUID(9999), Steward: "node-0001", Time: t0, Groups: map[string]*GroupSummary{"web": g}}
	out, err := json.Marshal(s)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func benchDeployment(b *testing.B) []byte {
	t0 := time.Date(2026, 12, 5, 11, 0, 0, 123456789, time.UTC)
	d := Deployment{ID: benchUUID(1), Namespace: "default", JobID: "web", JobVersion: 7, Status: DeploymentStatuses[0],
		StatusDescription: DescRunning, TaskGroups: map[string]*DeploymentState{}, CreateTime: t0, ModifyTime: t0.Add(time.Minute),
		Protocol: 4, CreatedBy: "node-0001", Nonce: benchUUID(2)}
	for _, name := range []string{"web", "sidecar"} {
		st := &DeploymentState{AutoRevert: true, ProgressDeadline: Duration(10 * time.Minute), DesiredCanaries: 5, DesiredTotal: 1000,
			PlacedAllocs: 760, HealthyAllocs: 750, UnhealthyAllocs: 2, RequireProgressBy: t0.Add(10 * time.Minute), MaxParallel: 8,
			CanaryPolicy: "spread", CanaryReason: "one canary per rack"}
		for i := range 5 {
			st.CanaryNodes = append(st.CanaryNodes, fmt.Sprintf("node-%04d", 100*i))
			st.PlacedCanaries = append(st.PlacedCanaries, benchUUID(100+i))
		}
		d.TaskGroups[name] = st
	}
	for i := range MaxDeploymentEvents {
		d.Events = append(d.Events, DeploymentEvent{Time: t0.Add(time.Duration(i) * time.Second), Kind: EventReclaimed, Message: fmt.Sprintf("slot %d reclaimed from node-%04d", i%8, i)})
	}
	out, err := json.Marshal(d)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func benchUUID(i int) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", 0x9e3779b9*uint32(i+1), i%0x10000, i%0x1000, (7*i)%0x1000, 0x5851f42d4c957f2d*uint64(i+1)%(1<<48))
}

// genDoc writes a random JSON document shaped like a value of type t.
func genDoc(r *rand.Rand, t reflect.Type) []byte {
	g := docGen{r: r}
	g.value(t, 0)
	return g.b
}

type docGen struct {
	r *rand.Rand
	b []byte
}

func (g *docGen) one(n int) bool { return g.r.IntN(n) == 0 }

func (g *docGen) space() {
	if g.one(6) {
		for range 1 + g.r.IntN(2) {
			g.b = append(g.b, " \t\n\r"[g.r.IntN(4)])
		}
	}
}

func (g *docGen) value(t reflect.Type, depth int) {
	g.space()
	defer g.space()
	for t != nil && t.Kind() == reflect.Pointer {
		if g.one(12) {
			g.b = append(g.b, "null"...)
			return
		}
		t = t.Elem()
	}
	if t == nil || depth > 4 || g.one(25) {
		g.anyValue(depth)
		return
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		switch g.r.IntN(4) {
		case 0:
			g.anyValue(depth)
		case 1:
			g.number()
		default:
			g.str(pick(g.r, []string{"running", "10s", "2026-12-05T11:00:00Z", "", "ready", "1m30s"}))
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		g.structValue(t, depth)
	case reflect.Map:
		g.mapValue(t.Elem(), depth)
	case reflect.Slice, reflect.Array:
		n := g.r.IntN(4)
		if depth < 2 && g.one(10) {
			n = 10 + g.r.IntN(30)
		}
		g.b = append(g.b, '[')
		for i := range n {
			if i > 0 {
				g.b = append(g.b, ',')
			}
			g.value(t.Elem(), depth+1)
		}
		g.b = append(g.b, ']')
	case reflect.String:
		g.str(pick(g.r, stringPool))
	case reflect.Bool:
		g.b = append(g.b, pick(g.r, []string{"true", "false"})...)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		g.number()
	default:
		g.anyValue(depth)
	}
}

func (g *docGen) structValue(t reflect.Type, depth int) {
	fields := fieldsOf(t)
	order := g.r.Perm(len(fields))
	n := g.r.IntN(len(fields) + 1)
	if g.one(3) {
		n = len(fields)
	}
	var keys []string
	g.b = append(g.b, '{')
	for i := range n + g.r.IntN(2) {
		var key string
		var ft reflect.Type
		switch {
		case i >= n || g.one(40):
			key = pick(g.r, []string{"colour", "", "Colour", "health_description", "ID", "-", "skip", "Skip"})
		case len(keys) > 0 && g.one(60):
			key = keys[g.r.IntN(len(keys))] // a repeat, perhaps in another case below
		default:
			f := fields[order[i]]
			key, ft = f.tag, f.typ
		}
		if g.one(40) {
			key = recase(g.r, key)
		}
		keys = append(keys, key)
		if i > 0 {
			g.b = append(g.b, ',')
		}
		g.key(key)
		g.value(ft, depth+1)
	}
	g.b = append(g.b, '}')
}

func (g *docGen) mapValue(elem reflect.Type, depth int) {
	n := g.r.IntN(4)
	many := depth < 3 && g.one(8)
	if many {
		n = smallObject - 2 + g.r.IntN(30)
	}
	g.b = append(g.b, '{')
	for i := range n {
		if i > 0 {
			g.b = append(g.b, ',')
		}
		key := pick(g.r, keyPool)
		if many && !g.one(n) {
			key = "k" + strconv.Itoa(i) // mostly distinct, to get past smallObject
		}
		g.key(key)
		g.value(elem, depth+1)
	}
	g.b = append(g.b, '}')
}

func (g *docGen) anyValue(depth int) {
	switch k := g.r.IntN(8); {
	case k < 2 && depth < 7:
		g.mapValue(nil, depth+1)
	case k < 3 && depth < 7:
		g.b = append(g.b, '[')
		for i := range g.r.IntN(4) {
			if i > 0 {
				g.b = append(g.b, ',')
			}
			g.value(nil, depth+1)
		}
		g.b = append(g.b, ']')
	case k < 5:
		g.str(pick(g.r, stringPool))
	case k < 6:
		g.number()
	default:
		g.b = append(g.b, pick(g.r, []string{"true", "false", "null"})...)
	}
}

// key writes s as a JSON string, escaping some of its characters.
func (g *docGen) key(s string) {
	if !g.one(8) {
		g.str(s)
		g.space()
		g.b = append(g.b, ':')
		return
	}
	g.b = append(g.b, '"')
	for _, c := range []byte(s) {
		if c < 0x80 && g.one(3) {
			g.b = fmt.Appendf(g.b, `\u%04x`, c)
		} else {
			g.b = append(g.b, c)
		}
	}
	g.b = append(g.b, '"')
	g.space()
	g.b = append(g.b, ':')
}

// str writes s as a JSON string: its bytes, escaped where JSON must, bad
// UTF-8 kept as it is.
func (g *docGen) str(s string) {
	g.b = append(g.b, '"')
	for _, c := range []byte(s) {
		switch {
		case c == '"' || c == '\\':
			g.b = append(g.b, '\\', c)
		case c < ' ':
			g.b = fmt.Appendf(g.b, `\u%04x`, c)
		default:
			g.b = append(g.b, c)
		}
	}
	g.b = append(g.b, '"')
}

func (g *docGen) number() {
	g.b = append(g.b, pick(g.r, []string{"0", "-0", "1", "42", "-7", "1.5", "1e10", "2E-3", "-0.25e+2", "1e999", "12345678901234567890"})...)
}

var stringPool = []string{"", "a", "web", "node-0001", "line\nbreak", `q"uote`, "back\\slash", "é", "\u212a", "😀", "\xff", "\t"}

var keyPool = []string{"a", "b", "x", "Rack", "rack", "RACK", "stop", "STOP", "", "[0]", "é", "É", "\xff", "\xfe", "\ufffd", "\u212a", "k", "K", "\u017f", "s", "\u0130", "i\u0307"}

// recase changes the case of some letters of s, or swaps in a letter that
// folds to another (the Kelvin sign for k, the long s for s).
func recase(r *rand.Rand, s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case c == 'k' && r.IntN(3) == 0:
			b.WriteRune('\u212a')
		case c == 's' && r.IntN(3) == 0:
			b.WriteRune('\u017f')
		case r.IntN(2) == 0:
			b.WriteString(strings.ToUpper(string(c)))
		default:
			b.WriteString(strings.ToLower(string(c)))
		}
	}
	return b.String()
}

// mutate leaves doc whole half of the time; else it truncates it, changes
// a few bytes, or copies a piece of it elsewhere.
func mutate(r *rand.Rand, doc []byte) []byte {
	if len(doc) == 0 {
		return doc
	}
	switch r.IntN(8) {
	case 0, 1:
		return doc[:r.IntN(len(doc))]
	case 2, 3:
		const bytes = "{}[]:,\"\\ 0-.eEtfnu\x00\x1f\xff"
		for range 1 + r.IntN(3) {
			i := r.IntN(len(doc))
			switch r.IntN(3) {
			case 0:
				doc = append(doc[:i:i], doc[i+1:]...)
			case 1:
				doc = append(doc[:i:i], append([]byte{bytes[r.IntN(len(bytes))]}, doc[i:]...)...)
			default:
				doc[i] = bytes[r.IntN(len(bytes))]
			}
			if len(doc) == 0 {
				return doc
			}
		}
		return doc
	case 4:
		i, j := r.IntN(len(doc)), r.IntN(len(doc))
		i, j = min(i, j), max(i, j)
		at := r.IntN(len(doc))
		return append(doc[:at:at], append(append([]byte(nil), doc[i:j]...), doc[at:]...)...)
	}
	return doc
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }
