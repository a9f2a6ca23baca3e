package gui

import (
	"fmt"
	"image/color"
	"slices"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// Comments in the diff: a click on a line number starts one on that line,
// Shift-click extends it to a range, the hunk bar's Comment button takes
// the hunk's lines. Each comment shows under the last line it is about.

// spotKey is a line a comment can end on: a number in the agent's
// version, or in the baseline's (old).
type spotKey struct {
	old bool
	n   int
}

// commentSpots places a file's comments while its lines are laid out.
type commentSpots struct {
	at          map[spotKey][]int
	placed      map[int]bool
	whole       []int // comments on the whole file
	n           int
	draftPlaced bool
}

func newCommentSpots(cs []review.Comment) *commentSpots {
	s := &commentSpots{at: map[spotKey][]int{}, placed: map[int]bool{}, n: len(cs)}
	for i, c := range cs {
		if c.Start == 0 && c.End == 0 {
			s.whole = append(s.whole, i)
			s.placed[i] = true
			continue
		}
		k := spotKey{c.Old, c.End}
		s.at[k] = append(s.at[k], i)
	}
	return s
}

// keys are the spots a line stands for: its number on each side it is on.
func (l *diffLine) keys() []spotKey {
	var out []spotKey
	if l.new != 0 {
		out = append(out, spotKey{false, l.new})
	}
	if l.old != 0 {
		out = append(out, spotKey{true, l.old})
	}
	return out
}

// take returns the comments that end on the row's lines, not placed yet,
// and whether the comment being written (d, a new one) ends there.
func (s *commentSpots) take(row codeRow, d *commentDraft, path string) (comments []int, draft bool) {
	lines := []*diffLine{row.left}
	if row.right != row.left {
		lines = append(lines, row.right)
	}
	for _, l := range lines {
		if l == nil {
			continue
		}
		for _, k := range l.keys() {
			for _, i := range s.at[k] {
				if !s.placed[i] {
					s.placed[i] = true
					comments = append(comments, i)
				}
			}
			if d != nil && d.path == path && d.index < 0 && !s.draftPlaced && k == (spotKey{d.old, d.end}) {
				s.draftPlaced, draft = true, true
			}
		}
	}
	slices.Sort(comments)
	return comments, draft
}

// unplaced are the comments on lines the view does not show.
func (s *commentSpots) unplaced() []int {
	var out []int
	for i := range s.n {
		if !s.placed[i] {
			out = append(out, i)
		}
	}
	return out
}

// numberOn is l's number on one side, if it is on that side.
func numberOn(l *diffLine, old bool) (int, bool) {
	if old {
		return l.old, l.old != 0
	}
	return l.new, l.new != 0
}

// lineClicked starts a comment on l, or with extend stretches the one
// being written to l.
func (r *ReviewWindow) lineClicked(l *diffLine, extend bool) {
	f := r.m.current()
	if f == nil {
		return
	}
	if d := r.dv.draft; extend && d != nil && d.path == f.Path && d.index < 0 {
		if n, ok := numberOn(l, d.old); ok {
			d.start, d.end = min(d.anchor, n), max(d.anchor, n)
			r.render(false)
			r.focusDraft()
			r.scrollToDraft()
			return
		}
	}
	n, old := l.number()
	r.startDraft(f.Path, old, n, n)
}

// startDraft opens the comment box under line end for lines start..end
// (of the baseline when old); text typed in a box already open is kept.
func (r *ReviewWindow) startDraft(path string, old bool, start, end int) {
	d := &commentDraft{path: path, old: old, anchor: start, start: start, end: end, index: -1}
	if prev := r.dv.draft; prev != nil && prev.index < 0 && prev.path == path {
		d.entry = prev.entry
	}
	r.dv.draft = d
	r.render(false)
	r.focusDraft()
	r.scrollToDraft()
}

// scrollToDraft brings the comment box into view when it is out of it.
func (r *ReviewWindow) scrollToDraft() {
	d := r.dv.draft
	if d == nil || d.box == nil {
		return
	}
	r.diffScrl.Refresh() // the content has grown by the box
	at, ok := offsetIn(r.diff, d.box)
	if !ok {
		return
	}
	y := at.Y + r.diff.Position().Y
	view, off := r.diffScrl.Size().Height, r.diffScrl.Offset.Y
	if y < off || y+d.box.Size().Height > off+view {
		r.diffScrl.ScrollToOffset(fyne.NewPos(0, max(y-view/3, 0)))
	}
}

// offsetIn is where o is inside c, found through the containers between
// them (the driver knows only what it has drawn).
func offsetIn(c *fyne.Container, o fyne.CanvasObject) (fyne.Position, bool) {
	for _, child := range c.Objects {
		if child == o {
			return child.Position(), true
		}
		if inner, ok := child.(*fyne.Container); ok {
			if p, ok := offsetIn(inner, o); ok {
				return child.Position().Add(p), true
			}
		}
	}
	return fyne.Position{}, false
}

// startEdit opens comment i of the shown file in a box.
func (r *ReviewWindow) startEdit(path string, i int) {
	c := r.m.comments(path)[i]
	d := &commentDraft{path: path, old: c.Old, anchor: c.Start, start: c.Start, end: c.End, index: i}
	r.dv.draft = d
	r.draftEntry().SetText(c.Text)
	r.render(false)
	r.focusDraft()
}

func (r *ReviewWindow) focusDraft() {
	if d := r.dv.draft; d != nil && d.entry != nil {
		r.Window.Canvas().Focus(d.entry)
	}
}

// draftCovers reports whether l is among the lines of the comment being
// written.
func (r *ReviewWindow) draftCovers(l *diffLine) bool {
	d := r.dv.draft
	if d == nil || d.index >= 0 || r.dv.file == nil || d.path != r.dv.file.Path {
		return false
	}
	n, ok := numberOn(l, d.old)
	return ok && n >= d.start && n <= d.end
}

// saveDraft keeps the comment being written in the decisions.
func (r *ReviewWindow) saveDraft() {
	d := r.dv.draft
	if d == nil {
		return
	}
	text := strings.TrimRight(d.entry.Text, " \n")
	if d.index >= 0 {
		r.m.editComment(d.path, d.index, text)
	} else {
		r.m.addComment(d.path, review.Comment{Text: text, Start: d.start, End: d.end, Old: d.old})
	}
	r.dv.draft = nil
	r.Window.Canvas().Unfocus() // the review keys work again
	r.refresh()
	r.render(false)
}

func (r *ReviewWindow) draftEntry() *fieldEntry {
	d := r.dv.draft
	if d.entry == nil {
		// Escape leaves it, and the review keys act again (keys.go).
		d.entry = r.newCommentEntry("A comment for the agent, sent with your next reply")
		d.entry.SetMinRowsVisible(3)
	}
	return d.entry
}

// draftView is the box a comment is written in.
func (r *ReviewWindow) draftView(f *review.File) fyne.CanvasObject {
	d := r.dv.draft
	entry := r.draftEntry()
	what := "New comment on " + linesText(d.start, d.end, d.old)
	if d.index >= 0 {
		what = "Editing the comment on " + linesText(d.start, d.end, d.old)
	} else if !d.old || d.start > 0 {
		what += " (Shift-click another line number to take a range)"
	}
	title := widget.NewLabelWithStyle(what, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	title.Truncation = fyne.TextTruncateEllipsis
	save := widget.NewButtonWithIcon("Save comment", theme.ConfirmIcon(), r.saveDraft)
	save.Importance = widget.HighImportance
	cancel := widget.NewButton("Cancel", func() {
		r.dv.draft = nil
		r.Window.Canvas().Unfocus()
		r.render(false)
	})
	d.box = commentCard(container.NewVBox(title, entry, container.NewHBox(save, cancel)), theme.Color(theme.ColorNamePrimary))
	return d.box
}

// commentView is comment i of f: where it is, its text, and what can be
// done with it; folded to a line once resolved.
func (r *ReviewWindow) commentView(f *review.File, i int) fyne.CanvasObject {
	if d := r.dv.draft; d != nil && d.path == f.Path && d.index == i {
		return r.draftView(f)
	}
	card := r.commentCardOf(f, i)
	if r.dv.cards != nil {
		r.dv.cards[i] = card
	}
	return card
}

// commentCardOf draws comment i of f.
func (r *ReviewWindow) commentCardOf(f *review.File, i int) fyne.CanvasObject {
	c := r.m.comments(f.Path)[i]
	where := linesText(c.Start, c.End, c.Old)
	where = strings.ToUpper(where[:1]) + where[1:]
	if c.Sent > 0 {
		where += fmt.Sprintf(" · sent in round %d", c.Sent)
	}
	resolve := widget.NewButtonWithIcon("Resolve", theme.ConfirmIcon(), func() {
		r.m.resolveComment(f.Path, i, !c.Resolved)
		r.refresh()
		r.render(false)
	})
	resolve.Importance = widget.LowImportance
	if r.roundOnly {
		resolve.Disable()
	}
	if c.Resolved {
		resolve.SetText("Reopen")
		resolve.SetIcon(theme.ContentUndoIcon())
		first, _, _ := strings.Cut(safetext.Line(strings.TrimSpace(c.Text)), "\n")
		line := widget.NewLabelWithStyle("Resolved · "+where+": "+first, fyne.TextAlignLeading, fyne.TextStyle{Italic: true})
		line.Truncation = fyne.TextTruncateEllipsis
		return commentCard(container.NewBorder(nil, nil, widget.NewIcon(theme.NewSuccessThemedResource(theme.ConfirmIcon())), resolve, line), theme.Color(theme.ColorNameSuccess))
	}
	head := widget.NewLabelWithStyle(where, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	head.Truncation = fyne.TextTruncateEllipsis
	buttons := container.NewHBox()
	if c.Sent == 0 && !r.roundOnly {
		edit := widget.NewButtonWithIcon("Edit", theme.DocumentCreateIcon(), func() { r.startEdit(f.Path, i) })
		del := widget.NewButtonWithIcon("Delete", theme.DeleteIcon(), func() {
			r.m.deleteComment(f.Path, i)
			r.refresh()
			r.render(false)
		})
		edit.Importance, del.Importance = widget.LowImportance, widget.LowImportance
		buttons.Add(edit)
		buttons.Add(del)
	}
	buttons.Add(resolve)
	body := widget.NewLabel(safetext.Text(c.Text))
	body.Wrapping = fyne.TextWrapWord
	accent := theme.Color(theme.ColorNamePrimary)
	if c.Sent > 0 {
		accent = theme.Color(theme.ColorNameDisabled)
	}
	return commentCard(container.NewVBox(container.NewBorder(nil, nil, nil, buttons, head), body), accent)
}

// foldedCommentView is comment i of f, on lines the view folds, with a
// button that unfolds them and shows it in place.
func (r *ReviewWindow) foldedCommentView(f *review.File, i int) fyne.CanvasObject {
	c := r.m.comments(f.Path)[i]
	show := widget.NewButtonWithIcon("Show "+linesText(c.Start, c.End, c.Old)+" in place", theme.VisibilityIcon(), func() {
		r.revealComment(f.Path, i)
	})
	show.Importance = widget.LowImportance
	return container.NewVBox(container.NewHBox(show), r.commentView(f, i))
}

// revealComment unfolds the lines comment i of the shown file p is
// about (a gap of unchanged lines, the end of a long hunk, a generated
// file's diff) and scrolls to it when it is out of view.
func (r *ReviewWindow) revealComment(p string, i int) {
	f := r.m.current()
	cs := r.m.comments(p)
	if f == nil || f.Path != p || i < 0 || i >= len(cs) {
		return
	}
	c := cs[i]
	if c.End > 0 {
		r.dv.generated[p] = true
		for g, gap := range r.dv.gaps {
			first := gap.newStart
			if c.Old {
				first = gap.oldStart
			}
			if c.End >= first && c.End < first+gap.n {
				r.dv.opened[p][g].top = gap.n
			}
		}
		for h, lines := range r.dv.hunks {
			for _, l := range lines {
				if n, ok := numberOn(&l, c.Old); ok && n == c.End {
					r.dv.longHunks[p+"\x00"+strconv.Itoa(h)] = true
				}
			}
		}
	}
	r.render(false)
	card := r.dv.cards[i]
	if card == nil {
		return
	}
	r.diffScrl.Refresh()
	if at, ok := offsetIn(r.diff, card); ok {
		y := at.Y + r.diff.Position().Y
		view, off := r.diffScrl.Size().Height, r.diffScrl.Offset.Y
		if y < off || y+card.Size().Height > off+view {
			r.diffScrl.ScrollToOffset(fyne.NewPos(0, max(y-view/3, 0)))
		}
	}
}

// commentCard sets a comment apart from the code: a panel with a coloured
// edge.
func commentCard(content fyne.CanvasObject, accent color.Color) fyne.CanvasObject {
	bg := canvas.NewRectangle(theme.Color(theme.ColorNameInputBackground))
	bg.CornerRadius = theme.InputRadiusSize()
	edge := canvas.NewRectangle(accent)
	edge.SetMinSize(fyne.NewSize(3, 0))
	return container.NewStack(bg, container.NewBorder(nil, nil, edge, nil, container.NewPadded(content)))
}

// linesText says which lines a comment is about.
func linesText(start, end int, old bool) string {
	var s string
	switch {
	case start == 0 && end == 0:
		return "the whole file"
	case start == end:
		s = fmt.Sprintf("line %d", start)
	default:
		s = fmt.Sprintf("lines %d–%d", start, end)
	}
	if old {
		s += " of the baseline"
	}
	return s
}
