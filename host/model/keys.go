package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// checkKeys walks a JSON document alongside the Go type it decodes into and
// refuses what encoding/json would silently accept: a struct field spelled in
// another case ("STOP" for "stop": encoding/json matches case-insensitively)
// and a key repeated in one object (encoding/json keeps the last). Either would
// let a declaration mean something other than what a reader of its bytes sees
// ({"stop":false,"STOP":true} stops a job). Syntax errors are left to the
// decoder, which describes them better: on bad syntax before the first
// refused key the walk gives up without a verdict.
//
// It runs before every strict decode, and every agent decodes every rollout
// summary and deployment record it receives, so it is a scanner over the
// bytes that allocates nothing for a record it accepts: no tokens, no map
// per object (a key is compared with the ones before it in its object,
// through a hash only past smallObject keys), a key decoded only when it
// has an escape or bad UTF-8, and the path of an error built only once
// there is an error. Its verdicts are those of the walk over json.Decoder's
// tokens it replaced (kept as checkKeysOracle in the tests, which hold it
// to them: TestCheckKeysAgreesWithTheTokenWalk and
// FuzzCheckKeysMatchesOracle), including where bad syntax leaves it
// without one.
func checkKeys(data []byte, t reflect.Type) *DecodeError {
	var s keyScanner
	s.data = data
	s.skipSpace()
	var ok bool
	switch {
	case s.pos < len(data) && data[s.pos] == '{':
		ok = s.object(keyTypeOf(t))
	case s.pos < len(data) && data[s.pos] == '[':
		ok = s.array(keyTypeOf(t))
	default:
		return nil // a scalar, or no JSON: no key to refuse
	}
	if ok || s.err == nil {
		return nil
	}
	// The steps were added on the way out, innermost first.
	path := ""
	for i := len(s.trail) - 1; i >= 0; i-- {
		if st := s.trail[i]; st.key >= 0 {
			path = joinPath(path, keyAt(data, st.key))
		} else {
			path += "[" + strconv.Itoa(st.index) + "]"
		}
	}
	s.err.Path = path
	return s.err
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// keyScanner is one checkKeys walk: a position in data, the keys of the
// objects being walked, and once a key is refused the error and the path
// to it.
type keyScanner struct {
	data  []byte
	pos   int
	seen  keyStack
	err   *DecodeError // the refused key's reason, its path still empty
	trail []pathStep   // the path to err from the inside out
}

// keyStack holds the keys of every object being walked, outermost first:
// an object's own keys are the ones from its length at the object's start,
// and it cuts the stack back to that length when it ends. Its first keys
// are in an array, so that a walk over a document of a few dozen keys in
// nested objects allocates nothing (a slice kept in keyScanner, or passed
// down the recursive walk, escapes).
type keyStack struct {
	n     int
	small [32]seenKey
	large []seenKey // the keys past small's
}

func (st *keyStack) at(i int) *seenKey {
	if i < len(st.small) {
		return &st.small[i]
	}
	return &st.large[i-len(st.small)]
}

func (st *keyStack) push(k seenKey) {
	if st.n < len(st.small) {
		st.small[st.n] = k
	} else {
		st.large = append(st.large[:st.n-len(st.small)], k)
	}
	st.n++
}

// find returns the index of the key compared as cmp among keys from..n-1,
// or -1.
func (st *keyStack) find(from int, cmp []byte) int {
	for j := from; j < st.n; j++ {
		if bytes.Equal(st.at(j).cmp, cmp) {
			return j
		}
	}
	return -1
}

// seenKey is one key of an object being walked.
type seenKey struct {
	cmp []byte // the key as compared: folded for a struct field, as decoded for a map
	at  int    // the offset of its opening quote
}

// pathStep is one step of the path to a refused key: the key at offset
// key, or (key -1) the element at index.
type pathStep struct{ key, index int }

// smallObject is how many keys of one object a key is compared with one by
// one; past it, the keys are found through a hash.
const smallObject = 16

// value walks one value, of type t (nil: whatever it is, only its shape is
// checked). It reports whether the walk goes on: false once a key is
// refused (s.err) or the syntax is bad.
func (s *keyScanner) value(t *typeRef) bool {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return false
	}
	switch c := s.data[s.pos]; {
	case c == '{':
		return s.object(t.keyType())
	case c == '[':
		return s.array(t.keyType())
	case c == '"':
		end, _, ok := stringEnd(s.data, s.pos)
		s.pos = end
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	}
	return false
}

