package safetext

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	tests := []struct {
		name, in, text, line string
		suspicious           bool
	}{
		{"plain", "print('hi')\n", "print('hi')\n", `print('hi')\x0a`, false},
		{"tab", "\tx := 1", "\tx := 1", "\tx := 1", false},
		{"unicode kept", "héllo, 世界 ✓ ❤️", "héllo, 世界 ✓ ❤️", "héllo, 世界 ✓ ❤️", false},
		{"crlf line end", "a\r\nb\r\n", "a\r\nb\r\n", `a\x0d\x0ab\x0d\x0a`, false},
		{"erase line", "ok\r\x1b[2Kos.system('x')", `ok\x0d\x1b[2Kos.system('x')`, `ok\x0d\x1b[2Kos.system('x')`, true},
		{"cursor up", "a\n\x1b[1A\x1b[2Kb", `a` + "\n" + `\x1b[1A\x1b[2Kb`, `a\x0a\x1b[1A\x1b[2Kb`, true},
		{"trailing cr", "abc\r", `abc\x0d`, `abc\x0d`, true},
		{"osc title", "\x1b]0;pwned\x07", `\x1b]0;pwned\x07`, `\x1b]0;pwned\x07`, true},
		{"nul and del", "a\x00b\x7f", `a\x00b\x7f`, `a\x00b\x7f`, true},
		{"backspace", "rm\b\bls", `rm\x08\x08ls`, `rm\x08\x08ls`, true},
		{"c1 csi", "a\u009b2Kb", "a<U+009B>2Kb", "a<U+009B>2Kb", true},
		{"invalid utf8", "a\xffb\xc3", `a\xffb\xc3`, `a\xffb\xc3`, true},
		{"raw c1 byte", "\x9b2K", `\x9b2K`, `\x9b2K`, true},
		{"trojan source", "if x \u202e} \u2066// admin\u2069 \u2066{", "if x <U+202E>} <U+2066>// admin<U+2069> <U+2066>{", "if x <U+202E>} <U+2066>// admin<U+2069> <U+2066>{", true},
		{"zero width", "pass\u200bword\ufeff", "pass<U+200B>word<U+FEFF>", "pass<U+200B>word<U+FEFF>", true},
		{"marks", "\u200e\u200f\u061c", "<U+200E><U+200F><U+061C>", "<U+200E><U+200F><U+061C>", true},
		{"separators", "a\u2028b\u2029c", "a<U+2028>b<U+2029>c", "a<U+2028>b<U+2029>c", true},
		{"soft hyphen", "ad\u00admin", "ad<U+00AD>min", "ad<U+00AD>min", true},
		{"tag characters", "x\U000E0041\U000E0042", "x<U+E0041><U+E0042>", "x<U+E0041><U+E0042>", true},
		{"hangul filler", "a\u3164b", "a<U+3164>b", "a<U+3164>b", true},
		{"empty", "", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Text(tt.in); got != tt.text {
				t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.text)
			}
			if got := Line(tt.in); got != tt.line {
				t.Errorf("Line(%q) = %q, want %q", tt.in, got, tt.line)
			}
			if got := Suspicious(tt.in); got != tt.suspicious {
				t.Errorf("Suspicious(%q) = %v, want %v", tt.in, got, tt.suspicious)
			}
			if got := SuspiciousBytes([]byte(tt.in)); got != tt.suspicious {
				t.Errorf("SuspiciousBytes(%q) = %v, want %v", tt.in, got, tt.suspicious)
			}
		})
	}
}

// TestCleanNoAlloc pins the fast path: text with nothing to escape is
// returned as it is.
func TestCleanNoAlloc(t *testing.T) {
	s := strings.Repeat("func main() {\n\tprintln(\"héllo\")\n}\n", 100)
	if n := testing.AllocsPerRun(10, func() { _ = Text(s) }); n != 0 {
		t.Errorf("Text of clean text allocates %v times, want 0", n)
	}
}

// checkSafe fails when out could still do something on a terminal or in
// a widget: a control byte other than tab and newline (and a CR right
// before a newline, in Text), a control, format or invisible character,
// invalid UTF-8.
func checkSafe(t *testing.T, in, out string, line bool) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("render(%q) = %q: not valid UTF-8", in, out)
	}
	for i, r := range out {
		switch {
		case r == '\t':
		case r == '\n' && !line:
		case r == '\r' && !line && strings.HasPrefix(out[i:], "\r\n"):
		case r < 0x20 || r == 0x7f:
			t.Fatalf("render(%q) = %q: control byte %#x at %d", in, out, r, i)
		case unicode.Is(unicode.Cc, r), unicode.Is(unicode.Cf, r), r == '\u2028', r == '\u2029', hidden(r):
			t.Fatalf("render(%q) = %q: hidden character %U at %d", in, out, r, i)
		}
	}
	if Suspicious(out) && !line {
		t.Fatalf("render(%q) = %q is itself suspicious", in, out)
	}
}

// visible is what of s survives rendering unchanged: every rune that is
// neither escaped nor a newline.
func visible(s string, line bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		n, bad := scan(s, i, line)
		if !bad {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"", "plain text\n", "ok\r\x1b[2Kos.system('id')\n", "a\r\nb", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\",
		"\u202e\u2066\u2069\u200b\ufeff", "\xff\xfe\xc3", "\u009b31m", "\x1b[1A\x1b[2K", "\U000E0041", "\u00ad\u061c\u2028",
		"日本語\ttab", "\x00\x7f\r",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		text, line := Text(in), Line(in)
		checkSafe(t, in, text, false)
		checkSafe(t, in, line, true)
		// Every printable character survives, in order: what is kept is
		// the input with only the escaped characters replaced.
		for _, tc := range []struct {
			out  string
			line bool
		}{{text, false}, {line, true}} {
			if v := visible(in, tc.line); !isSubsequence(v, tc.out) {
				t.Fatalf("render(%q) = %q loses printable text %q", in, tc.out, v)
			}
		}
		if Suspicious(in) != (text != in) {
			t.Fatalf("Suspicious(%q) = %v but Text changes it: %q", in, Suspicious(in), text)
		}
		// Rendering is idempotent: escapes are printable themselves.
		if Text(text) != text || Line(line) != line {
			t.Fatalf("rendering %q twice changes it", in)
		}
	})
}

// isSubsequence reports whether the runes of sub appear in s in order.
func isSubsequence(sub, s string) bool {
	for _, r := range sub {
		i := strings.IndexRune(s, r)
		if i < 0 {
			return false
		}
		s = s[i+utf8.RuneLen(r):]
	}
	return true
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"too long", 4, "too…"},
		{"héllo wörld", 6, "héllo…"},
		{"日本語テキスト", 3, "日本…"},
	} {
		if got := Cut(tc.in, tc.n); got != tc.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
