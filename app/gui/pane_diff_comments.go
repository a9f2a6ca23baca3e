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
func (p *diffPane) lineClicked(l *diffLine, extend bool) {
	f := p.m.current()
	if f == nil {
		return
	}
	if d := p.dv.draft; extend && d != nil && d.path == f.Path && d.index < 0 {
		if n, ok := numberOn(l, d.old); ok {
			d.start, d.end = min(d.anchor, n), max(d.anchor, n)
			p.render(false)
			p.focusDraft()
			p.scrollToDraft()
			return
		}
	}
	n, old := l.number()
	p.startDraft(f.Path, old, n, n)
}

// startDraft opens the comment box under line end for lines start..end
// (of the baseline when old); text typed in a box already open is kept.
func (p *diffPane) startDraft(path string, old bool, start, end int) {
	d := &commentDraft{path: path, old: old, anchor: start, start: start, end: end, index: -1}
	if prev := p.dv.draft; prev != nil && prev.index < 0 && prev.path == path {
		d.entry = prev.entry
	}
	p.dv.draft = d
	p.render(false)
	p.focusDraft()
	p.scrollToDraft()
}

// scrollToDraft brings the comment box into view when it is out of it.
func (p *diffPane) scrollToDraft() {
	d := p.dv.draft
	if d == nil || d.box == nil {
		return
	}
	p.scroll.Refresh() // the content has grown by the box
	at, ok := offsetIn(p.box, d.box)
	if !ok {
		return
	}
	y := at.Y + p.box.Position().Y
	view, off := p.scroll.Size().Height, p.scroll.Offset.Y
	if y < off || y+d.box.Size().Height > off+view {
		p.scroll.ScrollToOffset(fyne.NewPos(0, max(y-view/3, 0)))
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
func (p *diffPane) startEdit(path string, i int) {
	c := p.m.comments(path)[i]
	d := &commentDraft{path: path, old: c.Old, anchor: c.Start, start: c.Start, end: c.End, index: i}
	p.dv.draft = d
	p.draftEntry().SetText(c.Text)
	p.render(false)
	p.focusDraft()
}

func (p *diffPane) focusDraft() {
	if d := p.dv.draft; d != nil && d.entry != nil {
		p.win.Canvas().Focus(d.entry)
	}
}

// draftCovers reports whether l is among the lines of the comment being
// written.
func (p *diffPane) draftCovers(l *diffLine) bool {
	d := p.dv.draft
	if d == nil || d.index >= 0 || p.dv.file == nil || d.path != p.dv.file.Path {
		return false
	}
	n, ok := numberOn(l, d.old)
	return ok && n >= d.start && n <= d.end
}

// saveDraft keeps the comment being written in the decisions.
func (p *diffPane) saveDraft() {
	d := p.dv.draft
	if d == nil {
		return
	}
	text := strings.TrimRight(d.entry.Text, " \n")
	if d.index >= 0 {
		p.m.editComment(d.path, d.index, text)
	} else {
		p.m.addComment(d.path, review.Comment{Text: text, Start: d.start, End: d.end, Old: d.old})
	}
	p.dv.draft = nil
	p.win.Canvas().Unfocus() // the review keys work again
	p.ev.refresh()
	p.render(false)
}

func (p *diffPane) draftEntry() *fieldEntry {
	d := p.dv.draft
	if d.entry == nil {
		// Escape leaves it, and the review keys act again (fields.go).
		d.entry = newCommentEntry("A comment for the agent, sent with your next reply")
		d.entry.SetMinRowsVisible(3)
	}
	return d.entry
}

// draftView is the box a comment is written in.
func (p *diffPane) draftView(f *review.File) fyne.CanvasObject {
	d := p.dv.draft
	entry := p.draftEntry()
	what := "New comment on " + linesText(d.start, d.end, d.old)
	if d.index >= 0 {
		what = "Editing the comment on " + linesText(d.start, d.end, d.old)
	} else if !d.old || d.start > 0 {
		what += " (Shift-click another line number to take a range)"
	}
	title := widget.NewLabelWithStyle(what, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	title.Truncation = fyne.TextTruncateEllipsis
	save := widget.NewButtonWithIcon("Save comment", theme.ConfirmIcon(), p.saveDraft)
	save.Importance = widget.HighImportance
	cancel := widget.NewButton("Cancel", func() {
		p.dv.draft = nil
		p.win.Canvas().Unfocus()
		p.render(false)
	})
	d.box = commentCard(container.NewVBox(title, entry, container.NewHBox(save, cancel)), theme.Color(theme.ColorNamePrimary))
	return d.box
}

// commentView is comment i of f: where it is, its text, and what can be
// done with it; folded to a line once resolved.
func (p *diffPane) commentView(f *review.File, i int) fyne.CanvasObject {
	if d := p.dv.draft; d != nil && d.path == f.Path && d.index == i {
		return p.draftView(f)
	}
	card := p.commentCardOf(f, i)
	if p.dv.cards != nil {
		p.dv.cards[i] = card
	}
	return card
}

// commentCardOf draws comment i of f.
func (p *diffPane) commentCardOf(f *review.File, i int) fyne.CanvasObject {
	c := p.m.comments(f.Path)[i]
	where := linesText(c.Start, c.End, c.Old)
	where = strings.ToUpper(where[:1]) + where[1:]
	if c.Sent > 0 {
		where += fmt.Sprintf(" · sent in round %d", c.Sent)
	}
	resolve := widget.NewButtonWithIcon("Resolve", theme.ConfirmIcon(), func() {
		p.m.resolveComment(f.Path, i, !c.Resolved)
		p.ev.refresh()
		p.render(false)
	})
	resolve.Importance = widget.LowImportance
	if p.readOnly {
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
	if c.Sent == 0 && !p.readOnly {
		edit := widget.NewButtonWithIcon("Edit", theme.DocumentCreateIcon(), func() { p.startEdit(f.Path, i) })
		del := widget.NewButtonWithIcon("Delete", theme.DeleteIcon(), func() {
			p.m.deleteComment(f.Path, i)
			p.ev.refresh()
			p.render(false)
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
func (p *diffPane) foldedCommentView(f *review.File, i int) fyne.CanvasObject {
	c := p.m.comments(f.Path)[i]
	show := widget.NewButtonWithIcon("Show "+linesText(c.Start, c.End, c.Old)+" in place", theme.VisibilityIcon(), func() {
		p.revealComment(f.Path, i)
	})
	show.Importance = widget.LowImportance
	return container.NewVBox(container.NewHBox(show), p.commentView(f, i))
}

// revealComment unfolds the lines comment i of the shown file path is
// about (a gap of unchanged lines, the end of a long hunk, a generated
// file's diff) and scrolls to it when it is out of view.
func (p *diffPane) revealComment(path string, i int) {
	f := p.m.current()
	cs := p.m.comments(path)
	if f == nil || f.Path != path || i < 0 || i >= len(cs) {
		return
	}
	c := cs[i]
	if c.End > 0 {
		p.dv.generated[path] = true
		for g, gap := range p.dv.gaps {
			first := gap.newStart
			if c.Old {
				first = gap.oldStart
			}
			if c.End >= first && c.End < first+gap.n {
				p.dv.opened[path][g].top = gap.n
			}
		}
		for h, lines := range p.dv.hunks {
			for _, l := range lines {
				if n, ok := numberOn(&l, c.Old); ok && n == c.End {
					p.dv.longHunks[path+"\x00"+strconv.Itoa(h)] = true
				}
			}
		}
	}
	p.render(false)
	card := p.dv.cards[i]
	if card == nil {
		return
	}
	p.scroll.Refresh()
	if at, ok := offsetIn(p.box, card); ok {
		y := at.Y + p.box.Position().Y
		view, off := p.scroll.Size().Height, p.scroll.Offset.Y
		if y < off || y+card.Size().Height > off+view {
			p.scroll.ScrollToOffset(fyne.NewPos(0, max(y-view/3, 0)))
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

// newCommentEntry is a comment box for the diff pane: multi-line, and
// Escape leaves it so that the review keys work again.
func newCommentEntry(placeholder string) *fieldEntry {
	e := newFieldMultiLine()
	e.SetPlaceHolder(placeholder)
	e.SetMinRowsVisible(1)
	return e
}
