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

	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// wheelBoost multiplies a mouse wheel's step in the file list: fyne moves
// 25 px a notch on Linux and Windows (10 on macOS), about one row, where
// other apps move about three.
const wheelBoost = 2.5

// indentStep is how far a folder's contents sit right of it.
const indentStep = 14

// staleTip says what the mark on a file the user changed means.
const staleTip = "You changed this file in the project since the baseline. Applying the agent's change merges it into yours three ways; a conflict leaves your file as it is."

// fileList is the changeset's shown files as one compact list of folder
// and file rows (a folder's rows fold away with its arrow). Clicked, it
// takes the focus and passes the review keys on; it keeps the selection
// on the file under the keyboard's cursor.
type fileList struct {
	widget.List
	r      *ReviewWindow
	rows   []listRow
	closed map[string]bool // folded folders
}

// listRow is one row: a folder (its ID ends in "/") or a file, and how
// deep it sits.
type listRow struct {
	id    string
	depth int
}

func newFileList(r *ReviewWindow) *fileList {
	l := &fileList{r: r, closed: map[string]bool{}}
	l.Length = func() int { return len(l.rows) }
	// Each row carries the compact theme itself: fyne applies a list's
	// theme to its rows only when the list is a plain widget.List.
	l.CreateItem = func() fyne.CanvasObject { return container.NewThemeOverride(newFileRow(l), compactTheme{}) }
	l.UpdateItem = func(i widget.ListItemID, o fyne.CanvasObject) {
		if i < len(l.rows) {
			o.(*container.ThemeOverride).Content.(*fileRow).update(l.rows[i])
		}
	}
	l.OnSelected = func(i widget.ListItemID) {
		if i >= len(l.rows) {
			return
		}
		id := l.rows[i].id
		if isFolder(id) {
			r.setFolder(id)
			return
		}
		r.setFolder(parentFolder(id))
		if f := r.m.current(); f != nil && f.Path == id {
			return // already shown (the keys moved here)
		}
		if r.m.selectPath(id) {
			r.showFile()
		}
	}
	l.ExtendBaseWidget(l)
	// Only the rows: the list is drawn once it is in its compact theme.
	l.fill()
	return l
}

// rebuild lists the rows of the model's tree again and redraws them.
func (l *fileList) rebuild() {
	l.fill()
	l.UnselectAll()
	l.Refresh()
}

// fill lists the rows of the model's tree, in unfolded folders.
func (l *fileList) fill() {
	l.rows = l.rows[:0]
	var walk func(id string, depth int)
	walk = func(id string, depth int) {
		for _, c := range l.r.m.tree.children[id] {
			l.rows = append(l.rows, listRow{id: c, depth: depth})
			if isFolder(c) && !l.closed[c] {
				walk(c, depth+1)
			}
		}
	}
	walk("", 0)
}

// index is the row of id, or -1.
func (l *fileList) index(id string) int {
	for i, row := range l.rows {
		if row.id == id {
			return i
		}
	}
	return -1
}

// Select selects the row of a file or folder (a file's folded folders
// open), as a click on it does.
func (l *fileList) Select(id string) {
	if !isFolder(id) {
		opened := false
		for dir := parentFolder(id); dir != ""; dir = parentFolder(strings.TrimSuffix(dir, "/")) {
			if l.closed[dir] {
				delete(l.closed, dir)
				opened = true
			}
		}
		if opened {
			l.rebuild()
		}
	}
	if i := l.index(id); i >= 0 {
		l.List.Select(i)
	}
}

// ScrollTo scrolls the row of id into view.
func (l *fileList) ScrollTo(id string) {
	if i := l.index(id); i >= 0 {
		l.List.ScrollTo(i)
	}
}

// toggle folds or unfolds a folder.
func (l *fileList) toggle(folder string) {
	l.closed[folder] = !l.closed[folder]
	l.rebuild()
	if f := l.r.m.current(); f != nil {
		if i := l.index(f.Path); i >= 0 {
			l.List.Select(i)
		}
	}
}

func (l *fileList) TypedRune(ch rune) { l.r.key(ch) }

func (l *fileList) TypedKey(ev *fyne.KeyEvent) {
	if ev.Name == fyne.KeyEscape {
		unfocus(l)
		return
	}
	l.List.TypedKey(ev)
}

// wheel scrolls the list by a boosted wheel step.
func (l *fileList) wheel(ev *fyne.ScrollEvent) {
	l.ScrollToOffset(max(l.GetScrollOffset()-ev.Scrolled.DY*wheelBoost, 0))
}

