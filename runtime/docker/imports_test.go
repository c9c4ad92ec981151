package docker

import (
	"strings"
	"testing"

	"github.com/hivelet/hivelet/internal/imports"
)

// TestOnlyThisPackageImportsTheDockerClient keeps the Docker Engine client
// behind this package, so a move to its successor module stays here. The
// control is this package itself, which the scan must see importing it.
func TestOnlyThisPackageImportsTheDockerClient(t *testing.T) {
	const self = "github.com/hivelet/hivelet/runtime/docker"
	pkgs, err := imports.List("github.com/hivelet/hivelet/...")
	if err != nil {
		t.Fatal(err)
	}
	selfImports := false
	for _, p := range pkgs {
		var client []string
		for _, mod := range []string{"github.com/docker/docker", "github.com/moby/moby"} {
			client = append(client, p.ImportsUnder(mod)...)
		}
		if p.ImportPath == self {
			selfImports = len(client) > 0
			continue
		}
		if len(client) > 0 {
			t.Errorf("%s imports the Docker client (%s): only %s may", p.ImportPath, strings.Join(client, ", "), self)
		}
	}
	if !selfImports {
		t.Fatalf("control: %s is not seen importing the Docker client", self)
	}
}