func (s *keyScanner) object(kt *keyType) bool {
	s.pos++ // the '{'
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return true
	}
	base := s.seen.n
	var index map[uint64]int // past smallObject keys: a key's hash → the first in s.seen with it
	var seed maphash.Seed
	for {
		s.skipSpace()
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return false
		}
		at := s.pos
		end, plain, ok := stringEnd(s.data, at)
		if !ok {
			return false
		}
		s.pos = end
		key := s.data[at+1 : end-1]
		if !plain {
			k, ok := unquote(s.data[at:end])
			if !ok {
				return false
			}
			key = []byte(k)
		}
		cmp, elem, spelling := kt.member(key)

		prev := -1
		if n := s.seen.n - base; n <= smallObject {
			prev = s.seen.find(base, cmp)
		} else {
			if index == nil {
				seed = maphash.MakeSeed()
				index = make(map[uint64]int, 2*n)
				for j := base; j < s.seen.n; j++ {
					h := maphash.Bytes(seed, s.seen.at(j).cmp)
					if _, taken := index[h]; !taken {
						index[h] = j
					}
				}
			}
			h := maphash.Bytes(seed, cmp)
			if j, taken := index[h]; !taken {
				index[h] = s.seen.n
			} else if bytes.Equal(s.seen.at(j).cmp, cmp) {
				prev = j
			} else {
				prev = s.seen.find(base, cmp) // two keys with one hash
			}
		}
		if prev >= 0 {
			s.err = &DecodeError{Reason: fmt.Sprintf("key %q repeats %q in one object", key, keyAt(s.data, s.seen.at(prev).at))}
			return false
		}
		s.seen.push(seenKey{cmp: cmp, at: at})
		if spelling != "" {
			s.err = &DecodeError{Reason: fmt.Sprintf("field %q must be spelled %q", key, spelling)}
			s.trail = append(s.trail, pathStep{key: at})
			return false
		}

		s.skipSpace()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return false
		}
		s.pos++
		if !s.member(elem, pathStep{key: at}) {
			return false
		}
		if more, ok := s.after('}'); !ok {
			return false
		} else if !more {
			s.seen.n = base
			return true
		}
	}
}

func (s *keyScanner) array(kt *keyType) bool {
	s.pos++ // the '['
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return true
	}
	var elem *typeRef
	if kt.kind == listElems {
		elem = kt.elem
	}
	for i := 0; ; i++ {
		if !s.member(elem, pathStep{key: -1, index: i}) {
			return false
		}
		if more, ok := s.after(']'); !ok || !more {
			return ok
		}
	}
}

// member scans one value of an object or array; a key refused inside it
// gets step on its path.
func (s *keyScanner) member(elem *typeRef, step pathStep) bool {
	if s.value(elem) {
		return true
	}
	if s.err != nil {
		s.trail = append(s.trail, step)
	}
	return false
}

// after consumes what follows a member: a comma (more true) or the
// closing byte (more false); anything else is bad syntax (ok false).
func (s *keyScanner) after(closing byte) (more, ok bool) {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return false, false
	}
	switch s.data[s.pos] {
	case ',':
		s.pos++
		return true, true
	case closing:
		s.pos++
		return false, true
	}
	return false, false
}

func (s *keyScanner) skipSpace() { s.pos = spaceEnd(s.data, s.pos) }

