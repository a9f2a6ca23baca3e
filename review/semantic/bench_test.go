//go:build cgo && !darwin

// The in-process grammars, the baseline the WebAssembly parsers are
// compared with, on Linux: the Mac type-check fakes cgo, and their C
// types do not survive it.

package semantic

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	sitter "github.com/smacker/go-tree-sitter"
	"github.com/smacker/go-tree-sitter/python"
)

// BenchmarkSummarize summarizes 300 changed files of about 3.2 kB (Python,
// JavaScript and C by turns: review's BenchmarkSummarize's files) with the
// grammars in WebAssembly, beside the same grammars in-process (cgo, as
// Airlock parsed before), in the same run, and reports both and the
// ratio; and, once, how long the three modules took to compile.
func BenchmarkSummarize(b *testing.B) {
	langs := map[string]string{"Python": ".py", "JavaScript": ".js", "C": ".c"}
	type file struct{ path, old, new string }
	var files []file
	for i := range 300 {
		lang := [...]string{"Python", "JavaScript", "C"}[i%3]
		o, n := benchSource(lang, i)
		files = append(files, file{fmt.Sprintf("f%04d%s", i, langs[lang]), o, n})
	}
	e := newEngine(maxParserMemory)
	withParsersB(b, e)
	start := time.Now()
	for _, f := range []string{"python.wasm", "javascript.wasm", "c.wasm"} {
		if _, err := e.grammar(f); err != nil {
			b.Fatal(err)
		}
	}
	compile := time.Since(start)
	cgo := cgoReaders(b)
	run := func() time.Duration {
		start := time.Now()
		for _, f := range files {
			s := Summarize(f.path, []byte(f.old), []byte(f.new))
			if s == nil || s.Skipped != "" || len(s.Changes) != 2 {
				b.Fatalf("%s: %+v", f.path, s)
			}
		}
		return time.Since(start)
	}
	var ours, base time.Duration
	rounds := 0
	for b.Loop() {
		ours += run()
		restore := withReaders(cgo)
		base += run()
		restore()
		rounds++
	}
	per := func(d time.Duration) float64 { return d.Seconds() / float64(rounds) }
	b.ReportMetric(per(ours), "wasm-s")
	b.ReportMetric(per(base), "cgo-s")
	b.ReportMetric(per(ours)/per(base), "ratio")
	b.Logf("%d files: WebAssembly %.3fs, in-process cgo %.3fs (%.2fx); compiling Python's, JavaScript's and C's modules took %.2fs",
		len(files), per(ours), per(base), per(ours)/per(base), compile.Seconds())
}

func withParsersB(b *testing.B, e *engine) {
	old := parsers
	parsers = e
	b.Cleanup(func() { parsers = old })
}

// BenchmarkScript summarizes a change to a Python script of 300 kB made
// only of top-level statements, the worst case of reading the code
// outside declarations (every node is visited), beside the baseline of
// tree-sitter parsing both sides in-process and nothing more, and the
// same summary read in-process, in the same run.
func BenchmarkScript(b *testing.B) {
	var old, new strings.Builder
	for i := 0; old.Len() < 300_000; i++ {
		fmt.Fprintf(&old, "print(f(a.b[%d] + g(%d, *h), k=%d))\n", i%97, i%89, i%83)
		fmt.Fprintf(&new, "print(f(a.b[%d] + g(%d, *h), k=%d))\n", i%97, i%89, (i+1)%83)
	}
	o, n := []byte(old.String()), []byte(new.String())
	parse := func() {
		for _, src := range [][]byte{o, n} {
			p := sitter.NewParser()
			p.SetLanguage(python.GetLanguage())
			tree, err := p.ParseCtx(context.Background(), nil, src)
			if err != nil {
				b.Fatal(err)
			}
			tree.Close()
			p.Close()
		}
	}
	summarize := func() {
		s := Summarize("script.py", o, n)
		if s.Skipped != "" || len(s.Changes) != 1 {
			b.Fatalf("summary: %+v", s)
		}
	}
	summarize() // the module compiled
	cgo := cgoReaders(b)
	var ours, base, inproc time.Duration
	for range b.N {
		start := time.Now()
		summarize()
		ours += time.Since(start)
		start = time.Now()
		parse()
		base += time.Since(start)
		restore := withReaders(cgo)
		start = time.Now()
		summarize()
		inproc += time.Since(start)
		restore()
	}
	b.ReportMetric(ours.Seconds()/float64(b.N), "summarize-s")
	b.ReportMetric(base.Seconds()/float64(b.N), "parse-s")
	b.ReportMetric(float64(ours)/float64(base), "ratio")
	b.ReportMetric(inproc.Seconds()/float64(b.N), "cgo-summarize-s")
	b.ReportMetric(float64(ours)/float64(inproc), "cgo-ratio")
}
