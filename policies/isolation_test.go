package policies

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// completionReasons evaluates m's completion policy n times and returns
// the reasons, in order.
func completionReasons(t *testing.T, m *Module, n int) []string {
	t.Helper()
	in := genCompletion(1, time.Unix(1_700_000_000, 0))
	var out []string
	for i := range n {
		d, err := m.Completion(context.Background(), in)
		if err != nil {
			t.Fatalf("evaluation %d: %v", i, err)
		}
		out = append(out, d.Reason)
		// The restore runs off the decision path: wait for it so that the
		// next evaluation gets the same (single) pooled instance.
		m.engine.resets.Wait()
	}
	return out
}

// TestNoStateLeaksBetweenEvaluationsThroughGlobalsOrTables: hostile raw
// modules that keep a call counter in a mutable, unexported global
// (globals.wat) or in their table (table.wat) answer "calls=1" on every
// evaluation with a single pooled instance. Controls in the same test: the
// same instance called twice without the engine's restore does count
// (the module really tries), and a module with only immutable globals
// (immutable.wat) keeps the fast path: pooled, restored, nothing exported.
func TestNoStateLeaksBetweenEvaluationsThroughGlobalsOrTables(t *testing.T) {
	ctx := context.Background()
	e, _, _ := newTestEngine(t, Options{PoolSize: 1})
	for _, tc := range []struct {
		module    string
		wantFresh bool
		globals   int
	}{
		{"globals", false, 1},
		{"table", true, 0},
		{"immutable", false, 0},
	} {
		t.Run(tc.module, func(t *testing.T) {
			m, err := e.Load(ctx, tc.module, "", watModule(t, tc.module))
			if err != nil {
				t.Fatal(err)
			}
			if got := m.FreshReason() != ""; got != tc.wantFresh {
				t.Fatalf("fresh instances: %v (%q), want %v", got, m.FreshReason(), tc.wantFresh)
			}
			if len(m.globals) != tc.globals {
				t.Fatalf("restored globals %v, want %d", m.globals, tc.globals)
			}
			for i, r := range completionReasons(t, m, 4) {
				if r != "calls=1" {
					t.Fatalf("evaluation %d answered %q, want calls=1: state leaked", i+1, r)
				}
			}
			if !tc.wantFresh {
				// The fast path: the one instance is back in the pool and
				// is reused.
				if n := m.live.Load(); n != 1 {
					t.Fatalf("%d live instances with PoolSize 1, want 1 (pooled)", n)
				}
				inst := <-m.idle
				m.idle <- inst
				completionReasons(t, m, 1)
				if again := <-m.idle; again != inst {
					t.Fatal("the pooled instance was not reused")
				} else {
					m.idle <- again
				}
			}
			// Control: one instance, two calls, no restore in between.
			inst, err := m.instantiate(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer inst.mod.Close(ctx)
			var raw []string
			for range 2 {
				out, err := m.call(ctx, inst, inst.completion, exportCompletion, nil, time.Unix(0, 0), 1)
				if err != nil {
					t.Fatal(err)
				}
				raw = append(raw, string(out[7:]))
			}
			// (immutable.wat counts in memory, which the restore undoes.)
			if raw[0] != "calls=1" || raw[1] != "calls=2" {
				t.Fatalf("control without the restore answered %q, want [calls=1 calls=2]", raw)
			}
		})
	}
}

// TestNoStateLeaksBetweenEvaluationsThroughWASIDescriptors: a hostile
// module (fdclose.wat) writes to stderr, reports the write's errno, then
// closes stderr. Through the engine every evaluation's write succeeds
// (errno=0): the close changed nothing. Control in the same test: under
// wazero's stock WASI the same module, called twice on one instance, sees
// its own close (errno=8, EBADF) — the attack is real.
func TestNoStateLeaksBetweenEvaluationsThroughWASIDescriptors(t *testing.T) {
	ctx := context.Background()
	e, _, _ := newTestEngine(t, Options{PoolSize: 1})
	m, err := e.Load(ctx, "fdclose", "", watModule(t, "fdclose"))
	if err != nil {
		t.Fatal(err)
	}
	if m.FreshReason() != "" {
		t.Fatalf("fdclose runs fresh (%s); want the pooled path", m.FreshReason())
	}
	for i, r := range completionReasons(t, m, 4) {
		if r != "errno=0" {
			t.Fatalf("evaluation %d answered %q, want errno=0: the close leaked", i+1, r)
		}
	}
	// Control: stock WASI, one instance, two calls.
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	mod, err := rt.InstantiateWithConfig(ctx, watModule(t, "fdclose"), wazero.NewModuleConfig().WithStderr(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 2 {
		r, err := mod.ExportedFunction(exportCompletion).Call(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := mod.Memory().Read(uint32(r[0]>>32)+7, uint32(r[0])-7)
		got = append(got, string(b))
	}
	if got[0] != "errno=0" || got[1] != "errno=8" {
		t.Fatalf("control under stock WASI answered %q, want [errno=0 errno=8]", got)
	}
}

// TestGoGuestsKeepTheFastPathWithTheirGlobalsRestored: every built-in (Go,
// wasip1) has mutable globals (the Go runtime's stack pointer and
// registers); they are exported by the load-time rewrite and restored,
// and no built-in falls back to fresh instances. Control: the table
// module in the same engine does.
func TestGoGuestsKeepTheFastPathWithTheirGlobalsRestored(t *testing.T) {
	e, _, _ := newTestEngine(t, Options{})
	for _, name := range BuiltinNames() {
		m := loadBuiltin(t, e, name)
		if m.FreshReason() != "" || len(m.globals) == 0 {
			t.Errorf("%s: fresh %q, %d restored globals; want pooled with its globals restored", name, m.FreshReason(), len(m.globals))
		}
	}
	m, err := e.Load(context.Background(), "table", "", watModule(t, "table"))
	if err != nil || m.FreshReason() == "" {
		t.Fatalf("control: the table module loaded %v, fresh %q", err, m.FreshReason())
	}
}
