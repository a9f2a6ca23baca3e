package gui

import (
	"fmt"
	"image"
	"image/color"
	"strconv"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/internal/bytesize"
	"github.com/airlock-dev/airlock/review"
)

// The diff's body: an image file's sides, or its hunks, each under a bar
// with its verdict (painted as it changes, the cursor's hunk outlined),
// and the unchanged lines between them folded.

// gapOpen is how many unchanged lines of a gap are shown after the hunk
// above it (top) and before the hunk below it (bottom).
type gapOpen struct{ top, bottom int }

// hunkBar is what shows a hunk's verdict: its bar and its lines.
type hunkBar struct {
	bg     *canvas.Rectangle // the cursor's highlight
	stripe *canvas.Rectangle // the verdict's colour
	state  *widget.Button    // the verdict; a tap flips it
	codes  []*codeView
}

// fileBody adds the file's content: the image pair, or the hunks between
// the unchanged stretches, or a generated file's fold.
func (p *diffPane) fileBody(f *review.File, spots *commentSpots) {
	if f.Binary {
		if p.dv.images {
			appendTo(p.box, p.imageView(f, p.dv.oldImg, p.dv.newImg))
		}
		return
	}
	if len(f.Hunks) == 0 {
		return
	}
	if why, gen := isGenerated(f); gen && !p.dv.generated[f.Path] {
		show := widget.NewButtonWithIcon("Show the diff", theme.VisibilityIcon(), func() {
			p.dv.generated[f.Path] = true
			p.render(false)
		})
		show.Importance = widget.LowImportance
		note := widget.NewLabelWithStyle(fmt.Sprintf("Generated file (%s): its diff of +%d −%d lines is folded.", why, f.Added, f.Removed), fyne.TextAlignLeading, fyne.TextStyle{Italic: true})
		note.Truncation = fyne.TextTruncateEllipsis
		appendTo(p.box, container.NewBorder(nil, nil, widget.NewIcon(theme.FileApplicationIcon()), show, note))
		return
	}
	for i, h := range f.Hunks {
		p.gapView(f, i, p.box, spots)
		appendTo(p.box, p.hunkView(f, i, h, spots))
	}
	p.gapView(f, len(f.Hunks), p.box, spots)
}

// hunkView is one hunk: its bar, then its lines with the comments under
// them, on a background that marks the keyboard's hunk.
func (p *diffPane) hunkView(f *review.File, i int, h review.Hunk, spots *commentSpots) fyne.CanvasObject {
	bar := hunkBar{bg: canvas.NewRectangle(color.Transparent), stripe: canvas.NewRectangle(color.Transparent)}
	bar.stripe.SetMinSize(fyne.NewSize(5, 0))
	bar.state = widget.NewButton("", func() {
		p.m.setHunk(f, i, !p.m.taken(f, i))
		p.decided()
	})
	p.hunkCheck = append(p.hunkCheck, bar.state)
	head := widget.NewLabelWithStyle(fmt.Sprintf("Hunk %d/%d   @@ -%d,%d +%d,%d @@", i+1, len(f.Hunks), h.OldStart, h.OldLines, h.NewStart, h.NewLines),
		fyne.TextAlignLeading, fyne.TextStyle{Monospace: true})
	head.Truncation = fyne.TextTruncateEllipsis
	comment := widget.NewButtonWithIcon("Comment", theme.MailComposeIcon(), func() {
		old, start, end := hunkRange(h)
		p.startDraft(f.Path, old, start, end)
	})
	comment.Importance = widget.LowImportance
	if p.readOnly {
		bar.state.Disable()
		comment.Disable()
	}
	lines := container.NewVBox()
	shown := p.dv.hunks[i]
	key := f.Path + "\x00" + strconv.Itoa(i)
	if len(shown) > maxHunkShown && !p.dv.longHunks[key] {
		shown = shown[:maxHunkShown]
	}
	bar.codes = p.addLines(lines, shown, spots)
	if len(shown) < len(p.dv.hunks[i]) {
		rest := len(p.dv.hunks[i]) - len(shown)
		appendTo(lines, container.NewHBox(widget.NewButtonWithIcon(fmt.Sprintf("Show the other %d lines of this hunk", rest), theme.MoreVerticalIcon(), func() {
			p.dv.longHunks[key] = true
			p.render(false)
		})))
	}
	p.dv.bars = append(p.dv.bars, bar)
	p.paintHunk(f, i)
	top := container.NewBorder(nil, nil, container.NewHBox(bar.stripe, bar.state), comment, head)
	box := container.NewStack(bar.bg, container.NewVBox(top, lines))
	p.hunkBoxes = append(p.hunkBoxes, box)
	return box
}

