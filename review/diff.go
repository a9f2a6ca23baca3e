package review

import (
	"bytes"
	"slices"
	"unicode/utf8"

	"github.com/aymanbagabas/go-udiff/lcs"
)

// LineKind says what a hunk line does.
type LineKind string

const (
	Context LineKind = " "
	Insert  LineKind = "+"
	Delete  LineKind = "-"
)

// Line is one line of a hunk. Text excludes the line terminator; NoEOL is
// set on the last line of a file that does not end with a newline (rendered
// as "\ No newline at end of file" in a patch).
type Line struct {
	Kind  LineKind `json:"kind"`
	Text  string   `json:"text"`
	NoEOL bool     `json:"no_eol,omitempty"`
}

// bytes is the line as it appears in the file, terminator included.
func (l Line) bytes() string {
	if l.NoEOL {
		return l.Text
	}
	return l.Text + "\n"
}

// Hunk is one unified-diff hunk. Start and line counts follow unified-diff
// conventions: starts are 1-based, and a side with zero lines gives the
// number of the line before the hunk (0 at the start of the file).
type Hunk struct {
	OldStart int    `json:"old_start"`
	OldLines int    `json:"old_lines"`
	NewStart int    `json:"new_start"`
	NewLines int    `json:"new_lines"`
	Lines    []Line `json:"lines"`
	// Added and Removed count the hunk's "+" and "-" lines.
	Added   int `json:"added"`
	Removed int `json:"removed"`
}

// oldOffset is the 0-based index of the first old line the hunk covers.
func (h Hunk) oldOffset() int {
	if h.OldLines == 0 {
		return h.OldStart
	}
	return h.OldStart - 1
}

// newSide is the hunk's content after the change: context and "+" lines.
func (h Hunk) newSide() []string {
	var out []string
	for _, l := range h.Lines {
		if l.Kind != Delete {
			out = append(out, l.bytes())
		}
	}
	return out
}

// splitLines splits data into lines that keep their "\n"; the last line
// has none when data does not end with a newline. Joining the result gives
// data back byte for byte.
func splitLines(data []byte) []string {
	var lines []string
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			lines = append(lines, string(data))
			break
		}
		lines = append(lines, string(data[:i+1]))
		data = data[i+1:]
	}
	return lines
}

func joinLines(lines []string) []byte {
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	buf := make([]byte, 0, n)
	for _, l := range lines {
		buf = append(buf, l...)
	}
	return buf
}

func toLine(kind LineKind, s string) Line {
	if len(s) > 0 && s[len(s)-1] == '\n' {
		return Line{Kind: kind, Text: s[:len(s)-1]}
	}
	return Line{Kind: kind, Text: s, NoEOL: true}
}

// lineDiff returns the line edits turning a into b.
//
// The edits come from golang.org/x/tools' LCS implementation (via
// go-udiff): Myers' two-sided algorithm with a bound on the edit distance
// it explores, so that a hostile pair of files cannot make diffing
// quadratic. Below the bound the diff is minimal, as git's. Above it the
// library settles for a correct but coarse diff (a few huge hunks), which
// would make hunk-by-hunk review useless on a big file with many scattered
// edits; there the files are first split at anchors, lines that occur
// exactly once in each (patience diff's idea), and each stretch between
// anchors is diffed on its own.
func lineDiff(a, b []string) []lcs.Diff {
	if slices.Equal(a, b) {
		return nil // an empty file added, a mode changed: lcs allocates even for these
	}
	return anchoredDiff(a, b, 0, exactCost)
}

// exactCost is the edit count below which lcs.DiffLines is known to have
// found a minimal diff (its search bound is about 100 edits).
const exactCost = 90

func diffCost(ds []lcs.Diff) int {
	n := 0
	for _, d := range ds {
		n += (d.End - d.Start) + (d.ReplEnd - d.ReplStart)
	}
	return n
}

// anchoredDiff diffs a and b, splitting them at unique lines when the
// plain diff costs more than exact edits.
func anchoredDiff(a, b []string, depth, exact int) []lcs.Diff {
	ds := lcs.DiffLines(a, b)
	if diffCost(ds) <= exact || depth > 8 {
		return ds
	}
	anchors := uniqueAnchors(a, b)
	if len(anchors) == 0 {
		return ds
	}
	var out []lcs.Diff
	ai, bi := 0, 0
	gap := func(aEnd, bEnd int) {
		for _, d := range anchoredDiff(a[ai:aEnd], b[bi:bEnd], depth+1, exact) {
			out = append(out, lcs.Diff{Start: d.Start + ai, End: d.End + ai, ReplStart: d.ReplStart + bi, ReplEnd: d.ReplEnd + bi})
		}
	}
	for _, an := range anchors {
		gap(an[0], an[1])
		ai, bi = an[0]+1, an[1]+1
	}
	gap(len(a), len(b))
	return out
}

