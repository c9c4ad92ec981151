package policywire

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strconv"
	"unsafe"
)

// Integers are unsigned LEB128 varints ("uvarint"), signed ones zig-zag
// varints; a string is a 4-byte little-endian length and its bytes; an
// optional string is the same, with length 0xFFFFFFFF meaning absent.

// ErrMalformed is returned (wrapped) for input or output that does not
// follow the wire format, including trailing bytes.
var ErrMalformed = errors.New("malformed policy message")

type wireError struct {
	what string
	at   int
}

func (e *wireError) Error() string {
	return ErrMalformed.Error() + ": " + e.what + " at byte " + strconv.Itoa(e.at)
}

func (e *wireError) Is(target error) bool { return target == ErrMalformed }

// absent is the length of an absent optional string.
const absent = 0xFFFFFFFF

// AppendUvarint appends an unsigned LEB128 varint.
func AppendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

// AppendVarint appends a zig-zag varint.
func AppendVarint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

// AppendString appends a string: its length (4 bytes, little endian) and
// its bytes.
func AppendString(b []byte, s string) []byte {
	return append(binary.LittleEndian.AppendUint32(b, uint32(len(s))), s...)
}

// AppendOptString appends an optional string (absent: length 0xFFFFFFFF).
func AppendOptString(b []byte, s string, ok bool) []byte {
	if !ok {
		return binary.LittleEndian.AppendUint32(b, absent)
	}
	return AppendString(b, s)
}

// AppendParams appends a policy's parameters: a count, then each key and
// value, sorted by key.
func AppendParams(b []byte, p map[string]string) []byte {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = AppendString(b, k)
		b = AppendString(b, p[k])
	}
	return b
}

// reader decodes a message; its first error sticks and every later read
// returns a zero value.
type reader struct {
	b   []byte
	pos int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = &wireError{what: what, at: r.pos}
	}
}

func (r *reader) uvarint() uint64 { return readVarint(r, binary.Uvarint) }

func (r *reader) varint() int64 { return readVarint(r, binary.Varint) }

// readVarint reads one varint with read (binary.Uvarint or binary.Varint),
// or fails the reader on bytes that are not one.
func readVarint[T uint64 | int64](r *reader, read func([]byte) (T, int)) T {
	if r.err != nil {
		return 0
	}
	v, n := read(r.b[r.pos:])
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.pos += n
	return v
}

// count reads a uvarint used as a length or count, bounded by the bytes left
// (every element takes at least one byte), so a hostile count cannot make
// the decoder allocate more than the message's size.
func (r *reader) count() int {
	v := r.uvarint()
	if v > uint64(len(r.b)-r.pos) {
		r.fail("count larger than the message")
		return 0
	}
	return int(v)
}

func (r *reader) int() int {
	v := r.uvarint()
	if v > math.MaxInt32 {
		r.fail("integer out of range")
		return 0
	}
	return int(v)
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.fail("truncated")
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

// strLen reads a string length: 4 bytes, little endian. Fixed width costs
// a few bytes per string and saves a varint loop per string, which matters
// in a guest where every loop iteration checks for the deadline.
func (r *reader) strLen() (uint32, bool) {
	if r.err != nil {
		return 0, false
	}
	if len(r.b)-r.pos < 4 {
		r.fail("truncated string length")
		return 0, false
	}
	n := binary.LittleEndian.Uint32(r.b[r.pos:])
	r.pos += 4
	return n, true
}

// aliasString reads a string aliasing the buffer (no copy).
func (r *reader) aliasString() string {
	n, ok := r.strLen()
	if !ok || n == 0 {
		return ""
	}
	if uint64(n) > uint64(len(r.b)-r.pos) {
		r.fail("truncated string")
		return ""
	}
	s := unsafe.String(&r.b[r.pos], int(n))
	r.pos += int(n)
	return s
}

// copyString reads a string into fresh memory.
func (r *reader) copyString() string {
	n, ok := r.strLen()
	if !ok || uint64(n) > uint64(len(r.b)-r.pos) {
		r.fail("truncated string")
		return ""
	}
	s := string(r.b[r.pos : r.pos+int(n)])
	r.pos += int(n)
	return s
}

func (r *reader) optAlias() (string, bool) {
	if r.err == nil && len(r.b)-r.pos >= 4 && binary.LittleEndian.Uint32(r.b[r.pos:]) == absent {
		r.pos += 4
		return "", false
	}
	s := r.aliasString()
	return s, r.err == nil
}

func (r *reader) params() map[string]string {
	n := r.count()
	if n == 0 {
		return nil
	}
	p := make(map[string]string, n)
	for i := 0; i < n && r.err == nil; i++ {
		k := r.aliasString()
		p[k] = r.aliasString()
	}
	return p
}

func (r *reader) end() error {
	if r.err == nil && r.pos != len(r.b) {
		r.fail("trailing bytes")
	}
	return r.err
}
