package gui

import (
	"fmt"
	"image/color"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// bigChangeset is 200 modified files in ten folders (one line changed in
// each), an added file and a deleted one.
func bigChangeset(t testing.TB) *review.Changeset {
	t.Helper()
	objs := testObjects{}
	entry := objs.entry
	var changes []manifest.Change
	for d := range 10 {
		for i := range 20 {
			p := fmt.Sprintf("pkg/mod%02d/file%02d.go", d, i)
			changes = append(changes, manifest.Change{Kind: manifest.Modified, Path: p,
				Old: entry(p, "package x\n\nvar a = 1\n"), New: entry(p, fmt.Sprintf("package x\n\nvar a = %d\n", i+2))})
		}
	}
	changes = append(changes,
		manifest.Change{Kind: manifest.Added, Path: "docs/NEW.md", New: entry("docs/NEW.md", "# New\n\nText.\n")},
		manifest.Change{Kind: manifest.Deleted, Path: "old.txt", Old: entry("old.txt", "gone\n")})
	cs := objs.changeset(t, changes)
	return cs
}

func newBigReview(t *testing.T, svc *fakeService) *ReviewWindow {
	t.Helper()
	svc.changesets["1a2b3c4d"] = bigChangeset(t)
	return newTestReview(t, svc)
}

// rowOf is the drawn row of a file or folder (scrolled into view).
func (r *ReviewWindow) rowOf(t *testing.T, id string) *fileRow {
	t.Helper()
	r.files.list.ScrollTo(id)
	var found *fileRow
	for _, o := range liveObjects(r.Window.Content()) {
		if row, ok := o.(*fileRow); ok && row.row.id == id && row.Visible() {
			found = row
		}
	}
	if found == nil {
		t.Fatalf("no row for %s", id)
	}
	return found
}

// typeKeys types as the desktop driver does: into the focused widget, or
// on the canvas when nothing has the focus.
func typeKeys(c fyne.Canvas, s string) {
	for _, ch := range s {
		if f := c.Focused(); f != nil {
			f.TypedRune(ch)
		} else {
			c.OnTypedRune()(ch)
		}
	}
}

// tapRow clicks a row as the mouse does: the list takes the focus.
func (r *ReviewWindow) tapRow(t *testing.T, id string) {
	t.Helper()
	row := r.rowOf(t, id)
	pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(row)
	test.TapCanvas(r.Window.Canvas(), pos.Add(fyne.NewPos(row.Size().Width/2, row.Size().Height/2)))
}

func TestSummaryLine(t *testing.T) {
	r := newBigReview(t, reviewService(t))
	if got, want := r.files.summary.Text, "202 undecided   200 M · 1 A · 1 D   +203 −201"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	r.m.setFile(r.m.cs.File("old.txt"), false)
	r.m.setFile(r.m.cs.File("docs/NEW.md"), true)
	r.refresh()
	if got, want := r.files.summary.Text, "1 approved · 1 rejected · 200 undecided   200 M · 1 A · 1 D   +203 −201"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}

// TestFilter: the filter box shows the paths that contain its text; the
// keys walk only those, and work again after Escape or Return.
func TestFilter(t *testing.T) {
	r := newBigReview(t, reviewService(t))
	c := r.Window.Canvas()
	typeKeys(c, "/") // to the filter box
	if c.Focused() != r.files.filter {
		t.Fatalf("/ focused %v, want the filter box", c.Focused())
	}
	typeKeys(c, "MOD03/file1")
	if got := len(r.m.files); got != 10 {
		t.Errorf("filter shows %d files, want 10 (file10-19 of mod03)", got)
	}
	if diff := cmp.Diff([]string{"pkg/"}, r.m.tree.children[""]); diff != "" {
		t.Errorf("filtered tree top (-want +got):\n%s", diff)
	}
	if f := r.m.current(); f == nil || f.Path != "pkg/mod03/file10.go" {
		t.Errorf("cursor on %v, want the first shown file", f)
	}
	if !strings.HasSuffix(r.files.summary.Text, "(10 shown)") {
		t.Errorf("summary %q does not say how many are shown", r.files.summary.Text)
	}
	c.Focused().TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
	if c.Focused() != nil {
		t.Fatalf("Return left the focus on %v", c.Focused())
	}
	typeKeys(c, "nnA")
	if f := r.m.current(); f.Path != "pkg/mod03/file12.go" || r.m.fileState(f) != stateApproved {
		t.Errorf("after n n A: %s %s, want pkg/mod03/file12.go approved", f.Path, r.m.fileState(f))
	}
	typeKeys(c, strings.Repeat("n", 20))
	if f := r.m.current(); f.Path != "pkg/mod03/file19.go" {
		t.Errorf("n walked out of the filter to %s", f.Path)
	}
	// Emptied, the filter shows everything again, the cursor kept.
	r.files.filter.SetText("")
	if len(r.m.files) != 202 || r.m.current().Path != "pkg/mod03/file19.go" {
		t.Errorf("filter cleared: %d files, cursor on %s", len(r.m.files), r.m.current().Path)
	}
}

// TestFolderVerdict: a folder's files are approved or rejected together,
// with the folder buttons or the folder row's menu, and the folder row
// shows their state.
func TestFolderVerdict(t *testing.T) {
	svc := reviewService(t)
	r := newBigReview(t, svc)
	r.files.list.Select("pkg/mod02/")
	if r.files.folderLabel.Text != "Folder pkg/mod02/ (20 files):" {
		t.Errorf("folder bar says %q", r.files.folderLabel.Text)
	}
	test.Tap(r.files.folderBtns[0]) // Approve folder
	for _, f := range r.m.files {
		want := stateUndecided
		if strings.HasPrefix(f.Path, "pkg/mod02/") {
			want = stateApproved
		}
		if got := r.m.fileState(f); got != want {
			t.Fatalf("%s is %s after approving pkg/mod02/, want %s", f.Path, got, want)
		}
	}
	if !strings.Contains(r.files.summary.Text, "20 approved · 182 undecided") {
		t.Errorf("summary %q", r.files.summary.Text)
	}
	if got := svc.saved["1a2b3c4d"]; len(got.Files) != 20 {
		t.Errorf("saved %d decisions, want 20", len(got.Files))
	}
	if row := r.rowOf(t, "pkg/mod02/"); row.verdict.Resource.Name() != verdictIcon(stateApproved).Name() {
		t.Errorf("folder row icon %s, want approved", row.verdict.Resource.Name())
	}
	// One file of it rejected: the folder is partly approved.
	r.m.setFile(r.m.cs.File("pkg/mod02/file05.go"), false)
	r.refresh()
	if row := r.rowOf(t, "pkg/mod02/"); !row.partly.Visible() {
		t.Error("a folder with approved and rejected files has no partly mark")
	}

	// The menu of a folder row rejects the whole folder.
	row := r.rowOf(t, "pkg/mod02/")
	test.TapSecondary(row)
	menu := openMenu(t, r.Window.Canvas())
	if want := "Reject the 20 files in pkg/mod02/"; !menu[want] {
		t.Fatalf("folder menu %v has no %q", menu, want)
	}
	tapMenu(t, r.Window.Canvas(), "Reject the 20 files in pkg/mod02/")
	if got := r.m.filesState(r.m.under("pkg/mod02/")); got != stateRejected {
		t.Errorf("after the menu's Reject: folder %s", got)
	}

	// With a filter, a folder is what is shown of it.
	r.files.filter.SetText("file0")
	r.files.list.Select("pkg/mod04/")
	test.Tap(r.files.folderBtns[0])
	if got := len(r.m.under("pkg/mod04/")); got != 10 {
		t.Fatalf("filtered folder has %d files, want 10", got)
	}
	if got := r.m.fileState(r.m.cs.File("pkg/mod04/file15.go")); got != stateUndecided {
		t.Errorf("a file the filter hides was decided: %s", got)
	}
}

// openMenu is the items of the pop-up menu shown on c.
func openMenu(t *testing.T, c fyne.Canvas) map[string]bool {
	t.Helper()
	items := map[string]bool{}
	for _, o := range c.Overlays().List() {
		for _, w := range liveObjects(o) {
			if tx, ok := w.(*canvas.Text); ok {
				items[tx.Text] = true
			}
		}
	}
	return items
}

// tapMenu taps the menu item labelled text.
func tapMenu(t *testing.T, c fyne.Canvas, text string) {
	t.Helper()
	for _, o := range c.Overlays().List() {
		var item fyne.Tappable
		for _, w := range liveObjects(o) {
			if tp, ok := w.(fyne.Tappable); ok && strings.Contains(fmt.Sprintf("%T", w), "menuItem") {
				item = tp
			}
			if tx, ok := w.(*canvas.Text); ok && tx.Text == text && item != nil {
				item.Tapped(&fyne.PointEvent{})
				return
			}
		}
	}
	t.Fatalf("no menu item %q", text)
}

// liveObjects is o and everything drawn under it, as drawn (unlike
// test.LaidOutObjects, which builds widgets' insides anew).
func liveObjects(o fyne.CanvasObject) []fyne.CanvasObject {
	out := []fyne.CanvasObject{o}
	switch o := o.(type) {
	case *fyne.Container:
		for _, c := range o.Objects {
			out = append(out, liveObjects(c)...)
		}
	case fyne.Widget:
		for _, c := range test.WidgetRenderer(o).Objects() {
			out = append(out, liveObjects(c)...)
		}
	}
	return out
}

// TestKeysWithFocusInTheList: a click on a row gives the list the focus;
// the review keys still act, and Escape gives the focus back.
func TestKeysWithFocusInTheList(t *testing.T) {
	r := newTestReview(t, reviewService(t))
	c := r.Window.Canvas()
	r.tapRow(t, "src/main.go")
	if c.Focused() != r.files.list {
		t.Fatalf("a click on a row focused %v, want the list", c.Focused())
	}
	if f := r.m.current(); f.Path != "src/main.go" {
		t.Fatalf("the click showed %s", f.Path)
	}
	typeKeys(c, "jja")
	f := r.m.cs.File("src/main.go")
	if diff := cmp.Diff([]bool{false, false, true}, selection(r.m, f)); diff != "" {
		t.Errorf("j j a with the focus in the list (-want +got):\n%s", diff)
	}
	typeKeys(c, "nR")
	if g := r.m.current(); g.Path != "src/new.go" || r.m.fileState(g) != stateRejected {
		t.Errorf("n R: %s %s, want src/new.go rejected", g.Path, r.m.fileState(g))
	}
	c.Focused().TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
	if c.Focused() != nil {
		t.Errorf("Escape left the focus on %v", c.Focused())
	}
	typeKeys(c, "p")
	if g := r.m.current(); g.Path != "src/main.go" {
		t.Errorf("p after Escape: %s", g.Path)
	}
}

// TestKeysWhileTyping: in a text field the letters are text, not keys;
// Escape leaves the field and the keys act again. ? lists the keys.
func TestKeysWhileTyping(t *testing.T) {
	r := newTestReview(t, reviewService(t))
	c := r.Window.Canvas()
	r.files.list.Select("src/main.go")
	tapButton(t, r.diff.hunkBoxes[0], "Comment") // the first hunk's comment box, focused
	comment := r.diff.dv.draft.entry
	if c.Focused() != comment {
		t.Fatalf("the new comment box does not have the focus (%v has)", c.Focused())
	}
	typeKeys(c, "jar")
	if r.m.hunk != 0 || len(selection(r.m, r.m.current())) != 0 && selection(r.m, r.m.current())[0] {
		t.Errorf("typing in a comment moved or decided: hunk %d, %v", r.m.hunk, selection(r.m, r.m.current()))
	}
	if comment.Text != "jar" {
		t.Errorf("comment box %q, want jar", comment.Text)
	}
	c.Unfocus()

	c.Focus(r.files.filter)
	typeKeys(c, "j")
	if r.files.filter.Text != "j" || r.m.hunk != 0 {
		t.Errorf("j in the filter: filter %q, hunk %d", r.files.filter.Text, r.m.hunk)
	}
	r.files.filter.TypedKey(&fyne.KeyEvent{Name: fyne.KeyBackspace})
	r.files.filter.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
	if c.Focused() != nil {
		t.Fatalf("Escape left the focus on %v", c.Focused())
	}
	typeKeys(c, "j")
	if r.m.hunk != 1 {
		t.Errorf("j after Escape: hunk %d, want 1", r.m.hunk)
	}

	typeKeys(c, "?")
	if !strings.Contains(test.RenderToMarkup(c), "Review keys") {
		t.Error("? does not show the keys")
	}
}

// TestLongTextsDoNotWidenTheWindow: a 1000-character command line and a
// long status keep the window under 1280 px; the status ends at a word,
// and the whole text is in its tip.
func TestLongTextsDoNotWidenTheWindow(t *testing.T) {
	svc := reviewService(t)
	info := testInfo("1a2b3c4d")
	info.ScriptName, info.Command = "", []string{"sh", "-c", strings.Repeat("make test-everything && ", 42)}
	svc.infos = []sandbox.Info{info}
	svc.changesets["1a2b3c4d"] = bigChangeset(t)
	test.NewTempApp(t)
	r, err := NewReviewWindow(fyne.CurrentApp(), svc, info)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Window.Close)
	r.Window.Resize(fyne.NewSize(1280, 800))
	long := "Done: applied 180, merged 3, 17 in conflict (left untouched). Left out (runs on your machine): " + strings.Repeat("scripts/install-everything.sh, ", 20)
	r.status.SetText(long)
	if w := r.Window.Content().MinSize().Width; w > 1280 {
		t.Errorf("the review window needs %.0f px, want at most 1280", w)
	}
	shown := r.status.Shown()
	if !strings.HasSuffix(shown, "…") || len(shown) >= len(long) {
		t.Fatalf("status shows %q, want it shortened", shown)
	}
	cut := strings.TrimSuffix(shown, "…")
	if rest := long[len(cut):]; !strings.HasPrefix(rest, " ") && !strings.HasSuffix(cut, "/") {
		t.Errorf("status cut mid-word: %q|%q", cut, rest[:10])
	}
	if r.status.tipText() != long {
		t.Error("the status tip is not the whole text")
	}
	if !strings.HasSuffix(r.header.label.Shown(), "…") || !strings.Contains(r.header.label.tipText(), info.Command[2]) {
		t.Errorf("header shows %q; its tip must hold the whole command", r.header.label.Shown())
	}
}

