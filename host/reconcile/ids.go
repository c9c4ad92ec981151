package reconcile

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// IDs are derived, never random, so that the same input gives the same plan
// byte for byte, and so that two rounds (or two hosts) planning the same
// allocation name the same key: creating it twice is a compare-and-set
// conflict, not a duplicate.
//
// A new allocation that follows another one (an update replaces it, a
// placement carries a terminal one on) hashes the job, the version it will
// run and its predecessor: "the allocation of version v that follows X" is
// one allocation, however many rounds plan it. A first placement, with no
// predecessor, hashes the job, the version, the node and the name. (The
// predecessor already pins node and name; leaving them out keeps the
// hashed text within one SHA-256 block for UUID-sized IDs, which halves
// the cost of an update: see BENCHMARKS.md.)
//
// A deployment's ID hashes the job and its version: one deployment per
// (job, version), which is what makes creating it idempotent.

// AllocID returns the ID of a new allocation of the job at version on
// nodeID named name, following previous ("" for none).
func AllocID(namespace, jobID string, version uint64, nodeID, name, previous string) string {
	if previous != "" {
		return derive("next", namespace, jobID, version, previous)
	}
	return derive("first", namespace, jobID, version, nodeID, name)
}

// DeploymentID returns the ID of the deployment of one job version.
func DeploymentID(namespace, jobID string, version uint64) string {
	return derive("deployment", namespace, jobID, version)
}

// derive hashes kind, namespace, job, version and the parts (each string
// prefixed by its length, so no two lists collide) and formats the first 16
// bytes of the SHA-256 as a UUID-shaped string.
func derive(kind, namespace, jobID string, version uint64, parts ...string) string {
	var stack [256]byte
	b := stack[:0]
	b = appendPart(b, kind)
	b = appendPart(b, namespace)
	b = appendPart(b, jobID)
	b = binary.AppendUvarint(b, version)
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
