package model

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// decodeBothWays decodes doc with the canonical scanner and with Decode,
// and reports the scanner's verdict and what DecodeSummary returned.
func decodeBothWays(t *testing.T, doc []byte) (canonical bool, refErr error) {
	t.Helper()
	var fast RolloutSummary
	canonical = decodeSummaryCanonical(doc, &fast)
	var ref RolloutSummary
	refErr = Decode(doc, &ref)
	if canonical {
		if refErr != nil {
			t.Fatalf("the scanner accepted what Decode refuses (%v):\n%q", refErr, doc)
		}
		if !reflect.DeepEqual(fast, ref) {
			t.Fatalf("the scanner read\n%#v\nDecode read\n%#v\nof %q", fast, ref, doc)
		}
	}
	got, err := DecodeSummary(doc)
	switch {
	case (err == nil) != (refErr == nil):
		t.Fatalf("DecodeSummary: %v, Decode: %v, of %q", err, refErr, doc)
	case err != nil && err.Error() != refErr.Error():
		t.Fatalf("DecodeSummary's error %q is not Decode's %q", err, refErr)
	case err == nil && !reflect.DeepEqual(*got, ref):
		t.Fatalf("DecodeSummary read\n%#v\nDecode read\n%#v", *got, ref)
	}
	return canonical, refErr
}

// TestDecodeSummaryReadsWhatTheStewardWritesCanonically: a summary as the
// steward encodes it (json.Marshal) takes the scanner, whole, and reads
// back as it was written; the same with white space between the tokens.
func TestDecodeSummaryReadsWhatTheStewardWritesCanonically(t *testing.T) {
	doc := benchSummary(t)
	for _, d := range [][]byte{doc, indent(t, doc)} {
		canonical, err := decodeBothWays(t, d)
		if !canonical || err != nil {
			t.Fatalf("canonical %v, err %v: a steward's summary must take the scanner", canonical, err)
		}
	}
	var want RolloutSummary
	if err := json.Unmarshal(doc, &want); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSummary(doc)
	if err != nil || !reflect.DeepEqual(*got, want) || len(got.Groups["web"].Waiting) != 200 {
		t.Fatalf("read %+v, %v", got, err)
	}
	// Empty lists are empty, not absent, as the decoder makes them.
	empty := []byte(`{"job_id":"web","job_version":1,"deployment_id":"d","steward":"n","time":"2026-12-05T11:00:00Z","groups":{"web":{"waiting":[],"assigned":[],"next":[],"slots":[],"waiting_total":0,"desired":0,"placed":0,"healthy":0,"unhealthy":0,"pending":0,"outdated":0,"in_flight":0}}}`)
	if canonical, err := decodeBothWays(t, empty); !canonical || err != nil {
		t.Fatalf("canonical %v, err %v", canonical, err)
	}
}

func indent(t testing.TB, doc []byte) []byte {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(v, "", " \t")
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte("\r\n"), out...), '\n')
}

