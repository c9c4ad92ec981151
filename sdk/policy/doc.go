// Package policy is the SDK for writing hivelet rollout policies in Go.
//
// A policy makes one of the two judgement calls of a rollout: which nodes
// become canaries (canary selection) or whether a deployment continues, is
// promoted, succeeds or fails (deployment completion). It runs inside the
// agent as a sandboxed WebAssembly module: no filesystem, network,
// environment or arguments, a wall clock pinned to the decision's time, a
// memory cap and a deadline per call. A policy that traps, loops, runs out of
// memory or answers something invalid is stopped and the agent falls back to
// its built-in default for that decision.
//
// Write a plain function, register it in an init function, and build a
// reactor module with the standard toolchain:
//
//	func init() {
//		policy.RegisterCanary(choose, policy.Meta("canary"))
//	}
//
//	func main() {} // required by package main; never called by the agent
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o my.wasm .
//
// (or `hivelet policy build DIR`). The SDK owns the module's exports, its
// memory management and the wire encoding (docs/policy-abi.md, ABI version
// 2); authors never see a pointer.
//
// Send only what is needed: the agent encodes for each node its ID, name,
// datacenter, node pool and class, and only the attributes and meta keys
// the policy declared when it registered (Attribute, Meta, FieldFromParam,
// ...). Node.Attribute and Node.Meta report a key the policy did not declare
// as absent.
//
// Invariants: a policy function must be a deterministic function of its
// input (every agent of the fleet may evaluate it); it must not keep state
// between calls (the agent restores the module's memory after every
// evaluation, so such state is lost anyway); a panic is a fault, not an
// answer. This package imports nothing from the daemon, only the ABI's
// codec (internal/policywire, which the agent shares and which imports only
// the standard library; TestTheSDKImportsNothingFromTheDaemon); on a non-wasm
// platform it still compiles, so policies can be unit-tested natively by
// calling the registered function directly (see the examples).
package policy
