package qemu

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/airlock-dev/airlock/internal/headtail"
)

// What the console log keeps of what the guest prints: its first
// consoleHead bytes (the boot, read live while the machine runs) and its
// last consoleTail bytes (what a failure last said), with a marker line
// between them. A guest that prints without end cannot fill the host's
// disk.
const (
	consoleHead = 4 << 20
	consoleTail = 4 << 20
)

// console carries the guest console from QEMU into the console log: QEMU
// writes into a pipe (fd consoleFD), the backend reads it and keeps it
// within the cap.
type console struct {
	path string
	r    *os.File // the pipe's read end
	f    *os.File // the console log
	w    *headtail.Writer
	log  *slog.Logger
	done chan struct{}
}

// openConsole creates (truncating) the console log at path and the pipe
// QEMU writes the console into; the returned file is the write end, for
// QEMU alone.
func openConsole(path string, log *slog.Logger) (*console, *os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("console log: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("console log: %w", err)
	}
	c := &console{path: path, r: r, f: f, log: log, done: make(chan struct{}),
		w: headtail.New(f, "console log", consoleHead, consoleTail)}
	return c, w, nil
}

// copy reads the console until QEMU (every holder of the write end) is
// gone, then writes the log's tail. It never stops reading early: a
// console nobody drains would block the guest's writes. Run it once.
func (c *console) copy() {
	defer close(c.done)
	buf := make([]byte, 64<<10)
	var werr error
	for {
		n, err := c.r.Read(buf)
		if n > 0 && werr == nil {
			if _, werr = c.w.Write(buf[:n]); werr != nil {
				c.log.Warn("console log: the rest of the console is dropped", "path", c.path, "err", werr)
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
				c.log.Warn("console: read", "err", err)
			}
			break
		}
	}
	c.r.Close()
	st, err := c.w.Close()
	if err != nil {
		c.log.Warn("console log: write its end", "path", c.path, "err", err)
	}
	if err := c.f.Close(); err != nil {
		c.log.Warn("console log: close", "path", c.path, "err", err)
	}
	if st.Capped() {
		c.log.Warn("console log capped: the guest printed more than it keeps",
			"path", c.path, "seen_bytes", st.Seen, "kept_bytes", st.Kept, "left_out_bytes", st.LeftOut)
	}
}

// finish waits for copy to end once QEMU is gone. A process that still
// holds the write end (a child QEMU started for an exec: migration) does
// not keep it waiting: after a second the read gives up.
func (c *console) finish() {
	c.r.SetReadDeadline(time.Now().Add(time.Second))
	<-c.done
}

// abort releases a console whose QEMU never started.
func (c *console) abort() {
	c.r.Close()
	c.w.Close()
	c.f.Close()
}
