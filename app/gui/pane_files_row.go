package gui

import (
	"fmt"
	"image/color"
	"path"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/heldreq"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// indentStep is how far a folder's contents sit right of it.
const indentStep = 14

// staleTip says what the mark on a file the user changed means.
const staleTip = "You changed this file in the project since the baseline. Applying the agent's change merges it into yours three ways; a conflict leaves your file as it is."

// rowIcon is the size of a row's icons, rowGap the room between its
// parts.
const (
	rowIcon = 16
	rowGap  = 4
)

// fileRow draws one row: fold arrow (folders), the verdict, the kind of
// change, the name, warnings, the user's-side mark, "partly", and the
// lines added and removed. It is drawn with canvas objects of fixed
// sizes, not labels, so that rows are compact (a label pads itself by
// the theme's, and a list's rows do not take a theme of their own).
type fileRow struct {
	widget.BaseWidget
	l   *fileList
	row listRow

	indent  *canvas.Rectangle
	fold    *tapIcon
	verdict *canvas.Image
	letter  *canvas.Text
	name    *canvas.Text
	label   string // the whole name; name shows it fitted
	warn    *tipIcon
	stale   *tipIcon
	partly  *canvas.Text
	host    *canvas.Text // an action's host
	add     *canvas.Text
	del     *canvas.Text
	box     *fyne.Container
}

func newFileRow(l *fileList) *fileRow {
	w := &fileRow{l: l,
		indent:  canvas.NewRectangle(color.Transparent),
		verdict: canvas.NewImageFromResource(theme.RadioButtonIcon()),
		letter:  canvas.NewText("M", theme.Color(theme.ColorNameForeground)),
		name:    canvas.NewText("name", theme.Color(theme.ColorNameForeground)),
		warn:    newTipIcon(theme.NewWarningThemedResource(theme.WarningIcon()), ""),
		stale:   newTipIcon(theme.NewPrimaryThemedResource(theme.AccountIcon()), staleTip),
		partly:  canvas.NewText("partly", theme.Color(theme.ColorNameWarning)),
		host:    canvas.NewText("", theme.Color(theme.ColorNamePlaceHolder)),
		add:     canvas.NewText("+0", theme.Color(theme.ColorNameSuccess)),
		del:     canvas.NewText("−0", theme.Color(theme.ColorNameError)),
	}
	w.verdict.FillMode = canvas.ImageFillContain
	w.verdict.SetMinSize(fyne.NewSize(rowIcon, rowIcon))
	w.fold = newTapIcon(theme.MenuDropDownIcon(), func() {
		if isFolder(w.row.id) || w.row.id == actionsGroup {
			l.toggle(w.row.id)
		}
	})
	w.letter.TextStyle = fyne.TextStyle{Monospace: true}
	w.partly.TextStyle = fyne.TextStyle{Italic: true}
	w.add.TextStyle = fyne.TextStyle{Monospace: true}
	w.del.TextStyle = fyne.TextStyle{Monospace: true}
	size := theme.TextSize() - 1
	w.host.Hide()
	for _, t := range []*canvas.Text{w.letter, w.name, w.partly, w.host, w.add, w.del} {
		t.TextSize = size
	}
	// The last gap keeps the counts clear of the scroll bar.
	w.box = container.New(&lineLayout{fill: 4, gap: rowGap, onFill: w.fitName},
		w.indent, w.fold, w.verdict, w.letter, w.name, w.host, w.warn, w.stale, w.partly, w.add, w.del, gap(2))
	w.ExtendBaseWidget(w)
	return w
}

// fitName shows as much of the name as width holds, ending at a word.
func (w *fileRow) fitName(width float32) {
	shown := fitWords(w.label, width, func(s string) float32 {
		return fyne.MeasureText(s, w.name.TextSize, w.name.TextStyle).Width
	})
	if shown != w.name.Text {
		w.name.Text = shown
		w.name.Refresh()
	}
}

func (w *fileRow) CreateRenderer() fyne.WidgetRenderer { return widget.NewSimpleRenderer(w.box) }

// Tapped selects the row, as a click on a list's row does: the desktop
// driver gives a click to the innermost widget that takes taps of either
// button, and a row takes right clicks (TappedSecondary), so the list's
// own item under it never sees the click.
func (w *fileRow) Tapped(*fyne.PointEvent) {
	i := w.l.index(w.row.id)
	if i < 0 {
		return
	}
	if c := fyne.CurrentApp().Driver().CanvasForObject(w.l); c != nil {
		c.Focus(w.l) // the review keys come through the list
	}
	w.l.List.Select(i)
}

// TappedSecondary offers, on a right click, to approve or reject the
// row's file, or every shown file of its folder.
func (w *fileRow) TappedSecondary(ev *fyne.PointEvent) {
	p := w.l.p
	if p.readOnly {
		return
	}
	var items []*fyne.MenuItem
	if id := w.row.action; id != 0 {
		items = append(items,
			fyne.NewMenuItem("Approve action", func() { p.ev.decideAction(id, true) }),
			fyne.NewMenuItem("Reject action", func() { p.ev.decideAction(id, false) }))
	} else if isFolder(w.row.id) {
		fs := p.m.under(w.row.id)
		what := fmt.Sprintf("the %d %s in %s", len(fs), plural(len(fs), "file", "files"), safetext.Line(w.row.id))
		items = append(items,
			fyne.NewMenuItem("Approve "+what, func() { p.setFolderVerdict(w.row.id, true) }),
			fyne.NewMenuItem("Reject "+what, func() { p.setFolderVerdict(w.row.id, false) }))
	} else if f := p.m.cs.File(w.row.id); f != nil {
		items = append(items,
			fyne.NewMenuItem("Approve file", func() { p.m.setFile(f, true); p.ev.refresh(); p.ev.showFile() }),
			fyne.NewMenuItem("Reject file", func() { p.m.setFile(f, false); p.ev.refresh(); p.ev.showFile() }))
	}
	c := fyne.CurrentApp().Driver().CanvasForObject(w)
	if c == nil || len(items) == 0 {
		return
	}
	widget.ShowPopUpMenuAtPosition(fyne.NewMenu("", items...), c, ev.AbsolutePosition)
}

func (w *fileRow) update(row listRow) {
	w.row = row
	p := w.l.p
	if row.action != 0 || row.id == actionsGroup {
		w.updateAction(row)
		return
	}
	w.host.Hide()
	w.partly.Text = "partly"
	folder := isFolder(row.id)
	indent := float32(row.depth * indentStep)
	if !folder {
		indent += rowIcon + rowGap // where a folder's arrow is
	}
	w.indent.SetMinSize(fyne.NewSize(indent, 1))
	w.warn.Hide()
	w.stale.Hide()
	w.partly.Hide()
	var fs []*review.File
	if folder {
		fs = p.m.under(row.id)
		w.fold.Show()
		if w.l.closed[row.id] {
			w.fold.SetResource(theme.MenuExpandIcon())
		} else {
			w.fold.SetResource(theme.MenuDropDownIcon())
		}
		w.letter.Hide()
		name := path.Base(strings.TrimSuffix(row.id, "/"))
		w.name.TextStyle = fyne.TextStyle{Bold: true}
		w.name.Color = theme.Color(theme.ColorNameForeground)
		w.setName(safetext.Line(name) + "/")
		for _, f := range fs {
			if p.changedHere[f.Path] {
				w.stale.Tip = "You changed files in this folder in the project since the baseline (marked on their rows)."
				w.stale.Show()
				break
			}
		}
	} else {
		w.fold.Hide()
		f := p.m.cs.File(row.id)
		if f == nil {
			return
		}
		fs = []*review.File{f}
		w.letter.Text = statusLetter(f)
		w.letter.Color = letterColour(f)
		w.letter.Show()
		label := safetext.Line(path.Base(f.Path))
		if f.Status == review.Renamed {
			label += "  (was " + safetext.Line(f.OldPath) + ")"
		}
		w.name.TextStyle = fyne.TextStyle{}
		w.name.Color = theme.Color(theme.ColorNameForeground)
		if p.m.fileState(f) == stateRejected {
			// Left out: greyed and slanted, beside its red cross.
			w.name.TextStyle = fyne.TextStyle{Italic: true}
			w.name.Color = theme.Color(theme.ColorNamePlaceHolder)
		}
		w.setName(label)
		if reason := rowWarning(f); reason != "" {
			w.warn.Tip = reason
			w.warn.Show()
		}
		if p.changedHere[f.Path] {
			w.stale.Tip = staleTip
			w.stale.Show()
		}
	}
	state := p.m.filesState(fs)
	w.verdict.Resource = verdictIcon(state)
	w.verdict.Refresh()
	if state == statePartial {
		w.partly.Color = theme.Color(theme.ColorNameWarning)
		w.partly.Show()
		w.partly.Refresh()
	}
	add, del := lineCounts(fs)
	w.add.Hidden, w.del.Hidden = add == 0 && del == 0, add == 0 && del == 0
	w.add.Text, w.del.Text = fmt.Sprintf("+%d", add), fmt.Sprintf("−%d", del)
	w.add.Color, w.del.Color = theme.Color(theme.ColorNameSuccess), theme.Color(theme.ColorNameError)
	w.add.Refresh()
	w.del.Refresh()
	w.letter.Refresh()
	w.name.Refresh()
	w.box.Refresh()
}

// rowWarning is why a file's row carries a warning sign ("" for none):
// each of its flags' reasons, one a line (it runs on the user's machine,
// its lines hold control characters, it changes dependencies, skips
// tests…), what runs on the host first.
func rowWarning(f *review.File) string {
	var lines []string
	add := func(reason string) {
		if reason != "" {
			lines = append(lines, strings.ToUpper(reason[:1])+reason[1:])
		}
	}
	add(f.FlagReason(review.FlagHostExec))
	add(f.FlagReason(review.FlagControl))
	for _, fl := range f.Flags {
		if fl.Kind != review.FlagHostExec && fl.Kind != review.FlagControl {
			add(fl.Reason)
		}
	}
	return strings.Join(lines, "\n")
}

// letterColour colours a change's letter as editors do: added green,
// deleted red, the rest in the text colour.
func letterColour(f *review.File) color.Color {
	switch f.Status {
	case review.Added:
		return theme.Color(theme.ColorNameSuccess)
	case review.Deleted:
		return theme.Color(theme.ColorNameError)
	case review.Renamed:
		return theme.Color(theme.ColorNamePrimary)
	}
	return theme.Color(theme.ColorNameForeground)
}

// tapIcon is a row's icon that does something when tapped (a folder's
// fold arrow).
type tapIcon struct {
	widget.BaseWidget
	img   *canvas.Image
	onTap func()
}

func newTapIcon(res fyne.Resource, onTap func()) *tapIcon {
	i := &tapIcon{img: rowImage(res), onTap: onTap}
	i.ExtendBaseWidget(i)
	return i
}

func (i *tapIcon) CreateRenderer() fyne.WidgetRenderer { return widget.NewSimpleRenderer(i.img) }

func (i *tapIcon) SetResource(res fyne.Resource) { i.img.Resource = res; i.img.Refresh() }

func (i *tapIcon) Tapped(*fyne.PointEvent) { i.onTap() }

// rowImage is an icon at a row's size.
func rowImage(res fyne.Resource) *canvas.Image {
	img := canvas.NewImageFromResource(res)
	img.FillMode = canvas.ImageFillContain
	img.SetMinSize(fyne.NewSize(rowIcon, rowIcon))
	return img
}

// gap is empty space width wide.
func gap(width float32) fyne.CanvasObject {
	r := canvas.NewRectangle(color.Transparent)
	r.SetMinSize(fyne.NewSize(width, 1))
	return r
}

// lineLayout lays objects out on one line, left to right with a fixed
// gap; the object at fill takes the width the others leave, and onFill,
// if set, is told that width first. Hidden objects take no room.
type lineLayout struct {
	fill   int
	gap    float32
	onFill func(width float32)
}

func (l *lineLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	var w, h float32
	n := 0
	for i, o := range objs {
		if !o.Visible() {
			continue
		}
		m := o.MinSize()
		if i != l.fill { // the filler shortens its text to fit
			w += m.Width
		}
		h = max(h, m.Height)
		n++
	}
	return fyne.NewSize(w+float32(max(n-1, 0))*l.gap, h)
}

func (l *lineLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	rest := max(size.Width-l.MinSize(objs).Width, 0)
	x := float32(0)
	for i, o := range objs {
		if !o.Visible() {
			continue
		}
		m := o.MinSize()
		w := m.Width
		if i == l.fill {
			w = rest
			if l.onFill != nil {
				l.onFill(w)
			}
		}
		o.Resize(fyne.NewSize(w, m.Height))
		o.Move(fyne.NewPos(x, (size.Height-m.Height)/2))
		x += w + l.gap
	}
}

// setName sets the row's name, fitted to its room.
func (w *fileRow) setName(label string) {
	w.label = label
	w.name.Text = label
	if sz := w.name.Size().Width; sz > 0 {
		w.fitName(sz)
	}
}

// updateAction draws the row of the actions' group or of one action:
// its mark, its method and host, and its sentence.
func (w *fileRow) updateAction(row listRow) {
	p := w.l.p
	w.warn.Hide()
	w.stale.Hide()
	w.add.Hide()
	w.del.Hide()
	w.partly.Hide()
	w.name.TextStyle = fyne.TextStyle{}
	w.name.Color = theme.Color(theme.ColorNameForeground)
	if row.id == actionsGroup {
		w.indent.SetMinSize(fyne.NewSize(float32(row.depth*indentStep), 1))
		w.fold.Show()
		if w.l.closed[actionsGroup] {
			w.fold.SetResource(theme.MenuExpandIcon())
		} else {
			w.fold.SetResource(theme.MenuDropDownIcon())
		}
		w.letter.Hide()
		w.host.Hide()
		w.name.TextStyle = fyne.TextStyle{Bold: true}
		w.setName(fmt.Sprintf("Actions (%d)", len(p.m.actions)))
		w.verdict.Resource = verdictIcon(p.m.actionsState())
		// What is left to decide, where a folder says "partly".
		held := 0
		for _, v := range p.m.actionViews() {
			if v.State() == "held" {
				held++
			}
		}
		if held > 0 {
			w.partly.Color = theme.Color(theme.ColorNameWarning)
			w.partly.Text = fmt.Sprintf("%d held", held)
			w.partly.Show()
		}
	} else {
		w.indent.SetMinSize(fyne.NewSize(float32(row.depth*indentStep)+rowIcon+rowGap, 1))
		w.fold.Hide()
		v := p.m.actionView(row.action)
		if v == nil {
			return
		}
		w.letter.Text = actionMethod(*v)
		w.letter.Color = theme.Color(theme.ColorNamePrimary)
		w.letter.Show()
		w.host.Text = safetext.Cut(actionHost(*v), 40)
		w.host.Color = theme.Color(theme.ColorNamePlaceHolder)
		w.host.Show()
		if actionMark(*v) == stateRejected {
			w.name.TextStyle = fyne.TextStyle{Italic: true}
			w.name.Color = theme.Color(theme.ColorNamePlaceHolder)
		}
		// A sentence that is only the request starts with its method,
		// shown before it already.
		w.setName(safetext.Cut(strings.TrimPrefix(heldreq.Describe(v.Held), w.letter.Text+" "), actionSentenceMax))
		w.verdict.Resource = actionIcon(*v)
		if st := v.State(); st != "approved" && st != "rejected" && st != "held" {
			w.partly.Text = st
			w.partly.Color = theme.Color(theme.ColorNameWarning)
			if st == "sent" {
				w.partly.Color = theme.Color(theme.ColorNameSuccess)
			}
			w.partly.Show()
		}
	}
	w.verdict.Refresh()
	w.partly.Refresh()
	w.letter.Refresh()
	w.host.Refresh()
	w.name.Refresh()
	w.box.Refresh()
}

// verdictIcon shows a file's state in the tree: an empty circle while
// undecided, a green tick, a half mark, a red cross.
func verdictIcon(s fileState) fyne.Resource {
	switch s {
	case stateApproved:
		return theme.NewSuccessThemedResource(theme.ConfirmIcon())
	case statePartial:
		return theme.NewWarningThemedResource(theme.ContentRemoveIcon())
	case stateRejected:
		return theme.NewErrorThemedResource(theme.CancelIcon())
	}
	return theme.RadioButtonIcon()
}
