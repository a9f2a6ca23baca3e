// Package safetext owns how Airlock shows text that came from the guest
// (file contents, paths, link targets, the agent's summary and messages)
// on a terminal or in a widget: so that what a person sees is what the
// bytes are. Terminal control sequences cannot move the cursor, erase or
// recolour what was printed, and Unicode bidi overrides and invisible
// characters cannot reorder or hide text; each is shown as a visible
// escape instead.
//
// The escapes, used everywhere Airlock shows guest text:
//
//   - a byte is shown as \xNN (two lower-case hex digits): the C0 controls
//     (0x00–0x1f) other than tab and newline, DEL (0x7f), and every byte
//     that is not part of valid UTF-8. ESC is \x1b, a carriage return \x0d
//     (kept as it is only right before a newline, in Text: a CRLF line end
//     does not rewind the line);
//   - a character is shown as <U+XXXX>: the C1 controls (U+0080–U+009F),
//     every Unicode format character (category Cf: the bidi embeddings,
//     overrides and isolates U+202A–U+202E and U+2066–U+2069, the marks
//     U+200E, U+200F and U+061C, the zero-width characters U+200B–U+200D
//     and U+2060–U+2064, the byte order mark U+FEFF, the soft hyphen
//     U+00AD, the tag characters U+E0000–U+E007F, …), the line and
//     paragraph separators U+2028 and U+2029, and the Hangul fillers
//     (U+115F, U+1160, U+3164, U+FFA0), which render as nothing.
//
// Every other character, printable or not in a given font, is kept as it
// is, and a backslash or "<" in the input is not escaped: the input text
// `\x1b` and an ESC byte look the same. Suspicious tells them apart, and
// Airlock flags a file whose content or name holds what it escapes
// ("contains control or bidi characters").
//
// Lookalikes finds the words that mix ASCII letters with letters of another
// script that pass for Latin ones (a Cyrillic о in "cоunt_words"), and
// Name shows a name as Line does, with such words spelt with <U+XXXX>, so
// that it does not read as the name it imitates; Airlock flags a change that adds one.
//
// It uses the standard library only, so any package may import it; it
// must not import anything of Airlock's.
package safetext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text returns s safe to show on a terminal or in a widget, keeping its
// lines: tabs, newlines and a carriage return right before a newline stay,
// everything the package comment lists is escaped.
func Text(s string) string { return render(s, false) }

// Line returns s safe to show within one line (a path, a name, a field of
// a table): as Text, and newlines and every carriage return are escaped
// too (\x0a, \x0d).
func Line(s string) string { return render(s, true) }

// Cut shortens s to at most n characters (runes), the last one an
// ellipsis when anything was cut; it never splits a character. Cut text
// that came from a guest before or after Line: Cut alone escapes nothing.
func Cut(s string, n int) string {
	if n < 1 || utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// Suspicious reports whether s holds anything Text escapes (a CRLF line
// end is not suspicious): control characters, invalid UTF-8, bidi or
// invisible format characters.
func Suspicious(s string) bool {
	for i := 0; i < len(s); {
		n, bad := scan(s, i, false)
		if bad {
			return true
		}
		i += n
	}
	return false
}

// SuspiciousBytes is Suspicious of b.
func SuspiciousBytes(b []byte) bool {
	// The conversion copies; the callers check what a reviewer will see,
	// which is bounded by the size a changeset shows as text.
	return Suspicious(string(b))
}

func render(s string, line bool) string {
	// The common case: nothing to escape, no allocation.
	i := 0
	for i < len(s) {
		n, bad := scan(s, i, line)
		if bad {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		n, bad := scan(s, i, line)
		switch {
		case !bad:
			b.WriteString(s[i : i+n])
		case n == 1: // an ASCII control or a byte that is no UTF-8
			fmt.Fprintf(&b, `\x%02x`, s[i])
		default:
			r, _ := utf8.DecodeRuneInString(s[i:])
			fmt.Fprintf(&b, "<U+%04X>", r)
		}
		i += n
	}
	return b.String()
}

// scan looks at the character at s[i]: its length in bytes (1 for a
// byte that is no valid UTF-8) and whether it must be escaped.
func scan(s string, i int, line bool) (n int, bad bool) {
	c := s[i]
	if c < utf8.RuneSelf {
		switch {
		case c == '\t':
			return 1, false
		case c == '\n':
			return 1, line
		case c == '\r':
			return 1, line || i+1 >= len(s) || s[i+1] != '\n'
		case c < 0x20 || c == 0x7f:
			return 1, true
		}
		return 1, false
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && n == 1 {
		return 1, true
	}
	return n, hidden(r)
}

// hidden reports whether r is a control, format or invisible character
// that is shown as <U+XXXX>.
func hidden(r rune) bool {
	switch r {
	case '\u2028', '\u2029', '\u115f', '\u1160', '\u3164', '\uffa0':
		return true
	}
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r)
}
