package lint

import (
	"os"
	"slices"
	"testing"
)

// TestTheModuleLogsErrorsUnderErr: every slog call in the module, tests
// included, logs an error under "err". The control is the module's own
// use of "err", which the same scan must see (TestLogKeysFindsBannedKeysOnly
// shows it finds a banned key where there is one).
func TestTheModuleLogsErrorsUnderErr(t *testing.T) {
	uses, files, err := LogKeys("../..", Banned())
	if err != nil {
		t.Fatal(err)
	}
	requireModuleRoot(t, files, 100, "Go files")
	for _, u := range uses {
		t.Error(u)
	}
	control, _, err := LogKeys("../../host/fleet", map[string]string{"err": "(control)"})
	if err != nil || len(control) == 0 {
		t.Fatalf("control: the scan finds no \"err\" key in host/fleet (%v)", err)
	}
}

func TestLogKeysFindsBannedKeysOnly(t *testing.T) {
	src, err := os.ReadFile("testdata/uses.go")
	if err != nil {
		t.Fatal(err)
	}
	uses, err := FileLogKeys("uses.go", src, Banned())
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

// requireModuleRoot fails the test unless ../.. is the module root and a
// check over it counted at least that many of what: a scan of the wrong
// directory, or of nothing, must not pass.
func requireModuleRoot(t *testing.T, counted, least int, what string) {
	t.Helper()
	if _, err := os.Stat("../../go.mod"); err != nil || counted < least {
		t.Fatalf("read %d %s at ../.. (go.mod: %v): not the module root", counted, what, err)
	}
}