func TestFitWords(t *testing.T) {
	measure := func(s string) float32 { return float32(len([]rune(s))) }
	for _, tc := range []struct {
		in    string
		avail float32
		want  string
	}{
		{"short", 10, "short"},
		{"cut at a word here", 12, "cut at a…"},
		{"~/src/project/deep/file.go", 16, "~/src/project/…"},
		{"Done: applied 3, merged 1.", 20, "Done: applied 3…"},
		{"Supercalifragilistic", 6, "Super…"},
		{"anything", 0, ""},
	} {
		if got := fitWords(tc.in, tc.avail, measure); got != tc.want {
			t.Errorf("fitWords(%q, %v) = %q, want %q", tc.in, tc.avail, got, tc.want)
		}
	}
}

// TestHeaderFollowsTheSandbox: after an apply the header shows the
// sandbox's state as the store has it.
func TestHeaderFollowsTheSandbox(t *testing.T) {
	svc := reviewService(t)
	w := newTestMain(t, svc)
	r := w.OpenReview(svc.infos[0])
	if !strings.Contains(r.header.label.Text, "ready for review") {
		t.Fatalf("header %q", r.header.label.Text)
	}
	if !r.promo.undoBtn.Disabled() {
		t.Error("Undo is offered before anything was applied")
	}
	r.m.setAll(true)
	r.refresh()
	r.confirm = func(_, _ string, answer func(bool)) { answer(true) }
	test.Tap(r.promo.applyBtn)
	if strings.Contains(r.header.label.Text, "ready for review") || !strings.Contains(r.header.label.Text, "applied") {
		t.Errorf("header after apply: %q", r.header.label.Text)
	}
	if r.promo.undoBtn.Disabled() {
		t.Error("Undo is not offered after an apply")
	}
	test.Tap(r.promo.undoBtn)
	if !strings.Contains(r.header.label.Text, "ready for review") || !r.promo.undoBtn.Disabled() {
		t.Errorf("after undo: header %q, Undo offered %v", r.header.label.Text, !r.promo.undoBtn.Disabled())
	}
}