// hunkRange is the lines a comment on a whole hunk is about: its added
// and changed lines in the agent's version, or the removed ones for a
// hunk that only removes.
func hunkRange(h review.Hunk) (old bool, start, end int) {
	if h.NewLines > 0 {
		return false, h.NewStart, h.NewStart + h.NewLines - 1
	}
	return true, h.OldStart, h.OldStart + max(h.OldLines, 1) - 1
}

// hunkState is what the bar of hunk i of f says.
func (p *diffPane) hunkState(f *review.File, i int) fileState {
	if p.m.taken(f, i) {
		return stateApproved
	}
	fd := p.m.d.Files[f.Path]
	v := fd.Hunks[i].Verdict
	if v == review.Undecided || !f.HunkSelectable() {
		v = fd.Verdict
	}
	if v == review.Reject {
		return stateRejected
	}
	return stateUndecided
}

// paintHunk shows hunk i's verdict on its bar: a green tick, a red cross
// with its lines faded (they will not be applied), or a plain circle.
func (p *diffPane) paintHunk(f *review.File, i int) {
	b := p.dv.bars[i]
	st := p.hunkState(f, i)
	switch st {
	case stateApproved:
		b.state.SetText("Approved")
		b.state.SetIcon(theme.ConfirmIcon())
		b.state.Importance = widget.SuccessImportance
		b.stripe.FillColor = p.dv.pal.approvedC
	case stateRejected:
		b.state.SetText("Rejected")
		b.state.SetIcon(theme.CancelIcon())
		b.state.Importance = widget.DangerImportance
		b.stripe.FillColor = p.dv.pal.rejectedC
	default:
		b.state.SetText("Undecided")
		b.state.SetIcon(theme.RadioButtonIcon())
		b.state.Importance = widget.MediumImportance
		b.stripe.FillColor = p.dv.pal.undecidedC
	}
	b.state.Refresh()
	b.stripe.Refresh()
	for _, c := range b.codes {
		if c.dimmed != (st == stateRejected) {
			c.dimmed = st == stateRejected
			c.Refresh()
		}
	}
}

// updateHunks shows every hunk's verdict again.
func (p *diffPane) updateHunks() {
	f := p.m.current()
	if f == nil || f != p.dv.file {
		return
	}
	for i := range p.dv.bars {
		p.paintHunk(f, i)
	}
}

// markHunk highlights the hunk under the keyboard cursor and scrolls to it.
func (p *diffPane) markHunk() {
	p.paintCursor()
	if p.m.hunk < len(p.hunkBoxes) && p.m.hunk > 0 {
		y := p.hunkBoxes[p.m.hunk].Position().Y + p.box.Position().Y - 2*theme.Padding()
		p.scroll.ScrollToOffset(fyne.NewPos(0, y))
	} else {
		p.scroll.ScrollToTop()
	}
}

// paintCursor outlines the hunk under the keyboard cursor.
func (p *diffPane) paintCursor() {
	for i, b := range p.dv.bars {
		if i == p.m.hunk {
			b.bg.FillColor = p.dv.pal.cursorBG
			b.bg.StrokeColor = theme.Color(theme.ColorNamePrimary)
			b.bg.StrokeWidth = 2
		} else {
			b.bg.FillColor, b.bg.StrokeColor, b.bg.StrokeWidth = color.Transparent, color.Transparent, 0
		}
		b.bg.Refresh()
	}
}

