package reconcile

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"unsafe"
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

// idBatch derives a round's new allocation IDs (AllocID's, for one job and
// version) into one buffer and turns them into strings at once: one string
// for the round, each ID a slice of it, instead of one allocation per ID.
// The hashed text's head (kind, namespace, job, version) is encoded once.
type idBatch struct {
	buf         []byte
	targets     []*string // where each ID of buf goes, in order
	next, first []byte    // the heads of AllocID's two kinds of text
}

func newIDBatch(n int, namespace, jobID string, version uint64) idBatch {
	if n == 0 {
		return idBatch{} // alloc is never called
	}
	return idBatch{buf: make([]byte, 0, n*36), targets: make([]*string, 0, n),
		next: appendHead(nil, "next", namespace, jobID, version), first: appendHead(nil, "first", namespace, jobID, version)}
}

// alloc derives AllocID(namespace, jobID, version, nodeID, name, previous)
// of the batch's job and version for *target, set by done.
func (b *idBatch) alloc(target *string, nodeID, name, previous string) {
	var stack [256]byte
	m := stack[:0]
	if previous != "" {
		m = appendPart(append(m, b.next...), previous)
	} else {
		m = appendPart(appendPart(append(m, b.first...), nodeID), name)
	}
	b.buf = appendSum(b.buf, m)
	b.targets = append(b.targets, target)
}

// done sets every target. The targets must not have moved since alloc.
// The IDs share buf's memory: buf is never written again (the batch is
// done with), so the string is immutable as a string must be, and copying
// it would cost as much as the IDs' own allocations did.
func (b *idBatch) done() {
	if len(b.buf) == 0 {
		return
	}
	s := unsafe.String(&b.buf[0], len(b.buf))
	b.buf = nil
	for i, t := range b.targets {
		*t = s[i*36 : (i+1)*36]
	}
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
	b := appendHead(stack[:0], kind, namespace, jobID, version)
	for _, p := range parts {
		b = appendPart(b, p)
	}
	var out [36]byte
	return string(appendSum(out[:0], b))
}

// appendHead appends the head every derived ID's text starts with.
func appendHead(b []byte, kind, namespace, jobID string, version uint64) []byte {
	b = appendPart(b, kind)
	b = appendPart(b, namespace)
	b = appendPart(b, jobID)
	return binary.AppendUvarint(b, version)
}

// appendSum appends the first 16 bytes of text's SHA-256, formatted as a
// UUID-shaped string.
func appendSum(dst, text []byte) []byte {
	sum := sha256.Sum256(text)
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
	return append(dst, out[:]...)
}

func appendPart(b []byte, p string) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}
