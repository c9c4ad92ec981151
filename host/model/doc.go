// Package model owns hivelet's data model: jobs, groups, tasks, update
// strategies, nodes, allocations and deployments, and their JSON wire form
// (the format of the NATS KV buckets and of reconcile fixtures; see
// docs/wire-format.md).
//
// Invariants:
//   - Every enum is a closed type. Decoding an unknown value fails the whole
//     value with an error naming the field path and the value; nothing is
//     ever half-decoded (wanted-state.md, "an unknown value is not a partial
//     instruction"). TestEveryEnumRejectsUnknownValues enforces this.
//   - Decode and DecodeJob refuse unknown fields and trailing data.
//   - The package performs no I/O and reads no clock. Its one shared state
//     is Intern's table, bounded, which never changes a value (only where
//     its bytes are).
package model
