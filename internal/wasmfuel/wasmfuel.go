// Command wasmfuel gives a WebAssembly module a fuel gauge: an exported,
// mutable i64 global named "fuel" that every loop's header decrements, the
// module trapping (unreachable) when it is at zero. The host sets it before
// a call; a loop that never ends runs out of fuel instead of running
// forever. scripts/build-parsers runs it on the semantic summary's parsers:
// wazero's own way to stop a running call (WithCloseOnContextDone) makes an
// indirect call at each loop header, and tree-sitter parsed 2.7 times as
// slowly with it.
//
// Usage: go run ./internal/wasmfuel IN OUT
//
// The module is rewritten without being otherwise understood: its code is
// decoded only far enough to find each loop (the MVP's instructions, sign
// extension, saturating truncation and bulk memory; anything else, SIMD
// for one, is refused, never passed over). A module's structure has no
// code offsets, so inserted instructions shift nothing but the bodies'
// sizes. It must not import anything outside the standard library.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: wasmfuel IN OUT")
		os.Exit(2)
	}
	in, err := os.ReadFile(os.Args[1])
	if err == nil {
		var out []byte
		if out, err = AddFuel(in); err == nil {
			err = os.WriteFile(os.Args[2], out, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "wasmfuel: %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// The sections AddFuel reads or changes.
const (
	secImport = 2
	secGlobal = 6
	secExport = 7
	secCode   = 10
)

// FuelExport is the name of the gauge's export.
const FuelExport = "fuel"

// AddFuel returns mod with the gauge: a new global, exported as
// FuelExport, and a check at each loop's header.
func AddFuel(mod []byte) ([]byte, error) {
	if len(mod) < 8 || !bytes.Equal(mod[:8], []byte("\x00asm\x01\x00\x00\x00")) {
		return nil, errors.New("not a WebAssembly 1 module")
	}
	secs, err := sections(mod[8:])
	if err != nil {
		return nil, err
	}
	var imported, defined uint32 // globals
	haveGlobals, haveExports := false, false
	for _, s := range secs {
		switch s.id {
		case secImport:
			if imported, err = importedGlobals(s.body); err != nil {
				return nil, fmt.Errorf("import section: %w", err)
			}
		case secGlobal:
			haveGlobals = true
			if defined, _, err = uleb(s.body); err != nil {
				return nil, fmt.Errorf("global section: %w", err)
			}
		case secExport:
			haveExports = true
		}
	}
	fuel := imported + defined
	out := append([]byte{}, mod[:8]...)
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = appendULEB(out, uint32(len(body)))
		out = append(out, body...)
	}
	// A mutable i64, 0 until the host sets it.
	global := []byte{0x7e, 0x01, 0x42, 0x00, 0x0b}
	export := append(appendULEB(nil, uint32(len(FuelExport))), FuelExport...)
	export = appendULEB(append(export, 0x03), fuel)
	// Sections come in order: a missing global or export section is made
	// where it would have been.
	missing := func(next byte) {
		if !haveGlobals && order(next) > order(secGlobal) {
			emit(secGlobal, append([]byte{1}, global...))
			haveGlobals = true
		}
		if !haveExports && order(next) > order(secExport) {
			emit(secExport, append([]byte{1}, export...))
			haveExports = true
		}
	}
	for _, s := range secs {
		if s.id != 0 {
			missing(s.id)
		}
		body := s.body
		switch s.id {
		case secGlobal:
			body, err = appendToVector(body, global)
		case secExport:
			body, err = appendToVector(body, export)
		case secCode:
			body, err = fuelCode(body, fuel)
		}
		if err != nil {
			return nil, err
		}
		emit(s.id, body)
	}
	missing(0xff)
	return out, nil
}

// order is a section's place: the data count section comes before the
// code, the tag section before the globals.
func order(id byte) float64 {
	switch id {
	case 12:
		return 9.5
	case 13:
		return 5.5
	case 0xff:
		return 99
	}
	return float64(id)
}

type section struct {
	id   byte
	body []byte
}

func sections(b []byte) ([]section, error) {
	var out []section
	for len(b) > 0 {
		id := b[0]
		n, k, err := uleb(b[1:])
		if err != nil || uint64(1+k)+uint64(n) > uint64(len(b)) {
			return nil, fmt.Errorf("section %d: bad size", id)
		}
		out = append(out, section{id, b[1+k : 1+k+int(n)]})
		b = b[1+k+int(n):]
	}
	return out, nil
}

// importedGlobals counts the global imports: they come first in the
// globals' index space.
func importedGlobals(b []byte) (uint32, error) {
	r := &reader{b: b}
	n := r.u32()
	var globals uint32
	for range n {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
		case 0x00: // function: its type
			r.u32()
		case 0x01: // table: its reference type, its limits
			r.byte()
			r.limits()
		case 0x02: // memory
			r.limits()
		case 0x03: // global: its type, mutability
			r.byte()
			r.byte()
			globals++
		default:
			return 0, fmt.Errorf("import kind %#x", kind)
		}
	}
	return globals, r.err
}

// appendToVector appends one encoded element to a section that is a
// vector (its count first).
func appendToVector(b, elem []byte) ([]byte, error) {
	n, k, err := uleb(b)
	if err != nil {
		return nil, err
	}
	out := appendULEB(nil, n+1)
	out = append(out, b[k:]...)
	return append(out, elem...), nil
}

// fuelCode rewrites each function body of the code section.
func fuelCode(b []byte, fuel uint32) ([]byte, error) {
	r := &reader{b: b}
	n := r.u32()
	out := appendULEB(nil, n)
	for i := range n {
		size := r.u32()
		body := r.bytes(size)
		if r.err != nil {
			return nil, fmt.Errorf("function %d: %w", i, r.err)
		}
		fueled, err := fuelBody(body, fuel)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		out = appendULEB(out, uint32(len(fueled)))
		out = append(out, fueled...)
	}
	if r.err != nil || r.off != len(b) {
		return nil, errors.New("code section: bad size")
	}
	return out, nil
}

// check is what follows each loop's header: trap at zero, else take one.
func check(fuel uint32) []byte {
	get := appendULEB([]byte{0x23}, fuel)
	c := append([]byte{}, get...)
	c = append(c, 0x50, 0x04, 0x40, 0x00, 0x0b) // i64.eqz; if; unreachable; end
	c = append(c, get...)
	c = append(c, 0x42, 0x01, 0x7d) // i64.const 1; i64.sub
	return appendULEB(append(c, 0x24), fuel)
}

// fuelBody copies a function's body, the check after each loop header.
func fuelBody(body []byte, fuel uint32) ([]byte, error) {
	r := &reader{b: body}
	for range r.u32() { // the locals: a count and a type each
		r.u32()
		r.byte()
	}
	if r.err != nil {
		return nil, fmt.Errorf("locals: %w", r.err)
	}
	chk := check(fuel)
	out := append([]byte{}, body[:r.off]...)
	for r.off < len(body) && r.err == nil {
		start := r.off
		op := r.byte()
		loop := op == 0x03
		if err := r.immediates(op); err != nil {
			return nil, err
		}
		out = append(out, body[start:r.off]...)
		if loop {
			out = append(out, chk...)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}

// immediates reads what follows op.
func (r *reader) immediates(op byte) error {
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
		r.blockType()
	case op == 0x0c || op == 0x0d: // br, br_if
		r.u32()
	case op == 0x0e: // br_table
		for range r.u32() {
			r.u32()
		}
		r.u32()
	case op == 0x10: // call
		r.u32()
	case op == 0x11: // call_indirect: type, table
		r.u32()
		r.u32()
	case op == 0x1c: // select with types
		for range r.u32() {
			r.byte()
		}
	case op >= 0x20 && op <= 0x26: // local.*, global.*, table.get/set
		r.u32()
	case op >= 0x28 && op <= 0x3e: // loads and stores: align, offset
		r.u32()
		r.u32()
	case op == 0x3f || op == 0x40: // memory.size, memory.grow
		r.byte()
	case op == 0x41:
		r.sleb(32)
	case op == 0x42:
		r.sleb(64)
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xd0: // ref.null
		r.byte()
	case op == 0xd2: // ref.func
		r.u32()
	case op == 0xfc:
		return r.prefixed()
	case op <= 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b ||
		(op >= 0x45 && op <= 0xc4) || op == 0xd1:
		// No immediates (else and end included).
	default:
		return fmt.Errorf("opcode %#x at %d: not an instruction this tool knows", op, r.off-1)
	}
	return r.err
}

// prefixed reads a 0xfc instruction: saturating truncation and bulk
// memory.
func (r *reader) prefixed() error {
	switch sub := r.u32(); {
	case sub <= 7: // trunc_sat
	case sub == 8: // memory.init: data, memory
		r.u32()
		r.byte()
	case sub == 9: // data.drop
		r.u32()
	case sub == 10: // memory.copy: two memories
		r.byte()
		r.byte()
	case sub == 11: // memory.fill
		r.byte()
	default:
		return fmt.Errorf("opcode 0xfc %d at %d: not an instruction this tool knows", sub, r.off)
	}
	return r.err
}

// reader decodes, its first error kept.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s at %d", what, r.off)
	}
	r.off = len(r.b)
}

