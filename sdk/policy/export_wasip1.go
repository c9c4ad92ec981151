//go:build wasip1

package policy

import (
	"runtime"
	"unsafe"

	"github.com/hivelet/hivelet/internal/policywire"
)

// The module's exports (docs/policy-abi.md). Invariant: every export calls
// runtime.Gosched before it returns, so the Go scheduler, and with it the
// garbage collector, runs between any two calls and a module called in a
// loop keeps its heap flat (TestInstanceMemoryStaysFlat in policies).

// out keeps the last answer alive until the next call, while the agent
// copies it out of linear memory.
var out []byte

func pack(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&b[0])))<<32 | uint64(len(b))
}

//go:wasmexport hivelet_abi_version
func exportABIVersion() int32 { return ABIVersion }

//go:wasmexport hivelet_kinds
func exportKinds() int32 { return declaredKinds() }

//go:wasmexport hivelet_manifest
func exportManifest() uint64 {
	out = append(out[:0], manifestText(reg.reads)...)
	runtime.Gosched()
	return pack(out)
}

// in is the buffer of the next input. A fresh one each call: decoded
// strings alias it, so it must never be overwritten.
var in []byte

//go:wasmexport hivelet_alloc
func exportAlloc(n int32) int32 {
	in = make([]byte, n)
	if n == 0 {
		return 0
	}
	return int32(uintptr(unsafe.Pointer(&in[0])))
}

func inputAt(ptr, n int32) []byte {
	if n == 0 || len(in) < int(n) || int32(uintptr(unsafe.Pointer(&in[0]))) != ptr {
		return nil
	}
	return in[:n]
}

//go:wasmexport hivelet_canary
func exportCanary(ptr, n int32) uint64 {
	if reg.canary == nil {
		out = policywire.AppendError(out[:0], "this module implements no canary policy")
	} else {
		out = callCanary(reg.canary, inputAt(ptr, n), out[:0])
	}
	in = nil
	runtime.Gosched()
	return pack(out)
}

//go:wasmexport hivelet_completion
func exportCompletion(ptr, n int32) uint64 {
	if reg.completion == nil {
		out = policywire.AppendError(out[:0], "this module implements no completion policy")
	} else {
		out = callCompletion(reg.completion, inputAt(ptr, n), out[:0])
	}
	in = nil
	runtime.Gosched()
	return pack(out)
}

// reserved holds the reservation until the collector frees it.
var reserved []byte

// hivelet_reserve (optional in the ABI) is called once after
// initialisation, before the agent snapshots the module's memory: the
// allocation and the collection leave n bytes of mapped, free heap, so that
// evaluations allocate without growing linear memory (an instance whose
// memory grew cannot be restored and is replaced).
//
//go:wasmexport hivelet_reserve
func exportReserve(n int32) {
	reserved = make([]byte, n)
	reserved = nil
	runtime.GC()
	// Warm the allocator: take a span of each small size class now, so
	// that evaluations, which all start from this state, do not each pay
	// for fetching and zeroing fresh spans.
	for size := 8; size <= 32<<10; size += size/8 + 8 {
		sink = make([]byte, size)
		psink = make([]*byte, size/8)
	}
	sink, psink = nil, nil
	runtime.Gosched()
}

// sink and psink keep the warming allocations from being optimised away
// (pointer-free and pointerful objects use different spans).
var (
	sink  []byte
	psink []*byte
)
