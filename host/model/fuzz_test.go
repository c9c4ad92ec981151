package model

import (
	"errors"
	"strings"
	"testing"
)

// The KV decoders built on Decode are fuzzed in host/wanted; this is the
// regression test of what FuzzDecodeNode found there in Decode itself: with
// two bad fields the error named one field (the first in key order, found by
// locate) and gave the reason of the other (the first in document order,
// from encoding/json). Control: with one bad field both name it.
func TestADecodeErrorsPathAndReasonNameTheSameField(t *testing.T) {
	cases := []struct {
		doc, path, reason string
	}{
		{`{"id":"n","status":"","eligibility":""}`, "eligibility", "model.Eligibility"},
		{`{"id":"n","status":"up","eligibility":"eligible"}`, "status", "model.NodeStatus"},
		{`{"id":"n","status":"ready","eligibility":"no"}`, "eligibility", "model.Eligibility"},
	}
	for _, c := range cases {
		var n Node
		err := Decode([]byte(c.doc), &n)
		var de *DecodeError
		if !errors.As(err, &de) || de.Path != c.path || !strings.Contains(de.Reason, c.reason) {
			t.Errorf("%s: %v, want path %q with a reason about %s", c.doc, err, c.path, c.reason)
		}
	}
}
