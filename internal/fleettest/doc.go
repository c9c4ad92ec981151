// Package fleettest runs a hivelet fleet as real hosts for tests: a
// three-node NATS cluster with JetStream and any number of agents, each its
// own Docker container on a private bridge network, built from the files of
// examples/fleet (the same Dockerfile, nats.conf and agent-<i>.hcl an
// operator uses) and an image made here FROM scratch with static binaries.
// Nothing is pulled; no registry is used.
//
// Usage, from a _test.go file:
//
//	fleettest.RequireDocker(t) // skips, or fails under HIVELET_REQUIRE_DOCKER=1
//	img := fleettest.BuildImage(t, "../..")
//	f := fleettest.Start(t, fleettest.Options{Image: img, ExampleDir: ".", Agents: 4})
//	f.RunJob(job)                                  // the hivelet CLI on the host
//	f.WaitFor(time.Minute, "placed on every node", func() (bool, string) { ... })
//	f.Disconnect(f.Agent(4)); f.Reconnect(f.Agent(4))
//	f.KillNATS(f.NATSByName("nats-2"))
//
// What it owns and promises:
//   - Traffic from the test process goes only to 127.0.0.1: each NATS
//     server's client and monitoring ports are published there (random host
//     ports) and the CLI is given only those. The servers run with
//     no_advertise, so no client is told an address on the fleet network.
//     Everything else stays between the containers on the private network.
//   - Everything a Fleet creates (containers, the network) carries the label
//     LabelRun with the run's ID and is removed at the test's cleanup, also
//     when the test fails (after printing the tail of every container's
//     log). RemoveLeftovers removes what crashed earlier runs left behind,
//     and BuildImage removes the images of earlier builds.
//   - Every wait has a deadline and polls an observable (a CLI answer, a
//     container's state, an HTTP health endpoint); nothing here sleeps to
//     synchronise.
//   - Every binary the module's tests build (the image's, cmd/hivelet's
//     end-to-end binary, the example driver) is built by BuildStatic, with
//     one set of flags and one build at a time across test processes, so
//     the packages' tests share one compile of the module.
//   - The package never reads or changes host/ internals: it talks to the
//     fleet through the hivelet CLI (node status -json, job run, alloc logs),
//     the Docker CLI, and JetStream's own API for stream leaders.
//
// Only tests import it (it imports testing and starts containers); it must
// not import internal/testutil, which no non-test package may.
// TestTheFleetExample (examples/fleet) is its main user.
package fleettest
