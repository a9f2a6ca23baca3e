package review

import (
	"context"
	"fmt"
	"testing"

	"github.com/airlock-dev/airlock/sync/manifest"
)

// BenchmarkNewManyAdded builds the changeset of 100,000 added empty files
// in one directory (an agent's `npm install` makes tens of thousands): the
// per-file cost of a changeset apart from diffing content.
func BenchmarkNewManyAdded(b *testing.B) {
	const n = 100_000
	empty := sha256Hex(nil)
	changes := make([]manifest.Change, n)
	for i := range changes {
		p := fmt.Sprintf("many/%d", i+1)
		changes[i] = manifest.Change{Kind: manifest.Added, Path: p,
			New: &manifest.Entry{Path: p, Type: manifest.File, Mode: 0o644, SHA256: empty}}
	}
	src := func(string) ([]byte, error) { return nil, nil }
	b.ReportAllocs()
	for b.Loop() {
		cs, err := New(context.Background(), changes, src, Options{})
		if err != nil || len(cs.Files) != n {
			b.Fatalf("%v, %d files", err, len(cs.Files))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/file")
}
