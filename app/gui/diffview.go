package gui

import (
	"path"
	"strings"
	"time"
	"unicode"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/lexers"

	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// This file prepares a file's change for the diff view, without fyne:
// each side's lines made safe to show and highlighted, the hunks' lines
// with their numbers and changed words, the unchanged stretches between
// hunks, and whether a file is generated. pane_diff.go draws it.

// styledLine is one line of a side as the view shows it: the text made
// safe (escapes visible, tabs as spaces) and, per rune, its syntax class.
type styledLine struct {
	text []rune
	syn  []chroma.TokenType // nil: no highlighting
}

// diffLine is one line of the diff: a hunk's line, or an unchanged line
// shown from a gap.
type diffLine struct {
	kind     review.LineKind
	old, new int // 1-based line numbers; 0 when the line is not on that side
	styledLine
	// changed marks, per rune, the words that differ from the paired
	// line on the other side; nil when nothing is marked.
	changed []bool
	// pair is the index in its hunk's lines of the line it is shown
	// against (a removed line's added one and back), -1 for none.
	pair  int
	noEOL bool
}

// number is the line's number on the side a comment about it names: the
// agent's version, or the baseline's for a removed line.
func (l *diffLine) number() (n int, old bool) {
	if l.kind == review.Delete {
		return l.old, true
	}
	return l.new, false
}

// Limits that keep a hostile or huge file from stalling the window.
const (
	maxHighlightBytes = 512 << 10 // per side; larger sides are shown plain
	// How long highlighting a side may take: before the file is drawn,
	// and off fyne's goroutine, where it only delays the colours.
	syncHighlightTime  = 300 * time.Millisecond
	asyncHighlightTime = 5 * time.Second
	maxWordTokens      = 400 // per line, for the changed-words diff
	tabSpaces          = "    "
)

// showText is s as the view shows it: controls and bidi characters as
// visible escapes, tabs as four spaces.
func showText(s string) string {
	return strings.ReplaceAll(safetext.Line(s), "\t", tabSpaces)
}

// plainLine is s shown without highlighting.
func plainLine(s string) styledLine { return styledLine{text: []rune(showText(s))} }

// styleSide splits a side's content into lines ready to show, highlighted
// as the language chroma guesses from the file's name. Content it does not
// know, too large or too slow to tokenise is shown plain; inTime is false
// when it was plain only because budget ran out.
func styleSide(name string, content []byte, budget time.Duration) (lines []styledLine, inTime bool) {
	raw := splitContent(content)
	if lexer := lexers.Match(path.Base(name)); lexer != nil && len(content) <= maxHighlightBytes {
		hl, inTime := highlight(chroma.Coalesce(lexer), string(content), len(raw), budget)
		if hl == nil {
			return plainSide(content), inTime
		}
		out := make([]styledLine, len(raw))
		for i, line := range raw {
			if i < len(hl) && joined(hl[i]) == line {
				out[i] = styleTokens(hl[i])
			} else {
				out[i] = plainLine(line)
			}
		}
		return out, true
	}
	return plainSide(content), true
}

// plainSide is a side's lines shown without highlighting.
func plainSide(content []byte) []styledLine {
	raw := splitContent(content)
	out := make([]styledLine, len(raw))
	for i, line := range raw {
		out[i] = plainLine(line)
	}
	return out
}

// highlighted reports whether chroma knows the language of a file by its
// name.
func highlighted(name string) bool { return lexers.Match(path.Base(name)) != nil }

// splitContent is content's lines without their "\n".
func splitContent(content []byte) []string {
	if len(content) == 0 {
		return nil
	}
	s := strings.TrimSuffix(string(content), "\n")
	return strings.Split(s, "\n")
}

// highlight tokenises text and cuts the tokens into lines; nil when the
// lexer fails, or takes longer than budget (then inTime is false).
func highlight(lexer chroma.Lexer, text string, lines int, budget time.Duration) (_ [][]chroma.Token, inTime bool) {
	it, err := lexer.Tokenise(&chroma.TokeniseOptions{State: "root"}, text)
	if err != nil {
		return nil, true
	}
	deadline := time.Now().Add(budget)
	out := make([][]chroma.Token, 0, lines)
	var cur []chroma.Token
	for n := 0; ; n++ {
		tok := it()
		if tok == chroma.EOF {
			break
		}
		if n%256 == 0 && time.Now().After(deadline) {
			return nil, false
		}
		for {
			i := strings.IndexByte(tok.Value, '\n')
			if i < 0 {
				break
			}
			if i > 0 {
				cur = append(cur, chroma.Token{Type: tok.Type, Value: tok.Value[:i]})
			}
			out = append(out, cur)
			cur = nil
			tok.Value = tok.Value[i+1:]
		}
		if tok.Value != "" {
			cur = append(cur, tok)
		}
	}
	if cur != nil {
		out = append(out, cur)
	}
	return out, true
}

func joined(toks []chroma.Token) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteString(t.Value)
	}
	return b.String()
}

