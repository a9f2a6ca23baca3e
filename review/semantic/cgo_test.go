//go:build cgo && !darwin

// The in-process grammars, the baseline the WebAssembly parsers are
// compared with, on Linux: the Mac type-check fakes cgo, and their C
// types do not survive it.

package semantic

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	sitter "github.com/smacker/go-tree-sitter"
	"github.com/smacker/go-tree-sitter/c"
	"github.com/smacker/go-tree-sitter/cpp"
	"github.com/smacker/go-tree-sitter/java"
	"github.com/smacker/go-tree-sitter/javascript"
	"github.com/smacker/go-tree-sitter/python"
	"github.com/smacker/go-tree-sitter/rust"
	"github.com/smacker/go-tree-sitter/typescript/tsx"
	"github.com/smacker/go-tree-sitter/typescript/typescript"
)

// The same grammars as the modules, compiled in-process by cgo from the
// same sources: the baseline the WebAssembly parsers are measured and
// checked against (tests only; Airlock itself never runs them).
var cgoLanguages = map[string]*sitter.Language{
	"Python": python.GetLanguage(), "JavaScript": javascript.GetLanguage(),
	"TypeScript": typescript.GetLanguage(), "TSX": tsx.GetLanguage(), "Rust": rust.GetLanguage(),
	"Java": java.GetLanguage(), "C": c.GetLanguage(), "C++": cpp.GetLanguage(),
}

// cgoTree parses src in-process and lays the tree out as the module does,
// names being the module's (the same grammar's ids).
func cgoTree(ctx context.Context, lang *sitter.Language, names *grammarNames, src []byte) (*tree, *sitter.Tree, error) {
	p := sitter.NewParser()
	defer p.Close()
	p.SetLanguage(lang)
	t, err := p.ParseCtx(ctx, nil, src)
	if err != nil {
		return nil, nil, err
	}
	var recs []byte
	var nodes []*sitter.Node
	cur := sitter.NewTreeCursor(t.RootNode())
	defer cur.Close()
	parents := []uint32{0xffffffff}
	le := binary.LittleEndian
	for {
		n := cur.CurrentNode()
		var flags uint32
		if n.IsNamed() {
			flags |= 1
		}
		if n.HasError() {
			flags |= 2
		}
		r := make([]byte, recordSize)
		le.PutUint16(r[0:], uint16(n.Symbol()))
		le.PutUint16(r[2:], names.fieldID[cur.CurrentFieldName()])
		le.PutUint32(r[4:], flags)
		le.PutUint32(r[8:], n.StartByte())
		le.PutUint32(r[12:], n.EndByte())
		le.PutUint32(r[16:], n.StartPoint().Row)
		le.PutUint32(r[20:], parents[len(parents)-1])
		idx := uint32(len(recs) / recordSize)
		recs = append(recs, r...)
		nodes = append(nodes, n)
		if cur.GoToFirstChild() {
			parents = append(parents, idx)
			continue
		}
		for !cur.GoToNextSibling() {
			if !cur.GoToParent() {
				tr, err := decodeTree(recs, nil, len(src), names)
				if err != nil {
					return nil, nil, err
				}
				tr.lookup = func(n *node, field string) *node {
					ch := nodes[n.idx].ChildByFieldName(field)
					if ch == nil {
						return nil
					}
					for j := range int(n.kidsN) {
						if k := n.Child(j); k.start == ch.StartByte() && k.end == ch.EndByte() && k.sym == uint16(ch.Symbol()) {
							return k
						}
					}
					return nil
				}
				return tr, t, nil
			}
			parents = parents[:len(parents)-1]
		}
	}
}

// cgoReaders are the languages' readers parsing in-process, for the
// benchmarks' baseline.
func cgoReaders(tb testing.TB) map[string]reader {
	out := map[string]reader{}
	for _, g := range grammars {
		gr, err := parsers.grammar(g.file)
		if err != nil {
			tb.Fatal(err)
		}
		lang := cgoLanguages[g.name]
		out[g.name] = func(ctx context.Context, src []byte) ([]decl, bool, func(), error) {
			tr, st, err := cgoTree(ctx, lang, gr.names, src)
			if err != nil {
				return nil, false, nil, err
			}
			// Fields are looked up in tree-sitter's tree, to be
			// kept while tokens are read.
			ds, clean, _, err := readDecls(ctx, tr, g.walk, g.sep, g.syn, src)
			if err != nil {
				st.Close()
				return nil, false, nil, err
			}
			return ds, clean, st.Close, nil
		}
	}
	return out
}

// withReaders makes Summarize read with readers until the returned
// function is called.
func withReaders(readers map[string]reader) (restore func()) {
	saved := map[*language]reader{}
	for _, l := range languages {
		if r, ok := readers[l.name]; ok {
			saved[l], l.read = l.read, r
		}
	}
	return func() {
		for l, r := range saved {
			l.read = r
		}
	}
}

