// Package fleet is the fleet example run for real (README.md beside this
// file): its test starts the example's three NATS servers and four agents as
// containers on a private Docker network with internal/fleettest, and checks
// what a fleet does today when a job runs, an agent is cut off past its
// heartbeat TTL and comes back, and a NATS server dies during an update.
// The package holds no code of its own; the example is the configuration
// files, compose.yaml and build.sh.
package fleet
