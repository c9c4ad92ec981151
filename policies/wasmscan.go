package policies

import (
	"errors"
	"fmt"
	"strconv"
)

// This file inspects a module's binary before it is compiled, to find the
// instance state a memory restore does not cover (docs/policy-abi.md,
// "Isolation between evaluations"):
//
//   - mutable globals: the module is rewritten to export every mutable
//     global it defines under a reserved name (globalExportPrefix + index),
//     so the engine can snapshot them after initialisation and restore
//     them after every call, like memory;
//   - tables and element/data segments: an instruction that can change
//     them (table.set, table.grow, table.fill, table.copy, table.init,
//     elem.drop, data.drop) anywhere in the code, or a mutable global of a
//     type the engine cannot read and write exactly (v128, references),
//     makes the module run on a fresh instance per evaluation.
//
// The scan is conservative: it looks at every function body, whether or
// not it can run after initialisation.

// globalExportPrefix names the exports added for mutable globals. It is not
// a valid Go or C identifier prefix, so no toolchain's export collides.
const globalExportPrefix = "hivelet.global."

// moduleShape is what the scan found.
type moduleShape struct {
	// mutableGlobals are the indexes (in the global index space) of the
	// defined mutable globals of a restorable numeric type.
	mutableGlobals []uint32
	// fresh is why every evaluation needs a fresh instance ("" if it does
	// not).
	fresh string
}

// Value types.
const (
	vtI32, vtI64, vtF32, vtF64 = 0x7f, 0x7e, 0x7d, 0x7c
)

var errTruncated = errors.New("truncated module")

type wreader struct {
	b   []byte
	pos int
}

func (r *wreader) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, errTruncated
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

// uleb reads an unsigned LEB128 of at most 64 bits.
func (r *wreader) uleb() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 70; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, errors.New("LEB128 too long")
}

// skipLEB skips a signed or unsigned LEB128.
func (r *wreader) skipLEB() error { _, err := r.uleb(); return err }

func (r *wreader) skip(n uint64) error {
	if uint64(len(r.b)-r.pos) < n {
		return errTruncated
	}
	r.pos += int(n)
	return nil
}

func (r *wreader) skipName() error {
	n, err := r.uleb()
	if err != nil {
		return err
	}
	return r.skip(n)
}

func (r *wreader) skipLimits() error {
	flags, err := r.byte()
	if err != nil {
		return err
	}
	if err := r.skipLEB(); err != nil {
		return err
	}
	if flags&1 != 0 {
		return r.skipLEB()
	}
	return nil
}

// section is one section of a module binary.
type section struct {
	id         byte
	start, end int // of the whole section, header included
	body       int // start of the content
}

func sections(wasm []byte) ([]section, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, errors.New("not a WebAssembly binary")
	}
	r := &wreader{b: wasm, pos: 8}
	var out []section
	for r.pos < len(wasm) {
		start := r.pos
		id, _ := r.byte()
		n, err := r.uleb()
		if err != nil {
			return nil, err
		}
		body := r.pos
		if err := r.skip(n); err != nil {
			return nil, err
		}
		out = append(out, section{id: id, start: start, end: r.pos, body: body})
	}
	return out, nil
}

