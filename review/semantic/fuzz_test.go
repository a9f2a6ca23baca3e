package semantic

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// fuzzPaths are the files FuzzSummarize reads its input as: one per
// language.
var fuzzPaths = []string{"a.go", "a.py", "a.js", "a.ts", "a.tsx", "a.rs", "A.java", "a.c", "a.cpp"}

// FuzzSummarize reads hostile pairs in every language: no input may crash
// a reader or the comparison, and what is said of a change fits one line
// with no control character and no name longer than a line's.
func FuzzSummarize(f *testing.F) {
	seeds := []string{
		"package a\n\nfunc F(x int) int { return x }\n",
		"def f(a, *b, **c):\n    class C:\n        X = 1\n",
		"export class A { m(x) { return () => x } }\nconst f = y => y;\n",
		"interface I { a: string }\nnamespace N { export function g(): void {} }\n",
		"impl<T> Tr for S<T> { fn f(&self) {} }\nmod m { macro_rules! x { () => {} } }\n",
		"class A { enum E { X; void f() {} } record R(int a) {} }\n",
		"#ifdef X\nint f(int (*g)(int));\n#else\nstruct s { int a : 3; };\n#endif\n",
		"namespace { template <class T> class C { C(); ~C(); operator int(); }; }\n",
	}
	for i, s := range seeds {
		f.Add(uint8(i), s, seeds[(i+1)%len(seeds)])
		f.Add(uint8(i), "", s)
	}
	f.Fuzz(func(t *testing.T, lang uint8, old, new string) {
		p := fuzzPaths[int(lang)%len(fuzzPaths)]
		if _, ok := Language(p); !ok {
			t.Skip("no parser for this language in this build")
		}
		s := Summarize(p, []byte(old), []byte(new))
		if s == nil {
			t.Fatalf("%s: nil summary", p)
		}
		for _, c := range s.Changes {
			for _, name := range []string{c.Name, c.OldName} {
				if utf8.RuneCountInString(name) > maxName {
					t.Errorf("a name of %d runes", utf8.RuneCountInString(name))
				}
			}
			line := c.String()
			if strings.ContainsFunc(line, func(r rune) bool {
				return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError
			}) {
				t.Errorf("a change said with a control character: %q", line)
			}
		}
		for _, l := range s.Lines(6) {
			if strings.ContainsAny(l, "\n\r") {
				t.Errorf("a line of the summary breaks: %q", l)
			}
		}
	})
}
