package gui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/widget"
)

// reviewKeys are the review window's keys, as the keys dialog lists them.
var reviewKeys = [][2]string{
	{"j / k", "next / previous hunk (on to the next or previous file at either end)"},
	{"n / p", "next / previous file (after the last, the held actions)"},
	{"a / r", "approve / reject the hunk (a file without hunks: the file; an action)"},
	{"A / R", "approve / reject the whole file"},
	{"/", "filter the files by path"},
	{"↑ / ↓", "the row above / below, once the list is clicked"},
	{"← / →", "fold / unfold the selected folder"},
	{"Escape", "leave a text field (the keys work again); then clear the filter"},
	{"?", "this list"},
	{"Ctrl+Enter", "apply what is approved"},
}

// keysHint is the header's reminder of the keys.
const keysHint = "? keys"

// installKeys binds the review keys on the window: on its canvas when
// nothing has the focus, and in the file tree when it has (the tree takes
// the focus when clicked). A text field keeps its letters; Escape leaves
// it.
func (r *ReviewWindow) installKeys() {
	c := r.Window.Canvas()
	c.SetOnTypedRune(func(ch rune) { r.key(ch) })
	c.SetOnTypedKey(func(ev *fyne.KeyEvent) {
		if ev.Name == fyne.KeyEscape {
			r.files.clearFilter()
		}
	})
	c.AddShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyReturn, Modifier: fyne.KeyModifierShortcutDefault}, func(fyne.Shortcut) { r.promo.apply() })
}

// key handles one review key; it reports whether ch is one.
func (r *ReviewWindow) key(ch rune) bool {
	// The held actions come after the files, for the same keys.
	if r.m.action != 0 && r.actions.key(ch) || r.m.action == 0 && r.actions.enter(ch) {
		return true
	}
	f := r.m.current()
	switch ch {
	case 'j':
		r.m.moveHunk(1)
	case 'k':
		r.m.moveHunk(-1)
	case 'n':
		r.m.moveFile(1)
	case 'p':
		r.m.moveFile(-1)
	case 'a', 'r':
		if f == nil || r.roundOnly {
			return true
		}
		if len(f.Hunks) == 0 {
			r.m.setFile(f, ch == 'a')
		} else {
			r.m.setHunk(f, r.m.hunk, ch == 'a')
		}
		r.refresh()
	case 'A', 'R':
		if f == nil || r.roundOnly {
			return true
		}
		r.m.setFile(f, ch == 'A')
		r.refresh()
	case '/':
		r.files.focusFilter(r.Window.Canvas())
		return true
	case '?':
		r.showKeys()
		return true
	default:
		return false
	}
	r.selectCurrent()
	return true
}

// showKeys lists the review keys in a dialog.
func (r *ReviewWindow) showKeys() {
	form := container.New(keysLayout{})
	for _, k := range reviewKeys {
		key := widget.NewLabelWithStyle(k[0], fyne.TextAlignTrailing, fyne.TextStyle{Monospace: true})
		what := widget.NewLabel(k[1])
		form.Add(key)
		form.Add(what)
	}
	dialog.ShowCustom("Review keys", "Close", form, r.Window)
}

// keysLayout lays out the keys dialog's pairs in two columns.
type keysLayout struct{}

func (keysLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	var kw, ww, h float32
	for i := 0; i+1 < len(objs); i += 2 {
		k, w := objs[i].MinSize(), objs[i+1].MinSize()
		kw, ww = max(kw, k.Width), max(ww, w.Width)
		h += max(k.Height, w.Height)
	}
	return fyne.NewSize(kw+ww, h)
}

func (l keysLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	var kw float32
	for i := 0; i+1 < len(objs); i += 2 {
		kw = max(kw, objs[i].MinSize().Width)
	}
	var y float32
	for i := 0; i+1 < len(objs); i += 2 {
		h := max(objs[i].MinSize().Height, objs[i+1].MinSize().Height)
		objs[i].Move(fyne.NewPos(0, y))
		objs[i].Resize(fyne.NewSize(kw, h))
		objs[i+1].Move(fyne.NewPos(kw, y))
		objs[i+1].Resize(fyne.NewSize(size.Width-kw, h))
		y += h
	}
}

// fileTree is the review's file tree: a widget.Tree that, once clicked
// (it takes the focus), passes the review keys on instead of swallowing
// them, and gives the focus back on Escape.
type fileTree struct {
	widget.Tree
	onRune func(rune) bool
}

func (t *fileTree) TypedRune(ch rune) {
	if t.onRune != nil {
		t.onRune(ch)
	}
}

func (t *fileTree) TypedKey(ev *fyne.KeyEvent) {
	if ev.Name == fyne.KeyEscape {
		unfocus(t)
		return
	}
	t.Tree.TypedKey(ev)
}

// fieldEntry is a text field Escape leaves, so that the review keys work
// again without a click elsewhere. onKey, if set, is offered the field's
// other special keys first (Return, Up, Down) and reports whether it took
// one.
type fieldEntry struct {
	widget.Entry
	onKey func(*fyne.KeyEvent) bool
}

func newFieldEntry() *fieldEntry {
	e := &fieldEntry{}
	e.ExtendBaseWidget(e)
	return e
}

// newFieldMultiLine is a multi-line fieldEntry (a comment box).
func newFieldMultiLine() *fieldEntry {
	e := newFieldEntry()
	e.MultiLine = true
	e.Wrapping = fyne.TextWrapWord
	return e
}

func (e *fieldEntry) TypedKey(ev *fyne.KeyEvent) {
	if ev.Name == fyne.KeyEscape {
		unfocus(e)
		return
	}
	if e.onKey != nil && e.onKey(ev) {
		return
	}
	e.Entry.TypedKey(ev)
}

// unfocus takes the focus from o, if it has it.
func unfocus(o fyne.CanvasObject) {
	if c := fyne.CurrentApp().Driver().CanvasForObject(o); c != nil {
		c.Unfocus()
	}
}
