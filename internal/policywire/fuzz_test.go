package policywire

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fuzz targets of this file feed each message decoder arbitrary bytes:
// the answers are what a policy module (any guest, hostile or broken)
// returns to the host, the inputs what a guest built with the SDK decodes.
// Each checks:
//   - the decoder never panics or hangs;
//   - a refusal is ErrMalformed, naming what is wrong and a byte offset
//     inside the message, or (answers only) the policy's own *PolicyError;
//   - an accepted message is in range (a known decision, revert only with
//     fail, counts no larger than the message) and re-encodes to a message
//     that decodes to the same value; answers, which have one encoding but
//     for varint padding, re-encode to the same bytes when the input had
//     no padded varint (checked for the completion answer, which has none);
//   - a decoder allocates no more values than the message has bytes for.

func checkWireError(t *testing.T, buf []byte, err error) {
	t.Helper()
	var pe *PolicyError
	if errors.As(err, &pe) {
		return
	}
	var we *wireError
	if !errors.Is(err, ErrMalformed) || !errors.As(err, &we) {
		t.Fatalf("refusal is neither ErrMalformed nor a *PolicyError: %T %v", err, err)
	}
	if we.what == "" || we.at < 0 || we.at > len(buf) {
		t.Fatalf("refusal %q names no reason or an offset outside the %d-byte message", err, len(buf))
	}
	if !strings.Contains(err.Error(), "at byte "+strconv.Itoa(we.at)) {
		t.Fatalf("refusal %q does not say where", err)
	}
}

func watch(what string, data []byte) *time.Timer {
	return time.AfterFunc(30*time.Second, func() { panic(fmt.Sprintf("%s hangs on %q", what, data)) })
}

func FuzzDecodeCanaryOutput(f *testing.F) {
	f.Add(AppendCanaryOutput(nil, CanaryOutput{NodeIDs: []string{"n1", "n2"}, Reason: "first nodes"}))
	f.Add(AppendCanaryOutput(nil, CanaryOutput{Reason: "nobody: no node carries the meta key"}))
	f.Add(AppendCanaryOutput(nil, CanaryOutput{NodeIDs: []string{"n1", "n1", ""}}))
	f.Add(AppendError(nil, "cannot choose: parameter percent is not a number"))
	f.Add([]byte{9})                                                             // unknown status (testdata/wat/badstatus.wat)
	f.Add([]byte{0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}) // varint overflow
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0})                   // count > message
	f.Fuzz(func(t *testing.T, buf []byte) {
		defer watch("DecodeCanaryOutput", buf).Stop()
		out, err := DecodeCanaryOutput(buf)
		if err != nil {
			checkWireError(t, buf, err)
			var pe *PolicyError
			if errors.As(err, &pe) {
				if again := AppendError(nil, pe.Message); !bytes.Equal(again, buf) {
					t.Fatalf("error answer %q re-encodes to %q", buf, again)
				}
			}
			return
		}
		if 4*len(out.NodeIDs) > len(buf) {
			t.Fatalf("%d node IDs out of a %d-byte answer", len(out.NodeIDs), len(buf))
		}
		re := AppendCanaryOutput(nil, out)
		if len(re) > len(buf) {
			t.Fatalf("answer re-encodes longer (%d > %d bytes)", len(re), len(buf))
		}
		again, err := DecodeCanaryOutput(re)
		if err != nil || !reflect.DeepEqual(again, out) {
			t.Fatalf("answer %+v re-encoded decodes to %+v, %v", out, again, err)
		}
	})
}

func FuzzDecodeCompletionOutput(f *testing.F) {
	for _, out := range []CompletionOutput{{Decision: Continue, Reason: "waiting"}, {Decision: Promote}, {Decision: Succeed, Reason: "all healthy"},
		{Decision: Fail, Reason: "2 unhealthy"}, {Decision: Fail, Revert: true, Reason: "revert"}} {
		f.Add(AppendCompletionOutput(nil, out))
	}
	f.Add(AppendError(nil, "no groups"))
	f.Add([]byte{0, 4, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 1, 0, 0, 0, 0})
	f.Add([]byte{0, 3, 2, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, buf []byte) {
		defer watch("DecodeCompletionOutput", buf).Stop()
		out, err := DecodeCompletionOutput(buf)
		if err != nil {
			checkWireError(t, buf, err)
			return
		}
		if out.Decision > Fail || out.Decision.String() == "unknown" {
			t.Fatalf("accepted unknown decision %d", out.Decision)
		}
		if out.Revert && out.Decision != Fail {
			t.Fatalf("accepted revert with %s", out.Decision)
		}
		if re := AppendCompletionOutput(nil, out); !bytes.Equal(re, buf) {
			t.Fatalf("answer %q re-encodes to %q", buf, re)
		}
	})
}

