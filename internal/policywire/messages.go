package policywire

import (
	"math/bits"
	"time"
)

// ABIVersion is the newest ABI version, the one the SDK implements; a host
// runs modules of every version from MinABIVersion to it.
const (
	ABIVersion    = 2
	MinABIVersion = 1
)

// Kind bits, as the module's hivelet_kinds export returns them.
const (
	KindCanary     = 1
	KindCompletion = 2
)

// Node field bits: which of a node's fixed fields follow its ID in a canary
// input.
const (
	FieldName byte = 1 << iota
	FieldDatacenter
	FieldNodePool
	FieldClass
	FieldAll = FieldName | FieldDatacenter | FieldNodePool | FieldClass
)

// Output status bytes.
const (
	statusOK    = 0
	statusError = 1
)

// Canary is a canary input, but for its nodes.
type Canary struct {
	JobID        string
	JobVersion   uint64
	DeploymentID string
	Group        string
	Percent      int
	Count        int
	Params       map[string]string
	// Existing are the node IDs already canaries, sorted.
	Existing []string
}

// NodeFields are a node's fixed fields; only the ID and the fields whose
// bits were sent are set.
type NodeFields struct {
	ID, Name, Datacenter, NodePool, Class string
}

// Tables are the fixed-field bits, the attribute and meta keys a canary
// input sent, and every node's values for them, shared by the nodes of one
// input. A node's values start at its offset: its attribute values in the
// order of Attr, then its meta values, each with its presence in Has.
type Tables struct {
	Fields     byte
	Attr, Meta []string
	Vals       []string
	Has        []bool
}

// Nodes is what the canary input encoder reads: the eligible nodes, in the
// order they are sent.
type Nodes interface {
	Len() int
	Fixed(i int) NodeFields
	Attribute(i int, key string) (string, bool)
	Meta(i int, key string) (string, bool)
}

// AppendCanaryInput encodes a canary input. attr and meta are the key tables
// sent (the keys the policy declared); each node's values follow their
// order, and only the fixed fields whose bits are in fields are sent.
func AppendCanaryInput(b []byte, c *Canary, fields byte, attr, meta []string, nodes Nodes) []byte {
	b = AppendString(b, c.JobID)
	b = AppendUvarint(b, c.JobVersion)
	b = AppendString(b, c.DeploymentID)
	b = AppendString(b, c.Group)
	b = AppendUvarint(b, uint64(max(c.Percent, 0)))
	b = AppendUvarint(b, uint64(max(c.Count, 0)))
	b = AppendParams(b, c.Params)
	b = append(b, fields)
	b = AppendUvarint(b, uint64(len(attr)))
	for _, k := range attr {
		b = AppendString(b, k)
	}
	b = AppendUvarint(b, uint64(len(meta)))
	for _, k := range meta {
		b = AppendString(b, k)
	}
	n := nodes.Len()
	b = AppendUvarint(b, uint64(n))
	for i := range n {
		f := nodes.Fixed(i)
		b = AppendString(b, f.ID)
		if fields&FieldName != 0 {
			b = AppendString(b, f.Name)
		}
		if fields&FieldDatacenter != 0 {
			b = AppendString(b, f.Datacenter)
		}
		if fields&FieldNodePool != 0 {
			b = AppendString(b, f.NodePool)
		}
		if fields&FieldClass != 0 {
			b = AppendString(b, f.Class)
		}
		for _, k := range attr {
			v, ok := nodes.Attribute(i, k)
			b = AppendOptString(b, v, ok)
		}
		for _, k := range meta {
			v, ok := nodes.Meta(i, k)
			b = AppendOptString(b, v, ok)
		}
	}
	b = AppendUvarint(b, uint64(len(c.Existing)))
	for _, id := range c.Existing {
		b = AppendString(b, id)
	}
	return b
}

// DecodeCanaryInput decodes a canary input into the caller's node type N:
// bind is called once per node, in order, with its fixed fields, the input's
// tables and the offset of its values in them. The strings of the result
// alias buf.
func DecodeCanaryInput[N any](buf []byte, bind func(n *N, f NodeFields, t *Tables, off int32)) (Canary, []N, error) {
	r := &reader{b: buf}
	var c Canary
	c.JobID = r.aliasString()
	c.JobVersion = r.uvarint()
	c.DeploymentID = r.aliasString()
	c.Group = r.aliasString()
	c.Percent = r.int()
	c.Count = r.int()
	c.Params = r.params()
	t := &Tables{Fields: r.byte()}
	if t.Fields&^FieldAll != 0 {
		r.fail("unknown node field bit")
	}
	t.Attr = make([]string, r.count())
	for i := range t.Attr {
		t.Attr[i] = r.aliasString()
	}
	t.Meta = make([]string, r.count())
	for i := range t.Meta {
		t.Meta[i] = r.aliasString()
	}
	nNodes := r.count()
	width := len(t.Attr) + len(t.Meta)
	// Each node takes at least 4 bytes for its ID, each fixed field and
	// each value: a node count the bytes left cannot hold is malformed
	// before its values are allocated (count alone bounds only the nodes).
	if perNode := 4 * (1 + bits.OnesCount8(t.Fields) + width); nNodes > (len(r.b)-r.pos)/perNode {
		r.fail("more nodes than the message holds")
		nNodes = 0
	}
	// One backing array for every node's values: two allocations, not 2n.
	t.Vals = make([]string, nNodes*width)
	t.Has = make([]bool, nNodes*width)
	nodes := make([]N, nNodes)
	for i := 0; i < nNodes && r.err == nil; i++ {
		var f NodeFields
		f.ID = r.aliasString()
		if t.Fields&FieldName != 0 {
			f.Name = r.aliasString()
		}
		if t.Fields&FieldDatacenter != 0 {
			f.Datacenter = r.aliasString()
		}
		if t.Fields&FieldNodePool != 0 {
			f.NodePool = r.aliasString()
		}
		if t.Fields&FieldClass != 0 {
			f.Class = r.aliasString()
		}
		for j := i * width; j < (i+1)*width; j++ {
			t.Vals[j], t.Has[j] = r.optAlias()
		}
		bind(&nodes[i], f, t, int32(i*width))
	}
	if n := r.count(); n > 0 {
		c.Existing = make([]string, n)
		for i := range c.Existing {
			c.Existing[i] = r.aliasString()
		}
	}
	if err := r.end(); err != nil {
		return Canary{}, nil, err
	}
	return c, nodes, nil
}