func styleTokens(toks []chroma.Token) styledLine {
	var l styledLine
	for _, t := range toks {
		for _, r := range showText(t.Value) {
			l.text = append(l.text, r)
			l.syn = append(l.syn, t.Type)
		}
	}
	return l
}

// sideLine is line n (1-based) of a side, or text shown plain when the
// side does not have it as expected.
func sideLine(side []styledLine, n int, text string) styledLine {
	if n >= 1 && n <= len(side) && string(side[n-1].text) == showText(text) {
		return side[n-1]
	}
	return plainLine(text)
}

// hunkLines numbers a hunk's lines, takes their look from the styled
// sides and marks the words that changed between paired lines.
func hunkLines(h review.Hunk, old, new []styledLine) []diffLine {
	oldN, newN := h.OldStart, h.NewStart
	if h.OldLines == 0 {
		oldN++
	}
	if h.NewLines == 0 {
		newN++
	}
	out := make([]diffLine, 0, len(h.Lines))
	for _, l := range h.Lines {
		d := diffLine{kind: l.Kind, noEOL: l.NoEOL}
		switch l.Kind {
		case review.Insert:
			d.new, d.styledLine = newN, sideLine(new, newN, l.Text)
			newN++
		case review.Delete:
			d.old, d.styledLine = oldN, sideLine(old, oldN, l.Text)
			oldN++
		default:
			d.old, d.new, d.styledLine = oldN, newN, sideLine(new, newN, l.Text)
			oldN++
			newN++
		}
		out = append(out, d)
	}
	markWords(out)
	return out
}

// markWords pairs, in each run of removed lines and the run of added
// lines after it, the lines that are most alike (in order), and marks in
// each pair the words that differ.
func markWords(lines []diffLine) {
	for i := range lines {
		lines[i].pair = -1
	}
	for i := 0; i < len(lines); {
		if lines[i].kind != review.Delete {
			i++
			continue
		}
		d := i
		a, end := changeRun(lines, d)
		i = end
		for _, p := range pairLines(lines[d:a], lines[a:i]) {
			del, add := &lines[d+p[0]], &lines[a+p[1]]
			del.pair, add.pair = a+p[1], d+p[0]
			del.changed, add.changed, _ = changedWords(del.text, add.text)
		}
	}
}

// changeRun is the run of changed lines that starts at d: its removed
// lines up to a, then its added lines up to end.
func changeRun(lines []diffLine, d int) (a, end int) {
	a = d
	for a < len(lines) && lines[a].kind == review.Delete {
		a++
	}
	end = a
	for end < len(lines) && lines[end].kind == review.Insert {
		end++
	}
	return a, end
}

// Pairing lines by likeness compares every removed line of a run with
// every added one, word by word: up to this much work (words × words over
// all pairs); beyond it the lines are paired in order.
const (
	maxPairWork = 2_000_000
	minLikeness = 0.3
)