// TestRowsShowState: a rejected file is greyed beside a red cross, a
// partly approved one says so, a file the user changed on their side is
// marked with a tip, and each row counts its lines.
func TestRowsShowState(t *testing.T) {
	svc := reviewService(t)
	svc.stale = sandbox.Staleness{Modified: 1, Paths: []string{"src/main.go"}}
	r := newTestReview(t, svc)
	main := r.m.cs.File("src/main.go")
	r.m.setHunk(main, 0, true)
	r.m.setFile(r.m.cs.File("old.txt"), false)
	r.refresh()

	undecided, rejected, partly := r.rowOf(t, "src/new.go"), r.rowOf(t, "old.txt"), r.rowOf(t, "src/main.go")
	if undecided.name.Color == rejected.name.Color || !rejected.name.TextStyle.Italic {
		t.Error("a rejected row looks like an undecided one")
	}
	if rejected.verdict.Resource.Name() == undecided.verdict.Resource.Name() {
		t.Error("a rejected row has the undecided icon")
	}
	if !partly.partly.Visible() || undecided.partly.Visible() {
		t.Errorf("partly mark: on main.go %v, on new.go %v", partly.partly.Visible(), undecided.partly.Visible())
	}
	if !partly.stale.Visible() || partly.stale.Tip != staleTip || undecided.stale.Visible() {
		t.Error("the file changed on the user's side is not marked (or another is)")
	}
	if partly.add.Text != "+3" || partly.del.Text != "−3" {
		t.Errorf("main.go counts %s %s, want +3 −3", partly.add.Text, partly.del.Text)
	}
	if !r.rowOf(t, "src/").stale.Visible() {
		t.Error("the folder of a file changed on the user's side is not marked")
	}
}

