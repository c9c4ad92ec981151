package policy

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"time"
	"unsafe"
)

// The wire codec of ABI version 1 (docs/policy-abi.md). Integers are
// unsigned LEB128 varints ("uvarint"), signed ones zig-zag varints; a string
// is a 4-byte little-endian length and its bytes; an optional string is the
// same, with length 0xFFFFFFFF meaning absent. The codec uses no reflection and, on
// the decoding side of inputs, no copying: every string of a decoded input
// aliases the input buffer, which the SDK never reuses.
//
// The agent and tests use these functions; policy authors never need them.

// ErrMalformed is returned (wrapped) for input or output that does not
// follow the wire format, including trailing bytes.
var ErrMalformed = errors.New("malformed policy message")

type wireError struct {
	what string
	at   int
}

func (e *wireError) Error() string {
	return ErrMalformed.Error() + ": " + e.what + " at byte " + itoa(e.at)
}

func (e *wireError) Is(target error) bool { return target == ErrMalformed }

func itoa(v int) string {
	if v == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	neg := v < 0
	if neg {
		v = -v
	}
	for v > 0 {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// Output status bytes.
const (
	statusOK    = 0
	statusError = 1
)

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

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.pos:])
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.pos += n
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.pos:])
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

// absent is the length of an absent optional string.
const absent = 0xFFFFFFFF

func (r *reader) optAlias() (string, bool) {
	if r.err == nil && len(r.b)-r.pos >= 4 && binary.LittleEndian.Uint32(r.b[r.pos:]) == absent {
		r.pos += 4
		return "", false
	}
	s := r.aliasString()
	return s, r.err == nil
}

func (r *reader) end() error {
	if r.err == nil && r.pos != len(r.b) {
		r.fail("trailing bytes")
	}
	return r.err
}

// AppendUvarint, AppendString, AppendOptString and AppendVarint are the
// encoding primitives, exported for the agent's encoder.
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