// pairLines chooses which removed line is shown against which added one:
// the in-order pairing with the most likeness (common words, weighed by
// length), pairs under minLikeness left out.
func pairLines(dels, adds []diffLine) [][2]int {
	wordsIn := func(ls []diffLine) int {
		n := 0
		for _, l := range ls {
			n += len(words(l.text))
		}
		return n
	}
	if wordsIn(dels)*wordsIn(adds) > maxPairWork {
		var out [][2]int
		for k := 0; k < min(len(dels), len(adds)); k++ {
			out = append(out, [2]int{k, k})
		}
		return out
	}
	like := make([][]float64, len(dels))
	for i := range dels {
		like[i] = make([]float64, len(adds))
		for j := range adds {
			_, _, like[i][j] = changedWords(dels[i].text, adds[j].text)
		}
	}
	// best[i][j] is the most likeness of dels[i:] against adds[j:].
	best := make([][]float64, len(dels)+1)
	for i := range best {
		best[i] = make([]float64, len(adds)+1)
	}
	for i := len(dels) - 1; i >= 0; i-- {
		for j := len(adds) - 1; j >= 0; j-- {
			b := max(best[i+1][j], best[i][j+1])
			if like[i][j] >= minLikeness {
				b = max(b, like[i][j]+best[i+1][j+1])
			}
			best[i][j] = b
		}
	}
	var out [][2]int
	for i, j := 0, 0; i < len(dels) && j < len(adds); {
		switch {
		case like[i][j] >= minLikeness && best[i][j] == like[i][j]+best[i+1][j+1]:
			out = append(out, [2]int{i, j})
			i++
			j++
		case best[i][j] == best[i+1][j]:
			i++
		default:
			j++
		}
	}
	return out
}

// changedWords marks, per rune of each line, the words not in their
// longest common subsequence of words, and says how alike the lines are
// (0 to 1: the share of their non-blank characters in common words).
// Lines with no word in common, or too long to compare, are left
// unmarked: the whole line changed.
func changedWords(a, b []rune) (ma, mb []bool, likeness float64) {
	ta, tb := words(a), words(b)
	if len(ta) > maxWordTokens || len(tb) > maxWordTokens {
		return nil, nil, 0
	}
	// lcs[i][j] is the length of the LCS of ta[i:] and tb[j:].
	lcs := make([][]int32, len(ta)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(tb)+1)
	}
	for i := len(ta) - 1; i >= 0; i-- {
		for j := len(tb) - 1; j >= 0; j-- {
			switch {
			case string(a[ta[i][0]:ta[i][1]]) == string(b[tb[j][0]:tb[j][1]]):
				lcs[i][j] = lcs[i+1][j+1] + 1
			case lcs[i+1][j] >= lcs[i][j+1]:
				lcs[i][j] = lcs[i+1][j]
			default:
				lcs[i][j] = lcs[i][j+1]
			}
		}
	}
	keepA, keepB := make([]bool, len(ta)), make([]bool, len(tb))
	common := 0
	for i, j := 0, 0; i < len(ta) && j < len(tb); {
		switch {
		case string(a[ta[i][0]:ta[i][1]]) == string(b[tb[j][0]:tb[j][1]]):
			keepA[i], keepB[j] = true, true
			common += nonBlank(a[ta[i][0]:ta[i][1]])
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			i++
		default:
			j++
		}
	}
	if common == 0 {
		return nil, nil, 0
	}
	mark := func(text []rune, toks [][2]int, keep []bool) []bool {
		m := make([]bool, len(text))
		for k, t := range toks {
			if !keep[k] {
				for x := t[0]; x < t[1]; x++ {
					m[x] = true
				}
			}
		}
		return m
	}
	return mark(a, ta, keepA), mark(b, tb, keepB), 2 * float64(common) / float64(nonBlank(a)+nonBlank(b))
}