// gapView adds the unchanged lines before hunk i (after the last hunk
// when i is their number): those the user opened, and a fold with the
// buttons that open more.
func (p *diffPane) gapView(f *review.File, i int, to *fyne.Container, spots *commentSpots) {
	g := p.dv.gaps[i]
	if g.n <= 0 {
		return
	}
	open := &p.dv.opened[f.Path][i]
	top, bottom := min(open.top, g.n), min(open.bottom, g.n)
	if top+bottom > g.n {
		bottom = g.n - top
	}
	p.addLines(to, gapLines(g, 0, top, p.dv.new), spots)
	if hidden := g.n - top - bottom; hidden > 0 {
		more := func(n int) func() {
			return func() {
				switch {
				case n >= hidden:
					open.top += hidden
				case i == 0: // before the first hunk: towards it
					open.bottom += n
				case i == len(f.Hunks): // after the last: away from it
					open.top += n
				default:
					open.top += n / 2
					open.bottom += n - n/2
				}
				p.render(false)
			}
		}
		label := widget.NewLabelWithStyle(fmt.Sprintf("⋯ %d unchanged %s", hidden, plural(hidden, "line", "lines")), fyne.TextAlignLeading, fyne.TextStyle{Italic: true})
		row := container.NewHBox(widget.NewIcon(theme.MoreVerticalIcon()), label)
		if hidden > contextStep {
			b := widget.NewButton(fmt.Sprintf("Show %d more", contextStep), more(contextStep))
			b.Importance = widget.LowImportance
			row.Add(b)
		}
		all := widget.NewButton("Show all", more(hidden))
		all.Importance = widget.LowImportance
		row.Add(all)
		appendTo(to, row)
	}
	p.addLines(to, gapLines(g, g.n-bottom, g.n, p.dv.new), spots)
}

// addLines adds lines as code views, cut after each line a comment is
// about to put the comment under it. It returns the code views.
func (p *diffPane) addLines(to *fyne.Container, lines []diffLine, spots *commentSpots) []*codeView {
	if len(lines) == 0 {
		return nil
	}
	var rows []codeRow
	if p.dv.split {
		for _, s := range splitRows(lines) {
			rows = append(rows, codeRow{s.left, s.right})
		}
	} else {
		for k := range lines {
			rows = append(rows, codeRow{left: &lines[k]})
		}
	}
	var out []*codeView
	flush := func(part []codeRow) {
		if len(part) == 0 {
			return
		}
		v := newCodeView(part, p.dv.split, p.dv.pal, p.dv.digits)
		v.hint = p.scroll.Size().Width - 4*theme.Padding()
		if !p.readOnly {
			v.onNumber = func(l *diffLine, extend bool) { p.lineClicked(l, extend) }
		}
		v.selected = p.draftCovers
		out = append(out, v)
		p.dv.codes = append(p.dv.codes, v)
		appendTo(to, v)
	}
	start := 0
	for k, row := range rows {
		comments, draft := spots.take(row, p.dv.draft, p.m.current().Path)
		if len(comments) == 0 && !draft {
			continue
		}
		flush(rows[start : k+1])
		start = k + 1
		for _, i := range comments {
			appendTo(to, p.commentView(p.m.current(), i))
		}
		if draft {
			appendTo(to, p.draftView(p.m.current()))
		}
	}
	flush(rows[start:])
	return out
}

// imageView shows an image file's two sides, old beside new.
func (p *diffPane) imageView(f *review.File, old, new image.Image) fyne.CanvasObject {
	side := func(title string, img image.Image, s *review.Side) fyne.CanvasObject {
		if img == nil {
			return widget.NewLabelWithStyle(title+": none", fyne.TextAlignCenter, fyne.TextStyle{Italic: true})
		}
		b := img.Bounds()
		pic := canvas.NewImageFromImage(img)
		pic.FillMode = canvas.ImageFillContain
		pic.ScaleMode = canvas.ImageScaleFastest
		w := float32(min(b.Dx(), imageMaxWidth))
		pic.SetMinSize(fyne.NewSize(w, w*float32(b.Dy())/float32(b.Dx())))
		caption := widget.NewLabelWithStyle(fmt.Sprintf("%s: %d×%d, %s", title, b.Dx(), b.Dy(), bytesize.Format(s.Size)), fyne.TextAlignCenter, fyne.TextStyle{})
		return container.NewBorder(caption, nil, nil, nil, container.NewCenter(pic))
	}
	return container.NewGridWithColumns(2, side("Before", old, f.Old), side("After", new, f.New))
}

// appendTo adds o to c without laying c out: the pane is laid out once
// when it is complete (Add lays out every time, quadratic in the lines).
func appendTo(c *fyne.Container, o fyne.CanvasObject) {
	c.Objects = append(c.Objects, o)
}
