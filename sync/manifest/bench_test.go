package manifest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkWalk walks and hashes a generated tree of 10,000 files and
// 100 MB in 100 directories (10 KB per file on average).
func BenchmarkWalk(b *testing.B) {
	dir := b.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 20_000)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	var total int64
	for i := range 10_000 {
		d := filepath.Join(dir, fmt.Sprintf("pkg%02d", i%100), fmt.Sprintf("sub%d", i%7))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		n := rng.IntN(20_000) + 1
		total += int64(n)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.txt", i)), buf[:n], 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, workers := range []int{1, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				m, _, err := Walk(context.Background(), dir, WalkOptions{Workers: workers})
				if err != nil {
					b.Fatal(err)
				}
				if len(m.Entries) < 10_000 {
					b.Fatalf("%d entries", len(m.Entries))
				}
			}
		})
	}
}

// BenchmarkDiff diffs two manifests of 100,000 entries that differ by 10
// changes (modified, added, deleted, renamed).
func BenchmarkDiff(b *testing.B) {
	old := &Manifest{}
	for d := range 1000 {
		dp := fmt.Sprintf("dir%04d", d)
		old.Entries = append(old.Entries, Entry{Path: dp, Type: Dir, Mode: 0o755})
		for f := range 99 {
			old.Entries = append(old.Entries, Entry{Path: fmt.Sprintf("%s/file%03d.go", dp, f), Type: File, Mode: 0o644,
				Size: int64(1000 + f), SHA256: sum(fmt.Sprintf("%d/%d", d, f))})
		}
	}
	old.Sort()
	new := &Manifest{Entries: append([]Entry(nil), old.Entries...)}
	for _, i := range []int{101, 20_001, 40_001, 60_001} { // modified
		new.Entries[i].SHA256 = sum(fmt.Sprint("changed", i))
	}
	new.Entries[80_001].Mode = 0o755                                    // mode changed
	new.Entries[90_001].Path = "dir0909/file099.go"                     // renamed
	new.Entries = append(new.Entries[:50_001], new.Entries[50_003:]...) // two deleted
	new.Entries = append(new.Entries,
		Entry{Path: "dir0000/new.go", Type: File, Mode: 0o644, Size: 1, SHA256: sum("n")},
		Entry{Path: "dir0999/new.go", Type: File, Mode: 0o644, Size: 1, SHA256: sum("m")})
	new.Sort()
	if err := new.Validate(Limits{}); err != nil {
		b.Fatal(err)
	}
	var n int
	for b.Loop() {
		n = len(Diff(old, new))
	}
	if n != 10 {
		b.Fatalf("%d changes, want 10", n)
	}
}

func BenchmarkValidate(b *testing.B) {
	m := genBig()
	for b.Loop() {
		if err := m.Validate(Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func genBig() *Manifest {
	m := &Manifest{}
	for d := range 1000 {
		dp := fmt.Sprintf("dir%04d", d)
		m.Entries = append(m.Entries, Entry{Path: dp, Type: Dir, Mode: 0o755})
		for f := range 99 {
			m.Entries = append(m.Entries, Entry{Path: fmt.Sprintf("%s/file%03d.go", dp, f), Type: File, Mode: 0o644, Size: 10, SHA256: sum(dp)})
		}
	}
	m.Sort()
	return m
}