func FuzzDecodeCompletionInput(f *testing.F) {
	now := time.Unix(1_800_000_000, 5).UTC()
	in := Completion{DeploymentID: "d", JobID: "j", JobVersion: 3, Status: "running", Disruption: "many nodes expired", Now: now,
		Params: map[string]string{"k": "v", "a": ""},
		Groups: []Group{{Name: "a", DesiredTotal: 5, DesiredCanaries: 1, AutoRevert: true, Promoted: true, Complete: true,
			ProgressDeadline: time.Minute, RequireProgressBy: now.Add(time.Hour), Placed: 5, Healthy: 4, Unhealthy: 1, Pending: 0,
			CanariesHealthy: 1, LostInFlight: 1, Lost: 2, Disconnected: 3}, {Name: "b", AutoPromote: true}}}
	f.Add(AppendCompletionInput(nil, &in, ABIVersion))
	f.Add(AppendCompletionInput(nil, &Completion{}, ABIVersion))
	f.Fuzz(func(t *testing.T, buf []byte) {
		defer watch("DecodeCompletionInput", buf).Stop()
		got, err := DecodeCompletionInput(buf)
		if err != nil {
			checkWireError(t, buf, err)
			return
		}
		if len(got.Groups) > len(buf) || len(got.Params) > len(buf) {
			t.Fatalf("%d groups, %d params out of %d bytes", len(got.Groups), len(got.Params), len(buf))
		}
		re := AppendCompletionInput(nil, &got, ABIVersion)
		again, err := DecodeCompletionInput(re)
		if err != nil {
			t.Fatalf("input re-encoded does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, got) {
			t.Fatalf("input round trip differs:\n%+v\n%+v", got, again)
		}
	})
}

// fuzzNode records what DecodeCanaryInput binds.
type fuzzNode struct {
	f   NodeFields
	t   *Tables
	off int32
}

// decodedNodes reads decoded nodes back through the Nodes interface.
type decodedNodes []fuzzNode

func (l decodedNodes) Len() int               { return len(l) }
func (l decodedNodes) Fixed(i int) NodeFields { return l[i].f }
func (l decodedNodes) value(i, j int) (string, bool) {
	n := l[i]
	return n.t.Vals[int(n.off)+j], n.t.Has[int(n.off)+j]
}
func (l decodedNodes) Attribute(i int, k string) (string, bool) {
	for j, a := range l[i].t.Attr {
		if a == k {
			return l.value(i, j)
		}
	}
	return "", false
}
func (l decodedNodes) Meta(i int, k string) (string, bool) {
	t := l[i].t
	for j, m := range t.Meta {
		if m == k {
			return l.value(i, len(t.Attr)+j)
		}
	}
	return "", false
}

func FuzzDecodeCanaryInput(f *testing.F) {
	c := Canary{JobID: "web", JobVersion: 1 << 40, DeploymentID: "d1", Group: "g", Percent: 25, Count: 2,
		Params: map[string]string{"b": "2", "a": "1"}, Existing: []string{"x", "y"}}
	nodes := testNodes{
		{"id": "n1", "name": "h1", "datacenter": "dc1", "class": "gpu", "attr.k": "v1", "meta.rack": "r1"},
		{"id": "n2", "name": "h2", "datacenter": "dc2", "attr.k": ""},
	}
	f.Add(AppendCanaryInput(nil, &c, FieldDatacenter|FieldClass, []string{"k"}, []string{"rack"}, nodes))
	f.Add(AppendCanaryInput(nil, &c, FieldAll, nil, nil, nodes))
	f.Add(AppendCanaryInput(nil, &Canary{}, 0, nil, nil, testNodes{}))
	f.Fuzz(func(t *testing.T, buf []byte) {
		defer watch("DecodeCanaryInput", buf).Stop()
		var tables *Tables
		got, decoded, err := DecodeCanaryInput(buf, func(n *fuzzNode, nf NodeFields, tb *Tables, off int32) {
			*n = fuzzNode{nf, tb, off}
			tables = tb
		})
		// Every value of every node takes at least its 4-byte length.
		if tables != nil && 4*len(tables.Vals) > len(buf) {
			t.Fatalf("%d node values allocated for a %d-byte input", len(tables.Vals), len(buf))
		}
		if err != nil {
			checkWireError(t, buf, err)
			return
		}
		if tables == nil {
			if len(decoded) != 0 {
				t.Fatal("nodes decoded without their tables")
			}
			return // no node: the tables are not returned
		}
		if len(got.Existing) > len(buf) {
			t.Fatalf("%d existing canaries out of %d bytes", len(got.Existing), len(buf))
		}
		if hasDuplicate(tables.Attr) || hasDuplicate(tables.Meta) {
			return // the encoder reads values by key: a repeated key cannot re-encode (the host sends each once)
		}
		// Re-encode with the decoded tables.
		re := AppendCanaryInput(nil, &got, tables.Fields, tables.Attr, tables.Meta, decodedNodes(decoded))
		var tables2 *Tables
		again, decoded2, err := DecodeCanaryInput(re, func(n *fuzzNode, nf NodeFields, tb *Tables, off int32) {
			*n = fuzzNode{nf, tb, off}
			tables2 = tb
		})
		if err != nil {
			t.Fatalf("input re-encoded does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, got) || len(decoded2) != len(decoded) || !reflect.DeepEqual(*tables2, *tables) {
			t.Fatalf("input round trip differs:\n%+v %+v\n%+v %+v", got, *tables, again, *tables2)
		}
		for i := range decoded {
			if decoded[i].f != decoded2[i].f || decoded[i].off != decoded2[i].off {
				t.Fatalf("node %d: %+v, then %+v", i, decoded[i], decoded2[i])
			}
		}
	})
}

func hasDuplicate(keys []string) bool {
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			return true
		}
		seen[k] = true
	}
	return false
}
