package review

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// codeTree is n source files of about 3.2 kB (Go and Python by turns),
// nineteen functions each, and the same files with one function given a
// parameter and another's body changed.
func codeTree(n int) (oldT, newT tree) {
	oldT, newT = tree{files: map[string]string{}}, tree{files: map[string]string{}}
	for i := range n {
		var b strings.Builder
		p := fmt.Sprintf("pkg%02d/file%04d.go", i%30, i)
		if i%2 == 1 {
			p = strings.TrimSuffix(p, ".go") + ".py"
		}
		for fn := range 19 {
			if strings.HasSuffix(p, ".go") {
				fmt.Fprintf(&b, "// F%d adds up the values of a list in file %04d, as a helper.\nfunc F%d(values []int) int {\n\ttotal := 0\n\tfor _, v := range values {\n\t\ttotal += v * %d\n\t}\n\treturn total\n}\n\n", fn, i, fn, fn)
			} else {
				fmt.Fprintf(&b, "def f%d(values):\n    \"\"\"Add up the values of a list in file %04d, as a helper.\"\"\"\n    total = 0\n    for v in values:\n        total += v * %d\n    return total\n\n\n", fn, i, fn)
			}
		}
		src := b.String()
		if strings.HasSuffix(p, ".go") {
			src = "package p\n\n" + src
			oldT.files[p] = src
			newT.files[p] = strings.Replace(strings.Replace(src, "func F3(values []int) int", "func F3(values []int, scale int) int", 1), "v * 7", "v * 70", 1)
		} else {
			oldT.files[p] = src
			newT.files[p] = strings.Replace(strings.Replace(src, "def f3(values):", "def f3(values, scale=1):", 1), "v * 7", "v * 70", 1)
		}
	}
	return oldT, newT
}

// BenchmarkSummarize times Summarize over 3000 changed source files of
// about 3.2 kB (half Go, read by go/parser, half Python, by tree-sitter)
// against building the same changeset (reading, hashing and diffing
// both sides), in the same run, and reports both and the ratio.
func BenchmarkSummarize(b *testing.B) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	oldT, newT := codeTree(n)
	fx := newFixture(b, oldT, newT, nil)
	if len(fx.cs.Files) != n || len(fx.cs.Files[0].oldData) < 3000 {
		b.Fatalf("%d changed files of %d bytes", len(fx.cs.Files), len(fx.cs.Files[0].oldData))
	}
	var ours, base time.Duration
	rounds := 0
	for b.Loop() {
		start := time.Now()
		cs, err := New(context.Background(), fx.changes, fx.store.source, Options{})
		if err != nil {
			b.Fatal(err)
		}
		base += time.Since(start)
		start = time.Now()
		if err := cs.Summarize(context.Background()); err != nil {
			b.Fatal(err)
		}
		ours += time.Since(start)
		rounds++
		if f := cs.Files[1]; f.Semantic == nil || len(f.Semantic.Changes) != 2 {
			b.Fatalf("%s: %+v", f.Path, f.Semantic)
		}
	}
	per := func(d time.Duration) float64 { return d.Seconds() / float64(rounds) }
	b.ReportMetric(per(ours), "summarize-s")
	b.ReportMetric(per(base), "changeset-s")
	b.ReportMetric(per(ours)/per(base), "ratio")
	b.Logf("%d files: Summarize %.2fs, building the changeset %.2fs (%.1fx)", n, per(ours), per(base), per(ours)/per(base))
}
