package gui

import (
	"fmt"
	"image/color"
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

// Colours of diff lines (on the light and dark themes alike).
var (
	addedBG   = color.NRGBA{0x2e, 0xa0, 0x43, 0x40}
	removedBG = color.NRGBA{0xf8, 0x51, 0x49, 0x40}
	hunkBG    = color.NRGBA{0x38, 0x8b, 0xfd, 0x26}
)

// showFile renders the file under the cursor into the diff pane.
func (r *ReviewWindow) showFile() {
	r.diff.RemoveAll()
	r.hunkBoxes, r.hunkCheck = nil, nil
	f := r.m.current()
	if f == nil {
		r.diff.Add(widget.NewLabel("The agent changed nothing."))
		r.diff.Refresh()
		return
	}
	title := widget.NewLabelWithStyle(safetext.Line(f.Path), fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	approve := widget.NewButtonWithIcon("Approve file", theme.ConfirmIcon(), func() { r.m.setFile(f, true); r.refresh(); r.showFile() })
	reject := widget.NewButtonWithIcon("Reject file", theme.CancelIcon(), func() { r.m.setFile(f, false); r.refresh(); r.showFile() })
	state := widget.NewLabel(r.m.fileState(f).String())
	if r.roundOnly {
		approve.Disable()
		reject.Disable()
		state.SetText("round " + strconv.Itoa(r.round) + " only: read only")
	}
	r.fileState = state
	r.fileHead = container.NewBorder(nil, nil, container.NewHBox(widget.NewIcon(statusIcon(f)), title), container.NewHBox(state, approve, reject))
	r.diff.Add(r.fileHead)
	if reason := f.FlagReason(review.FlagHostExec); reason != "" {
		warn := widget.NewLabelWithStyle(strings.ToUpper(reason[:1])+reason[1:]+". Apply asks before writing it.", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
		warn.Importance = widget.WarningImportance
		warn.Wrapping = fyne.TextWrapWord
		r.diff.Add(container.NewBorder(nil, nil, widget.NewIcon(theme.NewWarningThemedResource(theme.WarningIcon())), nil, warn))
	}
	for _, line := range describeFile(f) {
		l := widget.NewLabel(line)
		if strings.HasPrefix(line, "⚠") {
			l.Importance = widget.WarningImportance
		}
		r.diff.Add(l)
	}
	comment := widget.NewEntry()
	comment.SetPlaceHolder("Comment on this file (kept with the decisions)")
	comment.SetText(r.m.d.Files[f.Path].Comment)
	comment.OnChanged = func(s string) { r.m.setFileComment(f.Path, s) }
	if r.roundOnly {
		comment.Disable()
	}
	r.diff.Add(comment)
	if len(f.Hunks) > 0 && !f.HunkSelectable() {
		r.diff.Add(widget.NewLabelWithStyle(fmt.Sprintf("A change like this (%s) is taken or left whole: approve or reject the file.", describe(f)), fyne.TextAlignLeading, fyne.TextStyle{Italic: true}))
	}
	for i, h := range f.Hunks {
		r.diff.Add(r.hunkView(f, i, h))
	}
	r.diff.Refresh()
	r.markHunk()
}

func describe(f *review.File) string {
	switch {
	case f.Status == review.Added:
		return "a new file"
	case f.Status == review.Deleted:
		return "a deletion"
	case f.IsSymlink():
		return "a symbolic link"
	}
	return string(f.Status)
}

// hunkView is one hunk: its toggle, its comment and its lines.
func (r *ReviewWindow) hunkView(f *review.File, i int, h review.Hunk) fyne.CanvasObject {
	header := fmt.Sprintf("Hunk %d/%d   @@ -%d,%d +%d,%d @@", i+1, len(f.Hunks), h.OldStart, h.OldLines, h.NewStart, h.NewLines)
	check := widget.NewCheck(header, nil)
	check.SetChecked(r.m.taken(f, i))
	check.OnChanged = func(on bool) {
		if on != r.m.taken(f, i) {
			r.m.setHunk(f, i, on)
			r.refresh()
			if !f.HunkSelectable() {
				r.showFile() // every hunk follows the file
			}
		}
	}
	r.hunkCheck = append(r.hunkCheck, check)
	comment := widget.NewEntry()
	comment.SetPlaceHolder("Comment on this hunk")
	comment.SetText(r.m.d.Files[f.Path].Hunks[i].Comment)
	comment.OnChanged = func(s string) { r.m.setHunkComment(f.Path, i, s) }
	if r.roundOnly {
		check.Disable()
		comment.Disable()
	}
	bg := canvas.NewRectangle(color.Transparent)
	top := container.NewStack(bg, container.NewBorder(nil, nil, check, nil, comment))
	// Long lines scroll sideways within their hunk; the pane only scrolls
	// down, so the buttons and comment boxes stay in view.
	box := container.NewVBox(top, container.NewHScroll(diffGrid(h)))
	r.hunkBoxes = append(r.hunkBoxes, box)
	return box
}

// diffGrid renders a hunk's lines with line numbers, added lines on green
// and removed lines on red.
func diffGrid(h review.Hunk) *widget.TextGrid {
	g := widget.NewTextGrid()
	add := &widget.CustomTextGridStyle{BGColor: addedBG, TextStyle: fyne.TextStyle{Monospace: true}}
	del := &widget.CustomTextGridStyle{BGColor: removedBG, TextStyle: fyne.TextStyle{Monospace: true}}
	oldN, newN := h.OldStart, h.NewStart
	if h.OldLines == 0 {
		oldN++
	}
	if h.NewLines == 0 {
		newN++
	}
	rows := make([]widget.TextGridRow, 0, len(h.Lines))
	for _, l := range h.Lines {
		var o, n string
		var style widget.TextGridStyle
		switch l.Kind {
		case review.Insert:
			n, style = fmt.Sprint(newN), add
			newN++
		case review.Delete:
			o, style = fmt.Sprint(oldN), del
			oldN++
		default:
			o, n = fmt.Sprint(oldN), fmt.Sprint(newN)
			oldN++
			newN++
		}
		// The line as it is, controls and bidi characters made visible.
		text := fmt.Sprintf("%5s %5s %s %s", o, n, l.Kind, strings.ReplaceAll(safetext.Line(l.Text), "\t", "    "))
		if l.NoEOL {
			text += "  ⏎ (no newline at end of file)"
		}
		row := widget.TextGridRow{Style: style}
		for _, c := range text {
			row.Cells = append(row.Cells, widget.TextGridCell{Rune: c})
		}
		rows = append(rows, row)
	}
	g.Rows = rows
	return g
}

// markHunk highlights the hunk under the keyboard cursor and scrolls to it.
func (r *ReviewWindow) markHunk() {
	for i, b := range r.hunkBoxes {
		bg := b.(*fyne.Container).Objects[0].(*fyne.Container).Objects[0].(*canvas.Rectangle)
		if i == r.m.hunk {
			bg.FillColor = hunkBG
		} else {
			bg.FillColor = color.Transparent
		}
		bg.Refresh()
	}
	if r.m.hunk < len(r.hunkBoxes) && r.m.hunk > 0 {
		r.diffScrl.ScrollToOffset(fyne.NewPos(0, r.hunkBoxes[r.m.hunk].Position().Y))
	} else {
		r.diffScrl.ScrollToTop()
	}
}
