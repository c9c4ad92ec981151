package vars

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"
)

// FuzzDecodeVariable feeds decode (what Get reads from the variables
// bucket, and templates render) arbitrary bytes and checks: it never panics
// or hangs; a refusal names the variable's path; an accepted variable is a
// non-nil map (templates index it) that re-encodes (json.Marshal, as Put
// writes it) to a value that decodes again to the same items.
func FuzzDecodeVariable(f *testing.F) {
	for _, items := range []map[string]string{{"password": "s3cr3t", "user": "app"}, {}, {"": "", "k": "line\nbreak \u2028 <>&"}} {
		b, err := json.Marshal(items)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`null`))
	f.Add([]byte(`{"a":1}`))
	f.Add([]byte(`{"a":"1"} x`))
	const path = "nomad/jobs/web"
	f.Fuzz(func(t *testing.T, value []byte) {
		watchdog := time.AfterFunc(30*time.Second, func() { panic(fmt.Sprintf("decode hangs on %q", value)) })
		defer watchdog.Stop()
		items, err := decode(path, value)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("refusal does not name the variable: %v", err)
			}
			return
		}
		if items == nil {
			t.Fatal("accepted variable with nil items")
		}
		b, err := json.Marshal(items)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decode(path, b)
		if err != nil || !maps.Equal(again, items) {
			t.Fatalf("items %q re-encoded decode to %q, %v", items, again, err)
		}
	})
}