// TestWheelScrollsFaster: a wheel step over the list moves it further
// than fyne's step, and the rows stay clipped by the list (no row is a
// scrollable of its own).
func TestWheelScrollsFaster(t *testing.T) {
	r := newBigReview(t, reviewService(t))
	c := r.Window.Canvas()
	pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(r.files.list).AddXY(50, 50)
	before := r.files.list.GetScrollOffset()
	test.Scroll(c, pos, 0, -25)
	if got := r.files.list.GetScrollOffset() - before; got != 25*wheelBoost {
		t.Errorf("one wheel step scrolled the list %v px, want %v", got, 25*wheelBoost)
	}
	for _, o := range liveObjects(r.files.list) {
		if _, ok := o.(fyne.Scrollable); ok && o != fyne.CanvasObject(r.files.list) && !strings.Contains(fmt.Sprintf("%T", o), "Scroll") {
			t.Errorf("%T inside the list is scrollable: it would not be clipped", o)
			break
		}
	}
}

// TestLightThemeShowsUncheckedBoxes: the light theme's box outline is
// visible on white.
func TestLightThemeShowsUncheckedBoxes(t *testing.T) {
	c := Theme().Color(theme.ColorNameInputBorder, theme.VariantLight)
	r, g, b, _ := c.RGBA()
	if lum := (r + g + b) / 3 >> 8; lum > 0xa0 {
		t.Errorf("light box outline %v is too faint on white", c)
	}
}