// scanModule finds a module's mutable globals and whether its tables or
// segments can change after initialisation.
func scanModule(wasm []byte) (moduleShape, error) {
	var shape moduleShape
	secs, err := sections(wasm)
	if err != nil {
		return shape, err
	}
	var imported uint32
	for _, s := range secs {
		r := &wreader{b: wasm[:s.end], pos: s.body}
		switch s.id {
		case 2: // imports
			n, err := r.uleb()
			if err != nil {
				return shape, err
			}
			for range n {
				if err := r.skipName(); err != nil {
					return shape, err
				}
				if err := r.skipName(); err != nil {
					return shape, err
				}
				kind, err := r.byte()
				if err != nil {
					return shape, err
				}
				switch kind {
				case 0:
					err = r.skipLEB()
				case 1:
					if _, err = r.byte(); err == nil {
						err = r.skipLimits()
					}
				case 2:
					err = r.skipLimits()
				case 3:
					if _, err = r.byte(); err == nil {
						var mut byte
						if mut, err = r.byte(); err == nil && mut == 1 {
							shape.fresh = "it imports a mutable global"
						}
					}
					imported++
				default:
					return shape, fmt.Errorf("import of unknown kind %#x", kind)
				}
				if err != nil {
					return shape, err
				}
			}
		case 6: // globals
			n, err := r.uleb()
			if err != nil {
				return shape, err
			}
			for i := range uint32(n) {
				vt, err := r.byte()
				if err != nil {
					return shape, err
				}
				mut, err := r.byte()
				if err != nil {
					return shape, err
				}
				if err := skipConstExpr(r); err != nil {
					return shape, err
				}
				if mut != 1 {
					continue
				}
				switch vt {
				case vtI32, vtI64, vtF32, vtF64:
					shape.mutableGlobals = append(shape.mutableGlobals, imported+i)
				default:
					shape.fresh = fmt.Sprintf("it has a mutable global of type %#x", vt)
				}
			}
		case 10: // code
			why, err := scanCode(r)
			if err != nil {
				return shape, fmt.Errorf("scanning code: %w", err)
			}
			if why != "" && shape.fresh == "" {
				shape.fresh = why
			}
		}
	}
	return shape, nil
}

// skipConstExpr skips an initialiser expression, up to and including its
// end.
func skipConstExpr(r *wreader) error {
	for {
		op, err := r.byte()
		if err != nil {
			return err
		}
		if op == 0x0b {
			return nil
		}
		if _, err := skipImmediates(r, op); err != nil {
			return err
		}
	}
}

// scanCode walks every instruction of every function body and returns why
// the module can change its tables or segments ("" if it cannot).
func scanCode(r *wreader) (string, error) {
	n, err := r.uleb()
	if err != nil {
		return "", err
	}
	for range n {
		size, err := r.uleb()
		if err != nil {
			return "", err
		}
		end := r.pos + int(size)
		if size > uint64(len(r.b)-r.pos) {
			return "", errTruncated
		}
		body := &wreader{b: r.b[:end], pos: r.pos}
		groups, err := body.uleb()
		if err != nil {
			return "", err
		}
		for range groups {
			if err := body.skipLEB(); err != nil {
				return "", err
			}
			if _, err := body.byte(); err != nil {
				return "", err
			}
		}
		for body.pos < end {
			op, _ := body.byte()
			what, err := skipImmediates(body, op)
			if err != nil {
				return "", err
			}
			if what != "" {
				return "its code uses " + what, nil
			}
		}
		r.pos = end
	}
	return "", nil
}

// skipImmediates skips the immediates of the instruction op and names it
// if it changes a table or a segment.
func skipImmediates(r *wreader, op byte) (string, error) {
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
		c, err := r.byte()
		if err != nil {
			return "", err
		}
		if c == 0x40 || (c >= 0x6f && c <= 0x7f) {
			return "", nil
		}
		r.pos--
		return "", r.skipLEB() // type index (s33)
	case op == 0x0c || op == 0x0d || (op >= 0x20 && op <= 0x24) || op == 0x10 || op == 0xd2 || op == 0x25:
		return "", r.skipLEB()
	case op == 0x26:
		return "table.set", r.skipLEB()
	case op == 0x0e: // br_table
		n, err := r.uleb()
		if err != nil {
			return "", err
		}
		for range n + 1 {
			if err := r.skipLEB(); err != nil {
				return "", err
			}
		}
		return "", nil
	case op == 0x11: // call_indirect
		if err := r.skipLEB(); err != nil {
			return "", err
		}
		return "", r.skipLEB()
	case op == 0x1c: // select with types
		n, err := r.uleb()
		if err != nil {
			return "", err
		}
		return "", r.skip(n)
	case op >= 0x28 && op <= 0x3e: // loads and stores: memarg
		if err := r.skipLEB(); err != nil {
			return "", err
		}
		return "", r.skipLEB()
	case op == 0x3f || op == 0x40 || op == 0xd0: // memory.size/grow, ref.null
		_, err := r.byte()
		return "", err
	case op == 0x41 || op == 0x42:
		return "", r.skipLEB()
	case op == 0x43:
		return "", r.skip(4)
	case op == 0x44:
		return "", r.skip(8)
	case op == 0xfc:
		sub, err := r.uleb()
		if err != nil {
			return "", err
		}
		return skipMisc(r, sub)
	case op == 0xfd:
		sub, err := r.uleb()
		if err != nil {
			return "", err
		}
		return "", skipSIMD(r, sub)
	case op <= 0x1b || (op >= 0x45 && op <= 0xc4) || op == 0xd1:
		return "", nil // no immediates
	}
	return "", fmt.Errorf("unknown opcode %#x", op)
}

