// Package lockio has the one writer that several goroutines share: each
// Write reaches the writer underneath whole, never interleaved with
// another. It must not import anything in the module.
package lockio

import (
	"io"
	"sync"
)

// Writer serialises writes to w (a command's stdout and stderr copiers,
// the proxy's request lines beside a command's stderr).
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer over w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

func (l *Writer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
