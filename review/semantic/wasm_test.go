package semantic

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/testkit/testenv"
)

// withParsers makes the package parse with e for the test's length.
func withParsers(t *testing.T, e *engine) {
	t.Helper()
	old := parsers
	parsers = e
	t.Cleanup(func() { parsers = old })
}

// TestEveryLanguageIsParsed: every build, cgo or not, parses every
// language (the grammars run in WebAssembly, pure Go).
func TestEveryLanguageIsParsed(t *testing.T) {
	for _, l := range languages {
		if l.read == nil {
			t.Errorf("no %s parser in this build", l.name)
			continue
		}
		if l.name == "Go" {
			continue
		}
		s := Summarize("a"+l.exts[0], nil, []byte("x\n"))
		if s == nil || s.Skipped != "" {
			t.Errorf("%s: %+v", l.name, s)
		}
	}
}

// nested is a Python file of n open brackets: tree-sitter's parse stack
// and its error recovery grow with each.
func nested(n int) []byte { return []byte("x = " + strings.Repeat("[(", n/2)) }

// TestParserMemoryCap: a file that needs more memory than the cap makes
// that file's summary say it could not be parsed, and the files read
// after it, in the same language and others, are summarized.
func TestParserMemoryCap(t *testing.T) {
	withParsers(t, newEngine(16<<20))
	ok := func() {
		t.Helper()
		for _, p := range []string{"a.py", "a.rs"} {
			s := Summarize(p, nil, []byte("def f(a): pass\n"))
			if p == "a.rs" {
				s = Summarize(p, nil, []byte("fn f(a: u8) {}\n"))
			}
			if s == nil || s.Skipped != "" || len(s.Changes) != 1 {
				t.Fatalf("%s after a parser ran out of memory: %+v", p, s)
			}
		}
	}
	ok()
	s := Summarize("hostile.py", nil, nested(900_000))
	if s == nil || s.Skipped != "could not be parsed: the parser ran out of memory" {
		t.Fatalf("a file past the memory cap: %+v", s)
	}
	ok()
}

// TestParserDeadline: a parse still running at the deadline is stopped
// there, and the parser serves the next file.
func TestParserDeadline(t *testing.T) {
	withParsers(t, newEngine(maxParserMemory))
	read := languageOf("a.py").read
	if _, _, _, err := read(context.Background(), []byte("x = 1\n")); err != nil {
		t.Fatal(err) // compiled and started: the deadline below is the parse's alone
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, _, err := read(ctx, nested(MaxSize))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a parse past its deadline: %v", err)
	}
	t.Logf("stopped %v after the start", time.Since(start))
	ds, clean, _, err := read(context.Background(), []byte("def f(a): pass\n"))
	if err != nil || !clean || len(ds) != 1 {
		t.Fatalf("the next parse: %d declarations, clean %v, %v", len(ds), clean, err)
	}
}

// TestParserFuel: a parse that spends its fuel (a loop that never ends
// would) stops there, its file "took too long to parse", and the next
// file is parsed.
func TestParserFuel(t *testing.T) {
	e := newEngine(maxParserMemory)
	withParsers(t, e)
	spent := 0
	e.fuel = func(n int) uint64 {
		if spent++; spent == 1 {
			return 1000 // the first file's alloc, parse and release
		}
		return defaultFuel(n)
	}
	src := []byte("def f(a):\n    return [a for a in range(10)]\n")
	if s := Summarize("a.py", nil, src); s == nil || s.Skipped != "took too long to parse" {
		t.Fatalf("a parse out of fuel: %+v", s)
	}
	if s := Summarize("a.py", nil, src); s == nil || s.Skipped != "" || len(s.Changes) != 1 {
		t.Fatalf("the next file: %+v", s)
	}
}

