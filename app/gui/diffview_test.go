package gui

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// commentOnHunk writes a comment on hunk i's lines through its bar's
// Comment button.
func (r *ReviewWindow) commentOnHunk(t *testing.T, i int, text string) {
	t.Helper()
	tapButton(t, r.diff.hunkBoxes[i], "Comment")
	r.writeComment(t, text)
}

// commentOnFile writes a comment on the whole file through the header's
// comment button.
func (r *ReviewWindow) commentOnFile(t *testing.T, text string) {
	t.Helper()
	for _, o := range test.LaidOutObjects(r.diff.dv.head) {
		if b, ok := o.(*tipButton); ok && b.Text == "" {
			test.Tap(b)
			r.writeComment(t, text)
			return
		}
	}
	t.Fatal("the header has no comment button")
}

// writeComment types into the open comment box and saves it.
func (r *ReviewWindow) writeComment(t *testing.T, text string) {
	t.Helper()
	if r.diff.dv.draft == nil || r.diff.dv.draft.entry == nil {
		t.Fatal("no comment box is open")
	}
	test.Type(r.diff.dv.draft.entry, text)
	tapButton(t, r.diff.box, "Save comment")
}

// tapButton taps the button labelled text under o.
func tapButton(t *testing.T, o fyne.CanvasObject, text string) {
	t.Helper()
	for _, c := range test.LaidOutObjects(o) {
		if b, ok := c.(*widget.Button); ok && b.Text == text {
			test.Tap(b)
			return
		}
	}
	t.Fatalf("no button %q", text)
}

// changesetOf builds a changeset of modified files, path to old and new
// content ("" old: added).
func changesetOf(t *testing.T, files ...[3]string) *review.Changeset {
	t.Helper()
	objs := testObjects{}
	entry := objs.entry
	var changes []manifest.Change
	for _, f := range files {
		if f[1] == "" {
			changes = append(changes, manifest.Change{Kind: manifest.Added, Path: f[0], New: entry(f[0], f[2])})
			continue
		}
		changes = append(changes, manifest.Change{Kind: manifest.Modified, Path: f[0], Old: entry(f[0], f[1]), New: entry(f[0], f[2])})
	}
	cs := objs.changeset(t, changes)
	return cs
}

func reviewOf(t *testing.T, cs *review.Changeset) *ReviewWindow {
	t.Helper()
	return newTestReview(t, &fakeService{
		infos:      []sandbox.Info{testInfo("1a2b3c4d")},
		changesets: map[string]*review.Changeset{"1a2b3c4d": cs},
	})
}

