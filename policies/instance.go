package policies

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// instance is one instantiated module with its memory snapshot. It serves
// one evaluation at a time; between evaluations its memory is restored to
// the snapshot taken right after initialisation, so nothing a policy
// writes survives a call.
type instance struct {
	mod                       api.Module
	mem                       api.Memory
	alloc, canary, completion api.Function
	snapshot                  []byte
	// globals are the module's mutable globals and gsnap their values
	// after initialisation, restored with the memory.
	globals []api.MutableGlobal
	gsnap   []uint64
	// inPtr and inCap locate the input buffer allocated before the
	// snapshot (inCap 0: none).
	inPtr, inCap uint32
	// now is the wall clock the guest sees (Unix nanoseconds), pinned per
	// evaluation; rng its random source, reseeded per evaluation.
	now    atomic.Int64
	rng    *seededReader
	stdout *guestLog
	stderr *guestLog
	stack  [2]uint64
}

// seededReader is a deterministic random source (PCG) the engine reseeds
// from the input before every evaluation.
type seededReader struct{ pcg *rand.PCG }

func (r *seededReader) Read(p []byte) (int, error) {
	var w [8]byte
	for i := 0; i < len(p); i += 8 {
		binary.LittleEndian.PutUint64(w[:], r.pcg.Uint64())
		copy(p[i:], w[:])
	}
	return len(p), nil
}

// guestLog forwards a guest's stdout or stderr to the host log, a line at a
// time, tagged with the module digest, at most limit bytes per evaluation.
type guestLog struct {
	log     *slog.Logger
	stream  string
	limit   int
	left    int
	dropped int
	line    []byte
}

func (g *guestLog) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > g.left {
		g.dropped += len(p) - g.left
		p = p[:g.left]
	}
	g.left -= len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			g.line = append(g.line, p...)
			break
		}
		g.line = append(g.line, p[:i]...)
		g.flushLine()
		p = p[i+1:]
	}
	return n, nil
}

func (g *guestLog) flushLine() {
	g.log.Info("policy output", "stream", g.stream, "line", string(g.line))
	g.line = g.line[:0]
}

// reset ends an evaluation: flushes a partial line, reports dropped bytes
// and refills the budget.
func (g *guestLog) reset() {
	if len(g.line) > 0 {
		g.flushLine()
	}
	if g.dropped > 0 {
		g.log.Warn("policy output truncated", "stream", g.stream, "dropped_bytes", g.dropped)
	}
	g.left, g.dropped = g.limit, 0
}

// instantiate creates and initialises an instance of m, and snapshots its
// memory. Initialisation runs under the engine's load deadline.
func (m *Module) instantiate(ctx context.Context) (*instance, error) {
	e := m.engine
	log := e.log.With("policy_digest", m.Digest)
	inst := &instance{
		rng:    &seededReader{pcg: rand.NewPCG(0, 0)},
		stdout: &guestLog{log: log, stream: "stdout", limit: e.opts.OutputLimit, left: e.opts.OutputLimit},
		stderr: &guestLog{log: log, stream: "stderr", limit: e.opts.OutputLimit, left: e.opts.OutputLimit},
	}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions("_initialize").
		WithStdout(inst.stdout).
		WithStderr(inst.stderr).
		WithRandSource(inst.rng).
		WithSysNanotime().
		WithWalltime(func() (int64, int32) {
			ns := inst.now.Load()
			return ns / 1e9, int32(ns % 1e9)
		}, sys.ClockResolution(1))
	ictx, cancel := context.WithTimeout(ctx, e.opts.LoadDeadline)
	defer cancel()
	mod, err := e.rt.InstantiateModule(ictx, m.compiled, cfg)
	if err != nil {
		return nil, m.callFault(err, nil, "initialising the module")
	}
	inst.mod = mod
	inst.mem = mod.Memory()
	if inst.mem == nil {
		mod.Close(ctx)
		return nil, &Fault{Kind: FaultMissingExport, Reason: "the module exports no memory"}
	}
	inst.alloc = mod.ExportedFunction(exportAlloc)
	inst.canary = mod.ExportedFunction(exportCanary)
	inst.completion = mod.ExportedFunction(exportCompletion)
	if inst.alloc == nil {
		mod.Close(ctx)
		return nil, &Fault{Kind: FaultMissingExport, Reason: "the module lacks the export " + exportAlloc}
	}
	if reserve := mod.ExportedFunction(exportReserve); reserve != nil && m.reserve.Load() > 0 {
		if _, err := reserve.Call(ictx, uint64(m.reserve.Load())); err != nil {
			mod.Close(ctx)
			return nil, m.callFault(err, nil, "calling "+exportReserve)
		}
	}
	// Allocate the input buffer now, so that it is part of the snapshot:
	// every evaluation whose input fits writes it there without a call.
	if c := m.inputCap.Load(); c > 0 {
		stack := []uint64{uint64(c)}
		if err := inst.alloc.CallWithStack(ictx, stack); err != nil {
			mod.Close(ctx)
			return nil, m.callFault(err, nil, "calling "+exportAlloc)
		}
		if ptr := uint32(stack[0]); uint64(ptr)+uint64(c) <= uint64(inst.mem.Size()) {
			inst.inPtr, inst.inCap = ptr, uint32(c)
		}
	}
	for _, name := range m.globals {
		g, ok := mod.ExportedGlobal(name).(api.MutableGlobal)
		if !ok {
			mod.Close(ctx)
			return nil, &Fault{Kind: FaultLoad, Reason: "the module's mutable global " + name + " is not writable by the host"}
		}
		inst.globals = append(inst.globals, g)
		inst.gsnap = append(inst.gsnap, g.Get())
	}
	snap, _ := inst.mem.Read(0, inst.mem.Size())
	inst.snapshot = bytes.Clone(snap)
	inst.stdout.reset()
	inst.stderr.reset()
	return inst, nil
}

