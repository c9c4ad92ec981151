package jobspec

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"
)

var update = flag.Bool("update", false, "rewrite the .want sections of testdata/errors.txtar")

// TestEveryErrorClassIsReportedAtItsPosition runs the transcript in
// testdata/errors.txtar: each job file must fail with exactly the errors in
// its .want section, every one of them, in file order.
func TestEveryErrorClassIsReportedAtItsPosition(t *testing.T) {
	const path = "testdata/errors.txtar"
	ar, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rewritten := false
	for i := 0; i < len(ar.Files); i++ {
		f := ar.Files[i]
		ext := filepath.Ext(f.Name)
		if ext != ".hcl" && ext != ".json" {
			continue
		}
		name := strings.TrimSuffix(f.Name, ext)
		if i+1 >= len(ar.Files) || ar.Files[i+1].Name != name+".want" {
			t.Fatalf("%s: no %s.want section follows", f.Name, name)
		}
		want := &ar.Files[i+1]
		t.Run(name, func(t *testing.T) {
			job, err := Parse(f.Name, f.Data)
			if err == nil {
				t.Fatalf("parsed without error into job %q; every case here must fail", job.ID)
			}
			got := err.Error() + "\n"
			if *update {
				if string(want.Data) != got {
					want.Data = []byte(got)
					rewritten = true
				}
				return
			}
			if got != string(want.Data) {
				t.Errorf("errors differ\n--- got\n%s--- want\n%s", got, want.Data)
			}
		})
	}
	if rewritten {
		if err := os.WriteFile(path, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