// spaceEnd is the first position from i in data that is not JSON white
// space (the key check's scanner and the summary's canonical one).
func spaceEnd(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func (s *keyScanner) literal(lit string) bool {
	if len(s.data)-s.pos < len(lit) || string(s.data[s.pos:s.pos+len(lit)]) != lit {
		return false
	}
	s.pos += len(lit)
	return true
}

// number skips a number as JSON spells it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
// Whatever follows is the caller's to judge.
func (s *keyScanner) number() bool {
	d, i := s.data, s.pos
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		i = digits(d, i+1)
	default:
		return false
	}
	if i < len(d) && d[i] == '.' {
		j := digits(d, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(d, i)
		if j == i {
			return false
		}
		i = j
	}
	s.pos = i
	return true
}

// digits returns the offset of the first byte from i on that is not a digit.
func digits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

// stringEnd scans the string whose opening quote is at d[at]: the offset
// past its closing quote, whether its bytes between the quotes are what it
// decodes to (no escape, valid UTF-8), and whether it is a string at all
// (closed, no control character, no bad escape).
func stringEnd(d []byte, at int) (end int, plain, ok bool) {
	plain = true
	high := false
	i := at + 1
	for {
		// Eight bytes at a time while none of them needs a look, then one
		// at a time.
		for len(d)-i >= 8 {
			x := binary.LittleEndian.Uint64(d[i:])
			q, bs := x^(ones*'"'), x^(ones*'\\')
			if ((x-ones*' ')&^x|(q-ones)&^q|(bs-ones)&^bs|x)&highs != 0 {
				break
			}
			i += 8
		}
		for i < len(d) && plainByte[d[i]] {
			i++
		}
		if i >= len(d) {
			return len(d), false, false
		}
		switch c := d[i]; {
		case c == '"':
			if high && plain && !utf8.Valid(d[at+1:i]) {
				plain = false // decoding replaces the bad bytes
			}
			return i + 1, plain, true
		case c == '\\':
			plain = false
			i++
			if i >= len(d) {
				return len(d), false, false
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(d)-i <= 4 {
					return len(d), false, false
				}
				for _, h := range d[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return i, false, false
					}
				}
				i += 4
			default:
				return i, false, false
			}
		case c < ' ':
			return i, false, false
		default: // c >= utf8.RuneSelf
			high = true
		}
		i++
	}
}

// ones and highs are bytes 0x01 and 0x80 in each of a uint64's eight:
// (x-ones*c)&^x&highs is not 0 when a byte of x is below c (c at most 0x80;
// Hacker's Delight, 6-1).
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plainByte marks the bytes a string holds as they are: not a quote, a
// backslash, a control character or part of a multi-byte character.
var plainByte = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// unquote decodes a string token as encoding/json does (replacing bad
// UTF-8 and lone surrogates, which strconv.Unquote would not).
func unquote(tok []byte) (string, bool) {
	var k string
	err := json.Unmarshal(tok, &k)
	return k, err == nil
}

// keyAt decodes the key whose opening quote is at data[at]: a key of the
// path or the message of an error, as written.
func keyAt(data []byte, at int) string {
	end, plain, _ := stringEnd(data, at)
	if plain {
		return string(data[at+1 : end-1])
	}
	k, _ := unquote(data[at:end])
	return k
}

// keyType is what the walk needs of a Go type: how it compares the keys of
// an object decoded into it, and the type of their values or of its
// elements.
type keyType struct {
	kind   keyKind
	elem   *typeRef     // mapKeys, listElems: the type of a value
	strct  reflect.Type // structKeys: the struct, for jsonField
	fields []keyField   // structKeys: in declaration order, the first of each name
	byName map[string]*keyField
}

type keyKind uint8

const (
	shapeOnly  keyKind = iota // decodes itself, or is not a container: keys compared exactly, values of any type
	structKeys                // keys compared folded, each a field's
	mapKeys                   // keys compared exactly, values of type elem
	listElems                 // elements of type elem
)

// keyField is a struct field: its JSON name, that name folded as keys of a
// struct are compared, and its type.
type keyField struct {
	name   string
	folded []byte
	typ    typeRef
}

// fewFields is how many fields a struct may have for a key to be looked
// up among them one by one, rather than in byName.
const fewFields = 8

// typeRef is a type whose keyType is looked up once, when first needed
// (types refer to themselves, so they cannot all be resolved up front).
type typeRef struct {
	t  reflect.Type
	kt atomic.Pointer[keyType]
}

// keyType resolves r; a nil r is a value of no known type.
func (r *typeRef) keyType() *keyType {
	if r == nil {
		return anyShape
	}
	if kt := r.kt.Load(); kt != nil {
		return kt
	}
	kt := keyTypeOf(r.t)
	r.kt.Store(kt)
	return kt
}

// anyShape is the keyType of a value of no known type.
var anyShape = &keyType{}

