package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/policies"
	"github.com/hivelet/hivelet/policies/build"
	"github.com/hivelet/hivelet/sdk/policy"
)

func TestChooseSpreadsMarkedNodesAcrossDatacenters(t *testing.T) {
	marked := map[string]string{"canary": "true"}
	in := policy.CanaryInput{Count: 3, Nodes: []policy.Node{
		policy.NewNode("a", "", "dc1", "", "", nil, marked),
		policy.NewNode("b", "", "dc1", "", "", nil, marked),
		policy.NewNode("c", "", "dc2", "", "", nil, nil),
		policy.NewNode("d", "", "dc2", "", "", nil, marked),
	}}
	out, err := choose(in)
	if err != nil || !slices.Equal(out.NodeIDs, []string{"a", "d", "b"}) {
		t.Fatalf("got %v, %v", out.NodeIDs, err)
	}
}

func TestTheModuleDeclaresWhatItReads(t *testing.T) {
	kinds, manifest := policy.Declared()
	if kinds != policy.KindCanary || manifest != "field datacenter\nmeta canary\n" {
		t.Fatalf("kinds %d, manifest %q", kinds, manifest)
	}
}

// TestTheBuiltModulePassesItsCasesFile builds the module as `hivelet policy
// build` does and runs cases.json through the agent's engine, as `hivelet
// policy test` does.
func TestTheBuiltModulePassesItsCasesFile(t *testing.T) {
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "canarymeta.wasm")
	if err := build.Module(ctx, ".", out); err != nil {
		t.Fatal(err)
	}
	wasm, _ := os.ReadFile(out)
	// The agent's deadlines (100 ms a call, 2 s a module's initialisation)
	// judge a module on a node; under -race beside three other test
	// packages on two cores a call took longer (the suite failed on it
	// once), so the cases get the generous ones `hivelet policy test
	// --deadline` and `--load-deadline` allow.
	e, err := policies.New(ctx, policies.Options{CacheDir: testutil.WazeroCacheDir(t), Deadline: 10 * time.Second, LoadDeadline: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	m, err := e.Compile(ctx, "canarymeta", wasm)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile("cases.json")
	var cf policies.CaseFile
	if err := policies.DecodeStrict(data, &cf); err != nil {
		t.Fatal(err)
	}
	if len(cf.Cases) < 5 {
		t.Fatalf("%d cases", len(cf.Cases))
	}
	for _, c := range cf.Cases {
		got, err := m.Eval(ctx, c.Input)
		if err != nil {
			t.Fatal(err)
		}
		if d := c.Want.Check(got); len(d) > 0 {
			t.Errorf("%s: %s (reason %q)", c.Name, strings.Join(d, "; "), got.Reason)
		}
	}
}
