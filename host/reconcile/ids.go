package reconcile

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"
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
// version) into one buffer: each ID is a string over its 36 bytes of the
// buffer, not an allocation of its own. The hashed text's head (kind,
// namespace, job, version) is encoded once, and one digest serves every ID.
type idBatch struct {
	buf []byte // the IDs, 36 bytes each; a byte once written is never written again
	h   hash.Hash
	// sum receives each digest, next and first are the texts of AllocID's
	// two kinds, holding their heads: three parts of one small array (a
	// batch that held its digest's array would be moved to the heap,
	// since h.Sum is a call through an interface).
	sum, next, first []byte
}

func newIDBatch(n int, namespace, jobID string, version uint64) idBatch {
	if n == 0 {
		return idBatch{} // alloc is never called
	}
	scratch := make([]byte, 288)
	return idBatch{buf: make([]byte, 0, n*36), h: sha256.New(), sum: scratch[0:0:32],
		next:  appendHead(scratch[32:32:160], "next", namespace, jobID, version),
		first: appendHead(scratch[160:160:288], "first", namespace, jobID, version)}
}

// alloc returns AllocID(namespace, jobID, version, nodeID, name, previous)
// of the batch's job and version.
func (b *idBatch) alloc(nodeID, name, previous string) string {
	// The text is built after its head, in place: b.next and b.first
	// keep their lengths (the head), whatever follows is overwritten.
	var m []byte
	if previous != "" {
		m = appendPart(b.next, previous)
		b.next = m[:len(b.next)]
	} else {
		m = appendPart(appendPart(b.first, nodeID), name)
		b.first = m[:len(b.first)]
	}
	b.h.Reset()
	b.h.Write(m)
	at := len(b.buf)
	b.buf = appendUUID(b.buf, b.h.Sum(b.sum))
	// These 36 bytes are never written again (the buffer only grows past
	// them, and a grown buffer is a copy): the string is immutable, as a
	// string must be.
	return unsafe.String(&b.buf[at], 36)
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
	sum := sha256.Sum256(b)
	var out [36]byte
	return string(appendUUID(out[:0], sum[:]))
}

// appendHead appends the head every derived ID's text starts with.
func appendHead(b []byte, kind, namespace, jobID string, version uint64) []byte {
	b = appendPart(b, kind)
	b = appendPart(b, namespace)
	b = appendPart(b, jobID)
	return binary.AppendUvarint(b, version)
}

// appendUUID appends the first 16 bytes of sum, formatted as a UUID-shaped
// string.
func appendUUID(dst, sum []byte) []byte {
	at := len(dst)
	dst = slices.Grow(dst, 36)[:at+36]
	out := dst[at : at+36]
	hex.Encode(out[0:8], sum[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], sum[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], sum[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], sum[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], sum[10:16])
	return dst
}

func appendPart(b []byte, p string) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}
