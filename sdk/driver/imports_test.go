package driver_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/internal/imports"
)

// TestTheSDKsImportNothingOfTheDaemon: authors depend on sdk/... alone, so
// no package under sdk/ imports another package of this module (host/,
// plugins/, policies/, runtime/, internal/, cmd/), but for the leaves in
// sdkLeaves: the policy ABI's codec, internal/policywire, which sdk/policy
// shares with the engine, and the edit distance, internal/typo, behind the
// driver config's "did you mean". Each leaf must import only the standard
// library, which this test checks too. The control is sdk/driver itself,
// which the scan must see importing sdk/driver/proto.
func TestTheSDKsImportNothingOfTheDaemon(t *testing.T) {
	const module, sdk = "github.com/hivelet/hivelet", "github.com/hivelet/hivelet/sdk"
	sdkLeaves := []string{module + "/internal/policywire", module + "/internal/typo"}
	pkgs, err := imports.List(sdk + "/...")
	if err != nil {
		t.Fatal(err)
	}
	control := false
	for _, p := range pkgs {
		for _, imp := range p.ImportsUnder(module) {
			if imp == sdk+"/driver/proto" && p.ImportPath == sdk+"/driver" {
				control = true
			}
			if !imports.Under(imp, sdk) && !slices.Contains(sdkLeaves, imp) {
				t.Errorf("%s imports %s: the SDKs may import only each other, the standard library and third-party modules", p.ImportPath, imp)
			}
		}
	}
	if !control {
		t.Fatalf("control: the scan does not see %s/driver importing %s/driver/proto", sdk, sdk)
	}
	if len(pkgs) < 3 || !strings.HasPrefix(pkgs[0].ImportPath, sdk) {
		t.Fatalf("listed %d packages, starting with %q", len(pkgs), pkgs[0].ImportPath)
	}
	leaves, err := imports.List(sdkLeaves...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range leaves {
		for _, imp := range p.Imports {
			if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s: a package the SDKs import may import only the standard library", p.ImportPath, imp)
			}
		}
	}
	if len(leaves) != len(sdkLeaves) {
		t.Fatalf("listed %d of the %d packages the SDKs may import", len(leaves), len(sdkLeaves))
	}
}