// keyTypes caches keyTypeOf per type, as fieldNames caches fieldsOf.
var keyTypes sync.Map // reflect.Type → *keyType

// keyTypeOf is the keyType of t, through any pointers. A type that
// implements json.Unmarshaler (enums, durations, times) decodes itself:
// only its shape is checked.
func keyTypeOf(t reflect.Type) *keyType {
	if t == nil {
		return anyShape
	}
	if v, ok := keyTypes.Load(t); ok {
		return v.(*keyType)
	}
	u := t
	for u.Kind() == reflect.Pointer {
		u = u.Elem()
	}
	kt := &keyType{}
	if !reflect.PointerTo(u).Implements(unmarshalerType) {
		switch u.Kind() {
		case reflect.Struct:
			kt.kind, kt.strct = structKeys, u
			names := map[string]bool{}
			for _, f := range fieldsOf(u) {
				if !names[f.tag] { // jsonField takes the first
					names[f.tag] = true
					kt.fields = append(kt.fields, keyField{name: f.tag, folded: []byte(strings.ToLower(f.tag)), typ: typeRef{t: f.typ}})
				}
			}
			if len(kt.fields) > fewFields {
				kt.byName = make(map[string]*keyField, len(kt.fields))
				for i := range kt.fields {
					kt.byName[kt.fields[i].name] = &kt.fields[i]
				}
			}
		case reflect.Map:
			kt.kind, kt.elem = mapKeys, &typeRef{t: u.Elem()}
		case reflect.Slice, reflect.Array:
			kt.kind, kt.elem = listElems, &typeRef{t: u.Elem()}
		}
	}
	v, _ := keyTypes.LoadOrStore(t, kt)
	return v.(*keyType)
}

// field is the field named key exactly, or nil.
func (kt *keyType) field(key []byte) *keyField {
	if kt.byName != nil {
		return kt.byName[string(key)]
	}
	for i := range kt.fields {
		if f := &kt.fields[i]; f.name == string(key) {
			return f
		}
	}
	return nil
}

// member resolves a key (as decoded) of an object of this type: the key as
// compared with the object's other keys, the type of its value (nil: any),
// and for a struct field spelled in another case the spelling it must have.
func (kt *keyType) member(key []byte) (cmp []byte, elem *typeRef, spelling string) {
	switch kt.kind {
	case structKeys:
		if f := kt.field(key); f != nil {
			return f.folded, &f.typ, ""
		}
		// Not a field's name as spelled: a field's in another case, or
		// unknown (the decoder refuses it).
		k := string(key)
		if folded := strings.ToLower(k); folded != k {
			cmp = []byte(folded)
		} else {
			cmp = key
		}
		if _, name, _, ok := jsonField(kt.strct, k); ok {
			spelling = name
		}
		return cmp, nil, spelling
	case mapKeys:
		return key, kt.elem, ""
	}
	return key, nil, ""
}

// jsonField finds the struct field of t that encoding/json decodes key into
// (it matches names case-insensitively): its type, its JSON name, and
// whether key spells that name exactly.
func jsonField(t reflect.Type, key string) (ft reflect.Type, name string, exact, ok bool) {
	for _, f := range fieldsOf(t) {
		if f.tag == key {
			return f.typ, f.tag, true, true
		}
		if strings.EqualFold(f.tag, key) {
			ft, name, ok = f.typ, f.tag, true
		}
	}
	return ft, name, false, ok
}

// jsonName is one exported field of a struct type: its JSON name and type.
type jsonName struct {
	tag string
	typ reflect.Type
}

// fieldNames caches fieldsOf per struct type: every decode of a record
// asks for the same few types, and reading their fields and tags by
// reflection for each key of each record was most of a decode's cost (a
// thousand agents decoding each other's node records).
var fieldNames sync.Map // reflect.Type → []jsonName

// fieldsOf is t's exported fields in declaration order with their JSON
// names (the tag's name, else the field's), leaving out those tagged "-".
func fieldsOf(t reflect.Type) []jsonName {
	if v, ok := fieldNames.Load(t); ok {
		return v.([]jsonName)
	}
	var out []jsonName
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		out = append(out, jsonName{tag: tag, typ: f.Type})
	}
	v, _ := fieldNames.LoadOrStore(t, out)
	return v.([]jsonName)
}
