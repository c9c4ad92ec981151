package services

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// FuzzDecodeRegistration feeds decode (what List and Instances read from
// the services bucket) a key and a value, as any client of the bucket could
// put them, and checks: it never panics or hangs; a refusal names the key
// or the field; an accepted registration belongs under its key (its name a
// key token, the key its name, allocation and index, so Instances(name)
// returns only that service's instances) and re-encodes (json.Marshal, as
// Register writes it) to a value that decodes again under the same key to
// the same bytes.
func FuzzDecodeRegistration(f *testing.F) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, r := range []*model.ServiceRegistration{
		{Name: "web", AllocID: "a1", JobID: "web", Group: "g", Task: "t", NodeID: "n1", Address: "10.0.0.1", Port: 8080, Tags: []string{"x", "y"}, Index: 0, UpdateTime: now},
		{Name: "db", AllocID: "a2", JobID: "db", Namespace: "ops", Group: "g", NodeID: "n2", Address: "::1", Port: 5432, Index: 3},
	} {
		b, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(Key(r), b)
	}
	f.Add("junk.a9.0", []byte("{not json"))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		watchdog := time.AfterFunc(30*time.Second, func() { panic(fmt.Sprintf("decode hangs on %q %q", key, value)) })
		defer watchdog.Stop()
		r, err := decode(key, value)
		if err != nil {
			var de *model.DecodeError
			if !errors.As(err, &de) && !strings.Contains(err.Error(), strconv.Quote(key)) {
				t.Fatalf("refusal names neither a field nor the key %q: %v", key, err)
			}
			if errors.As(err, &de) && de.Reason == "" {
				t.Fatalf("decode error without a reason: %v", err)
			}
			return
		}
		if CheckName(r.Name) != nil || !strings.HasPrefix(key, r.Name+".") || key != Key(r) {
			t.Fatalf("registration %+v accepted under key %q", r, key)
		}
		first, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decode(key, first)
		if err != nil {
			t.Fatalf("accepted registration, re-encoded, is refused: %v\n%s", err, first)
		}
		second, _ := json.Marshal(again)
		if !bytes.Equal(first, second) {
			t.Fatalf("round trip differs:\n%s\n%s", first, second)
		}
	})
}