// treeSources are sources in each language for TestTreesMatchCgo: the
// fuzz seeds, broken code, and the benchmark's files.
func treeSources() []string {
	srcs := []string{
		"def f(a, *b, **c):\n    class C:\n        X = 1\n", "def f(:\n  [1, 2\nclass", "x = ((([[[{{{",
		"export class A { m(x) { return () => x } }\nconst f = y => y;\n", "function (a, { b }) => ]",
		"interface I { a: string }\nnamespace N { export function g(): void {} }\n", "let x: Array<<T>> = ",
		"impl<T> Tr for S<T> { fn f(&self) {} }\nmod m { macro_rules! x { () => {} } }\n", "fn f( { impl",
		"class A { enum E { X; void f() {} } record R(int a) {} }\n", "class { void f( }",
		"#ifdef X\nint f(int (*g)(int));\n#else\nstruct s { int a : 3; };\n#endif\n", "int f(int a, { return",
		"namespace { template <class T> class C { C(); ~C(); operator int(); }; }\n", "template <<> ::",
		"\xff\xfe\x00 \u202e def",
	}
	for _, lang := range []string{"Python", "JavaScript", "C"} {
		o, n := benchSource(lang, 1)
		srcs = append(srcs, o, n)
	}
	return srcs
}

// TestTreesMatchCgo: the modules give the trees tree-sitter gives
// in-process, node for node (type, field, span, row, flags, place), and
// every field of every node is the child tree-sitter's own lookup finds.
func TestTreesMatchCgo(t *testing.T) {
	ctx := context.Background()
	for _, g := range grammars {
		t.Run(g.name, func(t *testing.T) {
			gr, err := parsers.grammar(g.file)
			if err != nil {
				t.Fatal(err)
			}
			for i, src := range treeSources() {
				ours, err := parsers.parse(ctx, g.file, []byte(src))
				if err != nil {
					t.Fatalf("source %d: %v", i, err)
				}
				base, st, err := cgoTree(ctx, cgoLanguages[g.name], gr.names, []byte(src))
				if err != nil {
					t.Fatalf("source %d, in-process: %v", i, err)
				}
				if len(ours.nodes) != len(base.nodes) {
					t.Fatalf("source %d: %d nodes, in-process %d", i, len(ours.nodes), len(base.nodes))
				}
				for j := range ours.nodes {
					a, b := &ours.nodes[j], &base.nodes[j]
					if a.Type() != b.Type() || a.field != b.field || a.start != b.start || a.end != b.end || a.row != b.row ||
						a.isNamed != b.isNamed || a.hasError != b.hasError || a.parent != b.parent {
						t.Fatalf("source %d node %d: %s, in-process %s", i, j, describe(a), describe(b))
					}
				}
				// Field lookups against tree-sitter's own (inherited
				// fields, hidden nodes), the two trees walked together.
				cur := sitter.NewTreeCursor(st.RootNode())
				for j := 0; ; j++ {
					n := cur.CurrentNode()
					for _, f := range gr.names.fields[1:] {
						want, got := n.ChildByFieldName(f), ours.nodes[j].ChildByFieldName(f)
						if (want == nil) != (got == nil) || want != nil && (want.Type() != got.Type() || want.StartByte() != got.StartByte() || want.EndByte() != got.EndByte()) {
							t.Errorf("source %d node %d (%s) field %s: %v, in-process %v", i, j, n.Type(), f, describe(got), want)
						}
					}
					if cur.GoToFirstChild() {
						continue
					}
					done := false
					for !cur.GoToNextSibling() {
						if !cur.GoToParent() {
							done = true
							break
						}
					}
					if done {
						break
					}
				}
				cur.Close()
				st.Close()
			}
		})
	}
}

func describe(n *node) string {
	if n == nil {
		return "nil"
	}
	return fmt.Sprintf("%s field %q %d-%d row %d named %v error %v parent %d", n.Type(), n.t.g.fields[n.field], n.start, n.end, n.row, n.isNamed, n.hasError, n.parent)
}

// benchSource is a file of about 3.2 kB in lang, nineteen functions, and
// the same with one function given a parameter and another's body
// changed (review's BenchmarkSummarize's files, in three languages).
func benchSource(lang string, i int) (old, new string) {
	var b strings.Builder
	for fn := range 19 {
		switch lang {
		case "Python":
			fmt.Fprintf(&b, "def f%d(values):\n    \"\"\"Add up the values of a list in file %04d, as a helper.\"\"\"\n    total = 0\n    for v in values:\n        total += v * %d\n    return total\n\n\n", fn, i, fn)
		case "JavaScript":
			fmt.Fprintf(&b, "// Adds up the values of a list in file %04d, as a helper.\nexport function f%d(values) {\n  let total = 0;\n  for (const v of values) {\n    total += v * %d;\n  }\n  return total;\n}\n\n", i, fn, fn)
		case "C":
			fmt.Fprintf(&b, "/* Adds up the values of a list in file %04d, as a helper. */\nint f%d(const int *values, int n) {\n\tint total = 0;\n\tfor (int i = 0; i < n; i++)\n\t\ttotal += values[i] * %d;\n\treturn total;\n}\n\n", i, fn, fn)
		}
	}
	old = b.String()
	sig := map[string][2]string{
		"Python":     {"def f3(values):", "def f3(values, scale=1):"},
		"JavaScript": {"function f3(values)", "function f3(values, scale)"},
		"C":          {"int f3(const int *values, int n)", "int f3(const int *values, int n, int scale)"},
	}[lang]
	new = strings.Replace(strings.Replace(old, sig[0], sig[1], 1), "v * 7", "v * 70", 1)
	new = strings.Replace(new, "values[i] * 7;", "values[i] * 70;", 1)
	return old, new
}
