package policies

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkIsolationCosts measures what the isolation of evaluations costs
// (docs/policy-abi.md, "Isolation between evaluations"), in one run:
//
//   - a small WAT module with a mutable global (globals.wat) pooled with
//     its global restored, against the same module on a fresh instance per
//     evaluation, and a module that falls back to fresh instances because
//     it changes its table (table.wat); each "+restore" row waits for the
//     background restore inside the timed region, so the restore's cost is
//     included;
//   - the load-time scan and rewrite of a built-in Go module (2.2 MB).
func BenchmarkIsolationCosts(b *testing.B) {
	ctx := context.Background()
	in := genCompletion(1, time.Unix(1_700_000_000, 0))
	for _, tc := range []struct {
		name, module string
		fresh        bool
	}{
		{"globals/pooled+restore", "globals", false},
		{"globals/fresh", "globals", true},
		{"table/fresh-fallback", "table", false},
	} {
		e, _, _ := newTestEngine(b, Options{FreshInstances: tc.fresh, PoolSize: 1})
		m, err := e.Load(ctx, tc.module, "", watModule(b, tc.module))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			var l latencies
			for b.Loop() {
				l.time(func() error {
					_, err := m.Completion(ctx, in)
					e.resets.Wait()
					return err
				})
			}
			l.report(b)
		})
	}
	wasm, _ := BuiltinWasm("percent")
	b.Run(fmt.Sprintf("scan+rewrite/percent-%dKB", len(wasm)>>10), func(b *testing.B) {
		var l latencies
		for b.Loop() {
			l.time(func() error {
				shape, err := scanModule(wasm)
				if err == nil {
					_, err = exportGlobals(wasm, shape.mutableGlobals)
				}
				return err
			})
		}
		l.report(b)
	})
}
