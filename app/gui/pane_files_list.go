package gui

import (
	"path"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"
)

// fileList is the changeset's shown files as one compact list of folder
// and file rows (a folder's rows fold away with its arrow). Clicked, it
// takes the focus and passes the review keys on; it keeps the selection
// on the file under the keyboard's cursor.
type fileList struct {
	widget.List
	p        *filesPane
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

func newFileList(p *filesPane) *fileList {
	l := &fileList{p: p, closed: map[string]bool{}, selected: -1}
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
			if p.m.action != l.rows[i].action {
				p.ev.showAction(l.rows[i].action)
			}
			return
		case id == actionsGroup:
			if p.m.action == 0 && len(p.m.actions) > 0 {
				p.ev.showAction(p.m.actions[0].ID)
			}
			return
		}
		if isFolder(id) {
			p.setFolder(id)
			return
		}
		p.setFolder(parentFolder(id))
		if f := p.m.current(); f != nil && f.Path == id && p.m.action == 0 {
			return // already shown (the keys moved here)
		}
		if p.m.selectPath(id) {
			p.m.action = 0
			p.ev.showFile()
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
		for _, c := range l.p.m.tree.children[id] {
			l.rows = append(l.rows, listRow{id: c, depth: depth})
			if isFolder(c) && !l.closed[c] {
				walk(c, depth+1)
			}
		}
	}
	walk("", 0)
	// The held actions follow the files, as a group of their own.
	if len(l.p.m.actions) > 0 {
		l.rows = append(l.rows, listRow{id: actionsGroup})
		if !l.closed[actionsGroup] {
			for _, a := range l.p.m.actions {
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
	if a := l.p.m.action; a != 0 && l.index(actionRowID(a)) >= 0 {
		l.List.Select(l.index(actionRowID(a)))
	} else if f := l.p.m.current(); f != nil && a == 0 {
		if i := l.index(f.Path); i >= 0 {
			l.List.Select(i)
		}
	}
}

func (l *fileList) TypedRune(ch rune) { l.p.ev.key(ch) }

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
