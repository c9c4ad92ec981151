// Package api owns the agent's local HTTP API (JSON, loopback only by
// default) and its Prometheus metrics. The data comes through small provider
// interfaces that host/agent implements; the metrics live in one Metrics
// struct registered on a registry passed in (never the global one), so every
// package updates the same collectors.
//
// Usage:
//
//	reg := prometheus.NewRegistry()
//	m := api.NewMetrics(reg)                       // also a fleet.Observer
//	h := api.NewHandler(api.Providers{Node: ..., Jobs: api.JobsFromSource(src), ...}, reg)
//	go api.Serve(ctx, api.Config{Addr: "127.0.0.1:4646"}, h, log)
//
// Endpoints: GET /v1/node, /v1/allocations, /v1/jobs, /v1/rejections,
// /v1/plugins, /v1/policies, /v1/health, /metrics; POST /v1/jobs and
// /v1/job/{job}/stop (job run and stop, JobWrites: the CLI's parsing,
// validation and write); POST /v1/deployment/{job}/promote|fail|pause|resume and
// /v1/job/{job}/revert/{version} (the rollout actions, docs/rollout.md). A
// provider left nil answers 404 {"error": "... not available"}. Each
// endpoint is documented in docs/api.md, one section per route
// (TestEveryRouteIsDocumented checks the page against the router both ways).
//
// Invariants:
//   - Serve refuses a non-loopback address unless Config.AllowNonLoopback.
//     TestServeRefusesANonLoopbackAddress.
//   - Every GET is read-only. A job write is parsed and validated as the
//     CLI does and written by the CLI's own code (JobWriter).
//     TestJobsAreWrittenOverHTTPWithTheCLIsValidation.
//   - The other POSTs are the operator's rollout actions
//     (Operator): one compare-and-set each, whose body is host/rollout's pure
//     transition re-run on the record just read — the same functions the
//     CLI calls, so a refusal is 409 with the core's reason here and exit 1
//     there. TestTheRolloutActionsAnswerWithTheCoresCodes.
package api
