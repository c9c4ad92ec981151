package reconcile

import (
	"crypto/sha256"
	"encoding"
	"encoding/binary"
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
//
// The digest is given the text already padded as SHA-256 pads it (a whole
// number of blocks), and its state after those blocks, which is the
// text's SHA-256, is read from its marshaled form: the digest hashes the
// blocks in place and does no padding, copying or finishing of its own,
// which cost as much as hashing the block. paddedSHA256 checks, once,
// that the standard library's digest is marshaled as expected; if it were
// not, the batch would finish every digest with Sum.
type idBatch struct {
	buf []byte // the IDs, 36 bytes each; a byte once written is never written again
	h   hash.Hash
	// st is h's state marshaler (nil: Sum finishes each digest); state
	// receives its marshaled state, or h.Sum's digest; next and first are
	// the texts of AllocID's two kinds, holding their heads: parts of one
	// small array (a batch that held its digest's array would be moved to
	// the heap, since h.Sum is a call through an interface).
	st                 encoding.BinaryAppender
	state, next, first []byte
}

func newIDBatch(n int, namespace, jobID string, version uint64) idBatch {
	if n == 0 {
		return idBatch{} // alloc is never called
	}
	scratch := make([]byte, 384)
	b := idBatch{buf: make([]byte, 0, n*36), h: sha256.New(), state: scratch[0:0:128],
		next:  appendHead(scratch[128:128:256], "next", namespace, jobID, version),
		first: appendHead(scratch[256:256:384], "first", namespace, jobID, version)}
	if paddedSHA256 {
		b.st, _ = b.h.(encoding.BinaryAppender)
	}
	return b
}

// alloc returns AllocID(namespace, jobID, version, nodeID, name, previous)
// of the batch's job and version.
func (b *idBatch) alloc(nodeID, name, previous string) string {
	// The text is built after its head, in place: b.next and b.first
	// keep their lengths (the head), whatever follows is overwritten.
	// A text that outgrows its array (with its padding) moves, head and
	// all, to a bigger one, which the next text of its kind reuses.
	head := &b.first
	var m []byte
	if previous != "" {
		head = &b.next
		m = appendPart(b.next, previous)
	} else {
		m = appendPart(appendPart(b.first, nodeID), name)
	}
	sum, m := b.sum(m)
	*head = m[:len(*head)]
	at := len(b.buf)
	b.buf = appendUUID(b.buf, sum)
	// These 36 bytes are never written again (the buffer only grows past
	// them, and a grown buffer is a copy): the string is immutable, as a
	// string must be.
	return unsafe.String(&b.buf[at], 36)
}

// sum returns the SHA-256 of m (at least its first 16 bytes), and m:
// padding it may write into m's spare capacity, or move it to a bigger
// array.
func (b *idBatch) sum(m []byte) ([]byte, []byte) {
	b.h.Reset()
	if b.st == nil {
		b.h.Write(m)
		return b.h.Sum(b.state[:0]), m
	}
	p := pad(m)
	b.h.Write(p)
	st, _ := b.st.AppendBinary(b.state[:0])
	return st[len(sha256Magic) : len(sha256Magic)+32], p[:len(m)]
}

// pad returns m padded as SHA-256 pads its input: a 1 bit, zeros, and
// the length in bits, to a whole number of 64-byte blocks. It writes into
// m's spare capacity (growing m if it has too little).
func pad(m []byte) []byte {
	n := len(m)
	total := (n + 8 + 64) &^ 63 // n, the 1 bit (a byte), the length (8 bytes), rounded up
	p := slices.Grow(m, total-n)[:total]
	p[n] = 0x80
	clear(p[n+1 : total-8])
	binary.BigEndian.PutUint64(p[total-8:], uint64(n)*8)
	return p
}

// sha256Magic heads a SHA-256 digest's marshaled state, which follows as
// its eight state words, big-endian.
const sha256Magic = "sha\x03"

// paddedSHA256 reports whether a digest fed padded blocks gives the
// SHA-256 of the text in its marshaled state (see idBatch): checked on one
// text against sha256.Sum256.
var paddedSHA256 = func() bool {
	h := sha256.New()
	st, ok := h.(encoding.BinaryAppender)
	if !ok {
		return false
	}
	text := []byte("hivelet: a padded text's digest is its state")
	want := sha256.Sum256(text)
	h.Write(pad(slices.Clip(text)))
	got, err := st.AppendBinary(nil)
	return err == nil && len(got) >= len(sha256Magic)+32 && string(got[:len(sha256Magic)]) == sha256Magic &&
		string(got[len(sha256Magic):len(sha256Magic)+32]) == string(want[:])
}()

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
// string: 8-4-4-4-12 lower-case hex digits. Written out byte pair by byte
// pair at constant offsets (no loop, no test per byte): a loop with the
// dashes' test cost a quarter of an update's derived ID, and encoding/hex
// per group twice this (BenchmarkAppendUUID: 16-17 ns against 8).
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

// hex2 writes c as two lower-case hex digits into o.
func hex2(o []byte, c byte) {
	o[0], o[1] = hexDigits[c>>4], hexDigits[c&15]
}

const hexDigits = "0123456789abcdef"

func appendPart(b []byte, p string) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}