// TestDecodeSummaryGoesToDecodeOutsideTheCanonicalForm: each of these
// leaves the scanner (an escape, another spelling, a repeat, a null, a
// number in another form, a time the decoder may read otherwise, bad
// syntax, trailing data), and DecodeSummary's answer is Decode's.
func TestDecodeSummaryGoesToDecodeOutsideTheCanonicalForm(t *testing.T) {
	base := `{"job_id":"web","job_version":3,"deployment_id":"d","steward":"node-1","time":"2026-12-05T11:00:00Z","groups":{"web":{"waiting":[{"node":"node-2","alloc":"a2"}],"waiting_total":1,"assigned":[0],"slots":[{"i":0,"node":"node-3"}],"desired":4,"placed":4,"healthy":3,"unhealthy":0,"pending":1,"outdated":1,"in_flight":1}}}`
	if canonical, err := decodeBothWays(t, []byte(base)); !canonical || err != nil {
		t.Fatalf("the base case: canonical %v, err %v", canonical, err)
	}
	cases := []struct{ old, new string }{
		{`"node-2"`, `"node\u002d2"`},
		{`"node-2"`, `"nöde-2"`},
		{`"job_id"`, `"Job_ID"`},
		{`"job_id":"web",`, `"job_id":"web","job_id":"web",`},
		{`"groups":{"web":{`, `"groups":{"web":{},"web":{`},
		{`"steward":"node-1"`, `"steward":null`},
		{`"waiting":[`, `"waiting":null,"x":[`},
		{`"job_version":3`, `"job_version":3.0`},
		{`"job_version":3`, `"job_version":3e0`},
		{`"job_version":3`, `"job_version":-3`},
		{`"job_version":3`, `"job_version":03`},
		{`"job_version":3`, `"job_version":18446744073709551615`},
		{`"job_version":3`, `"job_version":18446744073709551616`},
		{`"desired":4`, `"desired":-0`},
		{`"desired":4`, `"desired":-4`},
		{`"desired":4`, `"desired":9223372036854775808`},
		{`"desired":4`, `"desired":"4"`},
		{`"time":"2026-12-05T11:00:00Z"`, `"time":"2026-12-05T11:00:00.123456789+01:00"`},
		{`"time":"2026-12-05T11:00:00Z"`, `"time":"2026-12-05t11:00:00z"`},
		{`"time":"2026-12-05T11:00:00Z"`, `"time":"2026-12-05 11:00:00Z"`},
		{`"time":"2026-12-05T11:00:00Z"`, `"time":"2026-12-05T24:00:00Z"`},
		{`"time":"2026-12-05T11:00:00Z"`, `"time":null`},
		{`"time":"2026-12-05T11:00:00Z"`, `"time":1`},
		{`"i":0`, `"i":0,"node":"x"`},
		{`"alloc":"a2"}`, `"alloc":"a2",}`},
		{`}}}`, `}}} `},
		{`}}}`, `}}}{}`},
		{`}}}`, `}}`},
		{`"placed":4`, `"placed":4,"colour":1`},
	}
	outcomes := map[string]int{}
	for _, c := range cases {
		if !strings.Contains(base, c.old) {
			t.Fatalf("%q is not in the base case", c.old)
		}
		doc := strings.Replace(base, c.old, c.new, 1)
		canonical, err := decodeBothWays(t, []byte(doc))
		switch {
		case canonical:
			outcomes["scanned"]++
		case err == nil:
			outcomes["decoded"]++
		default:
			outcomes["refused"]++
		}
	}
	t.Logf("%v", outcomes)
	// Control: both ways out of the scanner were taken, and the scanner
	// took the forms it reads (white space after the document, a time
	// with an offset).
	if outcomes["decoded"] < 5 || outcomes["refused"] < 5 || outcomes["scanned"] < 2 {
		t.Fatalf("outcomes %v: the cases do not reach every way", outcomes)
	}
}

var summaryDocs = flag.Int("summary.docs", 6000, "random documents TestDecodeSummaryAgreesWithDecode checks")

// TestDecodeSummaryAgreesWithDecode holds the scanner to Decode on random
// documents shaped like a summary (the key check's generator: fields left
// out, repeated, spelled in another case or with escapes, values of the
// wrong shape, then truncated or with bytes changed) and on random
// summaries as the steward encodes them: what the scanner accepts, Decode
// accepts and reads the same. Control: the scanner accepts many of them
// and leaves many that Decode accepts or refuses.
func TestDecodeSummaryAgreesWithDecode(t *testing.T) {
	n := *summaryDocs
	if testing.Short() {
		n /= 4
	}
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(4, seed))
	t.Logf("seed %d", seed)
	count := map[string]int{}
	typ := reflect.TypeFor[*RolloutSummary]()
	for i := range n {
		var doc []byte
		if i%2 == 0 {
			doc = mutate(r, genDoc(r, typ))
		} else {
			doc = mutate(r, randomSummary(t, r))
		}
		canonical, err := decodeBothWays(t, doc)
		switch {
		case canonical:
			count["scanned"]++
		case err == nil:
			count["decoded"]++
		default:
			count["refused"]++
		}
	}
	t.Logf("%d documents: %v", n, count)
	for _, k := range []string{"scanned", "decoded", "refused"} {
		if count[k] < n/50 {
			t.Errorf("only %d documents %s", count[k], k)
		}
	}
}