// CanaryOutput is a canary answer.
type CanaryOutput struct {
	NodeIDs []string
	Reason  string
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

// PolicyError is a policy's own error answer, as a decoder returns it.
type PolicyError struct{ Message string }

func (e *PolicyError) Error() string { return "policy returned an error: " + e.Message }

// status reads an answer's status byte: true for a successful answer; an
// error answer is decoded to a *PolicyError in *err.
func (r *reader) status(err *error) bool {
	switch st := r.byte(); {
	case r.err != nil:
	case st == statusError:
		msg := r.copyString()
		if *err = r.end(); *err == nil {
			*err = &PolicyError{Message: msg}
		}
		return false
	case st != statusOK:
		r.fail("unknown status byte")
	}
	return true
}

// DecodeCanaryOutput decodes a canary answer strictly, copying its strings.
// A policy's error answer comes back as a *PolicyError.
func DecodeCanaryOutput(buf []byte) (CanaryOutput, error) {
	r := &reader{b: buf}
	var err error
	if !r.status(&err) {
		return CanaryOutput{}, err
	}
	var out CanaryOutput
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

// Completion is a completion input.
type Completion struct {
	DeploymentID string
	JobID        string
	JobVersion   uint64
	Status       string
	// Disruption (version 2 on) is why the disruption guard holds, or "".
	Disruption string
	Now        time.Time
	Params     map[string]string
	// Groups are sent in their order; the host sorts them by name.
	Groups []Group
}

// Group is one group of a completion input. Its fields are the SDK's
// policy.Group field for field, so that either converts to the other.
type Group struct {
	Name              string
	DesiredTotal      int
	DesiredCanaries   int
	AutoRevert        bool
	AutoPromote       bool
	Promoted          bool
	ProgressDeadline  time.Duration
	RequireProgressBy time.Time
	Placed            int
	Healthy           int
	Unhealthy         int
	Pending           int
	CanariesHealthy   int
	LostInFlight      int
	Lost              int
	Disconnected      int
	Complete          bool
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
// version abi. Version 1 has no disruption and no loss counts: a module
// built for it is sent the input it can decode.
func AppendCompletionInput(b []byte, in *Completion, abi uint32) []byte {
	b = AppendString(b, in.DeploymentID)
	b = AppendString(b, in.JobID)
	b = AppendUvarint(b, in.JobVersion)
	b = AppendString(b, in.Status)
	if abi >= 2 {
		b = AppendString(b, in.Disruption)
	}
	b = AppendVarint(b, unixNano(in.Now))
	b = AppendParams(b, in.Params)
	b = AppendUvarint(b, uint64(len(in.Groups)))
	for i := range in.Groups {
		b = appendGroup(b, &in.Groups[i], abi)
	}
	return b
}

func appendGroup(b []byte, g *Group, abi uint32) []byte {
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
	b = AppendUvarint(b, uint64(max(g.DesiredTotal, 0)))
	b = AppendUvarint(b, uint64(max(g.DesiredCanaries, 0)))
	b = AppendVarint(b, int64(g.ProgressDeadline))
	b = AppendVarint(b, unixNano(g.RequireProgressBy))
	for _, v := range [...]int{g.Placed, g.Healthy, g.Unhealthy, g.Pending, g.CanariesHealthy} {
		b = AppendUvarint(b, uint64(max(v, 0)))
	}
	if abi >= 2 {
		for _, v := range [...]int{g.LostInFlight, g.Lost, g.Disconnected} {
			b = AppendUvarint(b, uint64(max(v, 0)))
		}
	}
	return b
}

// DecodeCompletionInput decodes a completion input of version ABIVersion;
// its strings alias buf.
func DecodeCompletionInput(buf []byte) (Completion, error) {
	r := &reader{b: buf}
	var in Completion
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
		return Completion{}, err
	}
	return in, nil
}

// Decision is a completion verdict, as its wire byte.
type Decision uint8

// The completion verdicts.
const (
	Continue Decision = 0
	Promote  Decision = 1
	Succeed  Decision = 2
	Fail     Decision = 3
)

// String returns the verdict's name as the agent spells it.
func (d Decision) String() string {
	switch d {
	case Continue:
		return "continue"
	case Promote:
		return "promote"
	case Succeed:
		return "succeed"
	case Fail:
		return "fail"
	}
	return "unknown"
}

// CompletionOutput is a completion answer.
type CompletionOutput struct {
	Decision Decision
	Revert   bool
	Reason   string
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
	var err error
	if !r.status(&err) {
		return CompletionOutput{}, err
	}
	var out CompletionOutput
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