// TestParserTrap: a module that traps fails the call, never Airlock; an
// instance that failed is dropped, its file said to be unparsed, and the
// next file gets a new instance.
func TestParserTrap(t *testing.T) {
	e := newEngine(maxParserMemory)
	withParsers(t, e)
	g, err := e.grammar("python.wasm")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	in, err := g.take(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	// A source past the end of the module's memory: tree-sitter's first
	// read of it traps.
	if _, err := in.parse.Call(ctx, 0xffff_ff00, 0xf0); err == nil {
		t.Fatal("reading past the module's memory did not trap")
	} else {
		t.Logf("trap: %.60q", err)
	}
	// An instance that died (closed), pooled:
	// its next parse fails, that file only. (A trap leaves an instance
	// callable, its C heap maybe inconsistent: parse never pools one;
	// TestParserMemoryCap's abort is a trap through Summarize.)
	in.mod.Close(ctx)
	g.put(in)
	if s := Summarize("a.py", nil, []byte("def f(a): pass\n")); s == nil || s.Skipped != "could not be parsed" {
		t.Fatalf("a parse on a trapped instance: %+v", s)
	}
	if s := Summarize("a.py", nil, []byte("def f(a): pass\n")); s == nil || s.Skipped != "" || len(s.Changes) != 1 {
		t.Fatalf("after a trap: %+v", s)
	}
}

// record lays out one node's record as the module does.
func record(sym, field uint16, flags, start, end, row, parent uint32) []byte {
	b := make([]byte, recordSize)
	le := binary.LittleEndian
	le.PutUint16(b[0:], sym)
	le.PutUint16(b[2:], field)
	le.PutUint32(b[4:], flags)
	le.PutUint32(b[8:], start)
	le.PutUint32(b[12:], end)
	le.PutUint32(b[16:], row)
	le.PutUint32(b[20:], parent)
	return b
}

// fieldRecord lays out one field's record as the module does.
func fieldRecord(parent uint32, field, sym uint16, start, end uint32) []byte {
	b := make([]byte, fieldSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], parent)
	le.PutUint16(b[4:], field)
	le.PutUint16(b[6:], sym)
	le.PutUint32(b[8:], start)
	le.PutUint32(b[12:], end)
	return b
}

var testNames = &grammarNames{symbols: []string{"end", "module", "identifier"}, fields: []string{"", "name"}, fieldID: map[string]uint16{"name": 1}}