// words cuts a line into words (letters, digits and underscores), runs of
// spaces, and single other characters, as [start, end) rune offsets.
func words(s []rune) [][2]int {
	var out [][2]int
	for i := 0; i < len(s); {
		j := i + 1
		switch {
		case isWord(s[i]):
			for j < len(s) && isWord(s[j]) {
				j++
			}
		case unicode.IsSpace(s[i]):
			for j < len(s) && unicode.IsSpace(s[j]) {
				j++
			}
		}
		out = append(out, [2]int{i, j})
		i = j
	}
	return out
}

func isWord(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

func nonBlank(s []rune) int {
	n := 0
	for _, r := range s {
		if !unicode.IsSpace(r) {
			n++
		}
	}
	return n
}

// splitRow is one row of the side-by-side view: a baseline line on the
// left, the agent's on the right; nil leaves a side blank.
type splitRow struct{ left, right *diffLine }

// splitRows lays lines out side by side: unchanged lines on both sides,
// each removed line beside the added line it is paired with, the others
// beside each other in order, or beside a blank.
func splitRows(lines []diffLine) []splitRow {
	var rows []splitRow
	zip := func(dels, adds []*diffLine) {
		for k := 0; k < max(len(dels), len(adds)); k++ {
			var row splitRow
			if k < len(dels) {
				row.left = dels[k]
			}
			if k < len(adds) {
				row.right = adds[k]
			}
			rows = append(rows, row)
		}
	}
	for i := 0; i < len(lines); {
		if lines[i].kind != review.Delete && lines[i].kind != review.Insert {
			rows = append(rows, splitRow{&lines[i], &lines[i]})
			i++
			continue
		}
		d := i
		a, end := changeRun(lines, d)
		i = end
		var dels, adds []*diffLine
		j := a
		for k := d; k < a; k++ {
			p := lines[k].pair
			if p < a || p >= i {
				dels = append(dels, &lines[k])
				continue
			}
			for ; j < p; j++ {
				adds = append(adds, &lines[j])
			}
			zip(dels, adds)
			dels, adds = nil, nil
			rows = append(rows, splitRow{&lines[k], &lines[p]})
			j = p + 1
		}
		for ; j < i; j++ {
			adds = append(adds, &lines[j])
		}
		zip(dels, adds)
	}
	return rows
}

// contextGap is a stretch of unchanged lines before, between or after hunks:
// old lines from oldStart and new lines from newStart (1-based), n of
// them, the same on both sides.
type contextGap struct{ oldStart, newStart, n int }

// gaps are the unchanged stretches around f's hunks: len(f.Hunks)+1 of
// them, the first before the first hunk and the last after the last.
func gaps(f *review.File, oldLines, newLines int) []contextGap {
	out := make([]contextGap, 0, len(f.Hunks)+1)
	oldNext, newNext := 1, 1 // the first line not yet covered, per side
	for _, h := range f.Hunks {
		oldFirst := h.OldStart
		if h.OldLines == 0 {
			oldFirst++
		}
		newFirst := h.NewStart
		if h.NewLines == 0 {
			newFirst++
		}
		out = append(out, contextGap{oldNext, newNext, max(min(oldFirst-oldNext, newFirst-newNext), 0)})
		oldNext, newNext = oldFirst+h.OldLines, newFirst+h.NewLines
	}
	out = append(out, contextGap{oldNext, newNext, max(min(oldLines-oldNext+1, newLines-newNext+1), 0)})
	return out
}

// gapLines are the unchanged lines [from, to) of a gap (0-based within
// it), shown from the agent's side.
func gapLines(g contextGap, from, to int, new []styledLine) []diffLine {
	var out []diffLine
	for k := from; k < to; k++ {
		n := g.newStart + k
		if n < 1 || n > len(new) {
			break
		}
		out = append(out, diffLine{kind: review.Context, old: g.oldStart + k, new: n, styledLine: new[n-1]})
	}
	return out
}

// isGenerated reports whether f looks written by a tool, with the reason
// (review.Generated: the changeset's FlagGenerated uses the same check).
func isGenerated(f *review.File) (string, bool) { return review.Generated(f) }
