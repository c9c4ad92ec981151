package policies

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// BenchmarkEncodingInTheGuest is the measurement behind ABI v1's encoding:
// the same `percent` logic in a Go guest, one instance, the same runtime
// configuration as the engine (compiler, close on context done, a 100 ms
// deadline per call), at 1,000 nodes × 5 attributes × 3 meta keys:
//
//   - json: encoding/json in the guest, every node field sent (the naive
//     design). It does not fit the 100 ms deadline at 1,000 nodes, so it
//     runs with 5 s (still enforced);
//   - binary-all: ABI v1's encoding with every field, attribute and meta key
//     sent (as if the policy declared `attr *`, `meta *`);
//   - binary-declared: ABI v1 as the engine sends it to `percent`, which
//     declares nothing: node IDs only.
//
// Each op is: alloc, copy the input in, call, read the answer. Memory is
// not restored between calls here (the comparison is of decoding).
func BenchmarkEncodingInTheGuest(b *testing.B) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(true).
		WithCompilationCache(mustCache(b)))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	instantiate := func(wasm []byte) api.Module {
		cm, err := rt.CompileModule(ctx, wasm)
		if err != nil {
			b.Fatal(err)
		}
		m, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName("").WithStartFunctions("_initialize").WithSysNanotime())
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	nodes := genNodes(1000, 3)
	req := canaryReq(nodes, 100, &model.PolicyRef{Name: "percent"})
	run := func(b *testing.B, m api.Module, allocFn, callFn string, input []byte, deadline time.Duration) {
		alloc, call := m.ExportedFunction(allocFn), m.ExportedFunction(callFn)
		var l latencies
		for b.Loop() {
			l.time(func() error {
				cctx, cancel := context.WithTimeout(ctx, deadline)
				defer cancel()
				r, err := alloc.Call(cctx, uint64(len(input)))
				if err != nil {
					b.Fatal(err)
				}
				m.Memory().Write(uint32(r[0]), input)
				r, err = call.Call(cctx, r[0], uint64(len(input)))
				if err != nil {
					b.Fatal(err)
				}
				if _, ok := m.Memory().Read(uint32(r[0]>>32), uint32(r[0])); !ok {
					b.Fatal("answer out of bounds")
				}
				return nil
			})
		}
		l.report(b)
		b.ReportMetric(float64(len(input)), "input-bytes")
	}
	b.Run("json/nodes=1000", func(b *testing.B) {
		input, err := json.Marshal(map[string]any{"job_id": req.JobID, "deployment_id": req.DeploymentID, "count": req.Count, "eligible": req.Eligible})
		if err != nil {
			b.Fatal(err)
		}
		run(b, instantiate(goGuest(b, "testdata/jsonpercent")), "json_alloc", "json_canary", input, 5*time.Second)
	})
	percent, _ := BuiltinWasm("percent")
	b.Run("binary-all/nodes=1000", func(b *testing.B) {
		fields, attr, meta := allKeys(req.Eligible)
		run(b, instantiate(percent), exportAlloc, exportCanary, appendCanaryInput(nil, &req, fields, attr, meta), 100*time.Millisecond)
	})
	b.Run("binary-declared/nodes=1000", func(b *testing.B) {
		run(b, instantiate(percent), exportAlloc, exportCanary, appendCanaryInput(nil, &req, 0, nil, nil), 100*time.Millisecond)
	})
}

func allKeys(nodes []*model.Node) (byte, []string, []string) {
	m, err := parseManifest("field name datacenter node_pool class\nattr *\nmeta *\n")
	if err != nil {
		panic(err)
	}
	return m.keys(nil, nodes)
}

func mustCache(b *testing.B) wazero.CompilationCache {
	c, err := wazero.NewCompilationCacheWithDir(testutil.WazeroCacheDir(b))
	if err != nil {
		b.Fatal(err)
	}
	return c
}