// TestDecodeTreeHostile: records no tree of the file could have are a
// per-file error, never an index out of range.
func TestDecodeTreeHostile(t *testing.T) {
	root := record(1, 0, 1, 0, 10, 0, 0xffffffff)
	good := append(append([]byte{}, root...), record(2, 1, 1, 2, 5, 0, 0)...)
	name := fieldRecord(0, 1, 2, 2, 5)
	if tr, err := decodeTree(good, name, 10, testNames); err != nil || tr.root().ChildByFieldName("name").Content([]byte("0123456789")) != "234" {
		t.Fatalf("a good tree: %v", err)
	}
	for what, fields := range map[string][]byte{
		"a field cut short":     name[:fieldSize-1],
		"a field of no node":    fieldRecord(2, 1, 2, 2, 5),
		"field 0":               fieldRecord(0, 0, 2, 2, 5),
		"an unknown field":      fieldRecord(0, 2, 2, 2, 5),
		"no such child":         fieldRecord(0, 1, 2, 2, 6),
		"fields out of order":   append(fieldRecord(1, 1, 2, 2, 5), name...),
		"a field of a leaf":     fieldRecord(1, 1, 2, 2, 5),
		"another symbol's span": fieldRecord(0, 1, 1, 2, 5),
	} {
		if _, err := decodeTree(good, fields, 10, testNames); !errors.Is(err, errBadTree) {
			t.Errorf("%s: %v", what, err)
		}
	}
	for name, recs := range map[string][]byte{
		"no records":          nil,
		"a record cut short":  good[:recordSize+3],
		"unknown symbol":      append(append([]byte{}, root...), record(3, 0, 1, 0, 1, 0, 0)...),
		"unknown field":       append(append([]byte{}, root...), record(2, 2, 1, 0, 1, 0, 0)...),
		"end past the file":   append(append([]byte{}, root...), record(2, 0, 1, 0, 11, 0, 0)...),
		"start after its end": append(append([]byte{}, root...), record(2, 0, 1, 5, 4, 0, 0)...),
		"root with a parent":  record(1, 0, 1, 0, 10, 0, 0),
		"parent after child":  append(append([]byte{}, root...), record(2, 0, 1, 0, 1, 0, 1)...),
		"parent far away":     append(append([]byte{}, root...), record(2, 0, 1, 0, 1, 0, 0x7fffffff)...),
		"outside its parent": append(append(append([]byte{}, root...), record(2, 0, 1, 2, 5, 0, 0)...),
			record(2, 0, 1, 1, 6, 0, 1)...),
	} {
		if _, err := decodeTree(recs, nil, 10, testNames); !errors.Is(err, errBadTree) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// ERROR nodes are outside the grammar's table.
	if tr, err := decodeTree(append(append([]byte{}, root...), record(symError, 0, 3, 0, 1, 0, 0)...), nil, 10, testNames); err != nil || tr.root().Child(0).Type() != "ERROR" {
		t.Errorf("an ERROR node: %v", err)
	}
}

// FuzzDecodeTree: no output of a module, however made, panics the
// decoder or the node methods the walkers call.
func FuzzDecodeTree(f *testing.F) {
	f.Add(append(record(1, 0, 1, 0, 10, 0, 0xffffffff), record(2, 1, 1, 2, 5, 0, 0)...), fieldRecord(0, 1, 2, 2, 5), uint16(10))
	f.Fuzz(func(t *testing.T, recs, fields []byte, srcLen uint16) {
		tr, err := decodeTree(recs, fields, int(srcLen), testNames)
		if err != nil {
			return
		}
		src := make([]byte, srcLen)
		for i := range tr.nodes {
			n := &tr.nodes[i]
			_ = n.Type() + n.Content(src)
			n.ChildByFieldName("name")
			for j := range int(n.NamedChildCount()) {
				n.NamedChild(j).Content(src)
			}
		}
		cur := newCursor(tr.root())
		for steps := 0; steps < len(tr.nodes)*3; steps++ {
			cur.CurrentFieldName()
			if !cur.GoToFirstChild() && !cur.GoToNextSibling() && !cur.GoToParent() {
				break
			}
		}
	})
}

// TestParsersAreBuiltFromSources: the committed modules are what
// scripts/build-parsers makes of the pinned sources, byte for byte.
func TestParsersAreBuiltFromSources(t *testing.T) {
	if testing.Short() {
		t.Skip("builds eight grammars (a minute)")
	}
	if _, err := exec.LookPath("clang-14"); err != nil {
		testenv.Skip(t, testenv.WasmClang, "clang-14 not installed (scripts/setup-debian installs it)")
	}
	if _, err := os.Stat("/usr/lib/wasm32-wasi/libc.a"); err != nil {
		testenv.Skip(t, testenv.WasmClang, "wasi-libc not installed (scripts/setup-debian installs it)")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the modules are built on Debian")
	}
	out := t.TempDir()
	cmd := exec.Command("../../scripts/build-parsers", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build-parsers: %v\n%s", err, b)
	}
	built, err := filepath.Glob(filepath.Join(out, "*.wasm"))
	if err != nil || len(built) != len(languages)-1 {
		t.Fatalf("built %v (%v)", built, err)
	}
	for _, p := range built {
		name := filepath.Base(p)
		want, _ := os.ReadFile(p)
		have, err := modules.ReadFile("wasm/" + name)
		if err != nil {
			t.Errorf("%s is built but not committed", name)
			continue
		}
		if !bytes.Equal(have, want) {
			t.Errorf("wasm/%s is not what scripts/build-parsers makes (%d bytes, built %d): run it and commit the result", name, len(have), len(want))
		}
	}
}