// restore puts the instance back in its post-initialisation state (linear
// memory and mutable globals; a module whose tables or segments can change
// is never restored, see wasmscan.go). It
// reports false when that is impossible (memory grew: Go's allocator would
// grow it again on every call), and the instance must be discarded.
//
// It compares the memory with the snapshot chunk by chunk and copies back
// only the chunks that differ: an evaluation touches a small part of the
// memory, and comparing reads without writing (about 2.5x cheaper than
// copying everything, measured on the 2 vCPU machine). The result is the
// same as a full copy: every byte equals the snapshot afterwards.
func (inst *instance) restore() bool {
	inst.stdout.reset()
	inst.stderr.reset()
	if inst.mem.Size() != uint32(len(inst.snapshot)) {
		return false
	}
	mem, ok := inst.mem.Read(0, inst.mem.Size())
	if !ok {
		return false
	}
	for i, g := range inst.globals {
		if g.Get() != inst.gsnap[i] {
			g.Set(inst.gsnap[i])
		}
	}
	snap := inst.snapshot
	for o := 0; o < len(snap); o += restoreChunk {
		end := min(o+restoreChunk, len(snap))
		if !bytes.Equal(mem[o:end], snap[o:end]) {
			copy(mem[o:end], snap[o:end])
		}
	}
	return true
}

// restoreChunk is the granularity of the restore's comparison.
const restoreChunk = 16 << 10

// call runs one export on input and returns a copy of the answer.
func (m *Module) call(ctx context.Context, inst *instance, fn api.Function, name string, input []byte, now time.Time, seed uint64) ([]byte, error) {
	if fn == nil {
		return nil, &Fault{Kind: FaultMissingExport, Reason: "the module lacks the export for this decision"}
	}
	inst.now.Store(now.UnixNano())
	inst.rng.pcg.Seed(seed, seed^0x9e3779b97f4a7c15)
	cctx, cancel := context.WithTimeout(ctx, m.engine.opts.Deadline)
	defer cancel()
	ptr := inst.inPtr
	if len(input) > int(inst.inCap) {
		m.growInputCap(len(input))
		inst.stack[0] = uint64(len(input))
		if err := inst.alloc.CallWithStack(cctx, inst.stack[:]); err != nil {
			return nil, m.callFault(err, inst, "calling "+exportAlloc)
		}
		ptr = uint32(inst.stack[0])
	}
	if len(input) > 0 && !inst.mem.Write(ptr, input) {
		return nil, &Fault{Kind: FaultInvalidOutput, Reason: fmt.Sprintf("%s returned %#x, out of bounds for %d bytes", exportAlloc, ptr, len(input))}
	}
	inst.stack[0], inst.stack[1] = uint64(ptr), uint64(len(input))
	if err := fn.CallWithStack(cctx, inst.stack[:]); err != nil {
		return nil, m.callFault(err, inst, "calling "+name)
	}
	optr, olen := uint32(inst.stack[0]>>32), uint32(inst.stack[0])
	if olen > maxOutput {
		return nil, &Fault{Kind: FaultInvalidOutput, Reason: fmt.Sprintf("answer of %d bytes, more than %d", olen, maxOutput)}
	}
	out, ok := inst.mem.Read(optr, olen)
	if !ok {
		return nil, &Fault{Kind: FaultInvalidOutput, Reason: fmt.Sprintf("answer at %#x+%d is out of bounds", optr, olen)}
	}
	return bytes.Clone(out), nil
}

// maxOutput bounds an answer's size.
const maxOutput = 16 << 20

// callFault classifies an error from a call into the module.
func (m *Module) callFault(err error, inst *instance, what string) *Fault {
	var exit *sys.ExitError
	switch {
	case errors.As(err, &exit) && (exit.ExitCode() == sys.ExitCodeDeadlineExceeded || exit.ExitCode() == sys.ExitCodeContextCanceled):
		return &Fault{Kind: FaultDeadline, Reason: what + ": stopped at the deadline", Err: err}
	// A trap with memory past three quarters of the cap: the module ran out
	// (a grow was refused, and Go guests trap on that; allocators grow in
	// chunks, so "at the cap" exactly is rarely seen).
	case inst != nil && inst.mem != nil && uint64(inst.mem.Size())*4 >= uint64(m.engine.opts.MemoryLimitPages)*wasmPage*3:
		return &Fault{Kind: FaultMemory, Reason: fmt.Sprintf("%s: trapped with memory at the cap (%d MiB)", what, uint64(m.engine.opts.MemoryLimitPages)*wasmPage>>20), Err: err}
	case inst == nil && isMemoryLimitError(err):
		return &Fault{Kind: FaultMemory, Reason: what + ": " + err.Error(), Err: err}
	case inst == nil:
		return &Fault{Kind: FaultLoad, Reason: what + ": " + err.Error(), Err: err}
	default:
		return &Fault{Kind: FaultTrap, Reason: what + ": " + err.Error(), Err: err}
	}
}

const wasmPage = 65536

// isMemoryLimitError recognises wazero's refusal of a module whose declared
// memory exceeds the engine's cap (at compile or instantiation).
func isMemoryLimitError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "memory") && (strings.Contains(s, "limit") || strings.Contains(s, "max"))
}
