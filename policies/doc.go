// Package policies owns hivelet's WASM policy engine: loading and compiling
// policy modules (wazero, compiler mode, on-disk compilation cache), the
// module ABI (docs/policy-abi.md), the sandbox and its limits, the built-in
// policies (sources in builtin/<name>, logic in package rules, modules
// embedded), and distribution of custom modules through a JetStream object
// store. The decisions a policy makes are described in
// docs/reconciler-rules.md ("Canary nodes", "Deployments"); authors start
// from examples/policies/README.md, and cases files are docs/policy-cases.md.
//
// Invariants:
//   - The decision path never compiles: a policy is usable only after Load
//     (or LoadBuiltins) compiled it; a decision naming a module that is not
//     loaded falls back to the native default and is reported.
//   - The host never acts on an invalid answer and never crashes because
//     of a module: a trap, a panic, a loop past the deadline, memory past
//     the cap, a missing export, another ABI version or an answer failing
//     strict validation is a Fault; the decision falls back to the native
//     default (NativeCanary, NativeCompletion) and the fault is logged,
//     counted and handed to the OnFault hook (faults_test.go has one
//     hostile module per kind).
//   - No state leaks between evaluations: an instance's linear memory and
//     mutable globals (exported by a load-time rewrite, wasmscan.go) are
//     restored to their post-initialisation snapshot after every call; a
//     module that can change its tables or segments runs on a fresh
//     instance per evaluation; WASI's fd_close and fd_renumber change
//     nothing; an instance that trapped, timed out or grew is discarded
//     (isolation_test.go, TestAModuleCannotKeepStateBetweenEvaluations).
//   - A module is loaded only when its bytes match its pinned SHA-256, and
//     is kept by digest. A name-only reference resolves to the digest the
//     name had in the object store at the last Store.Ensure or Refresh
//     (the engine refreshes in the background every FollowInterval); a
//     pinned one to its digest. A built-in's bare name is reserved for it.
//
// Files: engine.go is the engine (compile, load, name resolution, the
// sandbox's WASI); module.go a compiled module's instance pool; instance.go
// one instance and its restore; follow.go the background name follower;
// decide.go the decisions and the reconciler's interfaces; store.go the
// object store; abi.go, manifest.go, wasmscan.go and fault.go the ABI, the
// manifest, the load-time rewrite and the fault kinds; cases.go the
// cases files of `hivelet policy test`.
package policies
