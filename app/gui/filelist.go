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

// fileList is the changeset's shown files as one compact list of folder
// and file rows (a folder's rows fold away with its arrow). Clicked, it
// takes the focus and passes the review keys on; it keeps the selection
// on the file under the keyboard's cursor.
type fileList struct {
	widget.List
	r        *ReviewWindow
	rows     []listRow
	closed   map[string]bool // folded folders
	selected int             // the selected row, -1 for none
}

// listRow is one row: a folder (its ID ends in "/"), a file, the
// actions' group (actionsGroup) or an action, and how deep it sits.
type listRow struct {
	id    string
	depth int
	// action is the number of the staged action the row shows (0 for
	// the other rows).
	action int
}

func newFileList(r *ReviewWindow) *fileList {
	l := &fileList{r: r, closed: map[string]bool{}, selected: -1}
	l.Length = func() int { return len(l.rows) }
	l.CreateItem = func() fyne.CanvasObject { return newFileRow(l) }
	l.UpdateItem = func(i widget.ListItemID, o fyne.CanvasObject) {
		if i < len(l.rows) {
			o.(*fileRow).update(l.rows[i])
		}
	}
	l.OnSelected = func(i widget.ListItemID) {
		if i >= len(l.rows) {
			return
		}
		l.selected = i
		id := l.rows[i].id
		switch {
		case l.rows[i].action != 0:
			if r.m.action != l.rows[i].action {
				r.showAction(l.rows[i].action)
			}
			return
		case id == actionsGroup:
			if r.m.action == 0 && len(r.m.actions) > 0 {
				r.showAction(r.m.actions[0].ID)
			}
			return
		}
		if isFolder(id) {
			r.setFolder(id)
			return
		}
		r.setFolder(parentFolder(id))
		if f := r.m.current(); f != nil && f.Path == id && r.m.action == 0 {
			return // already shown (the keys moved here)
		}
		if r.m.selectPath(id) {
			r.m.action = 0
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
	l.selected = -1
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
	// The held actions follow the files, as a group of their own.
	if len(l.r.m.actions) > 0 {
		l.rows = append(l.rows, listRow{id: actionsGroup})
		if !l.closed[actionsGroup] {
			for _, a := range l.r.m.actions {
				l.rows = append(l.rows, listRow{id: actionRowID(a.ID), depth: 1, action: a.ID})
			}
		}
	}
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
	if strings.HasPrefix(id, actionRowPrefix) && l.closed[actionsGroup] {
		delete(l.closed, actionsGroup)
		l.rebuild()
	} else if !isFolder(id) {
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
	if a := l.r.m.action; a != 0 && l.index(actionRowID(a)) >= 0 {
		l.List.Select(l.index(actionRowID(a)))
	} else if f := l.r.m.current(); f != nil && a == 0 {
		if i := l.index(f.Path); i >= 0 {
			l.List.Select(i)
		}
	}
}

func (l *fileList) TypedRune(ch rune) { l.r.key(ch) }

// TypedKey: Up and Down select the row above or below, as in a file
// manager; Left and Right fold and unfold the selected folder; Escape
// gives the focus back.
func (l *fileList) TypedKey(ev *fyne.KeyEvent) {
	switch ev.Name {
	case fyne.KeyEscape:
		unfocus(l)
	case fyne.KeyUp, fyne.KeyDown:
		next := l.selected + 1
		if ev.Name == fyne.KeyUp {
			next = l.selected - 1
		}
		if next >= 0 && next < len(l.rows) {
			l.List.Select(next)
		}
	case fyne.KeyLeft, fyne.KeyRight:
		if l.selected >= 0 && l.selected < len(l.rows) {
			id := l.rows[l.selected].id
			if (isFolder(id) || id == actionsGroup) && l.closed[id] == (ev.Name == fyne.KeyRight) {
				l.toggle(id)
				l.List.Select(l.index(id))
			}
		}
	default:
		l.List.TypedKey(ev)
	}
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
	r := w.l.r
	if r.roundOnly {
		return
	}
	var items []*fyne.MenuItem
	if id := w.row.action; id != 0 {
		items = append(items,
			fyne.NewMenuItem("Approve action", func() { r.actions.setVerdict(id, true) }),
			fyne.NewMenuItem("Reject action", func() { r.actions.setVerdict(id, false) }))
	} else if isFolder(w.row.id) {
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
		w.name.Color = theme.Color(theme.ColorNameForeground)
		w.setName(safetext.Line(name) + "/")
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
		label := safetext.Line(path.Base(f.Path))
		if f.Status == review.Renamed {
			label += "  (was " + safetext.Line(f.OldPath) + ")"
		}
		w.name.TextStyle = fyne.TextStyle{}
		w.name.Color = theme.Color(theme.ColorNameForeground)
		if r.m.fileState(f) == stateRejected {
			// Left out: greyed and slanted, beside its red cross.
			w.name.TextStyle = fyne.TextStyle{Italic: true}
			w.name.Color = theme.Color(theme.ColorNamePlaceHolder)
		}
		w.setName(label)
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
func (i *tapIcon) SetResource(res fyne.Resource)       { i.img.Resource = res; i.img.Refresh() }
func (i *tapIcon) Tapped(*fyne.PointEvent)             { i.onTap() }

// rowImage is an icon at a row's size.
func rowImage(res fyne.Resource) *canvas.Image {
	img := canvas.NewImageFromResource(res)
	img.FillMode = canvas.ImageFillContain
	img.SetMinSize(fyne.NewSize(rowIcon, rowIcon))
	return img
}

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
		if !r.m.filtered() {
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
	r.refilter(func() { r.m.setFilter(q) })
}

// setFlagged shows only the flagged files, or with false every file the
// filter shows.
func (r *ReviewWindow) setFlagged(on bool) {
	r.refilter(func() { r.m.setFlagged(on) })
}

// refilter changes what the list shows with change, then shows it.
func (r *ReviewWindow) refilter(change func()) {
	before := r.m.current()
	change()
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
	r := w.l.r
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
		w.setName(fmt.Sprintf("Actions (%d)", len(r.m.actions)))
		w.verdict.Resource = verdictIcon(r.m.actionsState())
		// What is left to decide, where a folder says "partly".
		held := 0
		for _, v := range r.m.actionViews() {
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
		v := r.m.actionView(row.action)
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