func appendParams(b []byte, p map[string]string) []byte {
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

// AppendCanaryInput encodes a canary input. attrKeys and metaKeys are the
// key tables sent (the keys the policy declared); each node's values follow
// their order. The agent has its own encoder working from its node records;
// this one serves tests and tools.
func AppendCanaryInput(b []byte, in CanaryInput, fields byte, attrKeys, metaKeys []string) []byte {
	b = AppendString(b, in.JobID)
	b = AppendUvarint(b, in.JobVersion)
	b = AppendString(b, in.DeploymentID)
	b = AppendString(b, in.Group)
	b = AppendUvarint(b, uint64(in.Percent))
	b = AppendUvarint(b, uint64(in.Count))
	b = appendParams(b, in.Params)
	b = append(b, fields)
	b = AppendUvarint(b, uint64(len(attrKeys)))
	for _, k := range attrKeys {
		b = AppendString(b, k)
	}
	b = AppendUvarint(b, uint64(len(metaKeys)))
	for _, k := range metaKeys {
		b = AppendString(b, k)
	}
	b = AppendUvarint(b, uint64(len(in.Nodes)))
	for i := range in.Nodes {
		n := &in.Nodes[i]
		b = AppendString(b, n.ID)
		if fields&FieldName != 0 {
			b = AppendString(b, n.Name)
		}
		if fields&FieldDatacenter != 0 {
			b = AppendString(b, n.Datacenter)
		}
		if fields&FieldNodePool != 0 {
			b = AppendString(b, n.NodePool)
		}
		if fields&FieldClass != 0 {
			b = AppendString(b, n.Class)
		}
		for _, k := range attrKeys {
			v, ok := n.Attribute(k)
			b = AppendOptString(b, v, ok)
		}
		for _, k := range metaKeys {
			v, ok := n.Meta(k)
			b = AppendOptString(b, v, ok)
		}
	}
	b = AppendUvarint(b, uint64(len(in.Existing)))
	for _, id := range in.Existing {
		b = AppendString(b, id)
	}
	return b
}

// DecodeCanaryInput decodes a canary input. The strings of the result alias
// buf: buf must not be modified afterwards.
func DecodeCanaryInput(buf []byte) (CanaryInput, error) {
	r := &reader{b: buf}
	var in CanaryInput
	in.JobID = r.aliasString()
	in.JobVersion = r.uvarint()
	in.DeploymentID = r.aliasString()
	in.Group = r.aliasString()
	in.Percent = r.int()
	in.Count = r.int()
	in.Params = r.params()
	keys := &keyTables{fields: r.byte()}
	if keys.fields&^FieldAll != 0 {
		r.fail("unknown node field bit")
	}
	keys.attr = make([]string, r.count())
	for i := range keys.attr {
		keys.attr[i] = r.aliasString()
	}
	keys.meta = make([]string, r.count())
	for i := range keys.meta {
		keys.meta[i] = r.aliasString()
	}
	nNodes := r.count()
	width := len(keys.attr) + len(keys.meta)
	// One backing array for every node's values: two allocations, not 2n.
	keys.vals = make([]string, nNodes*width)
	keys.has = make([]bool, nNodes*width)
	in.Nodes = make([]Node, nNodes)
	for i := 0; i < nNodes && r.err == nil; i++ {
		n := &in.Nodes[i]
		n.ID = r.aliasString()
		if keys.fields&FieldName != 0 {
			n.Name = r.aliasString()
		}
		if keys.fields&FieldDatacenter != 0 {
			n.Datacenter = r.aliasString()
		}
		if keys.fields&FieldNodePool != 0 {
			n.NodePool = r.aliasString()
		}
		if keys.fields&FieldClass != 0 {
			n.Class = r.aliasString()
		}
		n.keys = keys
		n.off = int32(i * width)
		for j := i * width; j < (i+1)*width; j++ {
			keys.vals[j], keys.has[j] = r.optAlias()
		}
	}
	if n := r.count(); n > 0 {
		in.Existing = make([]string, n)
		for i := range in.Existing {
			in.Existing[i] = r.aliasString()
		}
	}
	if err := r.end(); err != nil {
		return CanaryInput{}, err
	}
	return in, nil
}

// AppendCanaryOutput encodes a successful canary answer.
func AppendCanaryOutput(b []byte, out CanaryOutput) []byte {
	b = append(b, statusOK)
	b = AppendUvarint(b, uint64(len(out.NodeIDs)))
	for _, id := range out.NodeIDs {
		b = AppendString(b, id)
	}
	return AppendString(b, out.Reason)
}

// AppendError encodes a policy's error answer (either kind).
func AppendError(b []byte, msg string) []byte {
	return AppendString(append(b, statusError), msg)
}

// PolicyError is a policy's own error answer, as decoded by the agent.
type PolicyError struct{ Message string }

func (e *PolicyError) Error() string { return "policy returned an error: " + e.Message }

// DecodeCanaryOutput decodes a canary answer strictly, copying its strings.
// A policy's error answer comes back as a *PolicyError.
func DecodeCanaryOutput(buf []byte) (CanaryOutput, error) {
	r := &reader{b: buf}
	var out CanaryOutput
	switch st := r.byte(); {
	case r.err != nil:
	case st == statusError:
		msg := r.copyString()
		if err := r.end(); err != nil {
			return out, err
		}
		return out, &PolicyError{Message: msg}
	case st != statusOK:
		r.fail("unknown status byte")
	}
	if n := r.count(); n > 0 {
		out.NodeIDs = make([]string, n)
		for i := range out.NodeIDs {
			out.NodeIDs[i] = r.copyString()
		}
	}
	out.Reason = r.copyString()
	if err := r.end(); err != nil {
		return CanaryOutput{}, err
	}
	return out, nil
}

// Group flag bits.
const (
	flagAutoRevert = 1 << iota
	flagAutoPromote
	flagPromoted
	flagComplete
)

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.Unix(0, v).UTC()
}

// AppendCompletionInput encodes a completion input in the layout of ABI
// version abi (groups in the given order; the agent sends them sorted by
// name). Version 1 has no disruption and no loss counts: a module built
// for it is sent the input it can decode.
func AppendCompletionInput(b []byte, in CompletionInput, abi int) []byte {
	b = AppendString(b, in.DeploymentID)
	b = AppendString(b, in.JobID)
	b = AppendUvarint(b, in.JobVersion)
	b = AppendString(b, in.Status)
	if abi >= 2 {
		b = AppendString(b, in.Disruption)
	}
	b = AppendVarint(b, unixNano(in.Now))
	b = appendParams(b, in.Params)
	b = AppendUvarint(b, uint64(len(in.Groups)))
	for i := range in.Groups {
		b = appendGroup(b, &in.Groups[i], abi)
	}
	return b
}

