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
	form := container.New(pairsLayout{})
	for _, k := range reviewKeys {
		key := widget.NewLabelWithStyle(k[0], fyne.TextAlignTrailing, fyne.TextStyle{Monospace: true})
		what := widget.NewLabel(k[1])
		form.Add(key)
		form.Add(what)
	}
	dialog.ShowCustom("Review keys", "Close", form, r.Window)
}
