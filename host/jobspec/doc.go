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
//   - "${...}" interpolations of run-time values (node., attr., meta.,
//     NOMAD_..., anything but var. and local.) are kept as text for the node
//     to resolve at run time, even inside locals and function arguments
//     (TestInterpolationsAreKeptAsText); only the file's variables and
//     locals, and functions over them, are computed
//     (TestVariablesTakeDefaultsThenTheEnvironmentThenFilesThenFlags). A
//     function of a run-time value is refused: nothing on the node would
//     compute it.
//   - HCL and JSON reach the same model: HCL → canonical JSON → DecodeJob →
//     canonical JSON is byte-identical (TestCanonicalJSONRoundTripsByteForByte).
//   - A Nomad stanza hivelet does not support fails with
//     `stanza "X" is not supported by hivelet (why)`, never as an unknown key.
//   - The package performs no I/O: callers pass the file's name and bytes,
//     and the variables' inputs (Inputs: var files' bytes, -var flags, the
//     environment). The functions offered read no file, clock or randomness.
//
// The job file it reads is specified, block by block, in docs/job-files.md.
package jobspec
