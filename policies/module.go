package policies

import (
	"context"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
)

// This file is a compiled Module and its pool of instances: acquire takes
// an idle instance or creates one while the pool has room, release gives it
// back restored (or discards it when it faulted or grew), and Waiting says
// how many evaluations are queued for one.

// Module is a compiled, validated policy module.
type Module struct {
	Name     string
	Digest   string // SHA-256 of the bytes, hex
	Size     int
	ABI      uint32
	Kinds    Kind
	Manifest Manifest
	// Imports lists the module's imports ("module.name"), for inspection.
	Imports []string

	engine   *Engine
	compiled wazero.CompiledModule
	idle     chan *instance
	freed    chan struct{} // a discarded instance freed a pool slot
	live     atomic.Int32
	waiting  atomic.Int32 // evaluations blocked in acquire
	// reserve is the current reservation for new instances (adaptive).
	reserve atomic.Int64
	// inputCap is the input buffer allocated in new instances before
	// their snapshot (adaptive).
	inputCap atomic.Int64
	// globals names the exports of the module's mutable globals (added by
	// exportGlobals), restored with the memory after every call.
	globals []string
	// fresh, when not empty, is why every evaluation gets a fresh instance:
	// the module has state a restore cannot reset (tables, segments).
	fresh string
}

// FreshReason says why every evaluation of the module runs on a fresh
// instance ("" when instances are pooled and restored).
func (m *Module) FreshReason() string { return m.fresh }

// freshOnly reports whether evaluations must not reuse instances.
func (m *Module) freshOnly() bool { return m.engine.opts.FreshInstances || m.fresh != "" }

// acquire takes an idle instance, or creates one while the pool is not
// full, or waits until an instance is given back or a slot frees up.
func (m *Module) acquire(ctx context.Context) (*instance, error) {
	if m.freshOnly() {
		return m.instantiate(ctx)
	}
	for {
		select {
		case inst := <-m.idle:
			return inst, nil
		default:
		}
		if m.live.Add(1) <= int32(m.engine.opts.PoolSize) {
			inst, err := m.instantiate(ctx)
			if err != nil {
				m.drop()
			}
			return inst, err
		}
		m.live.Add(-1)
		m.waiting.Add(1)
		select {
		case inst := <-m.idle:
			m.waiting.Add(-1)
			return inst, nil
		case <-m.freed:
			m.waiting.Add(-1)
		case <-ctx.Done():
			m.waiting.Add(-1)
			return nil, &Fault{Kind: FaultDeadline, Reason: "waiting for an instance: " + ctx.Err().Error(), Err: ctx.Err()}
		}
	}
}

// Waiting reports how many evaluations of the module are waiting for an
// instance right now: every instance the pool may hold is busy. A value
// that stays above zero says the pool (Options.PoolSize) is too small for
// the decision rate, or an instance is stuck until its deadline.
func (m *Module) Waiting() int { return int(m.waiting.Load()) }

// drop forgets a discarded instance and wakes one waiter, if any, to
// create a replacement.
func (m *Module) drop() {
	m.live.Add(-1)
	select {
	case m.freed <- struct{}{}:
	default:
	}
}

// release gives an instance back: restored in the background (off the
// decision path) when it answered, discarded when it faulted.
func (m *Module) release(inst *instance, healthy bool) {
	if m.freshOnly() {
		inst.mod.Close(context.Background())
		return
	}
	if !healthy {
		if grown := int64(inst.mem.Size()) - int64(len(inst.snapshot)); grown > 0 {
			m.growReserve(grown)
		}
		inst.mod.Close(context.Background())
		m.drop()
		return
	}
	m.engine.resets.Add(1)
	go func() {
		defer m.engine.resets.Done()
		if inst.restore() {
			m.idle <- inst
			return
		}
		m.growReserve(int64(inst.mem.Size()) - int64(len(inst.snapshot)))
		inst.mod.Close(context.Background())
		m.drop()
	}()
}

// growReserve raises the module's reservation after an evaluation grew an
// instance's memory by grown bytes, up to half the memory cap.
func (m *Module) growReserve(grown int64) {
	limit := int64(m.engine.opts.MemoryLimitPages) * wasmPage / 2
	for {
		cur := m.reserve.Load()
		next := min(max(2*cur, cur+2*grown), limit)
		if next <= cur || m.reserve.CompareAndSwap(cur, next) {
			return
		}
	}
}

// growInputCap raises the input buffer of new instances after an input of
// n bytes did not fit, up to a quarter of the memory cap.
func (m *Module) growInputCap(n int) {
	limit := int64(m.engine.opts.MemoryLimitPages) * wasmPage / 4
	for {
		cur := m.inputCap.Load()
		next := min(max(cur, 2*int64(n)), limit)
		if next <= cur || m.inputCap.CompareAndSwap(cur, next) {
			return
		}
	}
}

// close releases a module no one can reach (it lost a load race).
func (m *Module) close(ctx context.Context) {
	for {
		select {
		case inst := <-m.idle:
			inst.mod.Close(ctx)
		default:
			m.compiled.Close(ctx)
			return
		}
	}
}