func (r *reader) byte() byte {
	if r.off >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *reader) bytes(n uint32) []byte {
	if uint64(r.off)+uint64(n) > uint64(len(r.b)) {
		r.fail("unexpected end")
		return nil
	}
	r.off += int(n)
	return r.b[r.off-int(n) : r.off]
}

func (r *reader) u32() uint32 {
	v, k, err := uleb(r.b[min(r.off, len(r.b)):])
	if err != nil {
		r.fail(err.Error())
		return 0
	}
	r.off += k
	return v
}

func (r *reader) sleb(bits int) {
	for i := 0; ; i++ {
		if i*7 >= bits+7 {
			r.fail("signed number too long")
			return
		}
		if r.byte()&0x80 == 0 || r.err != nil {
			return
		}
	}
}

func (r *reader) name() { r.bytes(r.u32()) }

func (r *reader) limits() {
	if r.byte()&1 != 0 {
		r.u32()
	}
	r.u32()
}

// blockType is empty (0x40), a value type, or a type's index (s33).
func (r *reader) blockType() {
	if r.off < len(r.b) && (r.b[r.off] == 0x40 || (r.b[r.off] >= 0x6f && r.b[r.off] <= 0x7f)) {
		r.off++
		return
	}
	r.sleb(33)
}

func uleb(b []byte) (v uint32, n int, err error) {
	var shift uint
	for i, c := range b {
		if i == 5 {
			break
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, i + 1, nil
		}
		shift += 7
	}
	return 0, 0, errors.New("bad unsigned number")
}

func appendULEB(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
