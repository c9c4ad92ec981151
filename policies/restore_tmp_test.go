package policies

import (
	"context"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/sdk/policy"
	"os"
	"testing"
	"time"
)

func BenchmarkTmpRestore(b *testing.B) {
	e, _, _ := newTestEngine(b, Options{PoolSize: 1})
	m := loadBuiltin(b, e, "default")
	in := genCompletion(10, time.Unix(1_800_000_000, 0))
	input := policyAppendCompletion(in)
	inst := <-m.idle
	changed := 0
	b.Run("chunked", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			if _, err := m.call(context.Background(), inst, inst.completion, exportCompletion, input, in.Now, 1); err != nil {
				b.Fatal(err)
			}
			mem, _ := inst.mem.Read(0, inst.mem.Size())
			changed = 0
			for o := 0; o < len(mem); o += restoreChunk {
				if string(mem[o:o+restoreChunk]) != string(inst.snapshot[o:o+restoreChunk]) {
					changed++
				}
			}
			b.StartTimer()
			inst.restore()
		}
		b.ReportMetric(float64(changed), "dirty-chunks")
		b.ReportMetric(float64(len(inst.snapshot)/restoreChunk), "chunks")
	})
	b.Run("full-copy", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			if _, err := m.call(context.Background(), inst, inst.completion, exportCompletion, input, in.Now, 1); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			inst.mem.Write(0, inst.snapshot)
		}
	})
	b.Run("call-only", func(b *testing.B) {
		for b.Loop() {
			if _, err := m.call(context.Background(), inst, inst.completion, exportCompletion, input, in.Now, 1); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			inst.restore()
			b.StartTimer()
		}
	})
}

func policyAppendCompletion(in reconcile.CompletionInput) []byte {
	return policy.AppendCompletionInput(nil, completionInput(&in))
}

func BenchmarkTmpBoundary(b *testing.B) {
	e, _, _ := newTestEngine(b, Options{PoolSize: 1, Deadline: 100 * time.Millisecond})
	m, err := e.Load(context.Background(), "raw", "", watModule(b, "raw"))
	if err != nil {
		b.Fatal(err)
	}
	in := genCompletion(10, time.Unix(1_800_000_000, 0))
	input := policyAppendCompletion(in)
	e.resets.Wait()
	inst := <-m.idle
	b.Run("raw-call", func(b *testing.B) {
		for b.Loop() {
			if _, err := m.call(context.Background(), inst, inst.completion, exportCompletion, input, in.Now, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-call-no-deadline-ctx", func(b *testing.B) {
		for b.Loop() {
			inst.stack[0] = uint64(len(input))
			inst.alloc.CallWithStack(context.Background(), inst.stack[:])
			inst.stack[0], inst.stack[1] = 65536, uint64(len(input))
			inst.completion.CallWithStack(context.Background(), inst.stack[:])
		}
	})
}

func BenchmarkTmpGuest(b *testing.B) {
	e, _, _ := newTestEngine(b, Options{PoolSize: 1, Deadline: 100 * time.Millisecond})
	wasm, _ := BuiltinWasm("default")
	if p := os.Getenv("TMP_WASM"); p != "" {
		wasm, _ = os.ReadFile(p)
	}
	m, err := e.Load(context.Background(), "x", "", wasm)
	if err != nil {
		b.Fatal(err)
	}
	in := genCompletion(10, time.Unix(1_800_000_000, 0))
	input := policyAppendCompletion(in)
	e.resets.Wait()
	inst := <-m.idle
	b.Run("call", func(b *testing.B) {
		for b.Loop() {
			if _, err := m.call(context.Background(), inst, inst.completion, exportCompletion, input, in.Now, 1); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			inst.restore()
			b.StartTimer()
		}
	})
}

func BenchmarkTmpAlloc(b *testing.B) {
	e, _, _ := newTestEngine(b, Options{PoolSize: 1, Deadline: 100 * time.Millisecond})
	wasm, _ := BuiltinWasm("default")
	m, err := e.Load(context.Background(), "x", "", wasm)
	if err != nil {
		b.Fatal(err)
	}
	e.resets.Wait()
	inst := <-m.idle
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		inst.stack[0] = 400
		inst.alloc.CallWithStack(ctx, inst.stack[:])
		cancel()
		b.StopTimer()
		inst.restore()
		b.StartTimer()
	}
}