// parentFolder is the tree ID of the folder p is in ("" at the top).
func parentFolder(p string) string {
	dir := path.Dir(strings.TrimSuffix(p, "/"))
	if dir == "." || dir == "/" {
		return ""
	}
	return dir + "/"
}

// fileRow draws one row: fold arrow (folders), the verdict, the kind of
// change, the name, warnings, the user's-side mark, "partly", and the
// lines added and removed.
type fileRow struct {
	widget.BaseWidget
	l   *fileList
	row listRow

	indent  *canvas.Rectangle
	fold    *tapIcon
	verdict *widget.Icon
	letter  *canvas.Text
	name    *widget.Label
	warn    *tipIcon
	stale   *tipIcon
	partly  *canvas.Text
	add     *canvas.Text
	del     *canvas.Text
	box     *fyne.Container
}

func newFileRow(l *fileList) *fileRow {
	w := &fileRow{l: l,
		indent:  canvas.NewRectangle(color.Transparent),
		verdict: widget.NewIcon(theme.RadioButtonIcon()),
		letter:  canvas.NewText("M", theme.Color(theme.ColorNameForeground)),
		name:    widget.NewLabel("name"),
		warn:    newTipIcon(theme.NewWarningThemedResource(theme.WarningIcon()), ""),
		stale:   newTipIcon(theme.NewPrimaryThemedResource(theme.AccountIcon()), staleTip),
		partly:  canvas.NewText("partly", theme.Color(theme.ColorNameWarning)),
		add:     canvas.NewText("+0", theme.Color(theme.ColorNameSuccess)),
		del:     canvas.NewText("−0", theme.Color(theme.ColorNameError)),
	}
	w.fold = newTapIcon(theme.MenuDropDownIcon(), func() {
		if isFolder(w.row.id) {
			l.toggle(w.row.id)
		}
	})
	w.letter.TextStyle = fyne.TextStyle{Monospace: true}
	w.partly.TextStyle = fyne.TextStyle{Italic: true}
	w.add.TextStyle = fyne.TextStyle{Monospace: true}
	w.del.TextStyle = fyne.TextStyle{Monospace: true}
	w.name.Truncation = fyne.TextTruncateEllipsis
	w.box = container.NewBorder(nil, nil,
		container.NewHBox(w.indent, w.fold, w.verdict, w.letter),
		// The last gap keeps the counts clear of the scroll bar.
		container.NewHBox(w.warn, w.stale, w.partly, w.add, w.del, gap(6)),
		w.name)
	w.ExtendBaseWidget(w)
	return w
}

func (w *fileRow) CreateRenderer() fyne.WidgetRenderer { return widget.NewSimpleRenderer(w.box) }

// Scrolled moves the list by a boosted step (the row is what the wheel
// is over).
func (w *fileRow) Scrolled(ev *fyne.ScrollEvent) { w.l.wheel(ev) }

// TappedSecondary offers, on a right click, to approve or reject the
// row's file, or every shown file of its folder.
func (w *fileRow) TappedSecondary(ev *fyne.PointEvent) {
	r := w.l.r
	if r.roundOnly {
		return
	}
	var items []*fyne.MenuItem
	if isFolder(w.row.id) {
		fs := r.m.under(w.row.id)
		what := fmt.Sprintf("the %d %s in %s", len(fs), plural(len(fs), "file", "files"), safetext.Line(w.row.id))
		items = append(items,
			fyne.NewMenuItem("Approve "+what, func() { r.setFolderVerdict(w.row.id, true) }),
			fyne.NewMenuItem("Reject "+what, func() { r.setFolderVerdict(w.row.id, false) }))
	} else if f := r.m.cs.File(w.row.id); f != nil {
		items = append(items,
			fyne.NewMenuItem("Approve file", func() { r.m.setFile(f, true); r.refresh(); r.showFile() }),
			fyne.NewMenuItem("Reject file", func() { r.m.setFile(f, false); r.refresh(); r.showFile() }))
	}
	c := fyne.CurrentApp().Driver().CanvasForObject(w)
	if c == nil || len(items) == 0 {
		return
	}
	widget.ShowPopUpMenuAtPosition(fyne.NewMenu("", items...), c, ev.AbsolutePosition)
}