// TestEscapeLeavesACommentBox: a comment box made with newCommentEntry
// keeps its letters and lets go on Escape, and the keys act again.
func TestEscapeLeavesACommentBox(t *testing.T) {
	r := newTestReview(t, reviewService(t))
	c := r.Window.Canvas()
	r.files.list.Select("src/main.go")
	comment := newCommentEntry("Comment on this hunk")
	r.diff.box.Add(comment)
	r.diff.box.Refresh()
	c.Focus(comment)
	typeKeys(c, "jk")
	if comment.Text != "jk" || r.m.hunk != 0 {
		t.Errorf("typing in the comment: %q, hunk %d", comment.Text, r.m.hunk)
	}
	c.Focused().TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
	if c.Focused() != nil {
		t.Fatalf("Escape left the focus on %v", c.Focused())
	}
	typeKeys(c, "j")
	if r.m.hunk != 1 {
		t.Errorf("j after Escape: hunk %d, want 1", r.m.hunk)
	}
}

// TestWheelScrollIsFaster: a scroll pane under wheelScroll moves a wheel
// step further than fyne's.
func TestWheelScrollIsFaster(t *testing.T) {
	test.NewTempApp(t)
	tall := canvas.NewRectangle(color.Transparent)
	tall.SetMinSize(fyne.NewSize(100, 5000))
	s := container.NewVScroll(tall)
	w := test.NewWindow(wheelScroll(s))
	t.Cleanup(w.Close)
	w.Resize(fyne.NewSize(200, 300))
	test.Scroll(w.Canvas(), fyne.NewPos(50, 50), 0, -25)
	if s.Offset.Y != 25*wheelBoost {
		t.Errorf("one wheel step moved %v px, want %v", s.Offset.Y, 25*wheelBoost)
	}
}