// numbered is n lines "line 1" … with some replaced.
func numbered(n int, change map[int]string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if c, ok := change[i]; ok {
			b.WriteString(c + "\n")
			continue
		}
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func codeText(r *ReviewWindow) string {
	var b strings.Builder
	for _, v := range r.diff.dv.codes {
		b.WriteString(v.Text())
	}
	return b.String()
}

// TestDiffViewsNumberLines: the unified view shows each line with its
// old and new numbers and its mark; side by side pairs the removed line
// with the added one, numbered on its own side.
func TestDiffViewsNumberLines(t *testing.T) {
	cs := changesetOf(t, [3]string{"notes.txt", numbered(10, nil), numbered(10, map[int]string{5: "line five", 6: ""})},
		[3]string{"other.txt", "a\n", "b\n"})
	r := reviewOf(t, cs)
	unified := "" +
		"  2   2   line 2\n" +
		"  3   3   line 3\n" +
		"  4   4   line 4\n" +
		"  5     - line 5\n" +
		"  6     - line 6\n" +
		"      5 + line five\n" +
		"      6 + \n" +
		"  7   7   line 7\n" +
		"  8   8   line 8\n" +
		"  9   9   line 9\n"
	if diff := cmp.Diff(unified, codeText(r)); diff != "" {
		t.Errorf("unified view (-want +got):\n%s", diff)
	}
	for _, o := range test.LaidOutObjects(r.diff.dv.head) {
		if s, ok := o.(*widget.Select); ok {
			s.SetSelected(viewSplit)
		}
	}
	split := "" +
		"  2   line 2 |   2   line 2\n" +
		"  3   line 3 |   3   line 3\n" +
		"  4   line 4 |   4   line 4\n" +
		"  5 - line 5 |   5 + line five\n" +
		"  6 - line 6 |   6 + \n" +
		"  7   line 7 |   7   line 7\n" +
		"  8   line 8 |   8   line 8\n" +
		"  9   line 9 |   9   line 9\n"
	if diff := cmp.Diff(split, codeText(r)); diff != "" {
		t.Errorf("side-by-side view (-want +got):\n%s", diff)
	}
	// The choice is the window's: the next file is side by side too.
	r.m.moveFile(1)
	r.showFile()
	if r.m.current().Path != "other.txt" || !r.diff.dv.split || !strings.Contains(codeText(r), " | ") {
		t.Error("the side-by-side view was not kept for the next file")
	}
}

// TestChangedWords: in a changed line only the words that differ are
// marked, on both sides.
func TestChangedWords(t *testing.T) {
	marked := func(text []rune, m []bool) []string {
		var out []string
		for i := 0; i < len(m); {
			if !m[i] {
				i++
				continue
			}
			j := i
			for j < len(m) && m[j] {
				j++
			}
			// Which of two equal spaces is the changed one is arbitrary.
			out = append(out, strings.TrimSpace(string(text[i:j])))
			i = j
		}
		return out
	}
	for _, tc := range []struct {
		old, new          string
		wantOld, wantNew  []string
		wholeLineUnmarked bool
	}{
		{old: "total := count(words) + 1", new: "total := countWords(words) + 2",
			wantOld: []string{"count", "1"}, wantNew: []string{"countWords", "2"}},
		{old: "if err != nil {", new: "if err != nil && !quiet {",
			wantNew: []string{"&& !quiet"}},
		{old: "alpha beta", new: "gamma delta", wholeLineUnmarked: true},
	} {
		h := review.Hunk{OldStart: 1, OldLines: 1, NewStart: 1, NewLines: 1, Lines: []review.Line{
			{Kind: review.Delete, Text: tc.old}, {Kind: review.Insert, Text: tc.new}}}
		lines := hunkLines(h, nil, nil)
		if tc.wholeLineUnmarked {
			if lines[0].changed != nil || lines[1].changed != nil {
				t.Errorf("%q → %q: lines with nothing in common are marked word by word", tc.old, tc.new)
			}
			continue
		}
		if diff := cmp.Diff(tc.wantOld, marked(lines[0].text, lines[0].changed)); diff != "" {
			t.Errorf("%q → %q: old side marks (-want +got):\n%s", tc.old, tc.new, diff)
		}
		if diff := cmp.Diff(tc.wantNew, marked(lines[1].text, lines[1].changed)); diff != "" {
			t.Errorf("%q → %q: new side marks (-want +got):\n%s", tc.old, tc.new, diff)
		}
	}
}

// TestPairsAlikeLines: a removed line is shown against the added line
// most like it, not the next one in order: side by side they share a
// row, and the blank line added before them sits alone.
func TestPairsAlikeLines(t *testing.T) {
	h := review.Hunk{OldStart: 1, OldLines: 2, NewStart: 1, NewLines: 3, Lines: []review.Line{
		{Kind: review.Delete, Text: "def count_words(text):"},
		{Kind: review.Delete, Text: "    words = text.lower().split()"},
		{Kind: review.Insert, Text: ""},
		{Kind: review.Insert, Text: "def count_words(text, stop_words=STOP_WORDS):"},
		{Kind: review.Insert, Text: "    words = [w for w in text.lower().split() if w not in stop_words]"},
	}}
	lines := hunkLines(h, nil, nil)
	var got []string
	for _, row := range splitRows(lines) {
		side := func(l *diffLine) string {
			if l == nil {
				return "·"
			}
			return strings.TrimSpace(string(l.text))
		}
		got = append(got, side(row.left)+" | "+side(row.right))
	}
	want := []string{
		"· | ",
		"def count_words(text): | def count_words(text, stop_words=STOP_WORDS):",
		"words = text.lower().split() | words = [w for w in text.lower().split() if w not in stop_words]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("side-by-side rows (-want +got):\n%s", diff)
	}
	if lines[0].changed == nil || lines[2].changed != nil {
		t.Error("the words are not marked against the paired line")
	}
}

// TestSyntaxHighlighting: a Go file's keywords and strings take the
// style's colours, different in the light and the dark palette.
func TestSyntaxHighlighting(t *testing.T) {
	src := []byte("package main\n\nfunc main() { println(\"hi\") }\n")
	lines, inTime := styleSide("main.go", src, time.Minute)
	if len(lines) != 3 || lines[0].syn == nil || !inTime {
		t.Fatalf("styled lines (in time %v): %+v", inTime, lines)
	}
	// Out of time, the side is plain and says so: the window colours it
	// later rather than leaving it plain.
	if late, inTime := styleSide("main.go", src, -time.Nanosecond); inTime || len(late) != 3 || late[0].syn != nil {
		t.Errorf("with no time left: in time %v, lines %+v; want plain lines, not in time", inTime, late)
	}
	test.NewTempApp(t)
	th := fyne.CurrentApp().Settings().Theme()
	for _, v := range []fyne.ThemeVariant{0, 1} {
		p := newDiffPalette(th, v)
		kw, str, plain := p.token(lines[2].syn[0]), p.token(lines[2].syn[strings.Index(string(lines[2].text), `"hi"`)]), p.fg
		if kw == plain || str == plain || kw == str {
			t.Errorf("variant %d: keyword %v, string %v, plain %v: want three colours", v, kw, str, plain)
		}
	}
}

// TestContextExpands: the unchanged lines between hunks are folded, and
// Show all brings back exactly the baseline's lines in between.
func TestContextExpands(t *testing.T) {
	cs := changesetOf(t, [3]string{"a.txt", numbered(40, nil), numbered(40, map[int]string{2: "two", 30: "thirty"})})
	r := reviewOf(t, cs)
	if strings.Contains(codeText(r), "line 10\n") {
		t.Fatal("line 10, between the hunks, is shown before it was asked for")
	}
	if !strings.Contains(r.diffText(), "⋯ 21 unchanged lines") {
		t.Errorf("no fold for lines 6–26:\n%s", r.diffText())
	}
	tapButton(t, r.diff.box, "Show all")
	got := codeText(r)
	for n := 1; n <= 40; n++ {
		want := fmt.Sprintf("%3d %3d   line %d\n", n, n, n)
		if n == 2 || n == 30 {
			continue
		}
		if n > 33 {
			// After the last hunk stays folded.
			if strings.Contains(got, want) {
				t.Errorf("line %d after the last hunk is shown", n)
			}
			continue
		}
		if !strings.Contains(got, want) {
			t.Errorf("after Show all, line %d is not shown as %q", n, want)
		}
	}
	// The fold after the last hunk opens step by step.
	tapButton(t, r.diff.box, "Show all")
	if !strings.Contains(codeText(r), " 40  40   line 40\n") {
		t.Error("the last line is not shown after opening the last fold")
	}
}

// TestGeneratedFileFolded: a generated file's diff is folded until asked
// for.
func TestGeneratedFileFolded(t *testing.T) {
	for _, tc := range [][3]string{
		{"go.sum", "a v1 h1:x\n", "a v1 h1:y\n"},
		{"api/api.pb.go", "package api\n", "package api\n\nvar x = 1\n"},
		{"gen.go", "// Code generated by stringer; DO NOT EDIT.\n\npackage x\n", "// Code generated by stringer; DO NOT EDIT.\n\npackage x\n\nconst y = 2\n"},
	} {
		t.Run(tc[0], func(t *testing.T) {
			r := reviewOf(t, changesetOf(t, tc))
			if len(r.diff.dv.codes) != 0 || !strings.Contains(r.diffText(), "Generated file") {
				t.Fatalf("the generated file is not folded: %d code views, text:\n%s", len(r.diff.dv.codes), r.diffText())
			}
			tapButton(t, r.diff.box, "Show the diff")
			if len(r.diff.dv.codes) == 0 {
				t.Error("Show the diff shows nothing")
			}
		})
	}
	if _, gen := isGenerated(changesetOf(t, [3]string{"main.go", "package main\n", "package main\n\n// not generated\n"}).Files[0]); gen {
		t.Error("a hand-written Go file is taken for generated")
	}
}

func pngOf(t *testing.T, w, h int, c color.Color) string {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestImagePair: a changed image shows old beside new; one that does not
// decode keeps the binary file's line.
func TestImagePair(t *testing.T) {
	cs := changesetOf(t, [3]string{"logo.png", pngOf(t, 40, 20, color.Black), pngOf(t, 40, 30, color.White)})
	r := reviewOf(t, cs)
	var imgs []*canvas.Image
	for _, o := range test.LaidOutObjects(r.diff.box) {
		if i, ok := o.(*canvas.Image); ok {
			imgs = append(imgs, i)
		}
	}
	if len(imgs) != 2 {
		t.Fatalf("%d images shown, want 2", len(imgs))
	}
	if b := imgs[0].Image.Bounds(); b.Dx() != 40 || b.Dy() != 20 {
		t.Errorf("the first image is %v, want the old 40×20", b)
	}
	for _, want := range []string{"Before: 40×20", "After: 40×30"} {
		if !strings.Contains(r.diffText(), want) {
			t.Errorf("no caption %q in:\n%s", want, r.diffText())
		}
	}
	// The test changeset's logo.png is not a real PNG.
	r = newTestReview(t, reviewService(t))
	r.files.list.Select("logo.png")
	for _, o := range test.LaidOutObjects(r.diff.box) {
		if _, ok := o.(*canvas.Image); ok {
			t.Error("an image that does not decode is shown")
		}
	}
	if !strings.Contains(r.diffText(), "Binary file: 6 B before, 7 B after") {
		t.Errorf("the binary line is missing:\n%s", r.diffText())
	}
	// A header claiming a huge image is refused before decoding.
	huge := pngOf(t, 1, 1, color.Black)
	b := []byte(huge)
	b[16], b[17], b[18], b[19] = 0, 1, 0, 0 // width 65536 in IHDR
	if _, err := decodeImage(b); err == nil {
		t.Error("a 65536-pixel-wide image header is accepted")
	}
}

// TestHunkBarShowsTheVerdict: a rejected hunk's bar reads differently
// from an undecided one's and its lines are faded; an approved one's is
// green.
func TestHunkBarShowsTheVerdict(t *testing.T) {
	r := newTestReview(t, reviewService(t))
	r.files.list.Select("src/main.go")
	f := r.m.current()
	r.m.setHunk(f, 0, true)
	r.m.setHunk(f, 1, false)
	r.refresh()
	r.showFile()
	type look struct {
		Text  string
		Imp   widget.Importance
		Faded bool
	}
	var got []look
	for i, b := range r.diff.dv.bars {
		got = append(got, look{r.diff.hunkCheck[i].Text, r.diff.hunkCheck[i].Importance, b.codes[0].dimmed})
	}
	want := []look{
		{"Approved", widget.SuccessImportance, false},
		{"Rejected", widget.DangerImportance, true},
		{"Undecided", widget.MediumImportance, false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hunk bars (-want +got):\n%s", diff)
	}
	if r.diff.dv.bars[1].stripe.FillColor == r.diff.dv.bars[2].stripe.FillColor {
		t.Error("a rejected hunk's stripe has an undecided one's colour")
	}
	// The keyboard's hunk is outlined, the others not.
	r.m.hunk = 2
	r.diff.markHunk()
	if r.diff.dv.bars[2].bg.StrokeWidth == 0 || r.diff.dv.bars[0].bg.StrokeWidth != 0 {
		t.Error("the hunk under the cursor is not the one outlined")
	}
	// A tap on the bar flips the verdict in place.
	test.Tap(r.diff.hunkCheck[1])
	if r.diff.hunkCheck[1].Text != "Approved" || r.diff.dv.bars[1].codes[0].dimmed {
		t.Errorf("after a tap the rejected hunk shows %q", r.diff.hunkCheck[1].Text)
	}
}

// TestRangeComment: a click on a line number and a Shift-click on
// another make a comment on the range, kept with Start, End and side,
// shown under its last line; a removed line is numbered in the baseline.
func TestRangeComment(t *testing.T) {
	cs := changesetOf(t, [3]string{"notes.txt", numbered(10, nil), numbered(10, map[int]string{5: "line five", 6: "line six"})})
	r := reviewOf(t, cs)
	line := func(old bool, n int) *diffLine {
		for _, v := range r.diff.dv.codes {
			for _, row := range v.rows {
				if l := row.left; l != nil {
					if got, ok := numberOn(l, old); ok && got == n && (l.kind != review.Context || !old) {
						return l
					}
				}
			}
		}
		t.Fatalf("no line %d (old %v)", n, old)
		return nil
	}
	r.diff.lineClicked(line(false, 6), false)
	r.diff.lineClicked(line(false, 4), true)
	if d := r.diff.dv.draft; d == nil || d.start != 4 || d.end != 6 {
		t.Fatalf("draft after Shift-click: %+v", r.diff.dv.draft)
	}
	r.writeComment(t, "Why two lines?\nOne would do.")
	r.diff.lineClicked(line(true, 5), false)
	r.writeComment(t, "Keep this one.")
	want := []review.Comment{
		{Text: "Why two lines?\nOne would do.", Start: 4, End: 6},
		{Text: "Keep this one.", Start: 5, End: 5, Old: true},
	}
	if diff := cmp.Diff(want, r.m.comments("notes.txt")); diff != "" {
		t.Errorf("comments (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, r.svc.(*fakeService).saved["1a2b3c4d"].Files["notes.txt"].Comments); diff != "" {
		t.Errorf("saved comments (-want +got):\n%s", diff)
	}
	// Each comment follows the code view that ends with its last line.
	var after []string
	objs := r.diff.hunkBoxes[0].(*fyne.Container).Objects[1].(*fyne.Container).Objects[1].(*fyne.Container).Objects
	for i, o := range objs {
		if v, ok := o.(*codeView); ok && i+1 < len(objs) {
			if _, isCode := objs[i+1].(*codeView); !isCode {
				rows := strings.Split(strings.TrimSuffix(v.Text(), "\n"), "\n")
				after = append(after, strings.TrimSpace(rows[len(rows)-1]))
			}
		}
	}
	if diff := cmp.Diff([]string{"5     - line 5", "6 + line six"}, after); diff != "" {
		t.Errorf("last lines before the comments (-want +got):\n%s", diff)
	}
	// Resolve folds it; a sent comment is read only.
	r.m.resolveComment("notes.txt", 1, true)
	fd := r.m.d.Files["notes.txt"]
	fd.Comments[0].Sent = 1
	r.m.d.Files["notes.txt"] = fd
	r.showFile()
	text := r.diffText()
	for _, want := range []string{"Lines 4–6 · sent in round 1", "Resolved · Line 5 of the baseline: Keep this one."} {
		if !strings.Contains(text, want) {
			t.Errorf("the diff does not show %q:\n%s", want, text)
		}
	}
	if r.m.deleteComment("notes.txt", 0) || r.m.editComment("notes.txt", 0, "changed") {
		t.Error("a sent comment was changed")
	}
}

// TestHostileLinesStayNarrow: control characters, bidi overrides and a
// 10,000-character line are drawn escaped and wrapped; the window does
// not widen.
func TestHostileLinesStayNarrow(t *testing.T) {
	long := strings.Repeat("x_", 5000)
	cs := changesetOf(t, [3]string{"evil.py", "a = 1\n", "a = 1\x1b[2K\r\u202eevil\u2066\n" + long + "\n"})
	r := reviewOf(t, cs)
	if w := r.Window.Content().MinSize().Width; w > 1280 {
		t.Errorf("the window needs %.0f px, want at most 1280", w)
	}
	got := codeText(r)
	if !strings.Contains(got, `a = 1\x1b[2K\x0d<U+202E>evil<U+2066>`) {
		t.Errorf("the line is not escaped:\n%.300s", got)
	}
	for _, o := range test.LaidOutObjects(r.diff.box) {
		if txt, ok := o.(*canvas.Text); ok {
			for _, bad := range hiddenRunes {
				if strings.Contains(txt.Text, bad) {
					t.Errorf("a text shows %q raw", bad)
				}
			}
			if len(txt.Text) > 400 {
				t.Errorf("a text of %d characters is drawn on one row", len(txt.Text))
			}
		}
	}
}

// TestCodeRowsKeepUnderscores: a row is taller than the font's line and
// every background is drawn before any text, so the next row's colour
// never covers an underscore of the row above.
func TestCodeRowsKeepUnderscores(t *testing.T) {
	cs := changesetOf(t, [3]string{"a.go", "var snake_case = 1\nvar b = 2\n", "var snake_case = 2\nvar b_c = 3\n"})
	r := reviewOf(t, cs)
	v := r.diff.dv.codes[0]
	c, rowH := v.cell()
	font := fyne.MeasureText("_gy", v.Theme().Size("text"), fyne.TextStyle{Monospace: true})
	if rowH < font.Height+2 || rowH < c.Height+2 {
		t.Errorf("rows are %.1f px for a %.1f px font line", rowH, font.Height)
	}
	seenText := false
	for _, o := range test.WidgetRenderer(v).Objects() {
		switch o.(type) {
		case *canvas.Text:
			seenText = true
		case *canvas.Rectangle:
			if seenText {
				t.Fatal("a background is drawn over a text")
			}
		}
	}
	if !seenText {
		t.Fatal("the code view draws no text")
	}
}

// TestLargeFileColouredLater: a large file is drawn plain at once and
// in colour when the highlighter is done; a file left meanwhile is not
// drawn over.
func TestLargeFileColouredLater(t *testing.T) {
	var old, new strings.Builder
	for i := range 2500 {
		fmt.Fprintf(&old, "var v%d = %d\n", i, i)
		if i == 1500 {
			i = -i
		}
		fmt.Fprintf(&new, "var v%d = %d\n", i, i)
	}
	cs := changesetOf(t, [3]string{"a.zzz", "a\n", "b\n"}, [3]string{"big.go", old.String(), new.String()})
	r := reviewOf(t, cs)
	var pending []func()
	r.async = func(f func()) { pending = append(pending, f) }
	// The highlighter's time limit is not what this test is about: a
	// loaded machine under -race once took more than its 5 s.
	r.diff.asyncBudget = 5 * time.Minute
	coloured := func() bool {
		for _, v := range r.diff.dv.codes {
			for _, row := range v.rows {
				if row.left.syn != nil {
					return true
				}
			}
		}
		return false
	}
	r.ShowFile("big.go")
	if len(pending) != 1 || coloured() {
		t.Fatalf("the large file: %d highlighter runs pending, coloured %v; want 1 and plain", len(pending), coloured())
	}
	pending[0]()
	if !coloured() || !strings.Contains(codeText(r), "- var v1500 = 1500") {
		t.Errorf("after the highlighter: coloured %v, text:\n%s", coloured(), codeText(r))
	}
	r.ShowFile("big.go") // the same file: nothing to do again
	r.ShowFile("a.zzz")
	r.m.selectPath("big.go")
	r.showFile()
	if len(pending) != 2 {
		t.Fatalf("%d highlighter runs, want 2", len(pending))
	}
	r.ShowFile("a.zzz")
	pending[1]() // finishes after the user moved on
	if r.m.current().Path != "a.zzz" || coloured() {
		t.Error("the highlighter drew over the file shown since")
	}
}

// TestCursorHunkScrolledTo: moving to a hunk further down scrolls the
// diff to it.
func TestCursorHunkScrolledTo(t *testing.T) {
	cs := changesetOf(t, [3]string{"a.txt", numbered(200, nil), numbered(200, map[int]string{2: "a", 40: "b", 80: "c", 120: "d", 160: "e", 199: "f"})})
	r := reviewOf(t, cs)
	r.m.moveHunk(1)
	r.m.moveHunk(1)
	r.showFile()
	want := r.diff.hunkBoxes[2].Position().Y
	if off := r.diff.scroll.Offset.Y; off < want-20 || off > want+20 {
		t.Errorf("the diff is scrolled to %.0f, want about %.0f (the third hunk)", off, want)
	}
}
