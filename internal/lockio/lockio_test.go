package lockio

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// TestWriterKeepsWritesWhole: lines written from many goroutines at once
// arrive each in one piece.
func TestWriterKeepsWritesWhole(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			line := strings.Repeat(string(rune('a'+i)), 100) + "\n"
			for range 200 {
				if _, err := w.Write([]byte(line)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 8*200 {
		t.Fatalf("%d lines, want %d", len(lines), 8*200)
	}
	for _, l := range lines {
		if len(l) != 100 || strings.Count(l, l[:1]) != 100 {
			t.Fatalf("a write was interleaved: %q", l)
		}
	}
}
