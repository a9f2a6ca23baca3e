// Package headtail has the writer that keeps a log the guest fills within
// a cap: the first bytes and the last, with a marker line saying how much
// was left out between them (the run's transcript, the guest's console
// log). It must not import anything in the module except
// internal/bytesize.
package headtail

import (
	"fmt"
	"io"
	"sync"

	"github.com/airlock-dev/airlock/internal/bytesize"
)

// Writer keeps the first Head and the last Tail bytes written to it. The
// head goes through to the writer underneath at once, so a log file is
// readable while its command runs; the tail is held in memory (a ring of
// at most Tail bytes, grown as needed) and written by Close, after a
// marker line when bytes were left out. A Writer is safe for concurrent
// use; its zero value is not: use New.
type Writer struct {
	mu       sync.Mutex
	w        io.Writer
	name     string // "transcript", "console log": for the marker
	head     int64
	tail     int64
	headLeft int64
	lastHead byte   // the last byte of the head written
	ring     []byte // the tail; oldest byte at pos once len(ring) == tail
	pos      int
	seen     int64
	closed   bool
}

// New returns a Writer over w that keeps the first head and the last tail
// bytes (both >= 0). name says what the log is, in the marker.
func New(w io.Writer, name string, head, tail int64) *Writer {
	return &Writer{w: w, name: name, head: max(head, 0), tail: max(tail, 0), headLeft: max(head, 0)}
}

// Write keeps p as the cap allows and reports it all written: what is
// left out is counted, never an error for the writer's writer (a command
// whose output is too long for the log still runs). Only a failed write
// of the head to the writer underneath is an error.
func (c *Writer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.seen += int64(n)
	if c.closed {
		return n, nil // late output (a copier still draining): counted only
	}
	if c.headLeft > 0 {
		h := p[:min(int64(len(p)), c.headLeft)]
		c.headLeft -= int64(len(h))
		p = p[len(h):]
		if len(h) > 0 {
			c.lastHead = h[len(h)-1]
			if _, err := c.w.Write(h); err != nil {
				return 0, err
			}
		}
	}
	c.keepTail(p)
	return n, nil
}

// keepTail adds p to the ring of the last tail bytes.
func (c *Writer) keepTail(p []byte) {
	tail := int(c.tail)
	if len(p) == 0 || tail == 0 {
		return
	}
	if len(p) >= tail {
		c.ring = append(c.ring[:0], p[len(p)-tail:]...)
		c.pos = 0
		return
	}
	if free := tail - len(c.ring); free > 0 {
		k := min(free, len(p))
		if cap(c.ring)-len(c.ring) < k {
			grown := make([]byte, len(c.ring), min(tail, max(2*cap(c.ring), len(c.ring)+k, 64<<10)))
			copy(grown, c.ring)
			c.ring = grown
		}
		c.ring = append(c.ring, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 { // the ring is full: overwrite the oldest bytes
		k := copy(c.ring[c.pos:], p)
		p = p[k:]
		c.pos = (c.pos + k) % tail
	}
}

// Stats says what a Writer saw and kept.
type Stats struct {
	Seen    int64 // bytes written to the Writer
	Kept    int64 // bytes kept in the log (the head and the tail)
	LeftOut int64 // Seen - Kept: what the marker stands for
}

// Capped says whether bytes were left out.
func (s Stats) Capped() bool { return s.LeftOut > 0 }

// Stats says what has been written so far and what the log keeps.
func (c *Writer) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats()
}

func (c *Writer) stats() Stats {
	kept := min(c.seen, c.head+c.tail)
	return Stats{Seen: c.seen, Kept: kept, LeftOut: c.seen - kept}
}

// Close writes the tail (after the marker, when bytes were left out) and
// returns the Writer's stats. It does not close the writer underneath.
// Writes after Close are counted and dropped. It is idempotent.
func (c *Writer) Close() (Stats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats()
	if c.closed {
		return st, nil
	}
	c.closed = true
	if st.Capped() {
		if _, err := io.WriteString(c.w, c.marker(st.LeftOut)); err != nil {
			return st, err
		}
	}
	for _, part := range [][]byte{c.ring[c.pos:], c.ring[:c.pos]} {
		if _, err := c.w.Write(part); err != nil {
			return st, err
		}
	}
	c.ring = nil
	return st, nil
}

// marker is the line that stands for n bytes left out, on a line of its
// own.
func (c *Writer) marker(n int64) string {
	nl := ""
	if c.head > 0 && c.lastHead != '\n' {
		nl = "\n"
	}
	return fmt.Sprintf("%s[airlock: %d bytes of output left out here; the %s keeps the first %s and the last %s]\n",
		nl, n, c.name, bytesize.Format(c.head), bytesize.Format(c.tail))
}
