package gui

import (
	"strings"
	"unicode/utf8"

	"github.com/hinshun/vt10x"

	"github.com/airlock-dev/airlock/internal/safetext"
)

// The terminal a transcript is shown through: wide enough for most lines,
// as tall as a large window. Lines scrolled off its top are kept, as a
// terminal's scrollback keeps them.
const (
	transcriptCols = 200
	transcriptRows = 50
)

// vtWrapNext is vt10x's cursor state "the next character wraps" (its
// constants are unexported).
const vtWrapNext = 1 << 1

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// plainTranscript is what a terminal would show of a transcript, as
// plain text: carriage returns, erased lines and cursor moves take effect
// (a progress line shows its last state), colours and other control
// sequences are left out, and a line longer than the terminal wraps.
func plainTranscript(b []byte) string {
	// What the terminal kept may still hold bidi or invisible
	// characters (they are printable to it): made visible too.
	s := safetext.Text(renderTerminal(b, transcriptCols, transcriptRows))
	if strings.TrimSpace(s) == "" {
		return "(the command printed nothing)"
	}
	return s
}

// renderTerminal plays b into a vt10x terminal of cols×rows and returns
// every line it showed: those that scrolled off the top, then the screen,
// without trailing blanks. A bare line feed starts a new line at the first
// column (newline mode), as a terminal shows output a PTY translated.
//
// vt10x keeps no scrollback, so the bytes go in in pieces that cannot
// scroll more than once, and the top line is copied out before a piece
// that may scroll it away: a line feed, index or next line on the bottom
// row, or a character that wraps there.
func renderTerminal(b []byte, cols, rows int) string {
	st := &scrollback{vt: vt10x.New(vt10x.WithSize(cols, rows)), cols: cols, rows: rows}
	st.vt.Write([]byte("\x1b[20h")) // LNM: line feed also returns the carriage
	for len(b) > 0 {
		n := st.safePrefix(b)
		if n > 0 {
			st.vt.Write(b[:n])
			b = b[n:]
			continue
		}
		// One piece that may scroll: an escape sequence, a line feed or a
		// character.
		n = pieceLen(b)
		st.feedWatching(b[:n])
		b = b[n:]
	}
	return st.text()
}

// scrollback is a vt10x terminal with the lines that left its top.
type scrollback struct {
	vt         vt10x.Terminal
	cols, rows int
	lines      []string
	top        []rune // row 0 before a piece that may scroll
}

// safePrefix is how many bytes at the start of b cannot scroll the
// screen: plain characters (no escape, no line feed) that fit on the
// cursor's row, or that cannot reach the bottom row by wrapping. It ends
// on a whole UTF-8 character; 0 when b starts with something that may
// scroll.
func (s *scrollback) safePrefix(b []byte) int {
	cur := s.vt.Cursor()
	room := s.cols - 1 - cur.X // characters that can be written without wrapping
	if cur.State&vtWrapNext != 0 {
		room = 0
	}
	// Rows below the cursor that wrapping may use up without scrolling.
	below := s.rows - 1 - cur.Y
	limit := room + below*s.cols
	width, n := 0, 0
	for n < len(b) {
		c := b[n]
		if c == 0x1b || c == '\n' || c == '\v' || c == '\f' {
			break
		}
		r, size := utf8.DecodeRune(b[n:])
		if r == utf8.RuneError && size == 1 {
			break // written as U+FFFD by feedWatching
		}
		w := 0
		switch {
		case c == '\t':
			w = 8
		case r >= 0x20 && r != 0x7f:
			w = 1
		}
		if width+w > limit {
			break
		}
		width += w
		n += size
	}
	return n
}

// pieceLen is the length of the piece at the start of b: a whole escape
// sequence, or one UTF-8 character (one byte when it is not valid).
func pieceLen(b []byte) int {
	if b[0] != 0x1b || len(b) == 1 {
		_, size := utf8.DecodeRune(b)
		return size
	}
	switch b[1] {
	case '[': // CSI: parameters and intermediates, then a final byte
		for i := 2; i < len(b); i++ {
			switch c := b[i]; {
			case c >= 0x40 && c <= 0x7e:
				return i + 1
			case c < 0x20 || c > 0x7e:
				return i // cut short: the terminal deals with what follows
			}
		}
		return len(b)
	case ']', 'P', '_', '^', 'k': // strings, to BEL or ST
		for i := 2; i < len(b); i++ {
			if b[i] == 0x07 {
				return i + 1
			}
			if b[i] == 0x1b && i+1 < len(b) && b[i+1] == '\\' {
				return i + 2
			}
		}
		return len(b)
	case '(', ')', '*', '+', '#': // one more byte
		return min(3, len(b))
	}
	return 2
}

// feedWatching writes one piece that may scroll the screen, keeping the
// top line if it does. A piece at the bottom row that scrolls a full
// screen moves row 1 to row 0; on a narrower scroll region row 0 stays.
func (s *scrollback) feedWatching(p []byte) {
	if r, size := utf8.DecodeRune(p); r == utf8.RuneError && size == 1 {
		p = []byte(string(utf8.RuneError))
	}
	cur := s.vt.Cursor()
	if cur.Y != s.rows-1 || !s.mayScroll(p, cur) {
		s.vt.Write(p)
		return
	}
	s.top = s.readRow(0, s.top[:0])
	// Rows 0 and 1 alike: a scroll would not show on row 0.
	alike := s.rowIs(1, s.top)
	s.vt.Write(p)
	if alike || !s.rowIs(0, s.top) {
		s.lines = append(s.lines, strings.TrimRight(string(s.top), " "))
	}
}

// mayScroll reports whether p, written with the cursor on the bottom row,
// may scroll: a line feed, IND or NEL, or a character when the cursor
// waits to wrap.
func (s *scrollback) mayScroll(p []byte, cur vt10x.Cursor) bool {
	switch {
	case len(p) == 1 && (p[0] == '\n' || p[0] == '\v' || p[0] == '\f'):
		return true
	case len(p) == 2 && p[0] == 0x1b && (p[1] == 'D' || p[1] == 'E'):
		return true
	case p[0] != 0x1b && p[0] >= 0x20 && p[0] != 0x7f:
		return cur.State&vtWrapNext != 0
	}
	return false
}

// readRow appends the characters of row y to buf.
func (s *scrollback) readRow(y int, buf []rune) []rune {
	for x := 0; x < s.cols; x++ {
		c := s.vt.Cell(x, y).Char
		if c == 0 {
			c = ' '
		}
		buf = append(buf, c)
	}
	return buf
}

// rowIs reports whether row y holds the characters r (false past the
// bottom).
func (s *scrollback) rowIs(y int, r []rune) bool {
	if y >= s.rows {
		return false
	}
	for x, want := range r {
		c := s.vt.Cell(x, y).Char
		if c == 0 {
			c = ' '
		}
		if c != want {
			return false
		}
	}
	return true
}

// text is the lines kept and the screen, without blank lines at the end.
func (s *scrollback) text() string {
	lines := s.lines
	for y := 0; y < s.rows; y++ {
		lines = append(lines, strings.TrimRight(string(s.readRow(y, nil)), " "))
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}
