package model

import (
	"encoding/binary"
	"sync"
	"time"
)

// DecodeSummary strictly decodes a rollout summary, as Decode would. Every
// agent decodes every summary of every job it watches (at 1,000 agents a
// summary a second is 1,000 decodes of a 200-waiter document, the largest
// item of the fleet's own CPU after the passes: docs/scale.md), so a
// summary in the form the steward writes (encoding/json's: the exact field
// names, each once; strings of printable ASCII without escapes; integers
// without fraction or exponent) is read by a scanner made for it
// (decodeSummaryCanonical). Anything else — another spelling, an escape, a
// null, a number in another form, bad syntax — goes to Decode, which
// accepts or refuses it and names the field. The scanner never accepts what
// Decode refuses and never reads a value differently
// (TestDecodeSummaryAgreesWithDecode).
func DecodeSummary(data []byte) (*RolloutSummary, error) {
	var s RolloutSummary
	if decodeSummaryCanonical(data, &s) {
		return &s, nil
	}
	s = RolloutSummary{}
	if err := Decode(data, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// decodeSummaryCanonical reads data into the zero summary s if data is a
// summary in the canonical form DecodeSummary describes, and reports
// whether it was; on false s holds part of a value and is discarded.
func decodeSummaryCanonical(data []byte, s *RolloutSummary) bool {
	sc := canonScanner{b: data}
	if !sc.summary(s) {
		return false
	}
	sc.space()
	return sc.i == len(sc.b)
}

// canonScanner walks the canonical form of a JSON document: a method
// returns false at the first byte outside it, and the caller gives up.
type canonScanner struct {
	b []byte
	i int
	// s is b as one string, made at the first non-empty string read: the
	// value's strings are views of it (one allocation for the document's
	// hundreds of node and allocation IDs, where Decode made one each). A
	// string kept after its summary is dropped keeps that copy with it:
	// the kilobytes of one document, never more than one per string kept.
	s string
}

func (c *canonScanner) space() { c.i = spaceEnd(c.b, c.i) }

// take consumes ch after white space.
func (c *canonScanner) take(ch byte) bool {
	c.space()
	if c.i < len(c.b) && c.b[c.i] == ch {
		c.i++
		return true
	}
	return false
}

// raw reads a string of printable ASCII other than '"' and '\\' and
// returns its bytes (a view of the input), quotes excluded.
func (c *canonScanner) raw() ([]byte, bool) {
	if !c.take('"') {
		return nil, false
	}
	start := c.i
	// Eight bytes at a time while none of them may end the string or
	// leave the canonical form (special), then byte by byte.
	for c.i+8 <= len(c.b) && !special(binary.LittleEndian.Uint64(c.b[c.i:])) {
		c.i += 8
	}
	for c.i < len(c.b) {
		ch := c.b[c.i]
		if ch == '"' {
			c.i++
			return c.b[start : c.i-1], true
		}
		if !plainASCII[ch] {
			return nil, false
		}
		c.i++
	}
	return nil, false
}

// special reports whether any of the eight bytes of x may be a '"', a
// '\\', a control character or not ASCII (it may say so of a plain byte
// above a special one: the caller then reads them one by one).
func special(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, bs, del := x^('"'*ones), x^('\\'*ones), x^(0x7f*ones)
	return ((q-ones)&^q|(bs-ones)&^bs|(del-ones)&^del|(x-0x20*ones)&^x|x)&highs != 0
}

// plainASCII marks the bytes a canonical string holds as they are: the
// printable ASCII but '\\' (and '"', which ends it).
var plainASCII = func() (t [256]bool) {
	for ch := 0x20; ch < 0x7f; ch++ {
		t[ch] = ch != '\\'
	}
	return t
}()

func (c *canonScanner) str(dst *string) bool {
	v, ok := c.raw()
	if ok && len(v) > 0 {
		if c.s == "" {
			c.s = string(c.b)
		}
		end := c.i - 1 // the closing quote
		*dst = c.s[end-len(v) : end]
	}
	return ok
}

// digits reads an unsigned integer of at most max digits, without a
// leading zero, and not followed by a fraction or an exponent.
func (c *canonScanner) digits(max int) (uint64, bool) {
	start := c.i
	var n uint64
	for c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9' {
		n = n*10 + uint64(c.b[c.i]-'0')
		c.i++
	}
	d := c.i - start
	if d == 0 || d > max || d > 1 && c.b[start] == '0' {
		return 0, false
	}
	if c.i < len(c.b) {
		switch c.b[c.i] {
		case '.', 'e', 'E', '-', '+':
			return 0, false
		}
	}
	return n, true
}

// int reads an int (at most 18 digits: no overflow on any platform's
// 64-bit int; a negative one without "-0").
func (c *canonScanner) int(dst *int) bool {
	c.space()
	neg := c.i < len(c.b) && c.b[c.i] == '-'
	if neg {
		c.i++
	}
	n, ok := c.digits(18)
	if !ok || neg && n == 0 || int64(int(n)) != int64(n) {
		return false
	}
	if neg {
		*dst = -int(n)
	} else {
		*dst = int(n)
	}
	return true
}

func (c *canonScanner) uint64(dst *uint64) bool {
	c.space()
	n, ok := c.digits(19) // below 10^19 < 2^64
	if ok {
		*dst = n
	}
	return ok
}

func (c *canonScanner) time(dst *time.Time) bool {
	c.space()
	start := c.i
	if _, ok := c.raw(); !ok {
		return false
	}
	// What the decoder does with a JSON string for a time.Time.
	return dst.UnmarshalJSON(c.b[start:c.i]) == nil
}

// object reads an object whose members member reads (given the key), each
// key at most once: seen is a bit per field, which member returns (0: an
// unknown key or a value it could not read; anyKey: a map's key, which
// member checks itself).
func (c *canonScanner) object(member func(key []byte) uint32) bool {
	if !c.take('{') {
		return false
	}
	if c.take('}') {
		return true
	}
	var seen uint32
	for {
		k, ok := c.raw()
		if !ok || !c.take(':') {
			return false
		}
		bit := member(k)
		if bit == 0 || bit != anyKey && seen&bit != 0 {
			return false
		}
		seen |= bit
		if c.take(',') {
			continue
		}
		return c.take('}')
	}
}

// array reads an array whose elements elem reads (the caller makes an
// empty one an empty, non-nil slice, as the decoder does).
func (c *canonScanner) array(elem func() bool) bool {
	if !c.take('[') {
		return false
	}
	if c.take(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if c.take(',') {
			continue
		}
		return c.take(']')
	}
}

func (c *canonScanner) ints(dst *[]int) bool {
	out := []int{}
	ok := c.array(func() bool {
		var v int
		if !c.int(&v) {
			return false
		}
		out = append(out, v)
		return true
	})
	*dst = out
	return ok
}

func (c *canonScanner) summary(s *RolloutSummary) bool {
	return c.object(func(k []byte) uint32 {
		switch string(k) {
		case "namespace":
			return bitIf(1<<0, c.str(&s.Namespace))
		case "job_id":
			return bitIf(1<<1, c.str(&s.JobID))
		case "job_version":
			return bitIf(1<<2, c.uint64(&s.JobVersion))
		case "deployment_id":
			return bitIf(1<<3, c.str(&s.DeploymentID))
		case "steward":
			return bitIf(1<<4, c.str(&s.Steward))
		case "time":
			return bitIf(1<<5, c.time(&s.Time))
		case "groups":
			return bitIf(1<<6, c.groups(s))
		}
		return 0
	})
}

func (c *canonScanner) groups(s *RolloutSummary) bool {
	s.Groups = map[string]*GroupSummary{}
	return c.object(func(k []byte) uint32 {
		name := string(k)
		if _, dup := s.Groups[name]; dup {
			return 0
		}
		g := &GroupSummary{}
		if !c.group(g) {
			return 0
		}
		s.Groups[name] = g
		return anyKey
	})
}

// anyKey is what a map's member returns to object (the map checks that
// no key repeats).
const anyKey = 1 << 31

func (c *canonScanner) group(g *GroupSummary) bool {
	return c.object(func(k []byte) uint32 {
		switch string(k) {
		case "waiting":
			// Read into a scratch list, then copied to one of the exact
			// size: one allocation for a group's waiters, not one per
			// doubling.
			sp := waiterScratch.Get().(*[]SummaryWaiter)
			out := (*sp)[:0]
			ok := c.array(func() bool {
				var w SummaryWaiter
				if !c.waiter(&w) {
					return false
				}
				out = append(out, w)
				return true
			})
			g.Waiting = append(make([]SummaryWaiter, 0, len(out)), out...)
			clear(out)
			*sp = out[:0]
			waiterScratch.Put(sp)
			return bitIf(1<<0, ok)
		case "waiting_total":
			return bitIf(1<<1, c.int(&g.WaitingTotal))
		case "assigned":
			return bitIf(1<<2, c.ints(&g.Assigned))
		case "next":
			return bitIf(1<<3, c.ints(&g.Next))
		case "slots":
			out := []SummarySlot{}
			ok := c.array(func() bool {
				var sl SummarySlot
				if !c.slot(&sl) {
					return false
				}
				out = append(out, sl)
				return true
			})
			g.Slots = out
			return bitIf(1<<4, ok)
		case "desired":
			return bitIf(1<<5, c.int(&g.Desired))
		case "placed":
			return bitIf(1<<6, c.int(&g.Placed))
		case "healthy":
			return bitIf(1<<7, c.int(&g.Healthy))
		case "unhealthy":
			return bitIf(1<<8, c.int(&g.Unhealthy))
		case "pending":
			return bitIf(1<<9, c.int(&g.Pending))
		case "outdated":
			return bitIf(1<<10, c.int(&g.Outdated))
		case "in_flight":
			return bitIf(1<<11, c.int(&g.InFlight))
		}
		return 0
	})
}

func (c *canonScanner) waiter(w *SummaryWaiter) bool {
	return c.object(func(k []byte) uint32 {
		switch string(k) {
		case "node":
			return bitIf(1<<0, c.str(&w.Node))
		case "alloc":
			return bitIf(1<<1, c.str(&w.Alloc))
		}
		return 0
	})
}

func (c *canonScanner) slot(s *SummarySlot) bool {
	return c.object(func(k []byte) uint32 {
		switch string(k) {
		case "i":
			return bitIf(1<<0, c.int(&s.Index))
		case "node":
			return bitIf(1<<1, c.str(&s.Holder))
		}
		return 0
	})
}

// waiterScratch holds the lists a summary's waiters are read into.
var waiterScratch = sync.Pool{New: func() any { return new([]SummaryWaiter) }}

// bitIf is bit when ok, else 0 (the member was not read).
func bitIf(bit uint32, ok bool) uint32 {
	if ok {
		return bit
	}
	return 0
}