// TestListKeys: with the list focused, Down and Up select the next and
// previous rows, Left folds a folder; Escape with no field focused
// clears the filter.
func TestListKeys(t *testing.T) {
	r := newTestReview(t, reviewService(t))
	c := r.Window.Canvas()
	r.tapRow(t, "src/main.go")
	r.files.list.TypedKey(&fyne.KeyEvent{Name: fyne.KeyDown})
	if f := r.m.current(); f.Path != "src/new.go" {
		t.Errorf("Down: %s", f.Path)
	}
	r.files.list.TypedKey(&fyne.KeyEvent{Name: fyne.KeyUp})
	r.files.list.TypedKey(&fyne.KeyEvent{Name: fyne.KeyUp})
	if r.files.folder != "src/" {
		t.Errorf("Up Up: folder %q, want src/", r.files.folder)
	}
	r.files.list.TypedKey(&fyne.KeyEvent{Name: fyne.KeyLeft})
	if r.files.list.index("src/main.go") >= 0 {
		t.Error("Left did not fold src/")
	}
	r.files.list.TypedKey(&fyne.KeyEvent{Name: fyne.KeyRight})
	if r.files.list.index("src/main.go") < 0 {
		t.Error("Right did not unfold src/")
	}
	r.files.filter.SetText("main")
	c.Unfocus()
	c.OnTypedKey()(&fyne.KeyEvent{Name: fyne.KeyEscape})
	if r.files.filter.Text != "" || len(r.m.files) != 6 {
		t.Errorf("Escape: filter %q, %d files shown", r.files.filter.Text, len(r.m.files))
	}
}

// TestTooltips: hovering a shortened header shows its whole text on the
// window's tip layer; leaving hides it.
func TestTooltips(t *testing.T) {
	r := longCommandReview(t, strings.Repeat("make test-everything && ", 42))
	r.Window.Resize(fyne.NewSize(1280, 800))
	layer := tipLayerOf(r.Window.Canvas())
	if layer == nil {
		t.Fatal("the review window has no tip layer")
	}
	r.header.label.MouseIn(&desktop.MouseEvent{PointEvent: fyne.PointEvent{AbsolutePosition: fyne.NewPos(300, 10)}})
	if !layer.box.Visible() || layer.label.Text != r.header.label.Text {
		t.Errorf("hovering the header shows %v %q", layer.box.Visible(), layer.label.Text)
	}
	r.header.label.MouseOut()
	if layer.box.Visible() {
		t.Error("the tip stays after the pointer left")
	}
}