// uniqueAnchors returns pairs (i, j) with a[i] == b[j] occurring exactly
// once in a and once in b, forming the longest chain increasing in both i
// and j (patience sorting).
func uniqueAnchors(a, b []string) [][2]int {
	type count struct{ na, nb, ia, ib int }
	counts := map[string]*count{}
	for i, l := range a {
		c := counts[l]
		if c == nil {
			c = &count{}
			counts[l] = c
		}
		c.na++
		c.ia = i
	}
	for j, l := range b {
		if c := counts[l]; c != nil {
			c.nb++
			c.ib = j
		}
	}
	var pairs [][2]int
	for i, l := range a {
		if c := counts[l]; c.na == 1 && c.nb == 1 {
			pairs = append(pairs, [2]int{i, c.ib})
		}
	}
	// Longest increasing subsequence of pairs by j.
	var tails []int // index into pairs of the smallest tail of each length
	prev := make([]int, len(pairs))
	for k, p := range pairs {
		lo, hi := 0, len(tails)
		for lo < hi {
			mid := (lo + hi) / 2
			if pairs[tails[mid]][1] < p[1] {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		if lo > 0 {
			prev[k] = tails[lo-1]
		} else {
			prev[k] = -1
		}
		if lo == len(tails) {
			tails = append(tails, k)
		} else {
			tails[lo] = k
		}
	}
	if len(tails) == 0 {
		return nil
	}
	chain := make([][2]int, len(tails))
	for k, n := tails[len(tails)-1], len(tails)-1; n >= 0; k, n = prev[k], n-1 {
		chain[n] = pairs[k]
	}
	return chain
}

// buildHunks groups the edits turning oldLines into newLines into unified
// hunks with context lines of context around each change.
func buildHunks(oldLines, newLines []string, context int) []Hunk {
	diffs := lineDiff(oldLines, newLines)
	var hunks []Hunk
	for i := 0; i < len(diffs); {
		// Gather diffs whose context would touch or overlap.
		j := i + 1
		for j < len(diffs) && diffs[j].Start-diffs[j-1].End <= 2*context {
			j++
		}
		first, last := diffs[i], diffs[j-1]
		oldFrom := max(0, first.Start-context)
		oldTo := min(len(oldLines), last.End+context)
		newFrom := first.ReplStart - (first.Start - oldFrom)
		h := Hunk{}
		pos := oldFrom
		for _, d := range diffs[i:j] {
			for ; pos < d.Start; pos++ {
				h.Lines = append(h.Lines, toLine(Context, oldLines[pos]))
			}
			for k := d.Start; k < d.End; k++ {
				h.Lines = append(h.Lines, toLine(Delete, oldLines[k]))
				h.Removed++
			}
			for k := d.ReplStart; k < d.ReplEnd; k++ {
				h.Lines = append(h.Lines, toLine(Insert, newLines[k]))
				h.Added++
			}
			pos = d.End
		}
		for ; pos < oldTo; pos++ {
			h.Lines = append(h.Lines, toLine(Context, oldLines[pos]))
		}
		h.OldLines = oldTo - oldFrom
		h.NewLines = h.OldLines - h.Removed + h.Added
		h.OldStart, h.NewStart = oldFrom+1, newFrom+1
		if h.OldLines == 0 {
			h.OldStart = oldFrom
		}
		if h.NewLines == 0 {
			h.NewStart = newFrom
		}
		hunks = append(hunks, h)
		i = j
	}
	return hunks
}

// applyHunks returns old with the hunks for which keep returns true
// applied, byte for byte. Hunks must be those computed from old.
func applyHunks(old []byte, hunks []Hunk, keep func(i int) bool) []byte {
	oldLines := splitLines(old)
	var out []string
	pos := 0
	for i, h := range hunks {
		if !keep(i) {
			continue
		}
		off := h.oldOffset()
		out = append(out, oldLines[pos:off]...)
		out = append(out, h.newSide()...)
		pos = off + h.OldLines
	}
	out = append(out, oldLines[pos:]...)
	return joinLines(out)
}

// binaryProbe is how much of a file is searched for a NUL byte, as git does.
const binaryProbe = 8000

// looksBinary reports whether data should not be shown as text: a NUL byte
// in its first 8000 bytes (git's rule) or invalid UTF-8 anywhere.
func looksBinary(data []byte) bool {
	if bytes.IndexByte(data[:min(len(data), binaryProbe)], 0) >= 0 {
		return true
	}
	return !utf8.Valid(data)
}