func (w *fileRow) update(row listRow) {
	w.row = row
	r := w.l.r
	folder := isFolder(row.id)
	indent := float32(row.depth * indentStep)
	if !folder {
		indent += theme.IconInlineSize() + theme.Padding()
	}
	w.indent.SetMinSize(fyne.NewSize(indent, 1))
	w.warn.Hide()
	w.stale.Hide()
	w.partly.Hide()
	var fs []*review.File
	if folder {
		fs = r.m.under(row.id)
		w.fold.Show()
		if w.l.closed[row.id] {
			w.fold.SetResource(theme.MenuExpandIcon())
		} else {
			w.fold.SetResource(theme.MenuDropDownIcon())
		}
		w.letter.Hide()
		name := path.Base(strings.TrimSuffix(row.id, "/"))
		w.name.TextStyle = fyne.TextStyle{Bold: true}
		w.name.Importance = widget.MediumImportance
		w.name.SetText(safetext.Line(name) + "/")
		for _, f := range fs {
			if r.changedHere[f.Path] {
				w.stale.Tip = "You changed files in this folder in the project since the baseline (marked on their rows)."
				w.stale.Show()
				break
			}
		}
	} else {
		w.fold.Hide()
		f := r.m.cs.File(row.id)
		if f == nil {
			return
		}
		fs = []*review.File{f}
		w.letter.Text = statusLetter(f)
		w.letter.Color = letterColour(f)
		w.letter.Show()
		w.letter.Refresh()
		label := safetext.Line(path.Base(f.Path))
		if f.Status == review.Renamed {
			label += "  (was " + safetext.Line(f.OldPath) + ")"
		}
		w.name.TextStyle = fyne.TextStyle{}
		w.name.Importance = widget.MediumImportance
		if r.m.fileState(f) == stateRejected {
			// Left out: greyed and slanted, beside its red cross.
			w.name.TextStyle = fyne.TextStyle{Italic: true}
			w.name.Importance = widget.LowImportance
		}
		w.name.SetText(label)
		if reason := rowWarning(f); reason != "" {
			w.warn.Tip = reason
			w.warn.Show()
		}
		if r.changedHere[f.Path] {
			w.stale.Tip = staleTip
			w.stale.Show()
		}
	}
	state := r.m.filesState(fs)
	w.verdict.SetResource(verdictIcon(state))
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
	w.box.Refresh()
}

// rowWarning is why a file's row carries a warning sign ("" for none):
// it runs on the user's machine, or its lines hold control characters.
func rowWarning(f *review.File) string {
	for _, k := range []review.FlagKind{review.FlagHostExec, review.FlagControl} {
		if reason := f.FlagReason(k); reason != "" {
			return strings.ToUpper(reason[:1]) + reason[1:]
		}
	}
	return ""
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

// tapIcon is an icon that does something when tapped (a folder's fold
// arrow).
type tapIcon struct {
	widget.Icon
	onTap func()
}

func newTapIcon(res fyne.Resource, onTap func()) *tapIcon {
	i := &tapIcon{onTap: onTap}
	i.ExtendBaseWidget(i)
	i.SetResource(res)
	return i
}

func (i *tapIcon) Tapped(*fyne.PointEvent) { i.onTap() }

// setFolder makes folder (a tree ID, "" for every shown file) the one the
// folder buttons act on.
func (r *ReviewWindow) setFolder(folder string) {
	r.folder = folder
	r.showFolder()
}

// showFolder says which files the folder buttons act on.
func (r *ReviewWindow) showFolder() {
	if r.folderLabel == nil {
		return
	}
	fs := r.m.under(r.folder)
	what := "Folder " + safetext.Line(r.folder)
	if r.folder == "" {
		what = "All shown"
		if r.m.filter == "" {
			what = "All"
		}
	}
	r.folderLabel.SetText(fmt.Sprintf("%s (%d %s):", what, len(fs), plural(len(fs), "file", "files")))
}

// setFolderVerdict approves or rejects every shown file of folder.
func (r *ReviewWindow) setFolderVerdict(folder string, approve bool) {
	if r.roundOnly {
		return
	}
	r.m.setFiles(r.m.under(folder), approve)
	r.refresh()
	r.showFile()
}

// setFilter shows only the files whose path contains q.
func (r *ReviewWindow) setFilter(q string) {
	before := r.m.current()
	r.m.setFilter(q)
	r.treeIDs = r.m.tree
	r.tree.rebuild()
	if r.folder != "" && len(r.m.under(r.folder)) == 0 {
		r.folder = ""
	}
	r.showFolder()
	r.summary.SetText(r.m.summary())
	f := r.m.current()
	if f == nil {
		return // nothing matches: the last file stays in view
	}
	r.tree.Select(f.Path)
	if f != before {
		r.showFile()
	}
}

// gap is empty space width wide.
func gap(width float32) fyne.CanvasObject {
	r := canvas.NewRectangle(color.Transparent)
	r.SetMinSize(fyne.NewSize(width, 1))
	return r
}