func skipMisc(r *wreader, sub uint64) (string, error) {
	lebs := func(n int) error {
		for range n {
			if err := r.skipLEB(); err != nil {
				return err
			}
		}
		return nil
	}
	switch sub {
	case 0, 1, 2, 3, 4, 5, 6, 7: // saturating truncations
		return "", nil
	case 8: // memory.init: reads a passive segment (a dropped one traps)
		return "", lebs(2)
	case 9:
		return "data.drop", lebs(1)
	case 10: // memory.copy
		return "", lebs(2)
	case 11: // memory.fill
		return "", lebs(1)
	case 12:
		return "table.init", lebs(2)
	case 13:
		return "elem.drop", lebs(1)
	case 14:
		return "table.copy", lebs(2)
	case 15:
		return "table.grow", lebs(1)
	case 16: // table.size
		return "", lebs(1)
	case 17:
		return "table.fill", lebs(1)
	}
	return "", fmt.Errorf("unknown instruction 0xfc %d", sub)
}

func skipSIMD(r *wreader, sub uint64) error {
	memarg := func() error {
		if err := r.skipLEB(); err != nil {
			return err
		}
		return r.skipLEB()
	}
	switch {
	case sub <= 11 || sub == 92 || sub == 93: // loads, stores
		return memarg()
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		return r.skip(16)
	case sub >= 21 && sub <= 34: // extract/replace lane
		return r.skip(1)
	case sub >= 84 && sub <= 91: // load/store lane
		if err := memarg(); err != nil {
			return err
		}
		return r.skip(1)
	}
	return nil
}

// exportGlobals returns wasm with an export added for each global in idx,
// named globalExportPrefix + index. The module is otherwise unchanged.
func exportGlobals(wasm []byte, idx []uint32) ([]byte, error) {
	if len(idx) == 0 {
		return wasm, nil
	}
	secs, err := sections(wasm)
	if err != nil {
		return nil, err
	}
	for _, s := range secs {
		if s.id != 7 {
			continue
		}
		r := &wreader{b: wasm[:s.end], pos: s.body}
		n, err := r.uleb()
		if err != nil {
			return nil, err
		}
		content := appendULEB(nil, n+uint64(len(idx)))
		content = append(content, wasm[r.pos:s.end]...)
		for _, i := range idx {
			name := globalExportPrefix + strconv.FormatUint(uint64(i), 10)
			content = appendULEB(content, uint64(len(name)))
			content = append(content, name...)
			content = append(content, 3) // global
			content = appendULEB(content, uint64(i))
		}
		out := make([]byte, 0, len(wasm)+len(content)-(s.end-s.body)+5)
		out = append(out, wasm[:s.start]...)
		out = append(out, 7)
		out = appendULEB(out, uint64(len(content)))
		out = append(out, content...)
		out = append(out, wasm[s.end:]...)
		return out, nil
	}
	return nil, errors.New("the module has no export section")
}

func appendULEB(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