// appendGroup encodes one group of a completion input.
func appendGroup(b []byte, g *Group, abi int) []byte {
	b = AppendString(b, g.Name)
	var f byte
	if g.AutoRevert {
		f |= flagAutoRevert
	}
	if g.AutoPromote {
		f |= flagAutoPromote
	}
	if g.Promoted {
		f |= flagPromoted
	}
	if g.Complete {
		f |= flagComplete
	}
	b = append(b, f)
	b = AppendUvarint(b, uint64(g.DesiredTotal))
	b = AppendUvarint(b, uint64(g.DesiredCanaries))
	b = AppendVarint(b, int64(g.ProgressDeadline))
	b = AppendVarint(b, unixNano(g.RequireProgressBy))
	b = AppendUvarint(b, uint64(g.Placed))
	b = AppendUvarint(b, uint64(g.Healthy))
	b = AppendUvarint(b, uint64(g.Unhealthy))
	b = AppendUvarint(b, uint64(g.Pending))
	b = AppendUvarint(b, uint64(g.CanariesHealthy))
	if abi >= 2 {
		b = AppendUvarint(b, uint64(g.LostInFlight))
		b = AppendUvarint(b, uint64(g.Lost))
		b = AppendUvarint(b, uint64(g.Disconnected))
	}
	return b
}

// DecodeCompletionInput decodes a completion input of this SDK's ABI
// version; its strings alias buf.
func DecodeCompletionInput(buf []byte) (CompletionInput, error) {
	r := &reader{b: buf}
	var in CompletionInput
	in.DeploymentID = r.aliasString()
	in.JobID = r.aliasString()
	in.JobVersion = r.uvarint()
	in.Status = r.aliasString()
	in.Disruption = r.aliasString()
	in.Now = fromUnixNano(r.varint())
	in.Params = r.params()
	in.Groups = make([]Group, r.count())
	for i := 0; i < len(in.Groups) && r.err == nil; i++ {
		g := &in.Groups[i]
		g.Name = r.aliasString()
		f := r.byte()
		if f&^(flagAutoRevert|flagAutoPromote|flagPromoted|flagComplete) != 0 {
			r.fail("unknown group flag")
		}
		g.AutoRevert, g.AutoPromote = f&flagAutoRevert != 0, f&flagAutoPromote != 0
		g.Promoted, g.Complete = f&flagPromoted != 0, f&flagComplete != 0
		g.DesiredTotal = r.int()
		g.DesiredCanaries = r.int()
		g.ProgressDeadline = time.Duration(r.varint())
		g.RequireProgressBy = fromUnixNano(r.varint())
		g.Placed = r.int()
		g.Healthy = r.int()
		g.Unhealthy = r.int()
		g.Pending = r.int()
		g.CanariesHealthy = r.int()
		g.LostInFlight = r.int()
		g.Lost = r.int()
		g.Disconnected = r.int()
	}
	if err := r.end(); err != nil {
		return CompletionInput{}, err
	}
	return in, nil
}

// AppendCompletionOutput encodes a successful completion answer.
func AppendCompletionOutput(b []byte, out CompletionOutput) []byte {
	b = append(b, statusOK, byte(out.Decision))
	if out.Revert {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return AppendString(b, out.Reason)
}

// DecodeCompletionOutput decodes a completion answer strictly: an unknown
// decision, a revert flag other than 0 or 1, or revert without fail is
// malformed. A policy's error answer comes back as a *PolicyError.
func DecodeCompletionOutput(buf []byte) (CompletionOutput, error) {
	r := &reader{b: buf}
	var out CompletionOutput
	switch st := r.byte(); {
	case r.err != nil:
	case st == statusError:
		msg := r.copyString()
		if err := r.end(); err != nil {
			return out, err
		}
		return out, &PolicyError{Message: msg}
	case st != statusOK:
		r.fail("unknown status byte")
	}
	d := r.byte()
	if r.err == nil && d > byte(Fail) {
		r.fail("unknown decision")
	}
	out.Decision = Decision(d)
	switch rv := r.byte(); {
	case r.err != nil:
	case rv > 1:
		r.fail("revert flag is not 0 or 1")
	case rv == 1 && out.Decision != Fail:
		r.fail("revert without fail")
	default:
		out.Revert = rv == 1
	}
	out.Reason = r.copyString()
	if err := r.end(); err != nil {
		return CompletionOutput{}, err
	}
	return out, nil
}
