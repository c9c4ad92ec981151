// Package jobspec owns hivelet's job files: it reads a job written in HCL
// (in the style of Nomad system and sysbatch jobs) or in the JSON wire form,
// resolves update-block inheritance and defaults, validates the result with
// model.Job.Validate, and renders the canonical JSON that `hivelet job
// inspect` prints and the jobs bucket stores.
//
// Invariants:
//   - No input panics the parser (FuzzParseHCL, FuzzParseJSON).
//   - Every problem is reported, each with file:line:col for HCL or the
//     field path for JSON, never only the first (TestEveryErrorClassIsReportedAtItsPosition).
//   - "${...}" interpolations are kept as text for the node to resolve at run
//     time; the parser evaluates no reference and calls no function
//     (TestInterpolationsAreKeptAsText).
//   - HCL and JSON reach the same model: HCL → canonical JSON → DecodeJob →
//     canonical JSON is byte-identical (TestCanonicalJSONRoundTripsByteForByte).
//   - A Nomad stanza hivelet does not support fails with
//     `stanza "X" is not supported by hivelet (why)`, never as an unknown key.
//   - The package performs no I/O: callers pass the file's name and bytes.
package jobspec
