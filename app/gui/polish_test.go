package gui

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
)

// TestDiffWheelAndClicks: a wheel step over the diff moves it wheelBoost
// times fyne's step, and a click on a line number under the wheel
// catcher still starts a comment on that line.
func TestDiffWheelAndClicks(t *testing.T) {
	cs := changesetOf(t, [3]string{"a.txt", numbered(200, nil), numbered(200, map[int]string{2: "a", 40: "b", 80: "c", 120: "d", 160: "e", 199: "f"})})
	r := reviewOf(t, cs)
	c := r.Window.Canvas()
	d := fyne.CurrentApp().Driver()
	before := r.diff.scroll.Offset.Y
	test.Scroll(c, d.AbsolutePositionForObject(r.diff.scroll).AddXY(200, 200), 0, -25)
	if got := r.diff.scroll.Offset.Y - before; got != 25*wheelBoost {
		t.Errorf("one wheel step scrolled the diff %v px, want %v", got, 25*wheelBoost)
	}
	r.diff.scroll.ScrollToTop()
	v := r.diff.dv.codes[0]
	_, rowH := v.cell()
	at := d.AbsolutePositionForObject(v).AddXY(4, rowH/2) // the first row's number
	test.TapCanvas(c, at)
	first := v.rows[0].left
	if dr := r.diff.dv.draft; dr == nil || dr.start != first.new || dr.end != first.new {
		t.Fatalf("a tap on line %d's number under the wheel catcher: draft %+v", first.new, r.diff.dv.draft)
	}
}

// TestCommentsTabTakesTheFasterWheel: the Comments tab's list is under a
// wheel catcher.
func TestCommentsTabTakesTheFasterWheel(t *testing.T) {
	r := newTestReview(t, reviewService(t))
	found := false
	for _, o := range test.LaidOutObjects(r.tabs.Items[3].Content) {
		if _, ok := o.(*wheelCatcher); ok {
			found = true
		}
	}
	if !found {
		t.Error("the Comments tab has no wheel catcher")
	}
}

// TestCommentsTabResolvesAndDeletes: the Comments tab resolves, reopens
// and deletes a comment not sent yet, as the diff does; a sent one has
// no Delete; the diff shows the change.
func TestCommentsTabResolvesAndDeletes(t *testing.T) {
	cs := changesetOf(t, [3]string{"notes.txt", numbered(10, nil), numbered(10, map[int]string{5: "line five"})})
	r := reviewOf(t, cs)
	r.m.addComment("notes.txt", review.Comment{Text: "first", Start: 5, End: 5})
	r.m.addComment("notes.txt", review.Comment{Text: "second", Start: 6, End: 6})
	fd := r.m.d.Files["notes.txt"]
	fd.Comments[1].Sent = 1
	r.m.d.Files["notes.txt"] = fd
	r.refresh()
	r.showFile()
	r.tabs.SelectIndex(3)
	list := r.comments.list
	list.Resize(fyne.NewSize(800, 400))
	row := func(i int) commentRow {
		t.Helper()
		for _, o := range test.LaidOutObjects(list) {
			if b, ok := o.(*fyne.Container); ok && len(b.Objects) == 3 {
				if _, ok := b.Objects[1].(*widget.Icon); ok {
					cr := commentRowOf(b)
					if strings.HasPrefix(cr.text.Text, []string{"first", "second"}[i]) {
						return cr
					}
				}
			}
		}
		t.Fatalf("no row for comment %d", i)
		return commentRow{}
	}
	if row(1).del.Visible() {
		t.Error("a sent comment offers Delete")
	}
	first := row(0)
	if !first.del.Visible() || first.resolve.Text != "Resolve" {
		t.Fatalf("an unsent comment's row: delete %v, %q", first.del.Visible(), first.resolve.Text)
	}
	test.Tap(first.resolve)
	if !r.m.comments("notes.txt")[0].Resolved {
		t.Fatal("Resolve in the Comments tab did not resolve the comment")
	}
	if !strings.Contains(r.diffText(), "Resolved · Line 5: first") {
		t.Errorf("the diff does not show the comment resolved:\n%s", r.diffText())
	}
	if got := row(0).resolve.Text; got != "Reopen" {
		t.Errorf("a resolved comment's button says %q, want Reopen", got)
	}
	test.Tap(row(0).resolve)
	if r.m.comments("notes.txt")[0].Resolved {
		t.Error("Reopen did not open the comment again")
	}
	test.Tap(row(0).del)
	if got := r.m.comments("notes.txt"); len(got) != 1 || got[0].Text != "second" {
		t.Errorf("after Delete the comments are %+v", got)
	}
	if saved := r.svc.(*fakeService).saved["1a2b3c4d"].Files["notes.txt"].Comments; len(saved) != 1 {
		t.Errorf("the deletion was not saved: %+v", saved)
	}
	if strings.Contains(r.diffText(), "first") {
		t.Errorf("the diff still shows the deleted comment:\n%s", r.diffText())
	}
}