// randomSummary is a summary as json.Marshal writes it, with values drawn
// to reach the scanner's edges (empty lists, negative and large numbers,
// times with and without fractions and offsets).
func randomSummary(t testing.TB, r *rand.Rand) []byte {
	ints := func() []int {
		if r.IntN(4) == 0 {
			return nil
		}
		out := make([]int, r.IntN(5))
		for i := range out {
			out[i] = r.IntN(300) - 20
		}
		return out
	}
	loc := time.FixedZone("", (r.IntN(25)-12)*3600)
	at := time.Date(2000+r.IntN(60), time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), []int{0, 123456789, 500000000, 1000}[r.IntN(4)], loc)
	s := RolloutSummary{JobID: pick(r, []string{"web", "api", "a-b_c"}), JobVersion: r.Uint64() >> r.IntN(64),
		DeploymentID: benchUUID(r.IntN(1000)), Steward: fmt.Sprintf("node-%d", r.IntN(100)), Time: at}
	if r.IntN(2) == 0 {
		s.Namespace = "default"
	}
	if r.IntN(6) > 0 {
		s.Groups = map[string]*GroupSummary{}
		for range 1 + r.IntN(3) {
			g := &GroupSummary{WaitingTotal: r.IntN(1000), Assigned: ints(), Next: ints(), Desired: r.IntN(1 << 20),
				Placed: r.IntN(10), Healthy: -r.IntN(3), InFlight: r.Int() >> r.IntN(63)}
			if r.IntN(4) > 0 {
				g.Waiting = make([]SummaryWaiter, r.IntN(30))
				for i := range g.Waiting {
					g.Waiting[i] = SummaryWaiter{Node: fmt.Sprintf("node-%d", r.IntN(100)), Alloc: benchUUID(r.IntN(1000))}
				}
			}
			if r.IntN(4) > 0 {
				g.Slots = make([]SummarySlot, r.IntN(10))
				for i := range g.Slots {
					g.Slots[i] = SummarySlot{Index: i, Holder: fmt.Sprintf("node-%d", r.IntN(100))}
				}
			}
			s.Groups[pick(r, []string{"web", "db", "cache", "x y"})] = g
		}
	}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzDecodeSummaryAgreesWithDecode is TestDecodeSummaryAgreesWithDecode
// on any bytes. In CI only its seeds run.
func FuzzDecodeSummaryAgreesWithDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	f.Add(benchSummary(f))
	for range 8 {
		f.Add(randomSummary(f, r))
		f.Add(genDoc(r, reflect.TypeFor[*RolloutSummary]()))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		decodeBothWays(t, doc)
	})
}

// BenchmarkDecodeSummary measures DecodeSummary (the scanner) against
// Decode on a summary listing 200 waiters, as every agent decodes each
// one during a rollout of 1,000 nodes.
func BenchmarkDecodeSummary(b *testing.B) {
	doc := benchSummary(b)
	for _, impl := range []struct {
		name   string
		decode func([]byte) error
	}{
		{"Decode", func(d []byte) error { var s RolloutSummary; return Decode(d, &s) }},
		{"DecodeSummary", func(d []byte) error { _, err := DecodeSummary(d); return err }},
	} {
		b.Run(impl.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				if err := impl.decode(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSpecialSeesEverySpecialByte holds the eight-byte test to the byte
// table: a word with any byte the table refuses (or a '"') is special, in
// any position and next to any other byte; a word of plain bytes is not.
func TestSpecialSeesEverySpecialByte(t *testing.T) {
	edges := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"', '\\', 0x5b, 0x5d, 0x7e, 0x7f, 0x80, 0x81, 0xfe, 0xff, 'a', '0'}
	r := rand.New(rand.NewPCG(9, 10))
	for range 200000 {
		var w [8]byte
		want := false
		for i := range w {
			if r.IntN(3) == 0 {
				w[i] = edges[r.IntN(len(edges))]
			} else {
				w[i] = byte(r.IntN(256))
			}
			if r.IntN(4) > 0 && (!plainASCII[w[i]] || w[i] == '"') {
				w[i] = 'x' // mostly plain words, so both answers are frequent
			}
			want = want || !plainASCII[w[i]] || w[i] == '"'
		}
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 | uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		if got := special(x); want && !got {
			t.Fatalf("% x: special says plain", w)
		} else if !want && got {
			t.Fatalf("% x: special says special of plain bytes", w)
		}
	}
}
