package jobspec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/txtar"

	"github.com/hivelet/hivelet/host/model"
)

// checkParsed holds for any input: a failure is Errors, each error located
// (line and column for HCL); a success is a valid job whose canonical JSON
// round-trips through DecodeJob byte for byte.
func checkParsed(t *testing.T, j *model.Job, err error, wantPositions bool) {
	if err != nil {
		var es Errors
		if !errors.As(err, &es) || len(es) == 0 {
			t.Fatalf("error is not a non-empty Errors: %T %v", err, err)
		}
		for _, e := range es {
			if wantPositions && e.Line < 1 && e.Message != "" && !bytes.Contains([]byte(e.Message), []byte("limit")) {
				t.Fatalf("HCL error without a position: %q", e.Error())
			}
		}
		return
	}
	if verr := j.Validate(); verr != nil {
		t.Fatalf("parsed job does not validate: %v", verr)
	}
	first, err := Canonical(j)
	if err != nil {
		t.Fatalf("canonical: %v", err)
	}
	decoded, err := model.DecodeJob(first)
	if err != nil {
		t.Fatalf("canonical JSON does not decode: %v\n%s", err, first)
	}
	second, err := Canonical(decoded)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Fatalf("round trip differs:\n%s\n---\n%s", first, second)
	}
}

func FuzzParseHCL(f *testing.F) {
	for _, src := range seedHCL {
		f.Add([]byte(src))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Go's fuzzer has no per-input deadline: a hang would only show
		// as a stalled exec count. Crash loudly instead.
		watchdog := time.AfterFunc(30*time.Second, func() { panic(fmt.Sprintf("ParseHCL hangs on %q", data)) })
		defer watchdog.Stop()
		j, err := ParseHCL("fuzz.hcl", data)
		checkParsed(t, j, err, true)
	})
}

func FuzzParseJSON(f *testing.F) {
	f.Add([]byte(`{"id":"j","type":"system","groups":[{"name":"g","count":1,"tasks":[{"name":"t","driver":"mock","config":{"a":[1,{"b":null}]}}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := ParseJSON("fuzz.json", data)
		checkParsed(t, j, err, false)
	})
}

// seedHCL are small seeds kept in code; the examples and the error
// transcript are in testdata/fuzz (see TestFuzzSeedCorpusHoldsEveryExample).
var seedHCL = []string{
	`job "j" {
  type = "system"
  group "g" {
    task "t" {
      driver = "mock"
      config { a = "${node.x}" b { c = [1, 2.5, true, null] } }
    }
  }
}`,
}

// TestFuzzSeedCorpusHoldsEveryExample keeps the committed seed corpus in
// step with the examples and the error transcript (rewrite with -update).
func TestFuzzSeedCorpusHoldsEveryExample(t *testing.T) {
	seeds := map[string][]byte{} // target/name → input
	for _, f := range exampleFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		target := "FuzzParseHCL"
		if filepath.Ext(f) == ".json" {
			target = "FuzzParseJSON"
		}
		seeds[target+"/example-"+strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))] = data
	}
	ar, err := txtar.ParseFile("testdata/errors.txtar")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ar.Files {
		switch filepath.Ext(f.Name) {
		case ".hcl":
			seeds["FuzzParseHCL/errors-"+strings.TrimSuffix(f.Name, ".hcl")] = f.Data
		case ".json":
			seeds["FuzzParseJSON/errors-"+strings.TrimSuffix(f.Name, ".json")] = f.Data
		}
	}
	for name, data := range seeds {
		path := filepath.Join("testdata", "fuzz", name)
		want := []byte("go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n")
		got, err := os.ReadFile(path)
		if bytes.Equal(got, want) {
			continue
		}
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("seed %s is missing or stale (%v): run with -update", path, err)
	}
}
