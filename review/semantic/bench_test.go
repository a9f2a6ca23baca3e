//go:build cgo

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

// BenchmarkScript summarizes a change to a Python script of 300 kB made
// only of top-level statements, the worst case of reading the code
// outside declarations (every node is visited), beside the baseline of
// tree-sitter parsing both sides and nothing more, in the same run.
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
	var ours, base time.Duration
	for range b.N {
		start := time.Now()
		s := Summarize("script.py", o, n)
		ours += time.Since(start)
		if s.Skipped != "" || len(s.Changes) != 1 {
			b.Fatalf("summary: %+v", s)
		}
		start = time.Now()
		parse()
		base += time.Since(start)
	}
	b.ReportMetric(ours.Seconds()/float64(b.N), "summarize-s")
	b.ReportMetric(base.Seconds()/float64(b.N), "parse-s")
	b.ReportMetric(float64(ours)/float64(base), "ratio")
}
