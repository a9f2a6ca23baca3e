package gui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"
)

// Fields and forms the windows share: a text field Escape leaves, pairs
// in two columns, a dialog's form of a fixed width.

// pairsLayout lays out pairs in two columns: a key and what it does (the
// keys dialog), a fact and its value (an action's request).
type pairsLayout struct{}

func (pairsLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	var kw, ww, h float32
	for i := 0; i+1 < len(objs); i += 2 {
		k, w := objs[i].MinSize(), objs[i+1].MinSize()
		kw, ww = max(kw, k.Width), max(ww, w.Width)
		h += max(k.Height, w.Height)
	}
	return fyne.NewSize(kw+ww, h)
}

func (l pairsLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
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

// dialogWidth is the width of the forms in dialogs (sending actions, a
// commit): their sentences wrap in it and never widen the window.
const dialogWidth = 560

// fixedWidth gives content a width of its own, never its text's.
func fixedWidth(width float32, content fyne.CanvasObject) fyne.CanvasObject {
	w := canvas.NewRectangle(color.Transparent)
	w.SetMinSize(fyne.NewSize(width, 0))
	return container.NewStack(w, content)
}
