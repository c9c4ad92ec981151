// Package testutil owns the small helpers the module's tests share: waiting
// for a condition (Eventually), a goroutine-safe log sink (SyncBuffer), a
// throwaway NATS server (StartNATS), a free loopback port (FreePort) and a
// temporary directory short enough for Unix socket paths (ShortTempDir).
//
// Usage, from a _test.go file:
//
//	var logs testutil.SyncBuffer
//	s := testutil.StartNATS(t, nil) // bare: loopback, random port, JetStream off
//	...
//	testutil.Eventually(t, 5*time.Second, "the job placed", func() bool { return placed() })
//	if !strings.Contains(logs.String(), "placed") { ... }
//
// Invariants:
//   - Only _test.go files import this package; no production package of the
//     module may (TestNoProductionPackageImportsTestutil checks every
//     package's non-test imports with internal/imports, over `go list`).
//   - Every helper that takes a testing.TB reports bad input and failures
//     through t.Fatalf with a message that names the helper and the cause,
//     and returns right after (so it also behaves with a testing.TB that
//     does not stop the goroutine).
//   - Everything a helper starts or creates (a server, a directory) is
//     released by t.Cleanup: a test never has to remember to.
//   - Eventually checks its condition once more after the deadline has
//     passed before it fails, so a condition that becomes true right at the
//     deadline does not fail the test.
package testutil
