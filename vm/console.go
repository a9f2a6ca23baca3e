package vm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
)

// consoleTailBytes bounds how much of a console log TailConsole reads.
const consoleTailBytes = 64 << 10

// TailConsole returns the last n non-empty lines of the console log at path,
// with terminal control sequences and carriage returns removed. A missing
// or unreadable file gives no lines.
func TailConsole(path string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > consoleTailBytes {
		if _, err := f.Seek(fi.Size()-consoleTailBytes, io.SeekStart); err != nil {
			return nil
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, consoleTailBytes))
	if err != nil {
		return nil
	}
	var lines []string
	for _, l := range bytes.Split(data, []byte("\n")) {
		s := strings.TrimSpace(stripControl(string(l)))
		if s != "" {
			lines = append(lines, s)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// stripControl drops ANSI escape sequences and other control characters
// that firmware and kernels write to consoles.
func stripControl(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == 0x1b:
			// ESC [ params final-byte, or ESC + one byte.
			if i+1 < len(s) && s[i+1] == '[' {
				i += 2
				for i < len(s) && (s[i] < 0x40 || s[i] > 0x7e) {
					i++
				}
			} else {
				i++
			}
		case c == '\t' || c >= 0x20 && c != 0x7f:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// BootError says a guest did not become ready, with the end of its console
// so that the person reading it sees what the kernel or init last said.
type BootError struct {
	Machine string
	Reason  string   // "did not answer within 60s", "exited during boot"
	Console []string // last console lines, oldest first
	Log     string   // path of the whole console log
	Err     error    // underlying error, if any
}

func (e *BootError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "guest %s %s", e.Machine, e.Reason)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if len(e.Console) > 0 {
		b.WriteString("\nlast console lines:")
		for _, l := range e.Console {
			b.WriteString("\n  | ")
			b.WriteString(l)
		}
	} else {
		b.WriteString("\nthe console printed nothing")
	}
	if e.Log != "" {
		fmt.Fprintf(&b, "\nfull console log: %s", e.Log)
	}
	return b.String()
}

func (e *BootError) Unwrap() error { return e.Err }