// TestFoldedCommentShownInPlace: a comment on lines the view folds is
// listed under the file; its button unfolds the lines and the comment
// moves under them.
func TestFoldedCommentShownInPlace(t *testing.T) {
	cs := changesetOf(t, [3]string{"a.txt", numbered(60, nil), numbered(60, map[int]string{2: "two", 50: "fifty"})})
	r := reviewOf(t, cs)
	r.m.addComment("a.txt", review.Comment{Text: "about line 25", Start: 24, End: 25})
	r.showFile()
	if !strings.Contains(r.diffText(), "Comments on lines not shown above") {
		t.Fatalf("the comment on folded lines is not listed apart:\n%s", r.diffText())
	}
	tapButton(t, r.diff.box, "Show lines 24–25 in place")
	if strings.Contains(r.diffText(), "Comments on lines not shown above") {
		t.Errorf("the comment is still listed apart:\n%s", r.diffText())
	}
	if !strings.Contains(codeText(r), "line 25\n") {
		t.Error("line 25 was not unfolded")
	}
	card := r.diff.dv.cards[0]
	if card == nil {
		t.Fatal("the comment is not drawn")
	}
	at, ok := offsetIn(r.diff.box, card)
	if !ok {
		t.Fatal("the comment is not in the diff")
	}
	y := at.Y + r.diff.box.Position().Y
	if off, view := r.diff.scroll.Offset.Y, r.diff.scroll.Size().Height; y < off || y > off+view {
		t.Errorf("the comment at %v is out of view (%v–%v)", y, off, off+view)
	}
}

// TestRoundOutputAfterTheRound: when a Send back round watched in its
// live tab ends, the review opens again with the Transcript tab in
// front, on that round, drawn at the tab's height.
func TestRoundOutputAfterTheRound(t *testing.T) {
	svc := reviewService(t)
	svc.rounds = map[string]*review.Changeset{"1a2b3c4d": {Files: []*review.File{svc.changesets["1a2b3c4d"].File("src/new.go")}}}
	svc.roundLogs = map[string][]sandbox.RoundLog{"1a2b3c4d": {
		{Round: 1, Transcript: []byte("first round output\n"), Kept: true},
		{Round: 2, Prompt: "Keep the old name.", Transcript: []byte(strings.Repeat("second round output\n", 60)), Kept: true},
	}}
	nr := sentBackReview(t, svc)
	nr.Window.Resize(fyne.NewSize(1100, 720))
	if nr.tabs.SelectedIndex() != 2 {
		t.Errorf("tab %d in front, want the Transcript (2)", nr.tabs.SelectedIndex())
	}
	if nr.rounds.pick == nil || nr.rounds.pick.Selected != "Round 2" {
		t.Fatalf("the transcript shows %v, want Round 2", nr.rounds.pick)
	}
	if !strings.Contains(nr.rounds.grid.Text(), "second round output") {
		t.Errorf("round 2's transcript: %q", nr.rounds.grid.Text())
	}
	if h := nr.rounds.grid.Size().Height; h < 300 {
		t.Errorf("the transcript is drawn %v px high", h)
	}
	if !strings.Contains(nr.status.Text, "Round 2 is ready") {
		t.Errorf("status %q", nr.status.Text)
	}
	// The wheel over the transcript moves it at the faster step.
	d := fyne.CurrentApp().Driver()
	before := d.AbsolutePositionForObject(nr.rounds.grid).Y
	test.Scroll(nr.Window.Canvas(), d.AbsolutePositionForObject(nr.rounds.grid).AddXY(100, 100), 0, -25)
	if moved := before - d.AbsolutePositionForObject(nr.rounds.grid).Y; moved != 25*wheelBoost {
		t.Errorf("one wheel step moved the transcript %v px, want %v", moved, 25*wheelBoost)
	}
}

// TestThemeChangeRedrawsTheDiff: when the theme turns from light to dark
// while a file is shown, the diff is drawn again in the dark colours.
func TestThemeChangeRedrawsTheDiff(t *testing.T) {
	cs := changesetOf(t, [3]string{"a.txt", numbered(10, nil), numbered(10, map[int]string{5: "five"})})
	r := reviewOf(t, cs)
	a := fyne.CurrentApp()
	a.Settings().SetTheme(variantTheme{Theme(), theme.VariantLight})
	r.showFile()
	if r.diff.dv.pal.dark {
		t.Fatal("the light theme gave a dark palette")
	}
	a.Settings().SetTheme(variantTheme{Theme(), theme.VariantDark})
	if !r.diff.dv.pal.dark || !r.diff.dv.codes[0].pal.dark {
		t.Error("the diff kept the light colours after the theme turned dark")
	}
}
