package reconcile

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
)

// IDs are derived, never random, so that the same input gives the same plan
// byte for byte, and so that two rounds (or two hosts) planning the same
// allocation name the same key: creating it twice is a compare-and-set
// conflict, not a duplicate.
//
// A new allocation's ID hashes the job, the version it will run, the node,
// the name and the allocation it replaces or carries on ("" for a first
// placement). Chaining the predecessor keeps a re-placement of the same
// version distinct from the allocation it replaces.
//
// A deployment's ID hashes the job and its version: one deployment per
// (job, version), which is what makes creating it idempotent.

// AllocID returns the ID of a new allocation.
func AllocID(namespace, jobID string, version uint64, nodeID, name, previous string) string {
	return derive("alloc", namespace, jobID, strconv.FormatUint(version, 10), nodeID, name, previous)
}

// DeploymentID returns the ID of the deployment of one job version.
func DeploymentID(namespace, jobID string, version uint64) string {
	return derive("deployment", namespace, jobID, strconv.FormatUint(version, 10))
}

// derive hashes the parts (each prefixed by its length, so no two part lists
// collide) and formats the first 16 bytes as a UUID-shaped string.
func derive(kind string, parts ...string) string {
	var stack [256]byte
	b := stack[:0]
	b = appendPart(b, kind)
	for _, p := range parts {
		b = appendPart(b, p)
	}
	sum := sha256.Sum256(b)
	var out [36]byte
	hex.Encode(out[0:8], sum[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], sum[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], sum[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], sum[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], sum[10:16])
	return string(out[:])
}

func appendPart(b []byte, p string) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}
