package reconcile

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// IDs are derived, never random, so that the same input gives the same plan
// byte for byte, and so that two rounds planning the same allocation name
// the same key: creating it twice is a compare-and-set conflict, not a
// duplicate.
//
// A new allocation that follows another one (an update replaces it, a
// placement carries a terminal one on) hashes the job, the version it will
// run and its predecessor: "the allocation of version v that follows X" is
// one allocation, however many rounds plan it. A first placement, with no
// predecessor, hashes the job, the version, the node and the name.
//
// An allocation's ID is its text's XXH3-128, not its SHA-256: nothing
// depends on it being hard to forge (an allocation's key also carries its
// node and job, so a crafted collision can only meet the author's own job
// on one node, where it is a conflict, not a takeover), and on an update
// deriving the IDs was a quarter of the reconciler's CPU (BENCHMARKS.md,
// "An allocation's ID by XXH3-128": 8 ns against 82 on a UUID-sized
// text). Only the agent of the node an allocation runs on derives its ID
// to write it (a dry run and hivelet reconcile show IDs, and write none),
// so agents of two releases never need to agree on one; an ID once
// written is read, never derived again.
//
// A deployment's ID hashes the job and its version with SHA-256: one
// deployment per (job, version), which is what makes creating it
// idempotent, and every agent of the fleet, of whatever release, must
// derive the same one (it is created by whichever agent comes first).

// AllocID returns the ID of a new allocation of the job at version on
// nodeID named name, following previous ("" for none).
func AllocID(namespace, jobID string, version uint64, nodeID, name, previous string) string {
	var stack [256]byte
	b := stack[:0]
	if previous != "" {
		b = appendPart(appendHead(b, "next", namespace, jobID, version), previous)
	} else {
		b = appendPart(appendPart(appendHead(b, "first", namespace, jobID, version), nodeID), name)
	}
	sum := xxh3.Hash128(b).Bytes()
	var out [36]byte
	return string(appendUUID(out[:0], sum[:]))
}

// idBatch derives a round's new allocation IDs (AllocID's, for one job and
// version) into one buffer: each ID is a string over its 36 bytes of the
// buffer, not an allocation of its own. The hashed text's head (kind,
// namespace, job, version) is encoded once.
type idBatch struct {
	buf []byte // the IDs, 36 bytes each; a byte once written is never written again
	// next and first are the texts of AllocID's two kinds, holding their
	// heads.
	next, first []byte
}

func newIDBatch(n int, namespace, jobID string, version uint64) idBatch {
	if n == 0 {
		return idBatch{} // alloc is never called
	}
	scratch := make([]byte, 256)
	return idBatch{buf: make([]byte, 0, n*36),
		next:  appendHead(scratch[0:0:128], "next", namespace, jobID, version),
		first: appendHead(scratch[128:128:256], "first", namespace, jobID, version)}
}

// alloc returns AllocID(namespace, jobID, version, nodeID, name, previous)
// of the batch's job and version.
func (b *idBatch) alloc(nodeID, name, previous string) string {
	// The text is built after its head, in place: b.next and b.first
	// keep their lengths (the head), whatever follows is overwritten.
	// A text that outgrows its array moves, head and all, to a bigger
	// one, which the next text of its kind reuses.
	head := &b.first
	var m []byte
	if previous != "" {
		head = &b.next
		m = appendPart(b.next, previous)
	} else {
		m = appendPart(appendPart(b.first, nodeID), name)
	}
	*head = m[:len(*head)]
	sum := xxh3.Hash128(m).Bytes()
	at := len(b.buf)
	b.buf = appendUUID(b.buf, sum[:])
	// These 36 bytes are never written again (the buffer only grows past
	// them, and a grown buffer is a copy): the string is immutable, as a
	// string must be.
	return unsafe.String(&b.buf[at], 36)
}

// DeploymentID returns the ID of the deployment of one job version.
// It hashes the kind, namespace, job and version (each string prefixed by
// its length, so no two lists collide) and shows the first 16 bytes of
// their SHA-256.
func DeploymentID(namespace, jobID string, version uint64) string {
	var stack [128]byte
	sum := sha256.Sum256(appendHead(stack[:0], "deployment", namespace, jobID, version))
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
// string: 8-4-4-4-12 lower-case hex digits. Written out byte by byte at
// constant offsets (no loop, no test per byte), each byte's two digits
// from a table: a loop with the dashes' test cost a quarter of an update's
// derived ID, encoding/hex per group 16-17 ns, two digits looked up one
// by one 8 ns, a pair from the table 5 (BenchmarkAppendUUID).
func appendUUID(dst, sum []byte) []byte {
	at := len(dst)
	dst = slices.Grow(dst, 36)[:at+36]
	o, s := (*[36]byte)(dst[at:]), (*[16]byte)(sum)
	hex2(o[0:2], s[0])
	hex2(o[2:4], s[1])
	hex2(o[4:6], s[2])
	hex2(o[6:8], s[3])
	o[8] = '-'
	hex2(o[9:11], s[4])
	hex2(o[11:13], s[5])
	o[13] = '-'
	hex2(o[14:16], s[6])
	hex2(o[16:18], s[7])
	o[18] = '-'
	hex2(o[19:21], s[8])
	hex2(o[21:23], s[9])
	o[23] = '-'
	hex2(o[24:26], s[10])
	hex2(o[26:28], s[11])
	hex2(o[28:30], s[12])
	hex2(o[30:32], s[13])
	hex2(o[32:34], s[14])
	hex2(o[34:36], s[15])
	return dst
}

// hex2 writes c as two lower-case hex digits into o: one 2-byte load from
// hexPairs and one 2-byte store.
func hex2(o []byte, c byte) {
	binary.NativeEndian.PutUint16(o, binary.NativeEndian.Uint16(hexPairs[2*int(c):]))
}

// hexPairs holds the 256 bytes' two-digit forms, "00" to "ff", in order.
var hexPairs = func() (t [512]byte) {
	const digits = "0123456789abcdef"
	for c := range 256 {
		t[2*c], t[2*c+1] = digits[c>>4], digits[c&15]
	}
	return t
}()

func appendPart(b []byte, p string) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}
