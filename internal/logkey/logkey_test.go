package logkey

import (
	"os"
	"slices"
	"testing"
)

// TestTheModuleLogsErrorsUnderErr: every slog call in the module, tests
// included, logs an error under "err". The control is the module's own
// use of "err", which the same scan must see (TestScanFindsBannedKeysOnly
// shows it finds a banned key where there is one).
func TestTheModuleLogsErrorsUnderErr(t *testing.T) {
	uses, files, err := Scan("../..", Banned())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("../../go.mod"); err != nil || files < 100 {
		t.Fatalf("scanned %d files at ../.. (go.mod: %v): not the module root", files, err)
	}
	for _, u := range uses {
		t.Error(u)
	}
	control, _, err := Scan("../../host/fleet", map[string]string{"err": "(control)"})
	if err != nil || len(control) == 0 {
		t.Fatalf("control: the scan finds no \"err\" key in host/fleet (%v)", err)
	}
}

func TestScanFindsBannedKeysOnly(t *testing.T) {
	src, err := os.ReadFile("testdata/uses.go")
	if err != nil {
		t.Fatal(err)
	}
	uses, err := ScanFile("uses.go", src, Banned())
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, u := range uses {
		lines = append(lines, u.Pos.Line)
	}
	if want := []int{10, 12, 13, 14}; !slices.Equal(lines, want) {
		t.Fatalf("banned keys found on lines %v, want %v: %v", lines, want, uses)
	}
}
