package gui

import (
	"fmt"
	"image/color"
	"math/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRenderTerminal(t *testing.T) {
	for _, tc := range []struct {
		name       string
		in         string
		cols, rows int
		want       string
	}{
		{name: "plain lines", in: "one\ntwo\n", want: "one\ntwo"},
		{name: "crlf", in: "one\r\ntwo\r\n", want: "one\ntwo"},
		{name: "progress overwritten by carriage returns", in: "downloading 10%\rdownloading 55%\rdownloading 100%\ndone\n", want: "downloading 100%\ndone"},
		{name: "a shorter overwrite keeps the rest", in: "abcdef\rxy\n", want: "xycdef"},
		{name: "erase line", in: "step 1/3\r\x1b[2Kstep 2/3\r\x1b[2Kok\n", want: "ok"},
		{name: "erase to end of line", in: "abcdef\r\x1b[Kxy", want: "xy"},
		{name: "colours", in: "\x1b[32mok\x1b[0m and \x1b[1;31mred\x1b[m, \x1b[38;5;208morange\x1b[39m\n", want: "ok and red, orange"},
		{name: "title and other strings", in: "\x1b]0;agent\x07hello \x1b]8;;https://x\x1b\\link\x1b]8;;\x1b\\\n", want: "hello link"},
		{name: "redraw with cursor up", in: "a\nb\nc\n\x1b[2A\x1b[2Kx\n", want: "a\nx\nc"},
		{name: "line longer than the width wraps", in: "abcdefghijKLM\nnext\n", cols: 10, want: "abcdefghij\nKLM\nnext"},
		{name: "line exactly the width", in: "abcdefghij\nnext", cols: 10, want: "abcdefghij\nnext"},
		{name: "tab", in: "a\tb\n", want: "a       b"},
		{name: "utf-8", in: "héllo ✓ 日本\n", want: "héllo ✓ 日本"},
		{name: "invalid utf-8 shows as a replacement", in: "a\xffb\n", want: "a\uFFFDb"},
		{name: "lines scrolled off the top are kept", in: "1\n2\n3\n4\n5\n6\n", rows: 3, want: "1\n2\n3\n4\n5\n6"},
		{name: "wraps on the bottom row are kept", in: "aaaaabbbbbcccccdddddeeeee\nz\n", cols: 5, rows: 2, want: "aaaaa\nbbbbb\nccccc\nddddd\neeeee\nz"},
		{name: "progress on the bottom row", in: "1\n2\n3\r4\n", rows: 2, want: "1\n2\n4"},
		{name: "index and next line scroll too", in: "1\n2\x1bD\x1bE3\n", rows: 2, want: "1\n2\n\n3"},
		{name: "a terminal overwrites what the cursor goes back to", in: "1\n2\n3\n4\n\x1b[3A\x1b[2KX", rows: 3, want: "1\n2\nX\n4"},
		{name: "identical lines scrolled off are all kept", in: "same\nsame\nsame\nsame\nsame\n", rows: 2, want: "same\nsame\nsame\nsame\nsame"},
		{name: "clear screen", in: "old\n\x1b[2J\x1b[Hnew\n", want: "new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cols, rows := tc.cols, tc.rows
			if cols == 0 {
				cols = transcriptCols
			}
			if rows == 0 {
				rows = transcriptRows
			}
			if diff := cmp.Diff(tc.want, renderTerminal([]byte(tc.in), cols, rows)); diff != "" {
				t.Errorf("renderTerminal(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// TestRenderTerminalKeepsEveryLine plays many lines of every length,
// ending in \n or \r\n, through a small terminal, in one write: every
// line comes out, wrapped at the width, in order.
func TestRenderTerminalKeepsEveryLine(t *testing.T) {
	const cols, rows = 20, 5
	rng := rand.New(rand.NewSource(1))
	var in strings.Builder
	var want []string
	for i := range 2000 {
		line := fmt.Sprintf("%d:", i) + strings.Repeat(string(rune('a'+i%26)), rng.Intn(3*cols))
		in.WriteString(line)
		if i%2 == 0 {
			in.WriteString("\r\n")
		} else {
			in.WriteString("\x1b[0m\n")
		}
		for len(line) > cols {
			want = append(want, line[:cols])
			line = line[cols:]
		}
		want = append(want, line)
	}
	got := strings.Split(renderTerminal([]byte(in.String()), cols, rows), "\n")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines lost or changed (-want +got):\n%s", diff)
	}
}

func TestPlainTranscriptOfNothing(t *testing.T) {
	for _, in := range []string{"", "\n\n", "\x1b[32m\x1b[0m"} {
		if got := plainTranscript([]byte(in)); got != "(the command printed nothing)" {
			t.Errorf("plainTranscript(%q) = %q", in, got)
		}
	}
}

func BenchmarkPlainTranscript(b *testing.B) {
	var in strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&in, "\x1b[32m%d\x1b[0m some output of the agent, a line of a usual length\r\n", i)
		if i%10 == 0 {
			in.WriteString("progress 10%\rprogress 50%\r\x1b[2Kprogress 100%\n")
		}
	}
	data := []byte(in.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		plainTranscript(data)
	}
}

// TestTerminalColoursReadableOnLight: xterm's bright yellow (airlock's
// own notes in the run view) is darkened on the light theme, and left as
// it is on the dark one.
func TestTerminalColoursReadableOnLight(t *testing.T) {
	yellow := ansi16[11]
	light, dark := color.NRGBA{0xff, 0xff, 0xff, 0xff}, color.NRGBA{0x17, 0x17, 0x18, 0xff}
	if got := readableOn(yellow, light); luminance(got) >= 0.45 {
		t.Errorf("yellow on white has luminance %.2f, want under 0.45", luminance(got))
	}
	if got := readableOn(yellow, dark); got != color.Color(yellow) {
		t.Errorf("yellow on the dark theme changed to %v", got)
	}
	if red := ansi16[1]; readableOn(red, light) != color.Color(red) {
		t.Error("a dark enough colour was changed on white")
	}
}
